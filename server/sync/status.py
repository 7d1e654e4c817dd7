"""How each sync transport is doing: last success, last failure and its message, bytes moved. Shown by
/api/status, the dashboard's settings, the tray (a failing transport is a state) and `hivenote sync status`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.hlc import wall_ms


@dataclass
class TransportState:
    name: str  # "s3", "folder", "peer http://laptop.tail:7788"
    kind: str  # "folder" | "s3" | "peer"
    target: str  # the bucket/prefix, folder path or peer URL
    last_ok: int | None = None  # wall ms
    last_error: int | None = None
    error: str = ""  # the last failure's message, kept until the next success
    bytes_in: int = 0
    bytes_out: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    # The last word was a failure: set by what was said last, never by comparing the two wall-clock times (a clock
    # set right steps back, and a success after it would leave the entry failing with its message cleared).
    failing: bool = False


class SyncStatus:
    """Thread-safe: transports report from their own tasks or threads."""

    def __init__(self, now_ms: Callable[[], int] = wall_ms) -> None:
        self.now_ms = now_ms
        self._lock = threading.Lock()
        self._states: dict[str, TransportState] = {}
        self._heard: dict[str, int] = {}  # node -> how many of its pulls this server answered (peers only)

    def _state(self, name: str, kind: str, target: str) -> TransportState:
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = TransportState(name, kind, target)
        return state

    def ok(self, name: str, *, kind: str, target: str, bytes_in: int = 0, bytes_out: int = 0, **detail: Any) -> None:
        with self._lock:
            state = self._state(name, kind, target)
            state.last_ok = self.now_ms()
            state.error, state.failing = "", False
            state.bytes_in += bytes_in
            state.bytes_out += bytes_out
            state.detail.update(detail)

    def failed(self, name: str, message: str, *, kind: str, target: str, **detail: Any) -> None:
        with self._lock:
            state = self._state(name, kind, target)
            state.last_error = self.now_ms()
            # A failing entry always says why.
            state.error, state.failing = message or f"{name} failed without saying why (see the server log)", True
            state.detail.update(detail)

    def note(self, name: str, **detail: Any) -> None:
        """Add to an entry's detail (what it does next) without saying it worked or failed."""
        with self._lock:
            state = self._states.get(name)
            if state is not None:
                state.detail.update(detail)

    def heard_from(self, node: str) -> None:
        """A peer (its node id) pulled from this server: it is up, and reaches us."""
        with self._lock:
            self._heard[node] = self._heard.get(node, 0) + 1

    def heard(self, node: str) -> int:
        """How many pulls of `node` this server answered (compare two readings: it was heard from in between)."""
        with self._lock:
            return self._heard.get(node, 0)

    def forget(self, name: str) -> None:
        with self._lock:
            self._states.pop(name, None)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(s) for s in sorted(self._states.values(), key=lambda s: s.name)]

    def problems(self) -> list[str]:
        """'<name>: <error>' for every transport whose last attempt failed."""
        with self._lock:
            return [f"{s.name}: {s.error}" for s in self._states.values() if s.failing]
