"""Dask clusters shared by the scale-out tests (started once per session, stopped at the end).

* ``proc_cluster``: two worker processes, one thread each (the process boundary).  Its
  scheduler gives up on a task after one lost worker (``allowed-failures`` 0), so a tool that
  kills its worker ends as ``Executor.Lost`` without waiting for three restarts.
* ``gpu_cluster``: one in-process worker with four threads and ``GPU=1`` (resources).
"""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="session")
def proc_cluster():
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", host="127.0.0.1")
    yield cluster
    cluster.close()


@pytest.fixture(scope="session")
def gpu_cluster():
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=4, processes=False,
                                       dashboard_address=":0", resources={"GPU": 1})
    yield cluster
    cluster.close()


def scheduler_keys(cluster, prefix: str) -> list[str]:
    """The keys starting with ``prefix`` that the cluster's scheduler still holds."""
    return [str(k) for k in cluster.scheduler.tasks if str(k).startswith(prefix)]
