"""Type hints as pydantic reads them: before Python 3.12 pydantic refuses a ``typing.TypedDict``
(it needs ``typing_extensions.TypedDict``), so :func:`pydantic_ready` rebuilds each one found in
a hint (nested in ``list[...]``, ``X | None``, ``Annotated[...]`` or another TypedDict's fields)
as the ``typing_extensions`` class with the same name, fields, required keys and docstring."""

from __future__ import annotations

import sys
import types
import typing
from typing import Any

import typing_extensions

__all__ = ["pydantic_ready"]

_NEEDED = sys.version_info < (3, 12)
_MARKS = (typing.Required, typing.NotRequired, typing_extensions.Required, typing_extensions.NotRequired)


def pydantic_ready(hint: Any) -> Any:
    """``hint`` with every ``typing.TypedDict`` in it made a ``typing_extensions.TypedDict``
    (``hint`` itself when there is none, or on Python 3.12 and later)."""
    if not _NEEDED:
        return hint
    return _Rebuild().hint(hint)


class _Rebuild:
    def __init__(self) -> None:
        self.done: dict[int, Any] = {}  # one new class per old one (a class used twice stays one)

    def hint(self, hint: Any) -> Any:
        if isinstance(hint, type) and typing.is_typeddict(hint):
            return self.typed_dict(hint)
        args = typing.get_args(hint)
        if not args:
            return hint
        new_args = tuple(self.hint(a) if not isinstance(a, (str, int, float, bool)) else a for a in args)
        if all(n is a for n, a in zip(new_args, args)):
            return hint
        origin = typing.get_origin(hint)
        if origin is typing.Annotated:
            return typing.Annotated[(new_args[0], *hint.__metadata__)]
        if origin is typing.Union or origin is types.UnionType:
            return typing.Union[new_args]
        if isinstance(hint, types.GenericAlias):
            return types.GenericAlias(origin, new_args)
        copy_with = getattr(hint, "copy_with", None)
        return copy_with(new_args) if copy_with is not None else hint

    def typed_dict(self, cls: type) -> Any:
        if type(cls).__module__ != "typing":  # already typing_extensions': pydantic takes it
            return cls
        if id(cls) in self.done:
            return self.done[id(cls)]
        try:
            fields = typing.get_type_hints(cls, include_extras=True)
        except Exception:  # noqa: BLE001 - unresolved forward references: pydantic will say what is wrong
            return cls
        required = getattr(cls, "__required_keys__", frozenset(fields))
        spelled = {}
        for key, field in fields.items():
            # a field's own mark wins: with postponed annotations (`from __future__ import
            # annotations`) Python 3.11 cannot see NotRequired[...] in the string and lists the key
            # as required
            own = typing.get_origin(field)
            is_required = key in required if own not in _MARKS else own in (typing.Required,
                                                                             typing_extensions.Required)
            while typing.get_origin(field) in _MARKS:
                field = typing.get_args(field)[0]
            mark = typing_extensions.Required if is_required else typing_extensions.NotRequired
            spelled[key] = mark[self.hint(field)]
        new = typing_extensions.TypedDict(cls.__name__, spelled)
        new.__module__, new.__qualname__, new.__doc__ = cls.__module__, cls.__qualname__, cls.__doc__
        self.done[id(cls)] = new
        return new
