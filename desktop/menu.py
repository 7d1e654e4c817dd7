"""The tray menu as data: `build_menu(status, ...)` returns plain `Item`s (label, action, enabled, checked,
children) for one state, so every state's menu is testable without a tray; `tray.py` turns them into pystray's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .supervisor import Status

STATUS_LABEL_MAX = 70  # longer error messages are cut in the menu; the tooltip and doctor have them whole


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


def status_line(status: Status) -> str:
    if status.server == "running":
        if status.sharing:
            return f"Shared on LAN: {status.share_urls[0]}" if status.share_urls else "Running, shared on LAN"
        return f"Running on {status.address}"
    if status.server == "starting":
        return "Starting…"
    if status.server == "stopped":
        return "Server stopped"
    message = f"Error: {status.message}"
    return message if len(message) <= STATUS_LABEL_MAX else message[: STATUS_LABEL_MAX - 1] + "…"


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
    return (
        Item(status_line(status), enabled=False),
        *sync,
        agents,
        SEPARATOR,
        Item("Stop server" if status.running else "Start server", "toggle-server", enabled=not busy),
        *((Item("Use another port", "use-free-port"),) if status.port_busy else ()),
        Item("Open dashboard", "open-dashboard", enabled=status.running or bool(status.elsewhere), default=True),
        Item(
            "Copy connect snippet",
            children=tuple(Item(title, f"copy:{client}") for client, title in clients),
        ),
        SEPARATOR,
        Item(lan_label, "toggle-lan", enabled=status.auth and not busy, checked=status.sharing),
        Item("Start at login", "toggle-autostart", checked=autostart),
        Item("Open data folder", "open-data-folder"),
        SEPARATOR,
        Item("Quit Hivenote", "quit"),
    )
