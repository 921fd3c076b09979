"""Suite-wide fixtures."""

from __future__ import annotations

import itertools

import pytest

_test_number = itertools.count()


@pytest.fixture(autouse=True)
def _private_data_home(tmp_path_factory, monkeypatch):
    """Each test gets its own XDG_DATA_HOME (created only if used), so the standard memory
    store, which persists in the user's data directory, never touches the real home and
    never carries memories from one test to another (subprocesses inherit it too)."""
    base = tmp_path_factory.getbasetemp() / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(base / str(next(_test_number))))
