"""The law behind per-credential budgets (server/web/budgets.py): what the ledger says each credential holds is
always what its connections hold, whatever order they change in, so a request is charged without counting every
connection again."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hivenote.server.web.serve import _UNKNOWN, BoundedH11Protocol, Ledger


class _Transport:
    def __init__(self) -> None:
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing


def _connection(ledger: Ledger) -> BoundedH11Protocol:
    """A connection's state as BoundedH11Protocol keeps it, without a socket (its transitions are the real ones)."""
    c = BoundedH11Protocol.__new__(BoundedH11Protocol)
    c.ledger = ledger
    c._phase, c.credential, c.streaming, c.body_size = "head", _UNKNOWN, False, 0
    c.transport = _Transport()  # type: ignore[assignment]
    ledger.account(c, 1)
    return c


PHASES = ("head", "body", "app", "idle", "drain", "gone")
CREDENTIALS = (_UNKNOWN, None, "", "bob", "peer-laptop")
changes = st.lists(
    st.tuples(
        st.integers(0, 5),  # which connection
        st.fixed_dictionaries(
            {},
            optional={
                "_phase": st.sampled_from(PHASES),
                "credential": st.sampled_from(CREDENTIALS),
                "streaming": st.booleans(),
                "body_size": st.integers(0, 1 << 20),
            },
        ),
    ),
    max_size=60,
)


def _recount(connections: list[BoundedH11Protocol]) -> dict[str, Any]:
    busy: Counter[object] = Counter()
    streams: Counter[object] = Counter()
    bodies: Counter[object] = Counter()
    body_bytes: Counter[object] = Counter()
    waiting = []
    for c in connections:
        if c._phase in ("head", "idle", "drain"):
            waiting.append(c)
        elif c._phase in ("body", "app") and c.credential is not _UNKNOWN:
            busy[c.credential] += 1
            streams[c.credential] += c.streaming
            bodies[c.credential] += c._phase == "body"
            body_bytes[c.credential] += c.body_size if c._phase == "body" else 0
    return {
        "busy": +busy,
        "streams": +streams,
        "bodies": +bodies,
        "body_bytes": +body_bytes,
        "waiting": {id(c) for c in waiting},
    }


@given(changes)
def test_the_ledger_always_says_what_the_connections_hold(steps: list[tuple[int, dict[str, Any]]]) -> None:
    ledger = Ledger()
    connections = [_connection(ledger) for _ in range(6)]
    for which, state in steps:
        connections[which]._change(**state)
        held = {
            "busy": +ledger.busy,
            "streams": +ledger.streams,
            "bodies": +ledger.bodies,
            "body_bytes": +ledger.body_bytes,
            "waiting": {id(c) for c in [*ledger.waiting_anonymous, *ledger.waiting_known]},
        }
        assert held == _recount(connections)
    # The oldest waiting connection that showed no credential goes first.
    oldest = ledger.oldest_waiting(besides=connections[0])
    anonymous = [c for c in ledger.waiting_anonymous if c is not connections[0]]
    known = [c for c in ledger.waiting_known if c is not connections[0]]
    assert oldest is (anonymous[0] if anonymous else known[0] if known else None)


def test_no_connection_leaves_the_budgets_by_upgrading() -> None:
    """A WebSocket upgrade hands the socket to another protocol, outside these deadlines and budgets: Hivenote serves
    no WebSocket, so uvicorn upgrades nothing, whatever library is installed."""
    from hivenote.server.web.serve import uvicorn_config

    config = uvicorn_config(object())
    assert config.ws == "none"
