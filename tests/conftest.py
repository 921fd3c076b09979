"""Suite-wide fixtures."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import settings

# CI explores the same examples on every run (a counterexample found while developing is
# kept as a test; CI must not fail on one it happens to draw first); locally each run
# draws new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

_test_number = itertools.count()


@pytest.fixture(autouse=True)
def _private_data_home(tmp_path_factory, monkeypatch):
    """Each test gets its own XDG_DATA_HOME (created only if used), so the standard memory
    store, which persists in the user's data directory, never touches the real home and
    never carries memories from one test to another (subprocesses inherit it too)."""
    base = tmp_path_factory.getbasetemp() / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(base / str(next(_test_number))))


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL cluster for the session (initdb + pg_ctl, durable/pgcluster.py):
    the run store suites and the state store conformance suite share it."""
    from durable.pgcluster import Cluster

    cluster = Cluster().start()
    yield cluster
    cluster.stop()
