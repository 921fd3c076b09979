"""The one root of every exception sophon-dsl raises: :class:`SophonError`.

Each family of errors keeps its own class and attributes (``DiagnosticError``
carries diagnostics, ``RunError`` a named ``{error, cause}``, ``ProviderError``
a status and whether it may be retried, ...), and every family derives from
:class:`SophonError`, so a caller can catch everything the package raises with
one ``except SophonError`` and still tell the families apart.

The families below are the mistakes a caller of the Python API can make before
anything runs.  Each names itself with a stable dotted ``code`` and keeps the
built-in base it replaced (``ValueError``, ``TypeError``, ...), so code that caught
the built-in still does.

Every other module imports this one, so it imports nothing itself.
"""

from __future__ import annotations

__all__ = ["InsideEventLoop", "MissingExtra", "OptionError", "OptionTypeError", "SophonError"]


class SophonError(Exception):
    """Base class of every exception raised by sophon-dsl (and its standard tools)."""


class OptionError(SophonError, ValueError):
    """An argument outside what it accepts: a limit, a mode, a format name, a store URL,
    a configuration value.  ``code`` says which kind (``Option.Invalid`` by default)."""

    code = "Option.Invalid"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class OptionTypeError(SophonError, TypeError):
    """An argument of the wrong kind (not a plan, not a plan value, an approver's answer
    that is no decision, an unknown keyword)."""

    code = "Option.WrongType"


class InsideEventLoop(SophonError, RuntimeError):
    """A blocking entry point (``run``, ``Agent.run``, ``GoalRunner.run``) called inside a
    running event loop: await its ``a...`` form instead."""

    code = "Api.InsideEventLoop"


class MissingExtra(SophonError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    code = "Install.MissingExtra"
