"""The tray menu as data: `build_menu(status, ...)` returns plain `Item`s (label, action, enabled, checked,
children) for one state, so every state's menu is testable without a tray; `tray.py` turns them into pystray's."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from hivenote.server.install import SNIPPET_ONLY

from .supervisor import Status

STATUS_LABEL_MAX = 70  # a menu line's width: longer messages go on more lines (the tooltip has them on one)
STATUS_LINES_MAX = 4  # an error's lines in the menu; past them it is cut (the tooltip and doctor have it whole)


@dataclass(frozen=True)
class Item:
    label: str
    action: str | None = None  # what the tray does when it is clicked: "toggle-server", "copy:cursor", ...
    enabled: bool = True
    checked: bool | None = None  # None: not a check item
    children: tuple[Item, ...] = ()
    default: bool = False  # the item a left click runs, on trays that have one

    @property
    def separator(self) -> bool:
        return self.label == SEPARATOR.label


SEPARATOR = Item("-")
CONNECT = "Connect an agent"
SNIPPETS = "Copy connect snippet"
SNIPPETS_PORT_TAKEN = "Copy connect snippet (not while another program has the port)"


def status_line(status: Status) -> str:
    if status.server == "running":
        if status.sharing:
            return f"Shared on LAN: {status.share_urls[0]}" if status.share_urls else "Running, shared on LAN"
        return f"Running on {status.address}"
    if status.server == "starting":
        return "Starting…"
    if status.server == "stopped":
        return "Server stopped"
    return error_lines(status.message)[0]


def error_lines(message: str) -> tuple[str, ...]:
    """An error message as menu lines of at most STATUS_LABEL_MAX characters, cut with "…" past STATUS_LINES_MAX
    lines: a menu that stays as wide as its other items, and what to do (at the message's end) still in it."""
    lines = textwrap.wrap(f"Error: {message}", STATUS_LABEL_MAX, break_on_hyphens=False) or ["Error"]
    if len(lines) > STATUS_LINES_MAX:
        last = lines[STATUS_LINES_MAX - 1]
        lines = [*lines[: STATUS_LINES_MAX - 1], last[: STATUS_LABEL_MAX - 1] + "…"]
    return tuple(lines)


def build_menu(status: Status, *, autostart: bool, clients: Sequence[tuple[str, str]]) -> tuple[Item, ...]:
    """The whole menu for one state. `clients` are (id, title) pairs for the Copy connect snippet submenu."""
    if status.agents:
        agents = Item(
            f"Agents online ({len(status.agents)})",
            children=tuple(Item(f"{a.name} — {a.last_seen}", enabled=False) for a in status.agents),
        )
    else:
        agents = Item("No agents online" if status.running else "Agents: server not running", enabled=False)
    busy = status.server == "starting"
    sync = tuple(Item(f"Sync problem: {problem}"[:STATUS_LABEL_MAX], enabled=False) for problem in status.sync_problems)
    if status.storage_problem:
        sync = (Item(f"Cannot save notes: {status.storage_problem}"[:STATUS_LABEL_MAX], enabled=False), *sync)
    lan_label = "Share on LAN" if status.auth else "Share on LAN (needs auth on: remove auth=false from settings)"
    lines = error_lines(status.message) if status.server == "error" else (status_line(status),)
    snippets = tuple(Item(title, f"copy:{client}") for client, title in clients)
    return (
        *(Item(line, enabled=False) for line in lines),
        *sync,
        agents,
        SEPARATOR,
        Item("Stop server" if status.running else "Start server", "toggle-server", enabled=not busy),
        *((Item("Use another port", "use-free-port"),) if status.port_busy else ()),
        # Stopped: it starts the server first, as a second launch does (the middle click runs it too).
        Item("Open dashboard", "open-dashboard", enabled=not busy, default=True),
        # Another program has the port: a snippet would point an agent at it.
        # The window's connect dialog for that agent: the change to its config is shown there before it is made.
        Item(CONNECT, children=tuple(Item(t, f"connect:{c}") for c, t in clients if c not in SNIPPET_ONLY)),
        Item(SNIPPETS_PORT_TAKEN, enabled=False, children=snippets)
        if status.port_busy
        else Item(SNIPPETS, children=snippets),
        SEPARATOR,
        Item(lan_label, "toggle-lan", enabled=status.auth and not busy, checked=status.sharing),
        Item("Start at login", "toggle-autostart", checked=autostart),
        Item("Open data folder", "open-data-folder"),
        SEPARATOR,
        Item("Quit Hivenote", "quit"),
    )
