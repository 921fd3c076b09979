"""What ``--executor`` and ``--executor-config`` say, read without importing Dask.

An executor spec is ``local``, ``dask:local`` (an embedded LocalCluster of processes),
``dask:local-threads``, ``dask:tcp://HOST:PORT`` (an existing scheduler) or
``dask:scheduler-file:PATH``.  The executor config (YAML or JSON) narrows which tools go to
the cluster and sets their resources::

    tools:
      "ml.*": {executor: dask, resources: {GPU: 1}}
      "text.*": {executor: local}
    local: [notify, audit.write]

Problems are :class:`ExecutorConfigError` with a diagnostic (E701 spec, E702 config).
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..runtime.invoker import ExecutorConfigError, refuse

__all__ = ["ExecutorConfigError", "ExecutorSpec", "Routing", "load_routing", "parse_executor_spec",
           "read_scheduler_file", "routing_from_data"]

ENV_VAR = "SOPHON_DSL_EXECUTOR"
# a scheduler file holds a few hundred bytes of JSON; anything much larger is not one, and
# reading it whole (/dev/zero, a log file named by mistake) must not hang or fill memory
SCHEDULER_FILE_MAX_BYTES = 1 << 20
_KINDS = ("local", "dask:local", "dask:local-threads", "dask:tcp://HOST:PORT", "dask:scheduler-file:PATH")


# (the error and its constructor are declared with the ToolExecutor seam, runtime/invoker.py;
# kept here under their old names for the modules and programs that import them from here)
_refuse = refuse


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed executor spec: ``kind`` is local, cluster (an embedded LocalCluster),
    address or scheduler-file; ``target`` the address or file."""

    kind: str
    target: str | None = None
    processes: bool = True

    @property
    def is_local(self) -> bool:
        return self.kind == "local"


def parse_executor_spec(text: str) -> ExecutorSpec:
    """``local | dask:local | dask:local-threads | dask:tcp://HOST:PORT | dask:scheduler-file:PATH``."""
    spec = (text or "").strip()
    if spec == "local":
        return ExecutorSpec("local")
    if spec == "dask:local":
        return ExecutorSpec("cluster")
    if spec == "dask:local-threads":
        return ExecutorSpec("cluster", processes=False)
    if spec.startswith("dask:scheduler-file:"):
        path = spec[len("dask:scheduler-file:"):].strip()
        if not path:
            raise _bad_spec(text, "the scheduler file path is empty (dask:scheduler-file:/shared/scheduler.json)")
        return ExecutorSpec("scheduler-file", path)
    if spec.startswith("dask:tcp://") or spec.startswith("dask:tls://"):
        address = spec[len("dask:"):]
        host_port = address.split("://", 1)[1]
        host, _, port = host_port.rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            return ExecutorSpec("address", address)
        raise _bad_spec(text, "the address needs a host and a port (dask:tcp://127.0.0.1:8786)")
    raise _bad_spec(text, "expected one of " + ", ".join(_KINDS))


def _bad_spec(text: str, why: str) -> ExecutorConfigError:
    return _refuse("E701", f"executor {text!r} is not valid: {why}", "--executor")


def read_scheduler_file(path: str) -> str:
    """The scheduler address in the file ``dask scheduler --scheduler-file PATH`` writes.

    Read here, bounded, rather than by ``distributed.Client(scheduler_file=...)``, which
    reads the whole file (forever for ``/dev/zero``) and fails on a malformed one with an
    ``AssertionError`` or ``TypeError``.  Every problem is :class:`ExecutorConfigError` (E701)."""
    def bad(why: str) -> ExecutorConfigError:
        return _refuse("E701", f"the Dask scheduler file {path} {why}", "--executor")

    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (the check below refuses it)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise bad("does not exist (start the scheduler with --scheduler-file, or check the path)") from None
    except OSError as exc:
        raise bad(f"cannot be read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise bad("is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(SCHEDULER_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise bad(f"cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > SCHEDULER_FILE_MAX_BYTES:
        raise bad(f"is larger than {SCHEDULER_FILE_MAX_BYTES} bytes: not a scheduler file")
    try:
        info = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise bad(f"is not JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    address = info.get("address") if isinstance(info, dict) else None
    if not isinstance(address, str) or "://" not in address:
        raise bad('has no scheduler address (expected JSON like {"address": "tcp://10.0.0.5:8786", ...})')
    return address


@dataclass(frozen=True)
class Routing:
    """Which tools go to the cluster and with which resources.

    Without ``patterns`` every tool that may run remotely does; with them only tools whose
    name matches a pattern routed to ``dask`` (the first matching pattern decides).  Names
    (or patterns) in ``local`` always stay in the coordinator."""

    patterns: tuple[tuple[str, bool, Mapping[str, float]], ...] = ()  # (pattern, remote?, resources)
    local: tuple[str, ...] = ()
    source: str | None = field(default=None, compare=False)

    def decide(self, name: str) -> tuple[bool, Mapping[str, float] | None]:
        """(remote?, the config's resources for the tool or None)."""
        if any(fnmatch.fnmatchcase(name, pat) for pat in self.local):
            return False, None
        if not self.patterns:
            return True, None
        for pat, remote, resources in self.patterns:
            if fnmatch.fnmatchcase(name, pat):
                return remote, (resources or None)
        return False, None


def load_routing(path: str) -> Routing:
    """Read an executor config file (YAML or JSON)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise _refuse("E702", f"cannot read the executor config: {exc.strerror or exc}", path) from None
    except yaml.YAMLError as exc:
        raise _refuse("E702", f"the executor config is not valid YAML: {exc}", path) from None
    return routing_from_data(data, path)


def routing_from_data(data: Any, source: str | None = None) -> Routing:
    """``{tools: {pattern: {executor: dask|local, resources: {NAME: amount}}}, local: [names]}``."""
    if data is None:
        return Routing(source=source)
    if not isinstance(data, Mapping):
        raise _refuse("E702", "the executor config must be a mapping with 'tools' and/or 'local'", source)
    unknown = sorted(set(map(str, data)) - {"tools", "local"})
    if unknown:
        raise _refuse("E702", f"unknown key(s) in the executor config: {', '.join(unknown)} "
                              "(expected 'tools' and 'local')", source)
    local = data.get("local") or []
    if not isinstance(local, list) or not all(isinstance(x, str) and x for x in local):
        raise _refuse("E702", "'local' must be a list of tool names", source)
    tools = data.get("tools") or {}
    if not isinstance(tools, Mapping):
        raise _refuse("E702", "'tools' must map name patterns to {executor, resources}", source)
    patterns = []
    for pat, entry in tools.items():
        entry = {} if entry is None else entry
        if not isinstance(entry, Mapping):
            raise _refuse("E702", f"tools[{pat!r}] must be a mapping like {{executor: dask}}", source)
        extra = sorted(set(map(str, entry)) - {"executor", "resources"})
        if extra:
            raise _refuse("E702", f"tools[{pat!r}]: unknown key(s) {', '.join(extra)} "
                                  "(expected 'executor' and 'resources')", source)
        where = entry.get("executor", "dask")
        if where not in ("dask", "local"):
            raise _refuse("E702", f"tools[{pat!r}].executor must be 'dask' or 'local', not {where!r}", source)
        resources = check_resources(entry.get("resources"), f"tools[{pat!r}].resources", source)
        patterns.append((str(pat), where == "dask", resources))
    return Routing(tuple(patterns), tuple(local), source)


def check_resources(value: Any, what: str, source: str | None = None) -> dict[str, float]:
    """A resources mapping ``{NAME: positive amount}``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
            for k, v in value.items()):
        raise _refuse("E702", f"{what} must map resource names to positive amounts, like {{GPU: 1}}", source)
    return dict(value)
