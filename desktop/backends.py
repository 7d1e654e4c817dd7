"""Which tray and window toolkits this machine can use, why, and the packages that are missing (with the exact
install line), for the tray app's choice and for `hivenote doctor`.

Linux: the tray is pystray's appindicator backend (a StatusNotifierItem, which GNOME's AppIndicator extension and
KDE show; libayatana falls back to the XEmbed tray on older panels). pystray's pip-only `xorg` backend has no
menu and never gets clicks, so it is never used. The window is pywebview on WebKitGTK.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

APT_PACKAGES = (
    "gir1.2-ayatanaappindicator3-0.1",
    "gir1.2-webkit2-4.1",
    "gir1.2-gtk-3.0",
    "xclip",
    # what pip needs to build PyGObject and pycairo (sdists only)
    "libgirepository1.0-dev",
    "libcairo2-dev",
    "pkg-config",
    "gcc",
    "python3-dev",
)
DNF_PACKAGES = (
    "libayatana-appindicator-gtk3",
    "webkit2gtk4.1",
    "gtk3",
    "xclip",
    "gobject-introspection-devel",
    "cairo-gobject-devel",
    "pkgconf-pkg-config",
    "gcc",
    "python3-devel",
)
INSTALL_HINT = (
    f"Debian/Ubuntu: sudo apt install {' '.join(APT_PACKAGES)}\n"
    f"Fedora: sudo dnf install {' '.join(DNF_PACKAGES)}\n"
    "then reinstall Hivenote so pip builds PyGObject against them."
)


@dataclass(frozen=True)
class Choice:
    name: str | None  # None: nothing usable
    reason: str


def graphical_session(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> bool:
    if platform in ("darwin", "win32"):
        return True
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def _gi_versions(*namespaces: tuple[str, str]) -> str | None:
    """The first (namespace, version) whose typelib loads, or None. Raises ImportError without PyGObject."""
    import gi

    for namespace, version in namespaces:
        try:
            gi.require_version(namespace, version)
        except ValueError:
            continue
        return namespace
    return None


def tray_backend(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> Choice:
    """The pystray backend to use here, checked without importing pystray (which may fail in odd ways)."""
    if platform == "darwin":
        return Choice("darwin", "macOS menu bar")
    if platform == "win32":
        return Choice("win32", "Windows notification area")
    if not graphical_session(environ, platform):
        return Choice(None, "no graphical session (neither DISPLAY nor WAYLAND_DISPLAY is set)")
    try:
        gtk = _gi_versions(("Gtk", "3.0"))
        indicator = _gi_versions(("AyatanaAppIndicator3", "0.1"), ("AppIndicator3", "0.1"))
    except ImportError:
        return Choice(None, "PyGObject is not installed (pip could not build it: the packages below are missing)")
    if gtk is None:
        return Choice(None, "GTK 3's GObject bindings are missing (gir1.2-gtk-3.0)")
    if indicator is None:
        return Choice("gtk", "no AppIndicator library: the icon shows only on XEmbed trays, not GNOME or KDE")
    return Choice("appindicator", f"{indicator} (StatusNotifierItem, shown by GNOME's extension and KDE)")


def window_backend(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> Choice:
    if platform == "darwin":
        return Choice("cocoa", "WebKit (WKWebView)")
    if platform == "win32":
        return Choice("edgechromium", "Microsoft Edge WebView2")
    if not graphical_session(environ, platform):
        return Choice(None, "no graphical session: the dashboard opens in a browser")
    try:
        webkit = _gi_versions(("WebKit2", "4.1"), ("WebKit2", "4.0"))
    except ImportError:
        webkit = None
    if webkit is not None:
        return Choice("gtk", "WebKitGTK")
    with contextlib.suppress(ImportError):
        import qtpy  # noqa: F401 - pywebview[qt] installed instead

        return Choice("qt", "Qt WebEngine (pywebview[qt])")
    return Choice(None, "WebKitGTK is missing (gir1.2-webkit2-4.1): the dashboard opens in the browser")


SNI_HOST = "StatusNotifier host"  # what tray_host() says for a panel that hosts StatusNotifierItems


def tray_host(environ: Mapping[str, str] = os.environ) -> str | None:
    """What will show the icon on this Linux session: a StatusNotifier host (D-Bus) or an XEmbed tray (X11)."""
    with contextlib.suppress(Exception):  # no bus, no gi: treated as "no host found"
        from gi.repository import Gio, GLib

        address = environ.get("DBUS_SESSION_BUS_ADDRESS")
        if address:
            flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
            bus = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
            reply = bus.call_sync(
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "NameHasOwner",
                GLib.Variant("(s)", ("org.kde.StatusNotifierWatcher",)),
                GLib.VariantType("(b)"),
                Gio.DBusCallFlags.NONE,
                2000,
                None,
            )
            bus.close_sync(None)
            if reply.unpack()[0]:
                return SNI_HOST
    name = environ.get("DISPLAY", "")
    local = re.fullmatch(r":(\d+)(\.\d+)?", name)
    if not name or (local and not Path(f"/tmp/.X11-unix/X{local.group(1)}").exists()):
        return None  # python-xlib would fall back to TCP and leak its sockets
    with contextlib.suppress(Exception):
        from Xlib import display as xdisplay

        x = xdisplay.Display(name)
        try:
            atom = x.intern_atom(f"_NET_SYSTEM_TRAY_S{x.get_default_screen()}")
            if x.get_selection_owner(atom) != 0:
                return "XEmbed tray"
        finally:
            x.close()
    return None
