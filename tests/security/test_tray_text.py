"""Untrusted text on the desktop: agent names (any MCP client's clientInfo), people and sync errors (peers' answers)
reach the tray's tooltip and notifications, which KDE and freedesktop notification servers read as markup and
Win32 keeps in fixed-size buffers. What pystray is handed is plain and short enough."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

import pytest

from hivenote.desktop.supervisor import Status, agents_online
from hivenote.desktop.tray import HEADING_MAX, MESSAGE_MAX, TITLE_MAX, Tray, plain
from hivenote.server.agents import AgentTracker
from hivenote.server.core.model import Author

HOSTILE = "<img src='http://203.0.113.9/x.png'/><a href='file:///etc/passwd'>Cursor</a>\x1b[31m\r\n<b>"


@dataclass
class FakeIcon:
    """pystray.Icon as the Tray drives it: what it was given to show."""

    name: str
    icon: Any = None
    title: str = ""
    menu: Any = None
    shown: list[tuple[str, str]] = field(default_factory=list)
    HAS_NOTIFICATION: bool = True

    def notify(self, message: str, title: str) -> None:
        self.shown.append((message, title))

    def update_menu(self) -> None:
        pass


class FakeMenu:
    SEPARATOR = object()

    def __init__(self, *items: Any) -> None:
        self.items = items


class FakePystray:
    """The module's seam (Tray takes the pystray module): a hand-written fake, no GUI."""

    Icon = FakeIcon
    Menu = FakeMenu

    @staticmethod
    def MenuItem(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return args


def hostile_status() -> Status:
    tracker = AgentTracker(now_ms=lambda: 1_800_000_000_000)
    tracker.record(Author(agent="other", client=HOSTILE))
    tracker.record(Author(agent="cursor", client="cursor", person=f"mallory{HOSTILE}"))
    return Status(
        "running",
        "127.0.0.1:7788",
        agents=agents_online(tracker, owner=""),
        sync_problems=(f"peer http://203.0.113.9:7788: answered 404 to /sync/shards: <html>{HOSTILE}</html>",),
    )


def assert_plain(text: str, limit: int) -> None:
    assert "<" not in text and ">" not in text
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)
    assert len(text.encode("utf-16-le")) <= 2 * limit


def test_the_status_a_hostile_client_makes_does_carry_markup_so_the_tray_must_neutralize_it() -> None:
    assert "<img" in hostile_status().title  # the Status is data; the Tray is where it meets the desktop


def test_the_tooltip_handed_to_the_desktop_is_plain_text_whatever_agents_and_peers_call_themselves() -> None:
    status = hostile_status()
    tray = Tray(FakePystray, lambda action: None, Status("starting", "127.0.0.1:7788"), ())
    tray.show(status, ())
    icon = tray.icon
    assert isinstance(icon, FakeIcon)
    assert_plain(icon.title, TITLE_MAX)
    assert "\u2039img src='http://203.0.113.9/x.png'/\u203a" in icon.title or icon.title.endswith("\u2026")
    assert icon.title.startswith("Hivenote — running · 2 agents online: ")


def test_notifications_handed_to_the_desktop_are_plain_text() -> None:
    tray = Tray(FakePystray, lambda action: None, Status("stopped", "127.0.0.1:7788"), ())
    tray.notify(f"cannot move the log to /home/me/{HOSTILE}", title=HOSTILE * 10)
    icon = tray.icon
    assert isinstance(icon, FakeIcon)
    [(message, title)] = icon.shown
    assert_plain(message, MESSAGE_MAX)
    assert_plain(title, HEADING_MAX)
    assert message.startswith("cannot move the log to /home/me/\u2039img")


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("Hivenote — running · 1 agent online: Cursor", 127, "Hivenote — running · 1 agent online: Cursor"),
        ("a<b>c & d", 127, "a\u2039b\u203ac & d"),
        ("tab\there\nnew\x00nul\x7fdel\x85nel", 127, "tab here new nul del nel"),
        ("x" * 200, 127, "x" * 126 + "\u2026"),
        ("\U0001f41d" * 100, 127, "\U0001f41d" * 63 + "\u2026"),  # a bee is two UTF-16 units
    ],
)
def test_plain_neutralizes_markup_and_control_characters_and_cuts_in_utf16_units(
    text: str, limit: int, expected: str
) -> None:
    assert plain(text, limit) == expected


def test_a_cut_tooltip_fits_the_buffer_win32_gives_it() -> None:
    """pystray copies the title into NOTIFYICONDATAW.szTip (WCHAR[128]) and raises ValueError past it."""

    class Tip(ctypes.Structure):
        _fields_ = [
            ("szTip", ctypes.c_wchar * 128),
            ("szInfo", ctypes.c_wchar * 256),
            ("szInfoTitle", ctypes.c_wchar * 64),
        ]

    def fill(tip: str, info: str, heading: str) -> Tip:
        return Tip(szTip=tip, szInfo=info, szInfoTitle=heading)

    with pytest.raises(ValueError, match="too long"):
        fill(hostile_status().title * 2, "", "")
    fill(plain(hostile_status().title * 2, 127), plain(HOSTILE * 50, 255), plain(HOSTILE * 50, 63))
