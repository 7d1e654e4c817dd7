"""The hybrid logical clock: local stamps always increase, follow what was seen, and resist skewed peers."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hivenote.server.hlc import Clock

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
            else:  # reported, and the clock is not dragged further than the allowed offset
                assert clock.skew.ahead_ms["peer-0001"] >= step[1]
                assert following[0] <= max(now[0] + MAX_OFFSET, last[0])
            last = following


def test_a_far_future_stamp_is_reported_with_its_lead() -> None:
    clock = Clock(lambda: 1_000, max_offset_ms=MAX_OFFSET)
    clock.observe(1_000 + 7_200_000, 0, "broken-0001")
    assert clock.skew.ahead_ms == {"broken-0001": 7_200_000}
    assert clock.tick()[0] == 1_000 + MAX_OFFSET
