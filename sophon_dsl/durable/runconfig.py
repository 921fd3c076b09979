"""What a durable run keeps of how it was configured, so that a resume or an approval in
another process (or directory) builds the same tools and provider: :class:`ToolConfig`
(the tool sources and standard-library choice, typed; the CLI fills it from its flags)
and :func:`stored_config` (which of a row's values a continuation may take, when the row
can vouch for them: :mod:`.trust`).  Nothing here knows the command line's namespace."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, fields
from typing import Any

from .trust import check_meta

__all__ = ["LIST_FLAGS", "STORED_KEYS", "TOOL_FLAGS", "ToolConfig", "stored_config"]

# the fields that build a run's tool registry (cli/registry.py), kept with the run
TOOL_FLAGS = ("tools", "no_stdlib", "stdlib", "sandbox", "stdlib_config", "allow_host")
# the settings each kind of run takes from its row besides the tool fields
_EXTRA = {"agent": ("provider", "model", "delegate_dir"),
          "goal": ("provider", "model", "planner_provider", "evaluator_provider", "approve")}
_DEFAULT_EXTRA = ("provider", "model")
STORED_KEYS = tuple(dict.fromkeys(k for keys in _EXTRA.values() for k in keys))
# the list-valued fields: a row's null reads as "none given" ([]) for them
LIST_FLAGS = ("tools", "allow_host")


@dataclass(frozen=True)
class ToolConfig:
    """The tool sources (``--tools``) and the standard-library choice of a run, as given
    (None: not given).  Values are kept as given so the stored meta's JSON is unchanged."""

    tools: Any = None
    no_stdlib: Any = None
    stdlib: Any = None
    sandbox: Any = None
    stdlib_config: Any = None
    allow_host: Any = None

    def given(self) -> bool:
        """Some tool field is set: then this set is the run's, not the row's."""
        return any(getattr(self, f) not in (None, False, [], ()) for f in TOOL_FLAGS)

    def meta(self, provider: str | None = None, model: str | None = None) -> dict:
        """The fields (paths made absolute) and the provider, kept with a run so that a
        resume from another directory builds the same tools."""
        meta = {f.name: getattr(self, f.name) for f in fields(self)}
        meta["tools"] = [_absolute(t) for t in meta["tools"] or ()]
        for name in ("sandbox", "stdlib_config"):
            if meta[name]:
                meta[name] = os.path.abspath(meta[name])
        meta["provider"], meta["model"] = provider, model
        return meta

    def stored_fields(self, meta: dict | None) -> dict[str, Any]:
        """The fields a continuation takes from its run: none when some are given now, else
        those ``meta`` holds (``meta``: what :func:`stored_config` let through, never a row's
        meta unchecked; a null list field reads as [])."""
        if self.given() or not meta:
            return {}
        return {name: [] if meta[name] is None and name in LIST_FLAGS else meta[name]
                for name in TOOL_FLAGS if name in meta}


def _absolute(source: str) -> str:
    """A tool source as a resume from another directory finds it again."""
    return os.path.abspath(source) if os.path.exists(source) else source


def stored_config(row: dict, tools: ToolConfig, given: Collection[str]) -> dict:
    """What a resume or approval of ``row`` may take from the store: the tool fields
    (unless ``tools`` gives some: then that set is used) and the settings of
    :data:`STORED_KEYS` not in ``given`` (those set again now), when the row can vouch for
    them (:func:`.trust.check_meta`).  Raises :class:`.trust.StoredConfigError`
    (``Store.ConfigUntrusted`` / ``Store.ConfigChanged``) when the row would supply a value
    it cannot vouch for.  Imports nothing, so it can run before the tools load."""
    spec = row.get("spec") or {}
    used = [k for k in _EXTRA.get(spec.get("kind"), _DEFAULT_EXTRA) if k not in given]
    if not tools.given():
        used[:0] = TOOL_FLAGS
    return check_meta(spec.get("meta"), used, row.get("run_id", "?"))
