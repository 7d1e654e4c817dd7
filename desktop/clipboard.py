"""Putting text on the system clipboard from the tray or the window process.

Where the tray runs GTK's loop (Linux), GTK's clipboard is used from that loop's thread: the long-lived tray
process then serves the selection itself, so a copy outlives the dashboard window and nothing else needs
installing. Elsewhere pyperclip (pbcopy on macOS, the Win32 API on Windows, xclip/xsel/wl-copy on Linux).
"""

from __future__ import annotations

import sys
import threading

from hivenote.server.core.errors import HivenoteError

GTK_WAIT_S = 5.0
_gtk_loop = threading.Event()  # set while a GTK/GLib main loop runs in this process


class ClipboardUnavailable(HivenoteError):
    code = "clipboard"


def use_gtk(running: bool) -> None:
    """Called by the tray when its GTK loop starts (True) and ends (False)."""
    if running:
        _gtk_loop.set()
    else:
        _gtk_loop.clear()


def copy(text: str) -> None:
    """Put `text` on the clipboard, or raise ClipboardUnavailable saying what to install. Any thread."""
    if _gtk_loop.is_set() and "gi.repository.Gtk" in sys.modules:
        _copy_gtk(text)
        return
    import pyperclip

    try:
        pyperclip.copy(text)
    except pyperclip.PyperclipException:
        raise ClipboardUnavailable(
            "no clipboard program found: install xclip or wl-clipboard (Debian/Ubuntu: sudo apt install xclip; "
            "Fedora: sudo dnf install xclip)"
        ) from None


def _copy_gtk(text: str) -> None:
    from gi.repository import Gdk, GLib, Gtk

    done = threading.Event()

    def put() -> bool:
        clipboard = Gtk.Clipboard.get(Gdk.SELECTION_CLIPBOARD)
        clipboard.set_text(text, -1)
        clipboard.store()  # hand it to a clipboard manager, if one runs, so it outlives this process
        done.set()
        return False  # run once

    if GLib.MainContext.default().is_owner():  # on GTK's own thread (tray menu callbacks)
        put()
        return
    GLib.idle_add(put)
    if not done.wait(GTK_WAIT_S):
        raise ClipboardUnavailable("the desktop did not take the text within 5 s; try again")
