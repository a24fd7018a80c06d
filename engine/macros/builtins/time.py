"""Date and time macros, read from the context's injectable clock (``now``).

Formatting follows moment.js (locale ``en``) through :mod:`tavernbox.macros.timefmt`; the clock
is ``MacroContext.now`` so renders are reproducible, falling back to the current UTC time.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ..evaluator import MacroCall
from ..registry import MacroRegistry

__all__ = ["register"]


def _now(call: MacroCall) -> datetime:
    return call.ctx.clock()


def _fmt(fmt: str):  # type: ignore[no-untyped-def]
    def handler(call: MacroCall) -> str:
        from ..timefmt import format_moment

        return format_moment(_now(call), fmt)

    return handler


def _time(call: MacroCall) -> str:
    from ..timefmt import format_moment, utc_offset_hours

    now = _now(call)
    if call.args:
        hours = utc_offset_hours(call.args[0])
        if hours is not None:  # a bad offset is ignored (ST shows local time)
            now = now.astimezone(timezone(timedelta(hours=hours)))
    return format_moment(now, "LT")


def _datetimeformat(call: MacroCall) -> str:
    from ..timefmt import format_moment

    return format_moment(_now(call), call.args[0])


def _time_diff(call: MacroCall) -> str:
    from ..timefmt import humanize, parse_date

    a = parse_date(call.args[0])
    b = parse_date(call.args[1])
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
