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
from .problems import notify
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


def tooltip(status: Status) -> tuple[str, str]:
    """The tooltip's title and text: "Hivenote", and the state the title gives after it."""
    return "Hivenote", plain(status.title.removeprefix("Hivenote — "), TITLE_MAX)


DEFAULT_LABEL = "Open dashboard"  # what a middle click on the icon runs


def _on_glib(func: Callable[[], None]) -> None:
    """Run on GTK's loop (AppIndicator calls must), after what is already queued there."""
    from gi.repository import GLib

    def once() -> bool:
        try:
            func()
        except Exception:  # a tray refinement must never take the tray down
            log.exception("updating the tray item failed")
        return False

    GLib.idle_add(once)


def _freedesktop_notify(title: str, body: str) -> None:
    from gi.repository import Gio

    notify(Gio.bus_get_sync(Gio.BusType.SESSION, None), title, body, icon="hivenote", expire_ms=-1)


def _on_gui_thread(func: Callable[[], None], platform: str = sys.platform) -> None:
    """GTK and Win32 backends marshal icon/title/menu changes themselves; macOS's call AppKit on the calling
    thread, which must be the main one (AppKit aborts otherwise), so they are queued to it. (Not run in CI.)"""
    if platform == "darwin":
        from PyObjCTools import AppHelper  # type: ignore[import-not-found, unused-ignore]

        AppHelper.callAfter(func)
    else:
        func()


PYSTRAY_INTERNALS = ("_update_menu", "_create_menu")  # of its appindicator Icon, beside `_appindicator` itself


def pystray_missing(icon_class: type) -> list[str]:
    """What the tray reads of pystray's appindicator backend (the module of `icon_class`) beyond its interface that
    this pystray lacks."""
    gone = [f"Icon.{name}" for name in PYSTRAY_INTERNALS if not hasattr(icon_class, name)]
    if not hasattr(_indicator_class(icon_class), "IndicatorStatus"):
        gone.append(f"{icon_class.__module__}.AppIndicator.IndicatorStatus")
    return gone


def _indicator_class(icon_class: type) -> Any:
    """libayatana's (or the original) AppIndicator class, as pystray's backend module loaded it."""
    return getattr(sys.modules.get(icon_class.__module__), "AppIndicator", None)


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
        # libayatana's AppIndicator (pystray's appindicator backend) can do more than pystray asks of it, through
        # pystray's internals (0.19.5, pinned): all of them here, checked now.
        self._indicator: Any = getattr(self.icon, "_appindicator", None)
        if self._indicator is not None and (gone := pystray_missing(type(self.icon))):
            log.warning(
                "this pystray lacks %s: the tray's menu, description and attention state are pystray's own "
                "(install pystray 0.19.5 for them)",
                ", ".join(gone),
            )
            self._indicator = None
        self._status = status
        self._tooltip: Any = None  # the ToolTip property libayatana does not export (desktop/tooltip.py)
        if self._indicator is not None:
            from gi.repository import Gio

            from .tooltip import ToolTip

            self._tooltip = ToolTip(Gio.bus_get_sync(Gio.BusType.SESSION, None), *tooltip(status))
        if self._indicator is not None:  # pystray rebuilds the menu after every click: in place too
            self._pystray_update_menu = self.icon._update_menu
            self.icon._update_menu = self._update_menu

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
            if menu_changed and self._indicator is None:
                self.icon.update_menu()

        _on_gui_thread(apply)
        if self._indicator is not None:
            self._status = status
            _on_glib(lambda: self._indicator_update(status, menu_changed))

    def _indicator_update(self, status: Status, menu_changed: bool) -> None:
        """On GTK's loop, after pystray's own updates (queued before this): the menu changed in place, the spoken
        description, NeedsAttention in error, and the middle click."""
        indicator, icon = self._indicator, self.icon
        status_kind = _indicator_class(type(icon)).IndicatorStatus
        if menu_changed:
            self._replace_menu_items()
        path = getattr(icon, "_icon_path", None)
        if path:  # pystray sets the icon without a description: screen readers would say nothing
            indicator.set_icon_full(path, plain(status.title, TITLE_MAX))
        if self._tooltip is not None:
            self._tooltip.show(*tooltip(status))
        if status.server == "error" or status.storage_problem:  # notes cannot be saved: as loud as an error
            attention = str(icons.assets_dir() / "hivenote-error.png")
            indicator.set_attention_icon_full(attention, plain(status.title, TITLE_MAX))
            indicator.set_status(status_kind.ATTENTION)
        else:
            indicator.set_status(status_kind.ACTIVE)

    def _update_menu(self) -> None:
        if getattr(self.icon, "_menu_handle", None) is None:
            self._pystray_update_menu()  # the first menu: libayatana registers the item once it has one
        else:
            _on_glib(self._replace_menu_items)

    def _replace_menu_items(self) -> None:
        """The new menu's items moved into the menu the indicator already exports: libayatana re-registers the item
        with the panel for every new menu (set_menu), which panels show as the icon blinking away and back."""
        icon = self.icon
        menu = getattr(icon, "_menu_handle", None)
        fresh = icon._create_menu(icon.menu) if menu is not None else None
        if menu is None or fresh is None:
            self._pystray_update_menu()
            return
        for child in menu.get_children():
            menu.remove(child)
        for child in fresh.get_children():
            fresh.remove(child)
            menu.append(child)
        menu.show_all()
        for child in menu.get_children():  # the middle click opens the dashboard, as the menu's default item
            label = child.get_child()
            if label is not None and hasattr(label, "get_text") and label.get_text() == DEFAULT_LABEL:
                self._indicator.set_secondary_activate_target(child)

    def first_show(self) -> None:
        """Once the loop runs: the description, the status and the middle click for the first state."""
        if self._indicator is not None:
            status = self._status
            _on_glib(lambda: self._indicator_update(status, True))

    def notify(self, message: str, title: str = "Hivenote") -> None:
        """A desktop notification where the backend and the desktop have one; never fails the caller. On Linux
        (pystray's GTK backends) it is sent here rather than by pystray, whose notifications carry no application
        name."""
        if not getattr(self.icon, "HAS_NOTIFICATION", False):
            return
        try:
            if sys.platform == "linux" and hasattr(self.icon, "_notifier"):  # pystray's GTK backends
                _freedesktop_notify(plain(title, HEADING_MAX), plain(message, MESSAGE_MAX))
            else:
                self.icon.notify(plain(message, MESSAGE_MAX), plain(title, HEADING_MAX))
        except Exception as exc:  # no notification daemon on this desktop
            log.info("no notification shown (%s): %s", exc, message)

    def run(self, setup: Callable[[], None]) -> None:
        def started(icon: Any) -> None:
            icon.visible = True
            self.first_show()
            setup()

        try:
            self.icon.run(setup=started)
        except Exception as exc:  # GTK backends raise at exit when no notification daemon runs
            log.info("tray loop ended with %s", exc)

    def stop(self) -> None:
        self.icon.stop()
