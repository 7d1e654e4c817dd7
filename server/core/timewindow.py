"""Time windows: the `since` and `until` of every surface (MCP, REST, the command line, the dashboard), read from
what a person or an agent writes ("yesterday", "last week", "3 days ago", "2h", "monday", "2026-12-01T14:30"), and
said back in words ("since Mon 1 Dec 00:00").

Every phrase names a span of time: a day, a week, a month or a year from its first moment to the next one's, or an
instant (a date-time, "2h", "3 days ago"). `since` starts at its span's start, `until` ends at its span's end, so
`since=monday until=monday` is all of Monday and `until=yesterday` is everything before today. Calendar phrases are
read in the machine's local time zone (or `tz`, when one is given), day by day, so a day across a daylight-saving
change is 23 or 25 hours long; "2h" and "30m" are exact lengths of time.

Pure: imports only the standard library; the time comes in as a parameter (`now_ms`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

from .errors import InvalidInput

ACCEPTED = (
    "an ISO 8601 date or date-time (2026-12-01, 2026-12, 2026-12-01T14:30, 2026-12-01T14:30:00Z, "
    "2026-12-01T14:30+01:00), 'now', 'today', 'yesterday', a weekday ('monday', 'last friday'), "
    "'this week', 'last week', 'this month', 'last month', 'this year', 'last year', "
    "an age ('3 days ago', '2 hours ago', '1 week ago') or a short one ('30m', '2h', '7d', '2w')"
)

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_UNITS = {
    "m": "minutes",
    "min": "minutes",
    "mins": "minutes",
    "minute": "minutes",
    "minutes": "minutes",
    "h": "hours",
    "hr": "hours",
    "hrs": "hours",
    "hour": "hours",
    "hours": "hours",
    "d": "days",
    "day": "days",
    "days": "days",
    "w": "weeks",
    "wk": "weeks",
    "wks": "weeks",
    "week": "weeks",
    "weeks": "weeks",
    "mo": "months",
    "month": "months",
    "months": "months",
    "y": "years",
    "yr": "years",
    "yrs": "years",
    "year": "years",
    "years": "years",
}
_AGE = re.compile(r"(\d{1,6})\s*([a-z]+)(?:\s+ago)?")
_MONTH = re.compile(r"(\d{4})-(\d{2})")
_LEAD = re.compile(r"(?:since|from|until|till|before|on)\s+")
_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of time, [start, end) in epoch ms; an instant has start == end."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Window:
    """Notes changed at `since` or later (epoch ms, None: from the start) and before `until` (None: up to now)."""

    since: int | None = None
    until: int | None = None

    def contains(self, ms: int) -> bool:
        return (self.since is None or ms >= self.since) and (self.until is None or ms < self.until)

    def describe(self, tz: tzinfo | None = None, *, now_ms: int | None = None) -> str:
        """The window in words, in local time: "since Mon 1 Dec 00:00", "before Tue 2 Dec 00:00", "from ... to ..."."""
        year = None if now_ms is None else _local(now_ms, tz).year
        if self.since is not None and self.until is not None:
            return f"from {clock_text(self.since, tz, year)} to {clock_text(self.until, tz, year)}"
        if self.since is not None:
            return f"since {clock_text(self.since, tz, year)}"
        if self.until is not None:
            return f"before {clock_text(self.until, tz, year)}"
        return "at any time"

    def to_json(self) -> dict[str, int | None]:
        return {"since": self.since, "until": self.until}


def clock_text(ms: int, tz: tzinfo | None = None, year: int | None = None) -> str:
    """`ms` in local time as "Mon 1 Dec 00:00" (with the year when it is not `year`), in English whatever the locale."""
    at = _local(ms, tz)
    text = f"{_DAY_NAMES[at.weekday()]} {at.day} {_MONTH_NAMES[at.month - 1]}"
    if year is None or at.year != year:
        text += f" {at.year}"
    return f"{text} {at:%H:%M}"


def _local(ms: int, tz: tzinfo | None) -> datetime:
    """`ms` as a naive local date-time (the wall clock of `tz`, or of the machine's time zone)."""
    seconds, millis = divmod(ms, 1000)
    if tz is None:
        return datetime.fromtimestamp(seconds) + timedelta(milliseconds=millis)
    return datetime.fromtimestamp(seconds, tz).replace(tzinfo=None) + timedelta(milliseconds=millis)


def _epoch_ms(at: datetime, tz: tzinfo | None) -> int:
    """A date-time as epoch ms: an aware one as it says, a naive one as the wall clock of `tz` (or of the machine's
    time zone, as the C library reads it, daylight-saving time included)."""
    if at.tzinfo is None:
        if tz is None:
            return round(at.timestamp() * 1000)  # local: mktime, which knows the zone's changes
        at = at.replace(tzinfo=tz)
    return (at.replace(tzinfo=None) - _EPOCH - (at.utcoffset() or timedelta(0))) // timedelta(milliseconds=1)


def _day(day: date, days: int, tz: tzinfo | None) -> Span:
    start = datetime(day.year, day.month, day.day)
    return Span(_epoch_ms(start, tz), _epoch_ms(start + timedelta(days=days), tz))


def _month_start(year: int, month: int) -> datetime:
    year += (month - 1) // 12
    return datetime(year, (month - 1) % 12 + 1, 1)


def _months_back(at: datetime, months: int) -> datetime:
    index = at.year * 12 + at.month - 1 - months
    year, month = divmod(index, 12)
    month += 1
    last = (_month_start(year, month + 1) - timedelta(days=1)).day
    return at.replace(year=year, month=month, day=min(at.day, last))


def read_time(text: str, *, now_ms: int, tz: tzinfo | None = None, name: str = "time") -> Span:
    """The span `text` names, read at `now_ms`. Raises `InvalidInput` naming the accepted forms when it cannot."""
    if not isinstance(text, str):
        raise InvalidInput(f"{name} must be text: {ACCEPTED}")
    raw = text.strip()
    lead = _LEAD.match(raw.lower())
    raw = raw[lead.end() :] if lead else raw  # "since monday", "until 2026-12-01": the word the parameter says
    phrase = " ".join(raw.lower().split())
    try:
        span = _read(phrase, raw, now_ms, tz)
    except (OverflowError, OSError, ValueError) as exc:  # a year past 9999, a date the platform cannot convert
        raise InvalidInput(f"{name} {text!r} is out of range ({exc}); use {ACCEPTED}") from None
    if span is None:
        raise InvalidInput(f"cannot read {name} {text!r} as a time; use {ACCEPTED}")
    return span


def _read(phrase: str, raw: str, now_ms: int, tz: tzinfo | None) -> Span | None:
    now = _local(now_ms, tz)
    today = now.date()
    if phrase == "now":
        return Span(now_ms, now_ms)
    if phrase == "today":
        return _day(today, 1, tz)
    if phrase == "yesterday":
        return _day(today - timedelta(days=1), 1, tz)
    words = phrase.split(" ")
    if len(words) == 2 and words[0] in ("this", "last"):
        back = words[0] == "last"
        if words[1] == "week":
            monday = today - timedelta(days=today.weekday() + (7 if back else 0))
            return _day(monday, 7, tz)
        if words[1] == "month":
            first = _month_start(today.year, today.month - (1 if back else 0))
            return Span(_epoch_ms(first, tz), _epoch_ms(_month_start(first.year, first.month + 1), tz))
        if words[1] == "year":
            first = datetime(today.year - (1 if back else 0), 1, 1)
            return Span(_epoch_ms(first, tz), _epoch_ms(datetime(first.year + 1, 1, 1), tz))
    if len(words) <= 2 and (weekday := _weekday(words[-1])) is not None and words[0] in (words[-1], "last"):
        ago = (today.weekday() - weekday) % 7
        if words[0] == "last" and ago == 0:
            ago = 7  # "last monday" on a Monday: a week ago, not today
        return _day(today - timedelta(days=ago), 1, tz)
    if (age := _AGE.fullmatch(phrase)) is not None and (unit := _UNITS.get(age.group(2))) is not None:
        return _aged(now_ms, now, int(age.group(1)), unit, tz)
    if (month := _MONTH.fullmatch(phrase)) is not None:
        year, number = int(month.group(1)), int(month.group(2))
        if not 1 <= number <= 12:
            return None
        first = datetime(year, number, 1)
        return Span(_epoch_ms(first, tz), _epoch_ms(_month_start(year, number + 1), tz))
    return _iso(raw, tz)


def _weekday(word: str) -> int | None:
    for number, day in enumerate(_WEEKDAYS):
        if word == day or (len(word) >= 3 and day.startswith(word)):
            return number
    return None


def _aged(now_ms: int, now: datetime, count: int, unit: str, tz: tzinfo | None) -> Span:
    if unit == "minutes":
        at = now_ms - count * 60_000
    elif unit == "hours":
        at = now_ms - count * 3_600_000
    elif unit in ("days", "weeks"):  # the same time on the wall clock that many days ago (23 or 25 hours a day at DST)
        at = _epoch_ms(now - timedelta(days=count * (7 if unit == "weeks" else 1)), tz)
    else:
        at = _epoch_ms(_months_back(now, count * (12 if unit == "years" else 1)), tz)
    return Span(at, at)


def _iso(raw: str, tz: tzinfo | None) -> Span | None:
    if not any(mark in raw for mark in "Tt :"):  # a date: the whole day
        try:
            return _day(date.fromisoformat(raw), 1, tz)
        except ValueError:
            return None
    text = raw[:-1] + "+00:00" if raw[-1:] in ("Z", "z") else raw
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    ms = _epoch_ms(at, tz)
    return Span(ms, ms)


def read_window(since: str | None, until: str | None, *, now_ms: int, tz: tzinfo | None = None) -> Window | None:
    """The window `since` and `until` name (either may be None or blank); None when neither names one. Raises
    `InvalidInput` when a value cannot be read or the window is empty (its start is not before its end)."""
    since = since.strip() if isinstance(since, str) else since
    until = until.strip() if isinstance(until, str) else until
    start = read_time(since, now_ms=now_ms, tz=tz, name="since").start if since else None
    end = read_time(until, now_ms=now_ms, tz=tz, name="until").end if until else None
    if start is None and end is None:
        return None
    if start is not None and end is not None and start >= end:
        raise InvalidInput(
            f"the window is empty: since {since!r} ({clock_text(start, tz)}) is not before until {until!r} "
            f"({clock_text(end, tz)}); give an earlier since or a later until"
        )
    return Window(start, end)
