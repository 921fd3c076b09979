"""Reading a model's JSON reply strictly: the whole reply (a code fence around it is allowed)
must be one JSON value. Unlike the latent executor's reader, prose around the JSON is not
searched for a value: the planner and the evaluator must fail loudly (seed 003)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["strict_json"]

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*?)\n\s*```\s*$", re.S)


def strict_json(reply: str, error: type[Exception], who: str) -> Any:
    """The JSON value of ``reply``, or ``error("the {who}'s reply is not valid JSON: ...")``."""
    body = reply.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise error(f"the {who}'s reply is not valid JSON: {exc}") from None
