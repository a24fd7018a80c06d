"""moment.js 2.30 (locale ``en``) as SillyTavern's time macros use it: format, humanize, parse.

``{{time}}``, ``{{date}}``, ``{{weekday}}``, ``{{isotime}}``, ``{{isodate}}`` and
``{{datetimeformat::fmt}}`` are ``moment().format(...)`` calls; ``{{idleDuration}}`` and
``{{timeDiff::a::b}}`` are ``moment.duration(ms).humanize(...)`` over ``moment(string)`` parses.
A prompt author can pass any format string to ``{{datetimeformat}}``, so :func:`format_moment`
reproduces moment's tokenizer (including its quirks: characters it cannot tokenize, such as a
newline outside ``[...]``, vanish; ``\\X`` escapes one character; ``[...]`` is literal text).

Everything takes an explicit instant (never the wall clock): the engine's clock is injected.
Dates are proleptic Gregorian years 1..9999 (Python's range); moment accepts more, see
docs/DEVIATIONS.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import lru_cache
from datetime import date, datetime, timedelta, timezone, tzinfo

__all__ = [
    "INVALID_DATE",
    "MomentFormatError",
    "format_moment",
    "humanize",
    "humanize_ms",
    "parse_date",
    "parse_st_timestamp",
    "utc_offset_hours",
]

#: moment's text for an invalid date or duration (locale ``en``).
INVALID_DATE = "Invalid date"

_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_MONTHS_SHORT = [m[:3] for m in _MONTHS]
_WEEKDAYS = "Sunday Monday Tuesday Wednesday Thursday Friday Saturday".split()
_WEEKDAYS_SHORT = [d[:3] for d in _WEEKDAYS]
_WEEKDAYS_MIN = [d[:2] for d in _WEEKDAYS]

#: locale ``en``'s long date formats; the lower-case variants are derived as moment derives them.
_LONG_FORMATS = {
    "LTS": "h:mm:ss A",
    "LT": "h:mm A",
    "L": "MM/DD/YYYY",
    "LL": "MMMM D, YYYY",
    "LLL": "MMMM D, YYYY h:mm A",
    "LLLL": "dddd, MMMM D, YYYY h:mm A",
}
#: moment's defaults for ``format()`` with no (or an empty) format string; the second is used in
#: UTC mode at offset zero.
_DEFAULT_FORMAT = "YYYY-MM-DDTHH:mm:ssZ"
_DEFAULT_FORMAT_UTC = "YYYY-MM-DDTHH:mm:ss[Z]"

# JavaScript's "." (any UTF-16 unit but a line terminator) and its ASCII "\d".
_ANY = r"[^\n\r\u2028\u2029]"
_LOCAL_TOKENS = re.compile(r"(\[[^\[]*\])|(\\)?(LTS|LT|LL?L?L?|l{1,4})")
_TOKENS = re.compile(
    r"(\[[^\[]*\])|(\\)?([Hh]mm(ss)?|Mo|MM?M?M?|Do|DDDo|DD?D?D?|ddd?d?|do?|w[o|w]?|W[o|W]?|Qo?"
    r"|N{1,5}|YYYYYY|YYYYY|YYYY|YY|y{2,4}|yo?|gg(ggg?)?|GG(GGG?)?|e|E|a|A|hh?|HH?|kk?|mm?|ss?"
    r"|S{1,9}|x|X|zz?|ZZ?|" + _ANY + ")"
)


class MomentFormatError(ValueError):
    """moment throws for this format string (one with no character it can tokenize)."""


def _lower_long_format(key: str) -> str | None:
    """moment's derivation of ``l``..``llll`` from ``L``..``LLLL`` (drop one letter of long tokens)."""
    upper = _LONG_FORMATS.get(key.upper())
    if upper is None:
        return None
    parts = []
    for match in _TOKENS.finditer(upper):
        token = match.group(0)
        parts.append(token[1:] if token in ("MMMM", "MM", "DD", "dddd") else token)
    return "".join(parts)


def _long_format(token: str) -> str | None:
    found = _LONG_FORMATS.get(token)
    if found is None and token[:1] == "l":
        found = _lower_long_format(token)
    return found


def _expand_long_formats(fmt: str) -> str:
    """Replace ``LT``, ``LL``, ``l``... by their definitions (moment repeats this up to 6 times)."""
    for _ in range(6):
        if not _LOCAL_TOKENS.search(fmt):
            break
        fmt = _LOCAL_TOKENS.sub(lambda m: _long_format(m.group(0)) or m.group(0), fmt)
    return fmt


def _zero_fill(number: int, width: int, force_sign: bool = False) -> str:
    digits = str(abs(number))
    sign = ("+" if force_sign else "") if number >= 0 else "-"
    return sign + "0" * max(0, width - len(digits)) + digits


def _ordinal(number: int) -> str:
    last = number % 10
    if (number % 100) // 10 == 1:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(last, "th")
    return f"{number}{suffix}"


def _days_before_year(year: int) -> int:
    y = year - 1
    return y * 365 + y // 4 - y // 100 + y // 400


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_in_year(year: int) -> int:
    return 366 if _is_leap(year) else 365


def _sunday0_weekday_of_jan(year: int, day: int) -> int:
    """Weekday (0 = Sunday) of January ``day`` of ``year``; valid for any year (no datetime)."""
    return (_days_before_year(year) + day - 1 + 1) % 7  # 0001-01-01 was a Monday


def _first_week_offset(year: int, dow: int, doy: int) -> int:
    first_week_day = 7 + dow - doy  # the January day always in week 1
    local_weekday = (7 + _sunday0_weekday_of_jan(year, first_week_day) - dow) % 7
    return -local_weekday + first_week_day - 1


def _weeks_in_year(year: int, dow: int, doy: int) -> int:
    return (
        _days_in_year(year) - _first_week_offset(year, dow, doy) + _first_week_offset(year + 1, dow, doy)
    ) // 7


def _week_of_year(year: int, day_of_year: int, dow: int, doy: int) -> tuple[int, int]:
    """(week, week-year) under a week rule: en is (dow 0, doy 6), ISO is (dow 1, doy 4)."""
    week = (day_of_year - _first_week_offset(year, dow, doy) - 1) // 7 + 1
    if week < 1:
        return week + _weeks_in_year(year - 1, dow, doy), year - 1
    if week > _weeks_in_year(year, dow, doy):
        return week - _weeks_in_year(year, dow, doy), year + 1
    return week, year


class _Instant:
    """The fields moment's format tokens read: wall-clock parts, UTC offset, epoch milliseconds."""

    __slots__ = ("day", "doy", "epoch_ms", "hour", "minute", "month", "ms", "offset", "second", "utc", "wday", "year")

    def __init__(self, wall: datetime, offset_minutes: int, epoch_ms: int, utc_mode: bool) -> None:
        self.year = wall.year
        self.month = wall.month  # 1-based
        self.day = wall.day
        self.hour = wall.hour
        self.minute = wall.minute
        self.second = wall.second
        self.ms = wall.microsecond // 1000
        self.wday = (wall.weekday() + 1) % 7  # 0 = Sunday
        self.doy = wall.timetuple().tm_yday
        self.offset = offset_minutes
        self.epoch_ms = epoch_ms
        self.utc = utc_mode


def _offset_text(minutes: int, separator: str) -> str:
    sign = "+"
    if minutes < 0:
        minutes, sign = -minutes, "-"
    return sign + _zero_fill(minutes // 60, 2) + separator + _zero_fill(minutes % 60, 2)


def _year_token(m: _Instant) -> str:
    return _zero_fill(m.year, 4) if m.year <= 9999 else "+" + str(m.year)


def _en_week(m: _Instant) -> tuple[int, int]:
    return _week_of_year(m.year, m.doy, 0, 6)


def _iso_week(m: _Instant) -> tuple[int, int]:
    return _week_of_year(m.year, m.doy, 1, 4)


def _era_year(m: _Instant) -> int:
    # Every year Python represents (1..9999) is in the era "AD", whose year is the calendar year.
    return m.year


def _H12(m: _Instant) -> int:
    return m.hour % 12 or 12


_FORMATTERS: dict[str, Callable[[_Instant], str]] = {
    "M": lambda m: str(m.month),
    "MM": lambda m: _zero_fill(m.month, 2),
    "Mo": lambda m: _ordinal(m.month),
    "MMM": lambda m: _MONTHS_SHORT[m.month - 1],
    "MMMM": lambda m: _MONTHS[m.month - 1],
    "Q": lambda m: str((m.month + 2) // 3),
    "Qo": lambda m: _ordinal((m.month + 2) // 3),
    "D": lambda m: str(m.day),
    "DD": lambda m: _zero_fill(m.day, 2),
    "Do": lambda m: _ordinal(m.day),
    "DDD": lambda m: str(m.doy),
    "DDDD": lambda m: _zero_fill(m.doy, 3),
    "DDDo": lambda m: _ordinal(m.doy),
    "d": lambda m: str(m.wday),
    "do": lambda m: _ordinal(m.wday),
    "dd": lambda m: _WEEKDAYS_MIN[m.wday],
    "ddd": lambda m: _WEEKDAYS_SHORT[m.wday],
    "dddd": lambda m: _WEEKDAYS[m.wday],
    "e": lambda m: str(m.wday),  # en weeks start on Sunday: locale weekday == day()
    "E": lambda m: str(m.wday or 7),
    "w": lambda m: str(_en_week(m)[0]),
    "ww": lambda m: _zero_fill(_en_week(m)[0], 2),
    "wo": lambda m: _ordinal(_en_week(m)[0]),
    "W": lambda m: str(_iso_week(m)[0]),
    "WW": lambda m: _zero_fill(_iso_week(m)[0], 2),
    "Wo": lambda m: _ordinal(_iso_week(m)[0]),
    "gg": lambda m: _zero_fill(_en_week(m)[1] % 100, 2),
    "gggg": lambda m: _zero_fill(_en_week(m)[1], 4),
    "ggggg": lambda m: _zero_fill(_en_week(m)[1], 5),
    "GG": lambda m: _zero_fill(_iso_week(m)[1] % 100, 2),
    "GGGG": lambda m: _zero_fill(_iso_week(m)[1], 4),
    "GGGGG": lambda m: _zero_fill(_iso_week(m)[1], 5),
    "Y": _year_token,
    "YY": lambda m: _zero_fill(m.year % 100, 2),
    "YYYY": lambda m: _zero_fill(m.year, 4),
    "YYYYY": lambda m: _zero_fill(m.year, 5),
    "YYYYYY": lambda m: _zero_fill(m.year, 6, True),
    "y": lambda m: str(_era_year(m)),
    "yo": lambda m: _ordinal(_era_year(m)),
    "yy": lambda m: _zero_fill(_era_year(m), 2),
    "yyy": lambda m: _zero_fill(_era_year(m), 3),
    "yyyy": lambda m: _zero_fill(_era_year(m), 4),
    "N": lambda m: "AD",
    "NN": lambda m: "AD",
    "NNN": lambda m: "AD",
    "NNNN": lambda m: "Anno Domini",
    "NNNNN": lambda m: "AD",
    "a": lambda m: "pm" if m.hour > 11 else "am",
    "A": lambda m: "PM" if m.hour > 11 else "AM",
    "H": lambda m: str(m.hour),
    "HH": lambda m: _zero_fill(m.hour, 2),
    "h": lambda m: str(_H12(m)),
    "hh": lambda m: _zero_fill(_H12(m), 2),
    "k": lambda m: str(m.hour or 24),
    "kk": lambda m: _zero_fill(m.hour or 24, 2),
    "hmm": lambda m: f"{_H12(m)}{_zero_fill(m.minute, 2)}",
    "hmmss": lambda m: f"{_H12(m)}{_zero_fill(m.minute, 2)}{_zero_fill(m.second, 2)}",
    "Hmm": lambda m: f"{m.hour}{_zero_fill(m.minute, 2)}",
    "Hmmss": lambda m: f"{m.hour}{_zero_fill(m.minute, 2)}{_zero_fill(m.second, 2)}",
    "m": lambda m: str(m.minute),
    "mm": lambda m: _zero_fill(m.minute, 2),
    "s": lambda m: str(m.second),
    "ss": lambda m: _zero_fill(m.second, 2),
    "S": lambda m: str(m.ms // 100),
    "SS": lambda m: _zero_fill(m.ms // 10, 2),
    "SSS": lambda m: _zero_fill(m.ms, 3),
    **{"S" * n: (lambda m, n=n: _zero_fill(m.ms * 10 ** (n - 3), n)) for n in range(4, 10)},
    "z": lambda m: "UTC" if m.utc else "",
    "zz": lambda m: "Coordinated Universal Time" if m.utc else "",
    "Z": lambda m: _offset_text(m.offset, ":"),
    "ZZ": lambda m: _offset_text(m.offset, ""),
    "X": lambda m: str(m.epoch_ms // 1000),
    "x": lambda m: str(m.epoch_ms),
}


def _literal(token: str) -> str:
    """What moment prints for a piece that is not a token: ``[text]`` -> text, ``\\X`` -> X."""
    if len(token) >= 2 and token[0] == "[":
        return token[1:-1] if token.endswith("]") else token[1:]
    return token.replace("\\", "")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def format_moment(
    dt: datetime, fmt: str, *, utc_offset: float | None = None, utc_mode: bool = False
) -> str:
    """``moment(dt).format(fmt)`` in locale ``en``.

    ``dt`` is an instant: an aware datetime (its offset is moment's local offset) or a naive one,
    taken as UTC. ``utc_offset`` (hours) re-expresses the instant at that offset, like
    ``moment().utc().utcOffset(n)``, which also switches moment to UTC mode (``z`` prints ``UTC``).
    Returns ``"Invalid date"`` when the shifted wall time leaves the years 1..9999.
    Raises :class:`MomentFormatError` where moment throws (a format with nothing to tokenize,
    e.g. only newlines).
    """
    if len(fmt) > 256:  # hostile formats are not kept
        return _format_instant(dt, fmt, utc_offset, utc_mode)
    return _format_cached(dt, dt.utcoffset(), fmt, utc_offset, utc_mode)


@lru_cache(maxsize=256)
def _format_cached(
    dt: datetime, _offset: timedelta | None, fmt: str, utc_offset: float | None, utc_mode: bool
) -> str:
    """Memoised formatting: renders format the same clock with the same few formats.

    Equal datetimes at different offsets compare (and hash) equal, so the offset is part of
    the key.
    """
    return _format_instant(dt, fmt, utc_offset, utc_mode)


def _format_instant(dt: datetime, fmt: str, utc_offset: float | None, utc_mode: bool) -> str:
    """``format_moment`` without the cache."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    epoch_ms = (dt - _EPOCH) // timedelta(milliseconds=1)
    if utc_offset is not None:
        if not math.isfinite(utc_offset):
            return INVALID_DATE
        offset_minutes = round(utc_offset * 60)
        utc_mode = True
    else:
        offset = dt.utcoffset() or timedelta(0)
        offset_minutes = round(offset.total_seconds() / 60)
    try:
        wall = dt.astimezone(timezone.utc).replace(tzinfo=None) + timedelta(minutes=offset_minutes)
    except OverflowError:
        return INVALID_DATE
    instant = _Instant(wall, offset_minutes, epoch_ms, utc_mode)
    if not fmt:
        fmt = _DEFAULT_FORMAT_UTC if utc_mode and offset_minutes == 0 else _DEFAULT_FORMAT
    return "".join(piece if isinstance(piece, str) else piece(instant) for piece in _compile_format(fmt))


@lru_cache(maxsize=512)
def _compile_format(fmt: str) -> tuple[str | Callable[[_Instant], str], ...]:
    """A format string as literal texts and token formatters (cached, as moment caches them)."""
    pieces = [m.group(0) for m in _TOKENS.finditer(_expand_long_formats(fmt))]
    if not pieces:
        raise MomentFormatError("moment cannot tokenize this format string")
    return tuple(_FORMATTERS.get(piece) or _literal(piece) for piece in pieces)


# ---------------------------------------------------------------------------------------------
# humanize

#: moment's relative-time thresholds (defaults): seconds, minutes, hours, days, months.
_SS, _S, _M, _H, _D, _MONTHS_T = 44, 45, 45, 22, 26, 11


def _js_round(x: float) -> int:
    """JavaScript's ``Math.round`` (halves go up), for the non-negative values used here."""
    floor = math.floor(x)
    return floor + 1 if x - floor >= 0.5 else floor


def humanize_ms(milliseconds: float, *, with_suffix: bool) -> str:
    """``moment.duration(milliseconds).humanize(with_suffix)`` in locale ``en``.

    A zero or negative duration takes the past suffix (``"a few seconds ago"``), as moment does.
    A NaN duration (from an invalid date) gives ``"Invalid date"``.
    """
    if math.isnan(milliseconds):
        return INVALID_DATE
    ms = abs(milliseconds)
    seconds = _js_round(ms / 1000)
    minutes = _js_round(ms / 6e4)
    hours = _js_round(ms / 36e5)
    days = _js_round(ms / 864e5)
    months = _js_round(ms / 864e5 * 4800 / 146097)
    years = _js_round(ms / 864e5 * 4800 / 146097 / 12)
    if seconds <= _SS:
        text = "a few seconds"
    elif seconds < _S:
        text = f"{seconds} seconds"
    elif minutes <= 1:
        text = "a minute"
    elif minutes < _M:
        text = f"{minutes} minutes"
    elif hours <= 1:
        text = "an hour"
    elif hours < _H:
        text = f"{hours} hours"
    elif days <= 1:
        text = "a day"
    elif days < _D:
        text = f"{days} days"
    elif months <= 1:
        text = "a month"
    elif months < _MONTHS_T:
        text = f"{months} months"
    elif years <= 1:
        text = "a year"
    else:
        text = f"{years} years"
    if not with_suffix:
        return text
    return f"in {text}" if milliseconds > 0 else f"{text} ago"


def humanize(seconds: float, *, with_suffix: bool) -> str:
    """``moment.duration(seconds * 1000).humanize(with_suffix)``: "a few seconds", "in 2 hours".

    JavaScript dates have millisecond resolution, so the duration is rounded to whole
    milliseconds first (a diff of two moments is always whole milliseconds).
    """
    if math.isnan(seconds):
        return INVALID_DATE
    if math.isinf(seconds):
        return humanize_ms(seconds, with_suffix=with_suffix)
    return humanize_ms(round(seconds * 1000), with_suffix=with_suffix)


# ---------------------------------------------------------------------------------------------
# parsing: what moment(string) accepts through its ISO 8601 and RFC 2822 paths

_ISO_EXTENDED = re.compile(
    r"\s*((?:[+-][0-9]{6}|[0-9]{4})-(?:[0-9]{2}-[0-9]{2}|W[0-9]{2}-[0-9]|W[0-9]{2}|[0-9]{3}|[0-9]{2}))"
    r"(?:(T| )([0-9]{2}(?::[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?)?)([+-][0-9]{2}(?::?[0-9]{2})?|\s*Z)?)?"
)
_ISO_BASIC = re.compile(
    r"\s*((?:[+-][0-9]{6}|[0-9]{4})(?:[0-9]{4}|W[0-9]{3}|W[0-9]{2}|[0-9]{3}|[0-9]{2}|))"
    r"(?:(T| )([0-9]{2}(?:[0-9]{2}(?:[0-9]{2}(?:[.,][0-9]+)?)?)?)([+-][0-9]{2}(?::?[0-9]{2})?|\s*Z)?)?"
)
# The date forms moment tries in order: (kind, search pattern, time allowed)
_ISO_DATES = [
    ("ymd6", re.compile(r"[+-][0-9]{6}-[0-9]{2}-[0-9]{2}"), True),
    ("ymd", re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"), True),
    ("gwe", re.compile(r"[0-9]{4}-W[0-9]{2}-[0-9]"), True),
    ("gw", re.compile(r"[0-9]{4}-W[0-9]{2}"), False),
    ("yddd", re.compile(r"[0-9]{4}-[0-9]{3}"), True),
    ("ym", re.compile(r"[0-9]{4}-[0-9]{2}"), False),
    ("ymd6", re.compile(r"[+-][0-9]{10}"), True),
    ("ymd", re.compile(r"[0-9]{8}"), True),
    ("gwe", re.compile(r"[0-9]{4}W[0-9]{3}"), True),
    ("gw", re.compile(r"[0-9]{4}W[0-9]{2}"), False),
    ("yddd", re.compile(r"[0-9]{7}"), True),
    ("ym", re.compile(r"[0-9]{6}"), False),
    ("y", re.compile(r"[0-9]{4}"), False),
]
_DIGITS = re.compile(r"[0-9]+")
_ASP_NET = re.compile(r"/?Date\((-?[0-9]+)", re.IGNORECASE)
_RFC2822 = re.compile(
    r"(?:(Mon|Tue|Wed|Thu|Fri|Sat|Sun),?\s)?([0-9]{1,2})\s(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
    r"\s([0-9]{2,4})\s([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?\s(?:(UT|GMT|[ECMP][SD]T)|([Zz])|([+-][0-9]{4}))"
)
_RFC_ZONES = {"UT": 0, "GMT": 0, "EDT": -240, "EST": -300, "CDT": -300, "CST": -360, "MDT": -360,
              "MST": -420, "PDT": -420, "PST": -480}


def _with_offset(wall: datetime, offset_minutes: int | None, local_tz: tzinfo) -> datetime | None:
    if offset_minutes is None:
        return wall.replace(tzinfo=local_tz)
    try:
        if abs(offset_minutes) < 24 * 60:
            return wall.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
        return (wall - timedelta(minutes=offset_minutes)).replace(tzinfo=timezone.utc)
    except OverflowError:
        return None


def _parse_offset(text: str) -> int:
    """moment's ``offsetFromString``: ``Z`` -> 0, ``+HH``, ``+HHMM``, ``+HH:MM`` -> minutes."""
    text = text.strip()
    if text == "Z":
        return 0
    digits = text[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) > 2 else 0)
    return -minutes if text[0] == "-" else minutes


def _parse_iso(text: str, local_tz: tzinfo) -> datetime | None:
    match = _ISO_EXTENDED.fullmatch(text) or _ISO_BASIC.fullmatch(text)
    if match is None:
        return None
    date_part, _sep, time_part, zone = match.groups()
    for kind, pattern, time_allowed in _ISO_DATES:
        found = pattern.search(date_part)
        if found is not None:
            break
    else:
        return None
    if time_part and not time_allowed:
        return None
    digits = _DIGITS.findall(found.group(0))
    try:
        if kind in ("ymd", "ymd6"):
            raw = "".join(digits)
            year_len = len(raw) - 4
            sign = -1 if found.group(0)[0] == "-" else 1
            day = date(sign * int(raw[:year_len]), int(raw[year_len:year_len + 2]), int(raw[year_len + 2:]))
        elif kind == "ym":
            raw = "".join(digits)
            day = date(int(raw[:4]), int(raw[4:6]), 1)
        elif kind == "y":
            day = date(int(digits[0]), 1, 1)
        elif kind == "yddd":
            raw = "".join(digits)
            year, ordinal = int(raw[:4]), int(raw[4:])
            if not 1 <= ordinal <= _days_in_year(year):
                return None
            day = date(year, 1, 1) + timedelta(days=ordinal - 1)
        else:  # ISO week dates
            raw = "".join(digits)
            week_year, week = int(raw[:4]), int(raw[4:6])
            weekday = int(raw[6:]) if kind == "gwe" else 1
            day = date.fromisocalendar(week_year, week, weekday)
    except ValueError:
        return None
    hour = minute = second = ms = 0
    if time_part:
        clock, _, fraction = time_part.replace(",", ".").partition(".")
        clock = clock.replace(":", "")
        hour = int(clock[:2])
        minute = int(clock[2:4] or 0)
        second = int(clock[4:6] or 0)
        if fraction:
            ms = int(float("0." + fraction) * 1000)
    if hour == 24 and minute == second == ms == 0:
        hour, extra_day = 0, timedelta(days=1)
    else:
        extra_day = timedelta(0)
        if hour > 23 or minute > 59 or second > 59:
            return None
    try:
        wall = datetime(day.year, day.month, day.day, hour, minute, second, ms * 1000) + extra_day
    except (ValueError, OverflowError):
        return None
    return _with_offset(wall, _parse_offset(zone) if zone else None, local_tz)


def _parse_rfc2822(text: str) -> datetime | None:
    cleaned = re.sub(r"\([^()]*\)|[\n\t]", " ", text)
    cleaned = re.sub(r"\s\s+", " ", cleaned).strip()
    match = _RFC2822.fullmatch(cleaned)
    if match is None:
        return None
    weekday, day_text, month_text, year_text, hh, mm, ss, zone, military, numeric = match.groups()
    year = int(year_text)
    if year <= 49:
        year += 2000
    elif year <= 999:
        year += 1900
    hour, minute, second = int(hh), int(mm), int(ss or 0)
    # moment's overflow check refuses out-of-range fields; 24:00:00 is the next midnight.
    if minute > 59 or second > 59 or hour > 24 or (hour == 24 and (minute or second)):
        return None
    try:
        day = date(year, _MONTHS_SHORT.index(month_text) + 1, int(day_text))
        if weekday is not None and _WEEKDAYS_SHORT.index(weekday) != (day.weekday() + 1) % 7:
            return None
        wall = datetime(day.year, day.month, day.day) + timedelta(hours=hour, minutes=minute, seconds=second)
    except (ValueError, OverflowError):
        return None
    if zone is not None:
        offset = _RFC_ZONES[zone]
    elif military is not None:
        offset = 0
    else:
        value = int(numeric)
        minutes = abs(value) % 100 * (1 if value >= 0 else -1)
        offset = (value - minutes) // 100 * 60 + minutes
    return _with_offset(wall, offset, timezone.utc)


def parse_date(text: str, *, local_tz: tzinfo = timezone.utc) -> datetime | None:
    """``moment(text)`` for the forms moment parses itself: ASP.NET ``/Date(ms)/``, ISO 8601 and
    RFC 2822. Returns an aware datetime, or ``None`` where the result would be invalid.

    A date-time without an offset is local time; ``local_tz`` says what local is (the engine's
    injected clock zone). moment finally hands anything else to the browser's ``Date`` parser,
    whose accepted forms vary by engine: that fallback is not reproduced (docs/DEVIATIONS.md).
    """
    asp = _ASP_NET.match(text)
    if asp is not None:
        try:
            return _EPOCH + timedelta(milliseconds=int(asp.group(1)))
        except (OverflowError, ValueError):
            return None
    return _parse_iso(text, local_tz) or _parse_rfc2822(text)


_UTC_OFFSET = re.compile(r"UTC([+-][0-9]+)")


def utc_offset_hours(arg: str) -> float | None:
    """The offset ``{{time::UTC+2}}`` asks for, in hours; ``None`` when ST ignores the argument.

    ST accepts exactly ``UTC`` then a sign and digits (no minutes form: ``UTC+5:30`` is ignored).
    moment's ``utcOffset(n)`` reads ``|n| < 16`` as hours and anything larger as minutes, so
    ``UTC+30`` is thirty minutes, not thirty hours.
    """
    match = _UTC_OFFSET.fullmatch(arg)
    if match is None:
        return None
    value = float(match.group(1))  # float: a 5,000-digit offset must not hit int() limits
    return value if abs(value) < 16 else value / 60


# ---------------------------------------------------------------------------------------------
# chat message timestamps: SillyTavern's timestampToMoment

_JS_WORD = r"[A-Za-z0-9_]"
_ST_MERIDIEM = re.compile(
    r"(" + _JS_WORD + r"+)\s([0-9]{1,2}),\s([0-9]{4})\s([0-9]{1,2}):([0-9]{1,2})(am|pm)", re.IGNORECASE
)
_ST_HUMANIZED = (
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})@([0-9]{1,2})h([0-9]{1,2})m([0-9]{1,2})s([0-9]{1,3})ms"),
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})@([0-9]{1,2})h([0-9]{1,2})m([0-9]{1,2})s()"),
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2}) @([0-9]{1,2})h ([0-9]{1,2})m ([0-9]{1,2})s ([0-9]{1,3})ms"),
)
_MONTH_PREFIXES = [(m.lower(), m[:3].lower()) for m in _MONTHS]
#: JavaScript's Date range: +-8.64e15 ms around the epoch.
_JS_MAX_TIME_MS = 8_640_000_000_000_000


def _st_month_number(name: str, now: datetime) -> str | None:
    """``moment().month(name).format('MM')`` in locale en, with ``now`` as ``moment()``.

    A digit string is a 0-based month index that rolls over into later years; a name is matched
    by prefix (``^january|^jan``, case-insensitive, first month wins); anything else leaves the
    month of ``now`` unchanged.
    """
    if name.isascii() and name.isdigit():
        index = int(name)
        if now.year + index // 12 > 275_760:  # past JavaScript's Date range: 'Invalid date'
            return None
        return _zero_fill(index % 12 + 1, 2)
    lowered = name.lower()
    for number, (full, short) in enumerate(_MONTH_PREFIXES, start=1):
        if lowered.startswith(full) or lowered.startswith(short):
            return _zero_fill(number, 2)
    return _zero_fill(now.month, 2)


def parse_st_timestamp(
    timestamp: str | int | float | None, *, now: datetime, local_tz: tzinfo = timezone.utc
) -> datetime | None:
    """A chat message's ``send_date`` as SillyTavern's ``timestampToMoment`` reads it.

    Accepted, in order: a number or digit string (milliseconds since the epoch); a strict ISO
    8601 string; ST's ``June 19, 2023 2:20pm`` form (local time; the month name is matched the way
    ``moment().month(name)`` matches it, so an unknown name means the month of ``now``); ST's
    "humanized" forms ``2024-07-12@01h31m37s123ms``, ``2024-7-12@01h31m37s`` and
    ``2024-6-5 @14h 56m 50s 682ms`` (UTC). Anything else is ``None``: moment's invalid date,
    which ``{{idleDuration}}`` prints as ``Invalid date``.
    """
    if timestamp is None or timestamp == "" or (isinstance(timestamp, (int, float)) and not timestamp):
        return None
    if isinstance(timestamp, bool):
        return None
    if isinstance(timestamp, (int, float)) or (timestamp.isascii() and timestamp.isdigit()):
        try:
            ms = float(timestamp)
        except (OverflowError, ValueError):
            return None
        if not math.isfinite(ms) or ms < 0 or ms > _JS_MAX_TIME_MS:
            return None
        try:
            return _EPOCH + timedelta(milliseconds=int(ms))
        except OverflowError:
            return None
    stripped = timestamp.lstrip()
    if stripped == timestamp and (_ISO_EXTENDED.fullmatch(timestamp) or _ISO_BASIC.fullmatch(timestamp)):
        parsed = _parse_iso(timestamp, local_tz)
        if parsed is not None:
            return parsed
    match = _ST_MERIDIEM.search(timestamp)
    if match is not None:
        name, day, year, hour, minute, meridiem = match.groups()
        month = _st_month_number(name, now.astimezone(local_tz))
        if month is None:
            return None
        hour24 = int(hour) % 12 + (12 if meridiem.lower() == "pm" else 0)
        iso = f"{year}-{month}-{day.zfill(2)}T{hour24:02d}:{minute.zfill(2)}:00"
        return _parse_iso(iso, local_tz)
    for pattern in _ST_HUMANIZED:
        match = pattern.search(timestamp)
        if match is not None:
            year, month_text, day, hour, minute, second, millis = match.groups()
            fraction = f".{millis.zfill(3)}" if millis else ""
            iso = (
                f"{year.zfill(4)}-{month_text.zfill(2)}-{day.zfill(2)}T{hour.zfill(2)}:{minute.zfill(2)}:"
                f"{second.zfill(2)}{fraction}Z"
            )
            return _parse_iso(iso, local_tz)
    return None
