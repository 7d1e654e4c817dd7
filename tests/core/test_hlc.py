"""The hybrid logical clock: local stamps always increase, follow what was seen, and resist skewed peers."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hivenote.server.core.hlc import Clock

MAX_OFFSET = 1000

events = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.integers(0, 50)),  # the wall clock moves (or not) by this much
        st.tuples(st.just("back"), st.integers(1, 500)),  # the wall clock is set back
        st.tuples(st.just("seen"), st.integers(-2000, 5000), st.integers(0, 3)),  # a remote stamp, relative
    ),
    max_size=60,
)


@given(events)
def test_local_stamps_increase_follow_remote_ones_and_ignore_far_future_ones(steps: list[tuple[Any, ...]]) -> None:
    now = [10_000]
    clock = Clock(lambda: now[0], max_offset_ms=MAX_OFFSET)
    last = (-1, -1)
    for step in steps:
        if step[0] == "tick":
            now[0] += step[1]
            stamp = clock.tick()
            assert stamp > last
            last = stamp
        elif step[0] == "back":
            now[0] -= step[1]
        else:
            wall, counter = now[0] + step[1], step[2]
            clock.observe(wall, counter, "peer-0001")
            following = clock.tick()
            assert following > last
            if step[1] <= MAX_OFFSET:
                assert following > (wall, counter)  # anything written after seeing an op sorts after it
            else:  # reported, and the clock is not dragged by it at all
                assert clock.skew.ahead_ms["peer-0001"] >= step[1]
                assert following[0] <= max(now[0], last[0])
            last = following


def test_a_far_future_stamp_is_reported_with_its_lead() -> None:
    clock = Clock(lambda: 1_000, max_offset_ms=MAX_OFFSET)
    clock.observe(1_000 + 7_200_000, 0, "broken-0001")
    assert clock.skew.ahead_ms == {"broken-0001": 7_200_000}
    assert clock.tick()[0] == 1_000  # not dragged: other machines' clocks stay right


def test_own_stamps_are_always_followed_so_a_later_own_edit_sorts_after_an_earlier_one() -> None:
    """Its clock was a day ahead when it wrote, and is right now: its next edit must still win over its own."""
    day = 86_400_000
    clock = Clock(lambda: 1_000, max_offset_ms=MAX_OFFSET)
    clock.own_nodes = {"me-0001"}
    clock.observe(1_000 + day, 3, "me-0001")
    assert clock.tick() > (1_000 + day, 3) and clock.own_ahead_ms == day
    assert clock.skew.ahead_ms == {}


def test_this_machines_own_skew_is_the_median_of_what_other_clocks_say() -> None:
    clock = Clock(lambda: 1_000)
    assert clock.own_skew_ms() == 0
    clock.note_offset("peer http://a", -86_400_000)  # they are a day behind us: we are a day ahead
    clock.note_offset("bucket", -86_399_000)
    clock.note_offset("peer http://b", 0)  # one wrong clock elsewhere does not decide
    assert clock.own_skew_ms() == 86_399_000
    clock.offsets = {"bucket": 30_000}
    assert clock.own_skew_ms() == 0  # within a minute: not reported
