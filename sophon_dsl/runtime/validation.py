"""Tool input and output validation: one compiled validator per distinct schema.

A fast structural pre-check (:func:`sophon_dsl.compiler.fast_schema_check`) answers
"certainly valid" for the plain schemas ``@tool`` derives from type hints; jsonschema
decides everything else.  Validators are cached per schema text and shared by runs.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ..compiler import fast_schema_check

__all__ = ["SchemaValidator", "schema_validator"]


class SchemaValidator:
    """``check(value)`` -> None or a message: fast pre-check, then jsonschema for the rest."""

    __slots__ = ("fast", "full")

    def __init__(self, fast: Callable[[Any], bool] | None, full: Any) -> None:
        self.fast = fast
        self.full = full

    def check(self, value: Any) -> str | None:
        fast = self.fast
        if fast is not None and fast(value):
            return None
        err = next(iter(self.full.iter_errors(value)), None)
        if err is None:
            return None
        where = "/".join(str(p) for p in err.absolute_path)
        return f"{err.message}" + (f" (at /{where})" if where else "")


_VALIDATORS: dict[str, SchemaValidator | None] = {}


def schema_validator(schema: Any) -> SchemaValidator | None:
    """The (cached) validator of a tool schema; None when there is nothing to check
    (no schema, an empty one, or one jsonschema rejects as a schema)."""
    if not isinstance(schema, dict) or not schema:
        return None
    try:
        key = json.dumps(schema, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _VALIDATORS:
        return _VALIDATORS[key]
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
        v: SchemaValidator | None = SchemaValidator(fast_schema_check(schema), cls(schema))
    except jsonschema.SchemaError:
        v = None
    if key is not None:
        if len(_VALIDATORS) >= 1024:
            _VALIDATORS.clear()
        _VALIDATORS[key] = v
    return v
