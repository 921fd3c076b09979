"""Iteration limits (seed 002): ``MaxToolIterations`` 100 by default, an absolute hard limit of
500, and a progress checkpoint every 10 iterations.

An iteration of the seed's loop is one model request and the tool calls it asks for: here,
one agent turn.  ``Agent(max_turns=N)`` is the per-agent setting.  Left out, it is the
seed's ``MaxToolIterations`` (100) for an agent running the planning pipeline
(``planning=`` given), and 8 otherwise (a short loop for one request, the agent's default
since before the pipeline); a value above :data:`HARD_LIMIT` is refused.  Every
:data:`PROGRESS_EVERY` turns the agent emits an ``agent_progress`` event.
"""

from __future__ import annotations

from ..errors import OptionError

__all__ = ["DEFAULT_TURNS", "HARD_LIMIT", "MAX_ITERATIONS", "PROGRESS_EVERY", "check_max_turns",
           "default_max_turns", "is_checkpoint"]

MAX_ITERATIONS = 100
HARD_LIMIT = 500
PROGRESS_EVERY = 10
DEFAULT_TURNS = 8


def default_max_turns(planning: object) -> int:
    """The turn limit when none is given: the seed's under the planning pipeline."""
    return DEFAULT_TURNS if planning is None else MAX_ITERATIONS


def check_max_turns(max_turns: int) -> int:
    """``max_turns`` when it is within 1..HARD_LIMIT, else ValueError."""
    if max_turns < 1:
        raise OptionError("max_turns must be at least 1")
    if max_turns > HARD_LIMIT:
        raise OptionError(f"max_turns must be at most {HARD_LIMIT} (the hard iteration limit)")
    return max_turns


def is_checkpoint(turn: int) -> bool:
    return turn > 0 and turn % PROGRESS_EVERY == 0
