"""The pystray side: turns `menu.Item`s into pystray's menu, and redraws the icon, title and menu only when
what they show has changed (rebuilding a menu closes it if it is open, and dbusmenu ids change)."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from . import icons
from .menu import Item
from .supervisor import Status

log = logging.getLogger(__name__)

# Win32 keeps a tooltip in 128 UTF-16 units and a balloon in 256/64, NUL included; pystray raises past them.
TITLE_MAX = 127 if sys.platform == "win32" else 1024
MESSAGE_MAX, HEADING_MAX = (255, 63) if sys.platform == "win32" else (1024, 256)


def plain(text: str, limit: int) -> str:
    """Text for a tooltip or a notification, which some desktops read as markup (a freedesktop notification body,
    KDE's rich-text tooltips). Agent names and sync errors there come from MCP clients and peers: no `<` or `>`
    reaches the desktop (look-alike angle quotes instead), no control characters, at most `limit` UTF-16 units."""
    text = "".join(" " if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in text)
    text = text.replace("<", "\u2039").replace(">", "\u203a")
    if len(text.encode("utf-16-le")) <= 2 * limit:
        return text
    while len(text.encode("utf-16-le")) > 2 * (limit - 1):
        text = text[:-1]
    return text + "\u2026"


def _on_gui_thread(func: Callable[[], None]) -> None:
    """GTK and Win32 backends marshal icon/title/menu changes themselves; macOS's call AppKit on the calling
    thread, which must be the main one (AppKit aborts otherwise), so they are queued to it. (Not run in CI.)"""
    if sys.platform == "darwin":
        from PyObjCTools import AppHelper

        AppHelper.callAfter(func)
    else:
        func()


class Tray:
    """One pystray icon. `show(status, items)` may be called from any thread (pystray marshals on GTK/Win32)."""

    def __init__(self, pystray: Any, on_action: Callable[[str], None], status: Status, items: tuple[Item, ...]):
        self._pystray = pystray
        self._on_action = on_action
        self._lock = threading.Lock()
        self._items = items
        self._drawn = (status.server, len(status.agents), status.warning)
        self._title = status.title
        self.icon = pystray.Icon(
            "hivenote",
            icon=icons.tray_icon(status.server, len(status.agents), warning=status.warning),
            title=plain(self._title, TITLE_MAX),
            menu=pystray.Menu(self._menu_items),
        )

    def _menu_items(self) -> Iterator[Any]:
        with self._lock:
            items = self._items
        return (self._convert(item) for item in items)

    def _convert(self, item: Item) -> Any:
        pystray = self._pystray
        if item.separator:
            return pystray.Menu.SEPARATOR
        if item.children:
            return pystray.MenuItem(item.label, pystray.Menu(*(self._convert(c) for c in item.children)))
        action = item.action

        def run(_icon: Any, _item: Any) -> None:
            if action is not None:
                self._on_action(action)

        checked = item.checked
        return pystray.MenuItem(
            item.label,
            run,
            checked=None if checked is None else (lambda _: checked),
            enabled=item.enabled and action is not None,
            default=item.default,
        )

    def show(self, status: Status, items: tuple[Item, ...]) -> None:
        with self._lock:
            menu_changed = items != self._items
            self._items = items
            drawn = (status.server, len(status.agents), status.warning)
            icon_changed, self._drawn = drawn != self._drawn, drawn
            title_changed, self._title = status.title != self._title, status.title
        image = icons.tray_icon(*drawn[:2], warning=drawn[2]) if icon_changed else None

        def apply() -> None:
            if image is not None:
                self.icon.icon = image
            if title_changed:
                self.icon.title = plain(status.title, TITLE_MAX)
            if menu_changed:
                self.icon.update_menu()

        _on_gui_thread(apply)

    def notify(self, message: str, title: str = "Hivenote") -> None:
        """A desktop notification where the backend and the desktop have one; never fails the caller."""
        if not getattr(self.icon, "HAS_NOTIFICATION", False):
            return
        try:
            self.icon.notify(plain(message, MESSAGE_MAX), plain(title, HEADING_MAX))
        except Exception as exc:  # no notification daemon on this desktop
            log.info("no notification shown (%s): %s", exc, message)

    def run(self, setup: Callable[[], None]) -> None:
        def started(icon: Any) -> None:
            icon.visible = True
            setup()

        try:
            self.icon.run(setup=started)
        except Exception as exc:  # GTK backends raise at exit when no notification daemon runs
            log.info("tray loop ended with %s", exc)

    def stop(self) -> None:
        self.icon.stop()
