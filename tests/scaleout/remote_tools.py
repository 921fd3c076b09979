"""Tools the scale-out tests load as a ``--tools FILE.py`` file (shipped to workers by value)."""

from __future__ import annotations

import asyncio
import os
import time

import pydantic

from sophon_dsl import tool
from sophon_dsl.runtime import Branch
from sophon_dsl.runtime.errors import RunError


class Report(pydantic.BaseModel):
    pid: int
    label: str


@tool
def where() -> int:
    """The pid of the process the call ran in."""
    return os.getpid()


@tool(placement="local")
def where_local() -> int:
    return os.getpid()


@tool
async def where_async(n: int) -> dict:
    await asyncio.sleep(0.001)
    return {"pid": os.getpid(), "n": n}


@tool
def named_error(x: int) -> int:
    raise RunError("Payment.Declined", f"card {x} expired")


@tool
def generic_error() -> int:
    raise ValueError("bad value")


@tool
def exits() -> int:
    raise SystemExit(3)


@tool
async def exits_async() -> int:
    raise SystemExit(4)


@tool
def picks(which: int) -> dict:
    return Branch(which, {"picked": which})


@tool
def report(label: str) -> Report:
    return Report(pid=os.getpid(), label=label)


@tool
def not_json() -> dict:
    return {"x": object()}


@tool
def flaky(path: str, failures: int) -> int:
    """Fails ``failures`` times (counted in the file ``path``), then returns the attempt."""
    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
    with open(path, "w") as fh:
        fh.write(str(n))
    if n <= failures:
        raise RuntimeError(f"attempt {n} fails")
    return n


@tool
def sleepy(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@tool(resources={"GPU": 1})
def gpu_interval(seconds: float) -> list:
    start = time.monotonic()
    time.sleep(seconds)
    return [start, time.monotonic()]


@tool(resources={"TPU": 1})
def needs_tpu() -> int:
    return 1


@tool
def dies() -> int:
    os._exit(17)


@tool
def blocks(path: str, seconds: float = 30) -> int:
    """Runs until the file ``path`` exists (a cancelled Dask task's thread cannot be stopped:
    the test releases it so the worker is free for the next one)."""
    end = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.01)
    return 1


@tool
def idempotency_key() -> dict:
    from sophon_dsl import current_call

    cur = current_call()
    return {"key": cur.key, "attempt": cur.attempt}


class Point(pydantic.BaseModel):
    x: int
    y: int


@tool
def norm1(p: Point) -> int:
    """A pydantic-typed parameter: converted from JSON on the worker, as locally."""
    return abs(p.x) + abs(p.y)
