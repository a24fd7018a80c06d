"""Date and time macros, read from the context's injectable clock (``now``).

Formatting follows moment.js (locale ``en``) through :mod:`tavernbox.macros.timefmt`; the clock
is ``MacroContext.now`` so renders are reproducible, falling back to the current UTC time.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..evaluator import MacroCall
from ..registry import MacroRegistry, context_handler
from ..timefmt import format_moment, humanize, parse_date, utc_offset_hours

__all__ = ["register"]


def _now(call: MacroCall) -> datetime:
    return call.ctx.clock()


def _fmt(fmt: str):  # type: ignore[no-untyped-def]
    # the text depends on the clock only; an injected clock is an immutable datetime that a host
    # passes render after render, so the last one's text is kept (matched by identity)
    last: tuple[datetime | None, str] = (None, "")

    def read(ctx: Any) -> str:
        nonlocal last
        now = ctx.now
        seen = last
        if now is not None and seen[0] is now:
            return seen[1]
        text = format_moment(ctx.clock(), fmt)
        if now is not None:
            last = (now, text)
        return text

    return context_handler(read)


def _time(call: MacroCall) -> str:
    now = _now(call)
    if call.args:
        hours = utc_offset_hours(call.args[0])
        if hours is not None:  # a bad offset is ignored (ST shows local time)
            # moment's utcOffset() takes any shift (UTC+1500 is 25 hours); datetime's timezone
            # refuses 24 hours or more, so the offset goes to the formatter instead
            return format_moment(now, "LT", utc_offset=hours)
    return format_moment(now, "LT")


def _datetimeformat(call: MacroCall) -> str:
    return format_moment(_now(call), call.args[0])


def _time_diff(call: MacroCall) -> str:
    local_tz = _now(call).tzinfo or timezone.utc  # a date without an offset is the clock's local time
    a = parse_date(call.args[0], local_tz=local_tz)
    b = parse_date(call.args[1], local_tz=local_tz)
    if a is None or b is None:
        return "Invalid date"
    return humanize((a - b).total_seconds(), with_suffix=True)


def register(registry: MacroRegistry) -> None:
    r = registry.register
    r("time", _time, max_args=1)
    r("date", _fmt("LL"))
    r("weekday", _fmt("dddd"))
    r("isotime", _fmt("HH:mm"))
    r("isodate", _fmt("YYYY-MM-DD"))
    r("datetimeformat", _datetimeformat, min_args=1, max_args=1)
    r("timeDiff", _time_diff, min_args=2, max_args=2)
