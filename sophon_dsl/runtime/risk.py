"""A call's effective risk: its own ``@risk`` or its tool's, whichever is higher."""

from __future__ import annotations

from typing import Any

from ..model import Call, Risk

__all__ = ["effective_risk"]


def effective_risk(call: Call, spec: Any) -> Risk:
    r = call.risk if call.risk is not None else Risk.NONE
    if spec is not None and getattr(spec, "risk", None) is not None and spec.risk > r:
        r = spec.risk
    return r
