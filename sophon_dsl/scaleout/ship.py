"""How a tool's function travels to the workers.

Functions of installed modules go by reference (the worker imports the module); functions
from a ``--tools FILE.py`` file, ``__main__`` or any other module that is not part of an
installed distribution go by value: cloudpickle, with their module registered by value (a
worker could not import it, and the future would never complete).  A ``@tool`` function
ships unwrapped and gets its argument conversion back on the worker.  Each pickle is named
by its hash, so workers unpickle it once.
"""

from __future__ import annotations

import hashlib
import sys
import typing
from functools import lru_cache
from typing import Any, Callable

__all__ = ["Shipped", "ship"]


class Shipped:
    """A tool's pickled function and its hash (or why it cannot be pickled)."""

    __slots__ = ("blob", "digest", "error")

    def __init__(self, blob: bytes | None, digest: str, error: str | None = None) -> None:
        self.blob, self.digest, self.error = blob, digest, error


# sophon-dsl's own packages: the workers have them (the preflight checks the version), even
# when an editable install leaves them out of the installed metadata
_OURS = frozenset({"sophon_dsl", "stdlib_tools"})


@lru_cache(maxsize=None)
def _installed_top_levels() -> frozenset[str]:
    from importlib.metadata import packages_distributions

    return frozenset(packages_distributions())


def by_value(module_name: str | None) -> bool:
    """Whether functions of ``module_name`` must be pickled by value."""
    if not module_name or module_name == "__main__":
        return True
    top = module_name.partition(".")[0]
    if top in _OURS or top in sys.stdlib_module_names:
        return False
    return top not in _installed_top_levels()


def _unwrapped(name: str, func: Callable[..., Any]) -> tuple:
    inner = getattr(func, "__wrapped__", None)
    code = getattr(func, "__code__", None)  # (functools.wraps gave the wrapper the function's names)
    if inner is not None and getattr(code, "co_qualname", "").startswith("ArgumentConverter.wrap"):
        # the hints resolved here: a function shipped by value keeps only the globals its code
        # uses, so a hint written as text ("Point") would not resolve on the worker
        try:
            hints = typing.get_type_hints(inner, include_extras=True)
        except Exception:  # noqa: BLE001 - unresolvable here too: converted as locally (not at all)
            hints = None
        return ("convert", name, inner, hints)
    return ("plain", name, func, None)


def ship(name: str, func: Callable[..., Any]) -> Shipped:
    """Pickle ``func`` (the tool called ``name``) for the workers."""
    import cloudpickle

    shipped = _unwrapped(name, func)
    module_name = getattr(shipped[2], "__module__", None)
    module = sys.modules.get(module_name) if module_name else None
    if module is not None and module_name != "__main__" and by_value(module_name):
        cloudpickle.register_pickle_by_value(module)
    try:
        blob = cloudpickle.dumps(shipped)
    except Exception as exc:  # noqa: BLE001 - a lock, a socket, a generator in a closure...
        return Shipped(None, "", f"it cannot be pickled: {type(exc).__name__}: {exc}")
    return Shipped(blob, hashlib.sha256(blob).hexdigest()[:32])
