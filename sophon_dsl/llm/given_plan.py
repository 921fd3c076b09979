"""A plan handed to the agent to continue from (seed 004, "the plan as a context message"):
``Agent.run(request, plan=...)`` and ``sophon-dsl agent REQUEST --plan FILE``.

The plan is not run as it is: it goes to the model as the Plan context message of the first
turn, next to the state (``state=`` / ``--state``), and the model follows it, extends it or
replaces it (seed 004's "Planning one step ahead" and "Adjusting a Plan").
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import OptionTypeError
from ..model import Plan

__all__ = ["as_plan"]


def as_plan(value: Any) -> Plan | None:
    """``value`` as a :class:`Plan`: a Plan; plan text (JSON when it starts with ``[`` or ``{``,
    else DSL); seed 004's data (a list of calls, ``{"type": "plan", "plan": [...]}``, a
    solution ``{"calls": [...]}``, any document ``sophon_dsl.loads`` reads); or a path to a plan
    file (any form, told by its extension).  None stays None.
    :class:`~sophon_dsl.diagnostics.DiagnosticError` (positioned diagnostics) when it does not
    load; TypeError for anything else."""
    from ..loader import load, loads

    if value is None or isinstance(value, Plan):
        return value
    if isinstance(value, os.PathLike):
        return load(value)
    if isinstance(value, str):
        head = value.lstrip()[:1]
        return loads(value, "json" if head in ("[", "{") else "dsl")
    if isinstance(value, (list, dict)):
        return loads(json.dumps(value, ensure_ascii=False), "json")
    raise OptionTypeError(f"plan must be a Plan, plan text, plan data (a list or dict) or a path, not "
                    f"{type(value).__name__}")
