"""``math.eval``: a safe arithmetic and comparison evaluator over an ``ast`` whitelist.

No ``eval``: the expression is parsed with :func:`ast.parse` and walked node by node.
Allowed: numeric literals, variables from a ``variables`` object, ``+ - * / // % **``
(exponent bounded), unary ``+ - not``, comparisons (chained), ``and`` / ``or``,
``x if c else y``, and the functions abs, min, max, round, sqrt, floor, ceil.
Attribute access, subscripts, other calls, strings, lambdas... are refused.
"""

from __future__ import annotations

import ast
import math as _m
import operator
from typing import Annotated, Any, Callable

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError

__all__ = ["build", "safe_eval", "MAX_EXPONENT", "MAX_INT_BITS"]

MAX_EXPRESSION_CHARS = 2000
MAX_EXPONENT = 1000
MAX_INT_BITS = 4096
MAX_DEPTH = 60

Number = int | float | bool

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}


MAX_ROUND_DIGITS = 1000  # round(7, -N) computes 10**N first: N is bounded before it runs


def _round(x: Any, ndigits: Any = None) -> Any:
    if ndigits is None:
        return round(x)
    if isinstance(ndigits, float) and not ndigits.is_integer():
        raise ToolError("Math.TypeError", f"round: ndigits must be an integer, not {ndigits}")
    n = int(ndigits)
    if abs(n) > MAX_ROUND_DIGITS:
        raise ToolError("Math.Overflow", f"round: ndigits {n} is beyond +-{MAX_ROUND_DIGITS}")
    return round(x, n)


_FUNCS: dict[str, tuple[Callable[..., Any], int, int]] = {  # name: (function, min args, max args)
    "abs": (abs, 1, 1), "min": (min, 1, 100), "max": (max, 1, 100), "round": (_round, 1, 2),
    "sqrt": (_m.sqrt, 1, 1), "floor": (_m.floor, 1, 1), "ceil": (_m.ceil, 1, 1),
}
_CONSTANTS = {"pi": _m.pi, "e": _m.e, "true": True, "false": False, "True": True, "False": False}


def _fail(message: str) -> ToolError:
    return ToolError("Math.InvalidExpression", message)


def _check_number(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > MAX_INT_BITS:
        raise ToolError("Math.Overflow", f"integer result larger than {MAX_INT_BITS} bits")
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        raise ToolError("Math.Overflow", "result is not a finite number")
    return v


def _pow(a: Any, b: Any) -> Any:
    if isinstance(b, (int, float)) and abs(b) > MAX_EXPONENT:
        raise ToolError("Math.Overflow", f"exponent {b} is larger than {MAX_EXPONENT}")
    if isinstance(a, int) and isinstance(b, int) and b > 0 and a not in (0, 1, -1):
        if (abs(a).bit_length() - 1) * b > MAX_INT_BITS:
            raise ToolError("Math.Overflow", f"integer result larger than {MAX_INT_BITS} bits")
    try:
        result = a ** b
    except ZeroDivisionError:  # 0 ** -1
        raise ToolError("Math.DivisionByZero", "zero raised to a negative power") from None
    if isinstance(result, complex):
        # a negative base to a fractional power has no real value, as sqrt(-1) (DomainError)
        shown = f"({a!r})" if a < 0 else repr(a)
        raise ToolError("Math.DomainError", f"{shown} ** {b!r} is not a real number") from None
    return result


def _bits(v: Any) -> int:
    return abs(v).bit_length() if isinstance(v, int) else 0


def _bound_result(op: Callable[[Any, Any], Any], a: Any, b: Any) -> None:
    """Refuse before computing an integer result above MAX_INT_BITS (issue 17: a result is
    bounded before the work, never checked after it). ``**`` has its own bound in _pow;
    ``/`` gives a float, ``//`` and ``%`` are no larger than their operands."""
    if op is operator.mul:
        grows = _bits(a) + _bits(b) > MAX_INT_BITS + 1
    elif op in (operator.add, operator.sub):
        grows = max(_bits(a), _bits(b)) + 1 > MAX_INT_BITS + 1
    else:
        grows = False
    if grows and isinstance(a, int) and isinstance(b, int):
        raise ToolError("Math.Overflow", f"integer result larger than {MAX_INT_BITS} bits")


class _Evaluator:
    def __init__(self, variables: dict[str, Any]):
        self.vars = variables

    def eval(self, node: ast.AST, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise _fail("expression nested too deeply")
        d = depth + 1
        if isinstance(node, ast.Expression):
            return self.eval(node.body, d)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (int, float)) and not isinstance(node.value, complex):
                return _check_number(node.value)
            raise _fail(f"only numbers are allowed, not {type(node.value).__name__}")
        if isinstance(node, ast.Name):
            if node.id in self.vars:
                return self.vars[node.id]
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            raise ToolError("Math.UnknownName", f"unknown name {node.id!r}")
        if isinstance(node, ast.UnaryOp):
            v = self.eval(node.operand, d)
            if isinstance(node.op, ast.Not):
                return not v
            if isinstance(node.op, ast.USub):
                return _check_number(-v)
            if isinstance(node.op, ast.UAdd):
                return +v
            raise _fail("operator not allowed")
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise _fail(f"operator {type(node.op).__name__} is not allowed")
            a, b = self.eval(node.left, d), self.eval(node.right, d)
            if op is operator.pow:
                return _check_number(_pow(a, b))
            _bound_result(op, a, b)
            try:
                return _check_number(op(a, b))
            except ZeroDivisionError:
                raise ToolError("Math.DivisionByZero", "division by zero") from None
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result: Any = True
                for v in node.values:
                    result = self.eval(v, d)
                    if not result:
                        return result
                return result
            result = False
            for v in node.values:
                result = self.eval(v, d)
                if result:
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = self.eval(node.left, d)
            for op_node, comp in zip(node.ops, node.comparators):
                op = _CMPOPS.get(type(op_node))
                if op is None:
                    raise _fail(f"comparison {type(op_node).__name__} is not allowed")
                right = self.eval(comp, d)
                if not op(left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.eval(node.body, d) if self.eval(node.test, d) else self.eval(node.orelse, d)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS:
                raise _fail("only abs, min, max, round, sqrt, floor and ceil can be called")
            if node.keywords:
                raise _fail("keyword arguments are not allowed")
            fn, lo, hi = _FUNCS[node.func.id]
            if any(isinstance(a, ast.Starred) for a in node.args):
                raise _fail("*args is not allowed")
            if not lo <= len(node.args) <= hi:
                raise _fail(f"{node.func.id} takes {lo} to {hi} arguments")
            args = [self.eval(a, d) for a in node.args]
            try:
                return _check_number(fn(*args))
            except (ValueError, OverflowError) as exc:
                raise ToolError("Math.DomainError", f"{node.func.id}: {exc}") from None
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            raise _fail("attribute access and subscripts are not allowed")
        raise _fail(f"{type(node).__name__} is not allowed")


def safe_eval(expression: str, variables: dict[str, Any] | None = None) -> int | float | bool:
    """Evaluate an arithmetic / comparison expression safely (see the module docstring)."""
    if not isinstance(expression, str):
        raise _fail("expression must be a string")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise _fail(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    env: dict[str, Any] = {}
    for k, v in (variables or {}).items():
        if not str(k).isidentifier():
            raise _fail(f"variable name {k!r} is not an identifier")
        if not isinstance(v, (int, float, bool)) or isinstance(v, complex):
            raise ToolError("Math.TypeError", f"variable {k!r} is not a number or boolean")
        env[str(k)] = _check_number(v)
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise _fail(f"syntax error: {exc.msg}") from None
    try:
        result = _Evaluator(env).eval(tree)
    except ToolError:
        raise
    except OverflowError:
        raise ToolError("Math.Overflow", "result too large") from None
    except TypeError as exc:
        raise ToolError("Math.TypeError", str(exc)) from None
    except RecursionError:
        raise _fail("expression nested too deeply") from None
    return result


@uses_config()
def build(config: StdlibConfig) -> list[ToolSpec]:
    def eval_(expression: Annotated[str, Field(description='e.g. "price * qty * (1 + vat) > 100"')],
              variables: Annotated[dict[str, Number] | None,
                                   Field(description="numbers the expression refers to by name")] = None,
              ) -> int | float | bool:
        return safe_eval(expression, variables)

    return [make_tool(eval_, "math.eval", Risk.NONE,
                      "Evaluate an arithmetic or comparison expression safely (no code execution): "
                      "numbers, variables, + - * / // % ** (bounded), comparisons, and/or/not, "
                      "x if c else y, abs/min/max/round/sqrt/floor/ceil, constants pi and e.")]
