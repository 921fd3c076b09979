"""The schemas of plain type hints written out without pydantic are pydantic's own, as JSON
text (key order included), and every other hint still goes to pydantic (issue 30)."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import typing
from typing import Any, Dict, List, Literal, Optional, Union, get_type_hints

import pytest

from sophon_dsl import tool
from sophon_dsl.hint_schemas import hint_schema
from sophon_dsl.tools import plain_schemas, pydantic_schemas, schemas_from_function

PLAIN = [str, int, float, bool, None, type(None), Any, object, list, dict, List, Dict,
         list[str], List[int], list[Any], list[dict], list[list[float]], dict[str, int], Dict[str, Any],
         dict[str, Any], dict[str, list[str]], Optional[int], Union[int, str], Union[int, str, None],
         int | None | str, Union[None, int], Optional[list[dict]], list[Optional[int]], bool | int,
         dict[str, Optional[str]], float | None]


def _json(value: Any) -> str:
    return json.dumps(value)


@pytest.mark.parametrize("hint", PLAIN, ids=repr)
def test_a_plain_hint_gets_pydantics_schema(hint):
    import pydantic

    expected = pydantic.TypeAdapter(hint).json_schema()
    expected.pop("title", None)
    assert _json(hint_schema(hint)) == _json(expected)


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int


class Movie(typing.TypedDict):
    title: str


@pytest.mark.parametrize("hint", [Colour, Point, Movie, Literal["a", "b"], tuple, tuple[int, str],
                                  dict[int, str], typing.Annotated[int, "x"], Optional[Any],
                                  list[Point], typing.Sequence[int], set[str], bytes],
                         ids=repr)
def test_any_other_hint_is_left_to_pydantic(hint):
    assert hint_schema(hint) is None


def _functions():
    def plain(userName: str, n: int = 5, profile: dict = None, o: Optional[int] = None,
              b: bool = True, fl: float = 1.5, a=None, name: str = "x", d: dict[str, int] | None = None,
              **more) -> dict:
        pass

    def typed_kwargs(q: str, **more: int) -> list[str]:
        pass

    def no_return(x: int, *rest):
        pass

    def returns_none(x: Any) -> None:
        pass

    def nothing() -> str:
        pass

    def any_kwargs(**more: Any) -> Optional[str]:
        pass

    return [plain, typed_kwargs, no_return, returns_none, nothing, any_kwargs]


@pytest.mark.parametrize("func", _functions(), ids=lambda f: f.__name__)
def test_a_plain_function_gets_pydantics_schemas(func):
    sig, hints = inspect.signature(func), get_type_hints(func, include_extras=True)
    plain = plain_schemas(func, sig, hints)
    assert plain is not None
    assert _json(plain) == _json(pydantic_schemas(func, sig, hints))
    assert _json(schemas_from_function(func)) == _json(plain)


def _not_plain():
    def list_default(xs: list = []) -> str:  # noqa: B006
        pass

    def enum_param(c: Colour) -> str:
        pass

    def model_return(x: str) -> Point:
        pass

    def inf_default(x: float = float("inf")) -> str:
        pass

    def tuple_kwargs(**more: tuple) -> str:
        pass

    return [list_default, enum_param, model_return, inf_default, tuple_kwargs]


@pytest.mark.parametrize("func", _not_plain(), ids=lambda f: f.__name__)
def test_a_function_with_other_hints_or_defaults_goes_to_pydantic(func):
    sig, hints = inspect.signature(func), get_type_hints(func, include_extras=True)
    assert plain_schemas(func, sig, hints) is None
    assert _json(schemas_from_function(func)) == _json(pydantic_schemas(func, sig, hints))


def test_a_plain_tool_is_described_without_importing_pydantic():
    import subprocess
    import sys

    code = ("import sys\nfrom sophon_dsl import tool\n"
            "@tool\ndef search(query: str, limit: int = 5) -> list[str]:\n    return []\n"
            "assert search.input_schema['required'] == ['query']\n"
            "assert 'pydantic' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_context_parameter_is_in_neither_schema():
    from sophon_dsl import CallContext

    @tool
    def lookup(q: str, ctx: CallContext) -> int:
        return 1

    assert list(lookup.input_schema["properties"]) == ["q"]
    assert lookup.input_schema["required"] == ["q"]
