"""Time tools: ``datetime.now`` (seed 002 always offers it) and a bounded ``time.sleep``."""

from __future__ import annotations

import asyncio
import datetime as _dt
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError

__all__ = ["build", "Now", "Slept"]


class Now(TypedDict):
    iso: str
    date: str
    time: str
    timezone: str
    utc_offset: str
    weekday: str
    unix: float


class Slept(TypedDict):
    slept: float


def _offset(d: _dt.datetime) -> str:
    off = d.utcoffset() or _dt.timedelta(0)
    total = int(off.total_seconds())
    sign = "-" if total < 0 else "+"
    total = abs(total)
    return f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}"


@uses_config("max_sleep")
def build(config: StdlibConfig) -> list[ToolSpec]:
    def now(timezone: Annotated[str | None, Field(
            description='an IANA zone such as "Europe/Paris" or "UTC"; default: the local zone')] = None,
            ) -> Now:
        if timezone:
            try:
                tz = ZoneInfo(timezone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ToolError("Time.UnknownTimezone", f"unknown IANA timezone {timezone!r}") from None
            d = _dt.datetime.now(tz)
            name = timezone
        else:
            d = _dt.datetime.now().astimezone()
            name = d.tzname() or _offset(d)
        return Now(iso=d.isoformat(), date=d.date().isoformat(), time=d.time().isoformat("seconds"),
                   timezone=name, utc_offset=_offset(d), weekday=d.strftime("%A"), unix=d.timestamp())

    async def sleep(seconds: Annotated[float, Field(ge=0, description="how long to wait")]) -> Slept:
        s = float(seconds)
        if s < 0 or s != s:
            raise ToolError("Time.InvalidArgument", "seconds must be a non-negative number")
        if s > config.max_sleep:
            raise ToolError("Time.TooLong", f"sleep is limited to {config.max_sleep} seconds")
        await asyncio.sleep(s)
        return Slept(slept=s)

    return [
        make_tool(now, "datetime.now", Risk.NONE,
                  "The current date and time (ISO 8601, date, time, weekday, UTC offset, unix "
                  "seconds), in an optional IANA timezone."),
        make_tool(sleep, "time.sleep", Risk.NONE,
                  f"Wait a number of seconds (at most {config.max_sleep})."),
    ]
