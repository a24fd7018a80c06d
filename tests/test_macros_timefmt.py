"""moment.js 2.30.1 (locale en) behaviour of tavernbox.macros.timefmt.

Every expected value below was produced by running moment 2.30.1 under Node (the JavaScript is
not part of the repository; only its outputs are).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tavernbox.macros.timefmt import (
    INVALID_DATE,
    MomentFormatError,
    format_moment,
    humanize,
    humanize_ms,
    parse_date,
    parse_st_timestamp,
    utc_offset_hours,
)

# (instant, offset in minutes, UTC mode, {format: moment(instant).format(format)})
FORMAT_VECTORS = [
    ('2026-11-30T10:00:00.000Z', 0, True, {
        'LT': '10:00 AM',
        'LTS': '10:00:00 AM',
        'L': '11/30/2026',
        'LL': 'November 30, 2026',
        'LLL': 'November 30, 2026 10:00 AM',
        'LLLL': 'Monday, November 30, 2026 10:00 AM',
        'l': '11/30/2026',
        'll': 'Nov 30, 2026',
        'lll': 'Nov 30, 2026 10:00 AM',
        'llll': 'Mon, Nov 30, 2026 10:00 AM',
        'dddd': 'Monday',
        'ddd': 'Mon',
        'dd': 'Mo',
        'd': '1',
        'do': '1st',
        'Do': '30th',
        'D': '30',
        'DD': '30',
        'MMMM': 'November',
        'MMM': 'Nov',
        'MM': '11',
        'M': '11',
        'Mo': '11th',
        'YYYY': '2026',
        'YY': '26',
        'Y': '2026',
        'YYYYYY': '+002026',
        'HH': '10',
        'H': '10',
        'hh': '10',
        'h': '10',
        'k': '10',
        'kk': '10',
        'mm': '00',
        'm': '0',
        'ss': '00',
        's': '0',
        'A': 'AM',
        'a': 'am',
        'S': '0',
        'SS': '00',
        'SSS': '000',
        'SSSSSS': '000000',
        'Z': '+00:00',
        'ZZ': '+0000',
        'X': '1796032800',
        'x': '1796032800000',
        'Q': '4',
        'Qo': '4th',
        'w': '49',
        'ww': '49',
        'wo': '49th',
        'W': '49',
        'WW': '49',
        'Wo': '49th',
        'E': '1',
        'e': '1',
        'DDD': '334',
        'DDDD': '334',
        'DDDo': '334th',
        'gg': '26',
        'gggg': '2026',
        'GG': '26',
        'GGGG': '2026',
        'N': 'AD',
        'NNNN': 'Anno Domini',
        'y': '2026',
        'yo': '2026th',
        'z': 'UTC',
        'zz': 'Coordinated Universal Time',
        'hmm': '1000',
        'Hmmss': '100000',
        '': '2026-11-30T10:00:00Z',
        '[escaped] YYYY': 'escaped 2026',
        '[a[b]': '[amb',
        '\\YYYY \\\\x': 'YYYY 1796032800000',
        'YYYY-MM-DD\nHH:mm': '2026-11-3010:00',
        'w|x': 'w|1796032800000',
        '[unclosed YYYY': '[unc11/30/2026o011 2026',
        'LLLL [at] LT': 'Monday, November 30, 2026 10:00 AM at 10:00 AM',
        'LLT': 'November 30, 2026T',
        '\\LT': 'LT',
        'dddd, MMMM Do YYYY, h:mm:ss a': 'Monday, November 30th 2026, 10:00:00 am',
        '\u2028x\ry': '17960328000002026',
    }),
    ('2021-01-03T17:35:09.007Z', 330, True, {
        'LT': '11:05 PM',
        'LTS': '11:05:09 PM',
        'L': '01/03/2021',
        'LL': 'January 3, 2021',
        'LLL': 'January 3, 2021 11:05 PM',
        'LLLL': 'Sunday, January 3, 2021 11:05 PM',
        'l': '1/3/2021',
        'll': 'Jan 3, 2021',
        'lll': 'Jan 3, 2021 11:05 PM',
        'llll': 'Sun, Jan 3, 2021 11:05 PM',
        'dddd': 'Sunday',
        'ddd': 'Sun',
        'dd': 'Su',
        'd': '0',
        'do': '0th',
        'Do': '3rd',
        'D': '3',
        'DD': '03',
        'MMMM': 'January',
        'MMM': 'Jan',
        'MM': '01',
        'M': '1',
        'Mo': '1st',
        'YYYY': '2021',
        'YY': '21',
        'Y': '2021',
        'YYYYYY': '+002021',
        'HH': '23',
        'H': '23',
        'hh': '11',
        'h': '11',
        'k': '23',
        'kk': '23',
        'mm': '05',
        'm': '5',
        'ss': '09',
        's': '9',
        'A': 'PM',
        'a': 'pm',
        'S': '0',
        'SS': '00',
        'SSS': '007',
        'SSSSSS': '007000',
        'Z': '+05:30',
        'ZZ': '+0530',
        'X': '1609695309',
        'x': '1609695309007',
        'Q': '1',
        'Qo': '1st',
        'w': '2',
        'ww': '02',
        'wo': '2nd',
        'W': '53',
        'WW': '53',
        'Wo': '53rd',
        'E': '7',
        'e': '0',
        'DDD': '3',
        'DDDD': '003',
        'DDDo': '3rd',
        'gg': '21',
        'gggg': '2021',
        'GG': '20',
        'GGGG': '2020',
        'N': 'AD',
        'NNNN': 'Anno Domini',
        'y': '2021',
        'yo': '2021st',
        'z': 'UTC',
        'zz': 'Coordinated Universal Time',
        'hmm': '1105',
        'Hmmss': '230509',
        '': '2021-01-03T23:05:09+05:30',
        '[escaped] YYYY': 'escaped 2021',
        '[a[b]': '[pmb',
        '\\YYYY \\\\x': 'YYYY 1609695309007',
        'YYYY-MM-DD\nHH:mm': '2021-01-0323:05',
        'w|x': 'w|1609695309007',
        '[unclosed YYYY': '[unc1/3/2021o900 2021',
        'LLLL [at] LT': 'Sunday, January 3, 2021 11:05 PM at 11:05 PM',
        'LLT': 'January 3, 2021T',
        '\\LT': 'LT',
        'dddd, MMMM Do YYYY, h:mm:ss a': 'Sunday, January 3rd 2021, 11:05:09 pm',
        '\u2028x\ry': '16096953090072021',
    }),
    ('2027-01-01T05:00:00.450Z', -300, True, {
        'LT': '12:00 AM',
        'LTS': '12:00:00 AM',
        'L': '01/01/2027',
        'LL': 'January 1, 2027',
        'LLL': 'January 1, 2027 12:00 AM',
        'LLLL': 'Friday, January 1, 2027 12:00 AM',
        'l': '1/1/2027',
        'll': 'Jan 1, 2027',
        'lll': 'Jan 1, 2027 12:00 AM',
        'llll': 'Fri, Jan 1, 2027 12:00 AM',
        'dddd': 'Friday',
        'ddd': 'Fri',
        'dd': 'Fr',
        'd': '5',
        'do': '5th',
        'Do': '1st',
        'D': '1',
        'DD': '01',
        'MMMM': 'January',
        'MMM': 'Jan',
        'MM': '01',
        'M': '1',
        'Mo': '1st',
        'YYYY': '2027',
        'YY': '27',
        'Y': '2027',
        'YYYYYY': '+002027',
        'HH': '00',
        'H': '0',
        'hh': '12',
        'h': '12',
        'k': '24',
        'kk': '24',
        'mm': '00',
        'm': '0',
        'ss': '00',
        's': '0',
        'A': 'AM',
        'a': 'am',
        'S': '4',
        'SS': '45',
        'SSS': '450',
        'SSSSSS': '450000',
        'Z': '-05:00',
        'ZZ': '-0500',
        'X': '1798779600',
        'x': '1798779600450',
        'Q': '1',
        'Qo': '1st',
        'w': '1',
        'ww': '01',
        'wo': '1st',
        'W': '53',
        'WW': '53',
        'Wo': '53rd',
        'E': '5',
        'e': '5',
        'DDD': '1',
        'DDDD': '001',
        'DDDo': '1st',
        'gg': '27',
        'gggg': '2027',
        'GG': '26',
        'GGGG': '2026',
        'N': 'AD',
        'NNNN': 'Anno Domini',
        'y': '2027',
        'yo': '2027th',
        'z': 'UTC',
        'zz': 'Coordinated Universal Time',
        'hmm': '1200',
        'Hmmss': '00000',
        '': '2027-01-01T00:00:00-05:00',
        '[escaped] YYYY': 'escaped 2027',
        '[a[b]': '[amb',
        '\\YYYY \\\\x': 'YYYY 1798779600450',
        'YYYY-MM-DD\nHH:mm': '2027-01-0100:00',
        'w|x': 'w|1798779600450',
        '[unclosed YYYY': '[unc1/1/2027o055 2027',
        'LLLL [at] LT': 'Friday, January 1, 2027 12:00 AM at 12:00 AM',
        'LLT': 'January 1, 2027T',
        '\\LT': 'LT',
        'dddd, MMMM Do YYYY, h:mm:ss a': 'Friday, January 1st 2027, 12:00:00 am',
        '\u2028x\ry': '17987796004502027',
    }),
    ('2020-12-31T21:29:59.999Z', -570, True, {
        'LT': '11:59 AM',
        'LTS': '11:59:59 AM',
        'L': '12/31/2020',
        'LL': 'December 31, 2020',
        'LLL': 'December 31, 2020 11:59 AM',
        'LLLL': 'Thursday, December 31, 2020 11:59 AM',
        'l': '12/31/2020',
        'll': 'Dec 31, 2020',
        'lll': 'Dec 31, 2020 11:59 AM',
        'llll': 'Thu, Dec 31, 2020 11:59 AM',
        'dddd': 'Thursday',
        'ddd': 'Thu',
        'dd': 'Th',
        'd': '4',
        'do': '4th',
        'Do': '31st',
        'D': '31',
        'DD': '31',
        'MMMM': 'December',
        'MMM': 'Dec',
        'MM': '12',
        'M': '12',
        'Mo': '12th',
        'YYYY': '2020',
        'YY': '20',
        'Y': '2020',
        'YYYYYY': '+002020',
        'HH': '11',
        'H': '11',
        'hh': '11',
        'h': '11',
        'k': '11',
        'kk': '11',
        'mm': '59',
        'm': '59',
        'ss': '59',
        's': '59',
        'A': 'AM',
        'a': 'am',
        'S': '9',
        'SS': '99',
        'SSS': '999',
        'SSSSSS': '999000',
        'Z': '-09:30',
        'ZZ': '-0930',
        'X': '1609450199',
        'x': '1609450199999',
        'Q': '4',
        'Qo': '4th',
        'w': '1',
        'ww': '01',
        'wo': '1st',
        'W': '53',
        'WW': '53',
        'Wo': '53rd',
        'E': '4',
        'e': '4',
        'DDD': '366',
        'DDDD': '366',
        'DDDo': '366th',
        'gg': '21',
        'gggg': '2021',
        'GG': '20',
        'GGGG': '2020',
        'N': 'AD',
        'NNNN': 'Anno Domini',
        'y': '2020',
        'yo': '2020th',
        'z': 'UTC',
        'zz': 'Coordinated Universal Time',
        'hmm': '1159',
        'Hmmss': '115959',
        '': '2020-12-31T11:59:59-09:30',
        '[escaped] YYYY': 'escaped 2020',
        '[a[b]': '[amb',
        '\\YYYY \\\\x': 'YYYY 1609450199999',
        'YYYY-MM-DD\nHH:mm': '2020-12-3111:59',
        'w|x': 'w|1609450199999',
        '[unclosed YYYY': '[unc12/31/2020o5944 2020',
        'LLLL [at] LT': 'Thursday, December 31, 2020 11:59 AM at 11:59 AM',
        'LLT': 'December 31, 2020T',
        '\\LT': 'LT',
        'dddd, MMMM Do YYYY, h:mm:ss a': 'Thursday, December 31st 2020, 11:59:59 am',
        '\u2028x\ry': '16094501999992020',
    }),
]


def _instant(iso: str, offset: int) -> datetime:
    utc = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return utc.astimezone(timezone(timedelta(minutes=offset)))


@pytest.mark.parametrize(
    ("iso", "offset", "utc_mode", "fmt", "expected"),
    [(iso, off, utc, fmt, exp) for iso, off, utc, table in FORMAT_VECTORS for fmt, exp in table.items()],
    ids=lambda v: repr(v) if isinstance(v, str) else None,
)
def test_format_matches_moment(iso: str, offset: int, utc_mode: bool, fmt: str, expected: str) -> None:
    dt = _instant(iso, offset)
    if utc_mode:
        # moment().utc().utcOffset(n): the same instant re-expressed, and UTC mode (z -> "UTC")
        got = format_moment(dt.astimezone(timezone.utc), fmt, utc_offset=offset / 60)
    else:
        got = format_moment(dt, fmt)
    assert got == expected


def test_naive_datetime_is_utc() -> None:
    assert format_moment(datetime(2026, 11, 30, 10, 0), "YYYY-MM-DD HH:mm Z x") == (
        "2026-11-30 10:00 +00:00 1796032800000"
    )


def test_format_without_tokenizable_character_raises_like_moment() -> None:
    # moment throws a TypeError for a format made only of line terminators
    with pytest.raises(MomentFormatError):
        format_moment(datetime(2026, 1, 1), "\n")


def test_out_of_range_shift_is_invalid_date() -> None:
    assert format_moment(datetime(9999, 12, 31, 23, 0), "LT", utc_offset=5) == INVALID_DATE
    assert format_moment(datetime(2026, 1, 1), "LT", utc_offset=float("inf")) == INVALID_DATE


@pytest.mark.parametrize(
    ("ms", "plain", "suffixed"),
    [
        (0, "a few seconds", "a few seconds ago"),
        (44499, "a few seconds", "in a few seconds"),
        (44500, "a minute", "in a minute"),
        (-44500, "a minute", "a minute ago"),
        (89999, "a minute", "in a minute"),
        (90000, "2 minutes", "in 2 minutes"),
        (44 * 60000 + 29999, "44 minutes", "in 44 minutes"),
        (44 * 60000 + 30000, "an hour", "in an hour"),
        (90 * 60000, "2 hours", "in 2 hours"),
        (-(21.5 * 3600000 - 1), "21 hours", "21 hours ago"),
        (21.5 * 3600000, "a day", "in a day"),
        (36 * 3600000, "2 days", "in 2 days"),
        (25.5 * 86400000 - 1, "25 days", "in 25 days"),
        (25.5 * 86400000, "a month", "in a month"),
        (45.66 * 86400000, "2 months", "in 2 months"),
        (319 * 86400000, "10 months", "in 10 months"),
        (320 * 86400000, "a year", "in a year"),
        (-548 * 86400000, "2 years", "2 years ago"),
        (1e13, "317 years", "in 317 years"),
    ],
)
def test_humanize_thresholds_match_moment(ms: float, plain: str, suffixed: str) -> None:
    assert humanize_ms(ms, with_suffix=False) == plain
    assert humanize_ms(ms, with_suffix=True) == suffixed
    assert humanize(ms / 1000, with_suffix=True) == suffixed


def test_humanize_of_nan_is_invalid_date() -> None:
    assert humanize(float("nan"), with_suffix=True) == INVALID_DATE


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "epoch_ms"),
    [
        ("2023-01-01", 1672531200000),
        ("2023-01-01T10:00", 1672567200000),
        ("2023-01-01 10:00:00", 1672567200000),
        ("2023-01-01T10:00:00Z", 1672567200000),
        ("2023-01-01T10:00:00 Z", 1672567200000),
        ("2023-01-01T10:00:00.123+02:00", 1672560000123),
        ("2023-01-01T10:00:00,5-0530", 1672587000500),
        ("2023-01-01T10:00:00+0000", 1672567200000),
        ("2023-01-01T10:00:00+24:00", 1672480800000),
        ("2023-01-01T10:00:00.123456789Z", 1672567200123),
        ("1970-01-01T00:00:00.9999", 999),
        ("  2023-01-01", 1672531200000),
        ("2023-01-01T24:00", 1672617600000),
        ("2023-01-01T10", 1672567200000),
        ("2023-W05-3", 1675209600000),
        ("2023-W05", 1675036800000),
        ("2023W053", 1675209600000),
        ("2020-W53-7", 1609632000000),
        ("2023-001", 1672531200000),
        ("2024-366", 1735603200000),
        ("2023-01", 1672531200000),
        ("20230101", 1672531200000),
        ("20230101T1030", 1672569000000),
        ("202301", 1672531200000),
        ("2023", 1672531200000),
        ("+002023-01-01", 1672531200000),
        ("Sun, 01 Jan 2023 10:00:00 GMT", 1672567200000),
        ("Sun, 01 Jan 2023 (comment) 10:00:00 GMT", 1672567200000),
        ("1 Jan 23 10:00 +0200", 1672560000000),
        ("01 Jan 2023 10:00 PST", 1672596000000),
        ("/Date(1672531200000)/", 1672531200000),
        ("Date(-5)", -5),
    ],
)
def test_parse_matches_moment(text: str, epoch_ms: int) -> None:
    parsed = parse_date(text)
    assert parsed is not None
    assert (parsed - EPOCH) // timedelta(milliseconds=1) == epoch_ms


@pytest.mark.parametrize(
    "text",
    [
        "", "abc", "yesterday", "2023-02-30", "2023-13-01", "2023-01-01T24:00:01", "2023-01-01T23:60",
        "2023-366", "2023T10", "2023-01-01T1000", "2023-W53-1", "2023-W00-1", "2023-W01-8",
        "Mon, 01 Jan 2023 10:00:00 GMT", "32 Jan 2023 10:00 Z",
    ],
)
def test_parse_invalid_like_moment(text: str) -> None:
    assert parse_date(text) is None


def test_parse_local_time_uses_given_zone() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    parsed = parse_date("2023-01-01T10:00", local_tz=ist)
    assert parsed is not None and parsed.utcoffset() == timedelta(hours=5, minutes=30)
    assert parse_date("2023-01-01T10:00Z", local_tz=ist).utcoffset() == timedelta(0)  # type: ignore[union-attr]


def test_time_diff_examples() -> None:
    def diff(a: str, b: str) -> str:
        left, right = parse_date(a), parse_date(b)
        assert left is not None and right is not None
        return humanize((left - right).total_seconds(), with_suffix=True)

    assert diff("2023-01-01", "2023-01-02") == "a day ago"
    assert diff("2023-01-02", "2023-01-01") == "in a day"
    assert diff("2023-01-01 12:00:00", "2023-01-01 15:00:00") == "3 hours ago"


@pytest.mark.parametrize(
    ("arg", "hours", "lt"),
    [
        ("UTC+2", 2, "12:00 PM"),
        ("UTC-7", -7, "3:00 AM"),
        ("UTC+0", 0, "10:00 AM"),
        ("UTC+05", 5, "3:00 PM"),
        ("UTC+15", 15, "1:00 AM"),
        ("UTC+16", 16 / 60, "10:16 AM"),  # moment reads |n| >= 16 as minutes
        ("UTC-30", -0.5, "9:30 AM"),
        ("UTC+120", 2, "12:00 PM"),
    ],
)
def test_utc_offset_matches_moment(arg: str, hours: float, lt: str) -> None:
    assert utc_offset_hours(arg) == pytest.approx(hours)
    now = datetime(2025, 11, 30, 10, 0, tzinfo=timezone.utc)
    assert format_moment(now, "LT", utc_offset=utc_offset_hours(arg)) == lt


@pytest.mark.parametrize("arg", ["", "UTC", "UTC+", "UTC+5:30", "utc+2", "GMT+2", "UTC+2 ", "UTC+\u0662", "+2"])
def test_utc_offset_rejected_forms(arg: str) -> None:
    assert utc_offset_hours(arg) is None


def test_utc_offset_huge_digit_string_does_not_raise() -> None:
    hours = utc_offset_hours("UTC+" + "9" * 5000)
    assert hours is not None
    assert format_moment(datetime(2026, 1, 1), "LT", utc_offset=hours) == INVALID_DATE


def test_local_mode_has_no_zone_abbreviation_and_offset_default_format() -> None:
    # moment(instant) in a zone at +05:30 (verified under TZ=Asia/Kolkata)
    dt = _instant("2026-11-30T10:00:00.000Z", 330)
    assert format_moment(dt, "z|zz") == "|"
    assert format_moment(dt, "") == "2026-11-30T15:30:00+05:30"
    assert format_moment(dt.astimezone(timezone.utc), "") == "2026-11-30T10:00:00+00:00"


# SillyTavern's timestampToMoment (send_date of chat messages); values from moment 2.30.1 + ST's
# parseTimestamp under Node with TZ=UTC.
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("timestamp", "epoch_ms"),
    [
        ("June 19, 2023 2:20pm", 1687184400000),
        ("june 19, 2023 12:05AM", 1687133100000),
        ("Jun 1, 2023 12:00pm", 1685620800000),
        ("Sept 3, 2023 1:2pm", 1693746120000),  # prefix match on the month, minute padded
        ("September 3, 2023 11:59pm", 1693785540000),
        ("5 19, 2023 2:20pm", 1687184400000),  # a digit "month" is a 0-based index
        ("12 19, 2023 2:20pm", 1674138000000),  # ... that rolls over (MM only: January)
        ("Sent: March 7, 2024 9:15am (edited)", 1709802900000),  # found anywhere in the text
        ("Mayday 4, 2023 1:00am", 1683162000000),
        ("December 31, 1999 13:30pm", 946647000000),
        ("2024-07-12@01h31m37s123ms", 1720747897123),
        ("2024-7-12@01h31m37s", 1720747897000),
        ("2024-6-5 @14h 56m 50s 682ms", 1717599410682),
        ("2024-6-5 @14h 56m 50s 5ms", 1717599410005),
        ("1700000000000", 1700000000000),
        ("0", 0),
        (1700000000123, 1700000000123),
        ("2023-01-01T10:00:00Z", 1672567200000),
        ("2023-01-01 10:00:00", 1672567200000),
        ("20230101T1030", 1672569000000),
    ],
)
def test_st_timestamps_match_st(timestamp: str | int, epoch_ms: int) -> None:
    parsed = parse_st_timestamp(timestamp, now=NOW)
    assert parsed is not None
    assert (parsed - EPOCH) // timedelta(milliseconds=1) == epoch_ms


@pytest.mark.parametrize("timestamp", ["March 32, 2024 9:15am", "", " 2023-01-01", "garbage", 0, None, -5, "1" * 30])
def test_st_timestamps_invalid(timestamp: str | int | None) -> None:
    assert parse_st_timestamp(timestamp, now=NOW) is None


def test_st_timestamp_unknown_month_name_means_current_month() -> None:
    # moment().month("Foo") leaves the month of "now" unchanged
    parsed = parse_st_timestamp("Foo 3, 2023 1:00pm", now=NOW)
    assert parsed == datetime(2023, 11, 3, 13, 0, tzinfo=timezone.utc)


def test_st_timestamp_meridiem_form_is_local_time() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    parsed = parse_st_timestamp("June 19, 2023 2:20pm", now=NOW, local_tz=ist)
    assert parsed == datetime(2023, 6, 19, 14, 20, tzinfo=ist)
