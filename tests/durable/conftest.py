"""Fixtures of the durable-run tests: one store conformance suite for every backend."""

from __future__ import annotations

import pytest

from sophon_dsl.durable import open_store

# (pg_cluster, one throwaway PostgreSQL per session, is in tests/conftest.py: the state
# store conformance suite, tests/test_store_conformance.py, uses it too)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return request.getfixturevalue("pg_cluster").new_database()


@pytest.fixture
def store(store_url):
    s = open_store(store_url)
    yield s
    s.close()
