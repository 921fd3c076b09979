"""The per-call attributes: one set of rules for every form.

A call's attributes (``_id``, ``_activity``, ``_instance``, ``_delegate``,
``_reasoningForCall``, ``_successCriterion``, ``_risk``, ``_retry``,
``_timeout``, ``_after``, ``_scopes``, ``_modelHint``, ``_outputMethod``) are
validated and converted here and nowhere else.  Both readers hand over the
attribute's value as plain JSON data and get back the model field and value,
or the problems:

* :mod:`.dsl_parser` first turns decorators, labels and ``_name=`` keyword
  arguments into that JSON value (``@retry(3)`` -> ``3``, ``@after(a, b)`` ->
  ``["a", "b"]``, ``@model(k=v)`` -> ``{"k": v}``) and reports every problem
  at the attribute's span;
* :mod:`.documents` passes the located node's data and reports each problem at
  the sub-node its :attr:`AttrError.path` names (``("max_delay",)`` for
  ``_retry.max_delay``), so the span and JSON path stay exact.

So a bad value gets the same message (always code E103) in the DSL, JSON and
YAML forms.  Which names are attributes, their DSL spellings, duplicates
(E108) and unknown names (E104) stay with the readers.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any, Callable, NamedTuple

from ..model import OutputMethod, RetryPolicy, Risk

__all__ = ["ATTRIBUTES", "RETRY_KEYS", "OUTPUT_METHODS", "OUTPUT_METHOD_WITHOUT_PATH", "AttrError",
           "convert_attribute", "describe", "param_key", "param_name"]

# JSON spelling -> model field (``output_method`` is the method of the call's OutputTarget)
ATTRIBUTES: dict[str, str] = {
    "_id": "id",
    "_activity": "activity",
    "_instance": "instance",
    "_delegate": "delegate",
    "_reasoningForCall": "reasoning",
    "_successCriterion": "success_criterion",
    "_risk": "risk",
    "_retry": "retry",
    "_timeout": "timeout",
    "_after": "after",
    "_scopes": "scopes",
    "_modelHint": "model_hint",
    "_outputMethod": "output_method",
}

def param_name(key: str) -> str:
    """The parameter a JSON/YAML call key names: ``__from`` is the parameter ``_from`` (one
    leading underscore dropped), because a key with a single leading ``_`` is an attribute."""
    return key[1:] if key[:2] == "__" else key


def param_key(name: str) -> str:
    """The JSON/YAML call key that spells parameter ``name`` (the inverse of :func:`param_name`)."""
    return "_" + name if name[:1] == "_" else name


RETRY_KEYS = ("max_attempts", "interval", "backoff_rate", "max_delay", "jitter", "errors")
OUTPUT_METHODS = tuple(m.value for m in OutputMethod)
OUTPUT_METHOD_WITHOUT_PATH = "_outputMethod needs an output path (_outputPath)"

_RISK_NAMES = ", ".join(r.name.lower() for r in Risk)


class AttrError(NamedTuple):
    """One problem with an attribute value (diagnostic code E103).

    ``path`` is where inside the value the problem is: ``()`` for the value
    itself, ``("errors",)`` for ``_retry.errors``.
    """

    message: str
    path: tuple[str | int, ...] = ()


def describe(data: Any) -> str:
    """What a JSON value is, for messages: ``a number``, ``an object``, ``a blank string``..."""
    if data is None:
        return "null"
    if data is True or data is False:
        return "a boolean"
    if isinstance(data, (int, float)):
        return "a number"
    if isinstance(data, str):
        return "a string" if data.strip() else "a blank string"
    if isinstance(data, (list, tuple)):
        return "a list"
    if isinstance(data, dict):
        return "an object"
    return type(data).__name__


def _got(data: Any) -> str:
    """Like :func:`describe`, but numbers and short strings are shown as written."""
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return repr(data)
    if isinstance(data, str) and data.strip() and len(data) <= 40:
        return repr(data)
    return describe(data)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _fail(message: str, *path: str | int) -> tuple[None, tuple[AttrError, ...]]:
    return None, (AttrError(message, path),)


# Each converter: JSON data -> (value, ()) or (None, errors)

def _string(attr: str) -> Callable[[Any], tuple[Any, tuple[AttrError, ...]]]:
    message = attr + " must be a non-blank string, got "

    def convert(data: Any):
        if isinstance(data, str) and data.strip():
            return data, ()
        return _fail(message + describe(data))
    return convert


def _names(attr: str) -> Callable[[Any], tuple[Any, tuple[AttrError, ...]]]:
    message = attr + " must be a list of non-blank names, got "

    def convert(data: Any):
        if isinstance(data, str) and data.strip():
            return (data,), ()  # a single name means a list of one
        got = describe(data)
        if isinstance(data, list):
            for i, x in enumerate(data):
                if not (isinstance(x, str) and x.strip()):
                    got = f"{describe(x)} at [{i}]"
                    break
            else:
                return tuple(data), ()
        return _fail(message + got)
    return convert


def _risk(data: Any):
    if not isinstance(data, str):
        return _fail(f"_risk must be a risk level ({_RISK_NAMES}), got {_got(data)}")
    try:
        return Risk.parse(data), ()
    except ValueError as exc:
        return _fail(f"_risk: {exc}")


def _timeout(data: Any):
    if _is_number(data) and data > 0:
        return data, ()
    return _fail(f"_timeout must be a positive number of seconds, got {_got(data)}")


def _model_hint(data: Any):
    if isinstance(data, dict):
        return data, ()
    return _fail('_modelHint must be an object such as {"requiresReasoning": true}, got ' + _got(data))


def _output_method(data: Any):
    if isinstance(data, str) and data in OUTPUT_METHODS:
        return OutputMethod(data), ()
    return _fail(f"_outputMethod must be one of {', '.join(OUTPUT_METHODS)}, got {_got(data)}")


def _non_negative(k: str, v: Any, nullable: bool = False) -> tuple[Any, AttrError | None]:
    if nullable and v is None:
        return None, None
    if _is_number(v) and v >= 0:
        return v, None  # kept as written (like _timeout): `interval=2` prints back as 2
    what = "a non-negative number or null" if nullable else "a non-negative number"
    return None, AttrError(f"_retry.{k} must be {what}, got {_got(v)}", (k,))


def _retry(data: Any):
    if isinstance(data, int) and not isinstance(data, bool):
        if data >= 1:
            return RetryPolicy(max_attempts=data), ()
        return _fail(f"_retry must be at least 1 (the maximum number of attempts), got {data!r}")
    if not isinstance(data, dict):
        return _fail(f"_retry must be an integer (the maximum number of attempts) or an object with "
                     f"{', '.join(RETRY_KEYS)}, got {_got(data)}")
    kw: dict[str, Any] = {}
    errors: list[AttrError] = []
    for k, v in data.items():
        err = None
        if k == "max_attempts":
            if _is_count(v):
                kw[k] = v
            else:
                err = AttrError(f"_retry.max_attempts must be an integer >= 1, got {_got(v)}", (k,))
        elif k in ("interval", "backoff_rate", "max_delay"):
            kw[k], err = _non_negative(k, v, nullable=k == "max_delay")
        elif k == "jitter":
            if isinstance(v, bool):
                kw[k] = v
            else:
                err = AttrError(f"_retry.jitter must be true or false, got {_got(v)}", (k,))
        elif k == "errors":
            kw[k], err = _error_names(v)
        else:
            hint = get_close_matches(k, RETRY_KEYS, 1)
            err = AttrError(f"unknown _retry field {k!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                            + f"; expected {', '.join(RETRY_KEYS)}", (k,))
        if err is not None:
            errors.append(err)
    if errors:
        return None, tuple(errors)
    return RetryPolicy(**kw), ()


def _error_names(data: Any) -> tuple[Any, AttrError | None]:
    if isinstance(data, str) and data.strip():
        return (data,), None
    got = describe(data)
    if isinstance(data, list):
        for i, x in enumerate(data):
            if not (isinstance(x, str) and x.strip()):
                got = f"{describe(x)} at [{i}]"
                break
        else:
            return tuple(data), None
    return None, AttrError(f"_retry.errors must be a list of non-blank error names, got {got}", ("errors",))


_CONVERTERS: dict[str, Callable[[Any], tuple[Any, tuple[AttrError, ...]]]] = {
    "_id": _string("_id"),
    "_activity": _string("_activity"),
    "_instance": _string("_instance"),
    "_delegate": _string("_delegate"),
    "_reasoningForCall": _string("_reasoningForCall"),
    "_successCriterion": _string("_successCriterion"),
    "_risk": _risk,
    "_retry": _retry,
    "_timeout": _timeout,
    "_after": _names("_after"),
    "_scopes": _names("_scopes"),
    "_modelHint": _model_hint,
    "_outputMethod": _output_method,
}


def convert_attribute(attr: str, data: Any) -> tuple[str, Any, tuple[AttrError, ...]]:
    """Validate and convert one attribute given in its JSON spelling.

    ``attr`` is a key of :data:`ATTRIBUTES`; ``data`` its value as plain JSON data
    (strings unparsed: ``"†state.x"`` is just a string here).  Returns
    ``(model field, value, ())`` or ``(model field, None, errors)`` with at least
    one :class:`AttrError`; a ``_retry`` object reports each bad field.
    """
    conv = _CONVERTERS.get(attr)
    if conv is None:
        return attr, None, (AttrError(f"unknown attribute {attr}"),)
    value, errors = conv(data)
    return ATTRIBUTES[attr], value, errors
