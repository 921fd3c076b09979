"""The one root of every exception sophon-dsl raises: :class:`SophonError`.

Each family of errors keeps its own class and attributes (``DiagnosticError``
carries diagnostics, ``RunError`` a named ``{error, cause}``, ``ProviderError``
a status and whether it may be retried, ...), and every family derives from
:class:`SophonError`, so a caller can catch everything the package raises with
one ``except SophonError`` and still tell the families apart.

Every other module imports this one, so it imports nothing itself.
"""

from __future__ import annotations

__all__ = ["SophonError"]


class SophonError(Exception):
    """Base class of every exception raised by sophon-dsl (and its standard tools)."""
