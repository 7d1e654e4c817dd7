"""The one reader of `since` / `until` (core/timewindow.py): calendar phrases in a real time zone, a day across a
daylight-saving change, the machine's own zone in a subprocess, what an unreadable phrase says, and its laws."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hivenote.server.core.errors import InvalidInput
from hivenote.server.core.timewindow import ACCEPTED, Window, read_time, read_window

BERLIN = ZoneInfo("Europe/Berlin")
HOUR = 3_600_000


def ms(text: str, tz: ZoneInfo = BERLIN) -> int:
    """A wall-clock time in `tz` as epoch ms."""
    return int(datetime.fromisoformat(text).replace(tzinfo=tz).timestamp() * 1000)


NOW = ms("2026-12-09T15:30")  # a Wednesday afternoon in Berlin


@pytest.mark.parametrize(
    ("phrase", "start", "end"),
    [
        ("today", "2026-12-09T00:00", "2026-12-10T00:00"),
        ("yesterday", "2026-12-08T00:00", "2026-12-09T00:00"),
        ("Monday", "2026-12-07T00:00", "2026-12-08T00:00"),
        ("since Monday", "2026-12-07T00:00", "2026-12-08T00:00"),
        ("wed", "2026-12-09T00:00", "2026-12-10T00:00"),
        ("last wednesday", "2026-12-02T00:00", "2026-12-03T00:00"),
        ("this week", "2026-12-07T00:00", "2026-12-14T00:00"),
        ("last week", "2026-11-30T00:00", "2026-12-07T00:00"),
        ("this month", "2026-12-01T00:00", "2027-01-01T00:00"),
        ("last month", "2026-11-01T00:00", "2026-12-01T00:00"),
        ("last year", "2025-01-01T00:00", "2026-01-01T00:00"),
        ("2026-11-30", "2026-11-30T00:00", "2026-12-01T00:00"),
        ("2026-11", "2026-11-01T00:00", "2026-12-01T00:00"),
        ("3 days ago", "2026-12-06T15:30", "2026-12-06T15:30"),
        ("7d", "2026-12-02T15:30", "2026-12-02T15:30"),
        ("2h", "2026-12-09T13:30", "2026-12-09T13:30"),
        ("30 min", "2026-12-09T15:00", "2026-12-09T15:00"),
        ("2026-12-01T14:30", "2026-12-01T14:30", "2026-12-01T14:30"),
    ],
)
def test_each_phrase_names_its_span_in_the_local_time_zone(phrase: str, start: str, end: str) -> None:
    span = read_time(phrase, now_ms=NOW, tz=BERLIN)
    assert (span.start, span.end) == (ms(start), ms(end))


def test_an_explicit_offset_wins_over_the_local_zone() -> None:
    assert read_time("2026-12-01T14:30Z", now_ms=NOW, tz=BERLIN).start == ms("2026-12-01T15:30")
    assert read_time("2026-12-01T14:30+01:00", now_ms=NOW, tz=BERLIN).start == ms("2026-12-01T14:30")


def test_a_day_across_a_daylight_saving_change_is_23_or_25_hours() -> None:
    """Berlin moves its clocks on 29 March 2026 (02:00 -> 03:00) and 25 October 2026 (03:00 -> 02:00)."""
    spring = read_time("yesterday", now_ms=ms("2026-03-30T09:00"), tz=BERLIN)
    assert (spring.start, spring.end) == (ms("2026-03-29T00:00"), ms("2026-03-30T00:00"))
    assert spring.end - spring.start == 23 * HOUR
    autumn = read_time("yesterday", now_ms=ms("2026-10-26T09:00"), tz=BERLIN)
    assert autumn.end - autumn.start == 25 * HOUR
    # "1 day ago" is the same time on the wall clock, not 24 hours: 23 hours back across the spring change.
    assert NOW - read_time("1 day ago", now_ms=NOW, tz=BERLIN).start == 24 * HOUR
    day_ago = read_time("1 day ago", now_ms=ms("2026-03-29T12:00"), tz=BERLIN).start
    assert day_ago == ms("2026-03-28T12:00") and ms("2026-03-29T12:00") - day_ago == 23 * HOUR
    # "24h" is exact.
    assert ms("2026-03-29T12:00") - read_time("24h", now_ms=ms("2026-03-29T12:00"), tz=BERLIN).start == 24 * HOUR


def test_the_machines_own_time_zone_is_read_when_none_is_given() -> None:
    """A subprocess with TZ set: the C library's local time, daylight-saving time included (no zone passed in)."""
    code = (
        "from hivenote.server.core.timewindow import read_time, read_window\n"
        f"span = read_time('yesterday', now_ms={ms('2026-03-30T09:00')})\n"
        "print(span.start, span.end)\n"
        f"print(read_window('monday', None, now_ms={NOW}).describe(now_ms={NOW}))\n"
    )
    env = {**os.environ, "TZ": "Europe/Berlin"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, encoding="utf-8", timeout=60, check=True
    )
    start, end = map(int, done.stdout.split("\n")[0].split())
    assert (start, end) == (ms("2026-03-29T00:00"), ms("2026-03-30T00:00"))
    assert done.stdout.split("\n")[1] == "since Mon 7 Dec 00:00"


def test_the_window_says_itself_in_words() -> None:
    window = read_window("monday", None, now_ms=NOW, tz=BERLIN)
    assert window is not None and window.describe(BERLIN, now_ms=NOW) == "since Mon 7 Dec 00:00"
    both = read_window("2025-12-31", "yesterday", now_ms=NOW, tz=BERLIN)
    assert both is not None
    assert both.describe(BERLIN, now_ms=NOW) == "from Wed 31 Dec 2025 00:00 to Wed 9 Dec 00:00"
    assert read_window(None, "yesterday", now_ms=NOW, tz=BERLIN) == Window(None, ms("2026-12-09T00:00"))
    assert read_window(None, " ", now_ms=NOW, tz=BERLIN) is None


@pytest.mark.parametrize("phrase", ["blah", "next week", "3 fortnights ago", "2026-13-01", "monday-ish", "-2h", ""])
def test_an_unreadable_phrase_says_what_would_work(phrase: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        read_window(phrase or "  x", None, now_ms=NOW, tz=BERLIN)
    message = str(raised.value)
    assert "since" in message and ACCEPTED in message
    for form in ("yesterday", "last week", "3 days ago", "2h", "monday", "2026-12-01"):
        assert form in message


def test_an_empty_window_is_refused_with_what_to_change() -> None:
    with pytest.raises(InvalidInput, match=r"is not before until .* give an earlier since or a later until"):
        read_window("today", "yesterday", now_ms=NOW, tz=BERLIN)


PHRASES = st.sampled_from(
    [
        "now",
        "today",
        "yesterday",
        "this week",
        "last week",
        "this month",
        "last month",
        "this year",
        "last year",
        "monday",
        "last sunday",
        "fri",
    ]
) | st.builds(
    lambda n, unit, ago: f"{n}{unit}{' ago' if ago else ''}",
    st.integers(0, 500),
    st.sampled_from([" minutes", "h", " hours", "d", " days", "w", " weeks", " months", " years"]),
    st.booleans(),
)
INSTANTS = st.integers(ms("2001-01-01T00:00"), ms("2090-01-01T00:00"))
ZONES = st.sampled_from([BERLIN, ZoneInfo("America/New_York"), ZoneInfo("Australia/Lord_Howe"), ZoneInfo("UTC")])


@given(PHRASES, INSTANTS, ZONES)
def test_a_phrase_never_ends_before_it_starts_nor_starts_after_now(phrase: str, now: int, tz: ZoneInfo) -> None:
    span = read_time(phrase, now_ms=now, tz=tz)
    assert span.start <= span.end
    assert span.start <= now
    window = read_window(phrase, phrase, now_ms=now, tz=tz) if span.start < span.end else None
    assert window is None or (window.since is not None and window.until is not None and window.since < window.until)


@given(INSTANTS, ZONES)
def test_an_iso_date_time_reads_back_as_the_instant_it_was_written_from(at: int, tz: ZoneInfo) -> None:
    moment = datetime.fromtimestamp(at / 1000, UTC).replace(microsecond=(at % 1000) * 1000)
    assert read_time(moment.isoformat(), now_ms=at, tz=tz).start == at
    assert read_time(moment.isoformat().replace("+00:00", "Z"), now_ms=at, tz=tz).start == at
    local = moment.astimezone(tz)
    day = read_time(local.date().isoformat(), now_ms=at, tz=tz)
    assert day.start <= at < day.end  # an instant is inside the day it is written on
    assert timedelta(hours=22) <= timedelta(milliseconds=day.end - day.start) <= timedelta(hours=26)
