"""The tool registry a command works with, from ``--tools`` and the standard-library flags
(``--no-stdlib``, ``--stdlib``, ``--sandbox``, ``--stdlib-config``, ``--allow-host``).

The standard library is found through :mod:`sophon_dsl.stdlib_hook` and handed to the
registry as a lazy tool source: a command whose plan uses no standard tool never builds one.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .common import UsageError

if TYPE_CHECKING:  # (`sophon-dsl --help` imports this module: the core is imported when a command runs)
    from ..diagnostics import Diagnostic

__all__ = ["registry_for", "stdlib_source"]


def registry_for(args: argparse.Namespace) -> tuple[Any, list[Diagnostic]]:
    """(registry, notes): the ``--tools`` sources over the standard library the flags ask for."""
    from ..diagnostics import has_errors, render_text
    from ..tools import ToolRegistry
    from ..toolsource import load_tool_sources

    tools, diags = load_tool_sources(args.tools)
    if has_errors(diags):
        raise UsageError(render_text(diags, sources=_tool_sources_text(diags)))
    registry = ToolRegistry(tools, fallback=stdlib_source(args))
    return registry, registry.notes()


def _tool_sources_text(diags: Sequence[Diagnostic]) -> dict[str, str]:
    """The text of each tools file a positioned diagnostic points into (for the source excerpt)."""
    sources: dict[str, str] = {}
    for d in diags:
        if d.file and d.span is not None and d.file not in sources:
            try:
                sources[d.file] = Path(d.file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                pass
    return sources


def stdlib_source(args: argparse.Namespace) -> Any:
    """The standard tools the flags ask for (a lazy source), or None for ``--no-stdlib``."""
    from .. import stdlib_hook

    sandbox, hosts = getattr(args, "sandbox", None), tuple(getattr(args, "allow_host", ()) or ())
    config_file = getattr(args, "stdlib_config", None)
    if getattr(args, "no_stdlib", False):
        given = [flag for flag, value in (("--stdlib", getattr(args, "stdlib", None)), ("--sandbox", sandbox),
                                          ("--stdlib-config", config_file), ("--allow-host", hosts or None))
                 if value is not None]
        if given:
            raise UsageError(f"--no-stdlib cannot be combined with {', '.join(given)}, "
                             "which configure the standard tool library")
        return None
    only = None
    if getattr(args, "stdlib", None) is not None:
        only = [x.strip() for x in args.stdlib.split(",") if x.strip()]
        if not only:
            raise UsageError(f"--stdlib: expected comma-separated standard groups or tools "
                             f"(e.g. http,text,files.read), got {args.stdlib!r}")
    for host in hosts:
        _check_host("--allow-host", host)
    # the project config's [tool.sophon-dsl.stdlib] settings (cli/settings.py), checked there
    project, origin = getattr(args, "project_stdlib", None) or (None, None)
    if only is None and sandbox is None and not hosts and config_file is None and not project:
        return stdlib_hook.tool_source(True)  # None when the library is not installed
    library = stdlib_hook.library()
    if library is None:
        raise UsageError(f"the standard tool library ({stdlib_hook.STDLIB_MODULE}) is not installed")
    kwargs: dict[str, Any] = (_read_stdlib_config(library.StdlibConfig, config_file) if config_file
                              else dict(project or {}))
    if sandbox is not None:
        if not Path(sandbox).is_dir():
            raise UsageError(f"--sandbox: {sandbox!r} is not a directory")
        kwargs["sandbox_root"] = sandbox
    if hosts:  # --allow-host adds to the config file's list
        kwargs["http_allow_list"] = (*kwargs.get("http_allow_list", ()), *hosts)
    try:
        config = library.StdlibConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{'--stdlib-config' if config_file or not project else origin}: {exc}") from None
    try:
        return library.source(config, only=only)  # checks the names now, as a usage error
    except ValueError as exc:
        flag = "--stdlib" if getattr(args, "project_stdlib", None) is None else f"{origin}: stdlib.groups"
        raise UsageError(f"{flag}: {exc}") from None


def _read_stdlib_config(config_type: type, path: str) -> dict[str, Any]:
    import dataclasses

    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise UsageError(f"--stdlib-config: cannot read {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--stdlib-config: cannot read {path!r}: not UTF-8 ({exc.reason} at byte "
                         f"{exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else repr(path)
        reason = getattr(exc, "problem", None) or exc
        raise UsageError(f"--stdlib-config: {where}: not valid YAML/JSON: {reason}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--stdlib-config: {path!r} must hold a mapping of settings")
    known = {f.name for f in dataclasses.fields(config_type)} - {"http_transport"}
    unknown = sorted(set(data) - known)
    if unknown:
        import difflib

        hints = [f"did you mean '{close[0]}' for '{key}'?" for key in unknown
                 for close in [difflib.get_close_matches(str(key), known, n=1)] if close]
        raise UsageError(f"--stdlib-config: unknown setting(s) {', '.join(unknown)}; "
                         + (" ".join(hints) + " " if hints else "") + f"known: {', '.join(sorted(known))}")
    hosts = data.get("http_allow_list")
    if isinstance(hosts, str):
        data["http_allow_list"] = (hosts,)
    elif isinstance(hosts, list) and all(isinstance(h, str) for h in hosts):
        data["http_allow_list"] = tuple(hosts)
    elif hosts is not None:
        raise UsageError("--stdlib-config: http_allow_list must be a host or a list of hosts/CIDRs")
    for host in data.get("http_allow_list", ()):
        _check_host("--stdlib-config: http_allow_list", host)
    root = data.get("sandbox_root")
    if root is not None and not (isinstance(root, str) and Path(root).is_dir()):
        raise UsageError(f"--stdlib-config: sandbox_root {root!r} is not a directory")
    types = {f.name: str(f.type) for f in dataclasses.fields(config_type)}
    for key, value in data.items():
        expected = _CONFIG_TYPES.get(types.get(key, ""))
        if expected is None:
            continue
        label, ok = expected
        if not ok(value):
            raise UsageError(f"--stdlib-config: {path!r}: {key} must be {label}, "
                             f"got {json.dumps(value, default=str)}")
    return data


def _is_number(v: Any) -> bool:
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


# annotation of a StdlibConfig field -> (what it must be, check); other fields are checked above
_CONFIG_TYPES: dict[str, tuple[str, Any]] = {
    "int": ("a whole number >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "float": ("a number >= 0", _is_number),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "bool | None": ("true, false or null", lambda v: v is None or isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "str | None": ("a string or null", lambda v: v is None or isinstance(v, str)),
}


def _check_host(flag: str, host: str) -> None:
    """A host name (``api.local``, ``*.corp.example``), an IP address or a CIDR network."""
    import ipaddress
    import re

    text = host.strip()
    if "/" in text or ":" in text or re.fullmatch(r"[0-9.]+", text):
        try:
            ipaddress.ip_network(text.strip("[]"), strict=False)
            return
        except ValueError as exc:
            raise UsageError(f"{flag}: {host!r} is not an IP address or CIDR network: {exc}") from None
    label = r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"
    if not re.fullmatch(rf"(\*\.)?{label}(\.{label})*\.?", text):
        raise UsageError(f"{flag}: {host!r} is not a host name (api.example.com, *.corp.example), "
                         "an IP address or a CIDR network")
