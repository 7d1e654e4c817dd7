"""What a person is told when the desktop app cannot do its job: the words (what happened, what to do next) and
where they go. Started from a terminal, stderr is enough; started from the applications menu or at login, nobody
reads stderr, so a dialog shows it (a desktop notification where GTK cannot open one).

The dialog is one small seam per OS: GTK on Linux (run here under Xvfb by tests/desktop/test_unwritable.py),
`osascript` on macOS and MessageBoxW on Windows (their commands are tested with fakes of the OS call only).
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from hivenote.server.core.errors import StoreError

log = logging.getLogger(__name__)

EXIT_STORE = StoreError.exit_code  # the command line's "storage error" (README "Exit codes")
CANNOT_WRITE = (errno.EACCES, errno.EPERM, errno.EROFS)


def cannot_write(exc: BaseException) -> bool:
    """An OSError that means "this account may not write here" (not a full disk or a missing folder)."""
    return isinstance(exc, OSError) and exc.errno in CANNOT_WRITE


def write_refusal(exc: BaseException) -> OSError | None:
    """The OSError behind `exc` when it means "this account may not write here": `exc` itself, the write a state
    file's error carries (`error`), or the cause a store error was raised from; else None."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        if cannot_write(current):
            return current if isinstance(current, OSError) else None
        inner = getattr(current, "error", None)
        current = inner if isinstance(inner, BaseException) else current.__cause__
    return None


def unwritable(
    data_dir: Path,
    exc: OSError,
    *,
    user: str | None = None,
    platform: str = sys.platform,
    serving: bool = False,
) -> str:
    """The message for a data dir (or a file in it) this account cannot write: which folder, why, and the fix.
    `serving`: the tray serves the notebook read-only meanwhile (else: it did not start, and the CLI still reads)."""
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(data_dir) else ""
    if serving:
        meanwhile = ", so Hivenote serves it read-only: reading and search work, new notes are refused"
        after = " Hivenote saves notes again by itself once it can."
    else:
        meanwhile, after = "", " Reading still works: hivenote list, hivenote search."
    if exc.errno == errno.EROFS:
        return (
            f"Hivenote cannot write to its data folder {data_dir}: it is on a read-only file system{where}{meanwhile}. "
            "Remount it read-write, or start Hivenote with a folder on another disk (--data-dir, or "
            f"HIVENOTE_DATA_DIR).{after}"
        )
    return (
        f"Hivenote cannot write to its data folder {data_dir}: permission denied{where}{meanwhile}. "
        f"{_cause_and_fix(data_dir, exc, user, platform)} "
        f"(or start Hivenote with another folder: --data-dir, or HIVENOTE_DATA_DIR).{after}"
    )


def unreadable(
    data_dir: Path,
    exc: OSError,
    *,
    user: str | None = None,
    platform: str = sys.platform,
    missing: bool | None = None,
) -> str:
    """The message for a data dir this account may not even read (what `sudo hivenote` leaves: a folder another
    account owns, for that account only) or cannot create (`missing`; looked up when None): nothing can be shown,
    so no "reading still works"."""
    if not data_dir.exists() if missing is None else missing:  # the folder above it is another account's
        above = Path(exc.filename).parent if exc.filename else data_dir.parent
        return (
            f"Hivenote cannot create its data folder {data_dir}: permission denied in {above}. "
            f"{_cause_and_fix(above, exc, user, platform, whole=False)} (or start Hivenote with another folder: "
            "--data-dir, or HIVENOTE_DATA_DIR)."
        )
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(data_dir) else ""
    return (
        f"Hivenote cannot open its data folder {data_dir}: permission denied{where}, so it can neither show nor save "
        f"notes. {_cause_and_fix(data_dir, exc, user, platform, read=True)} (or start Hivenote with another folder: "
        "--data-dir, or HIVENOTE_DATA_DIR)."
    )


def refused(data_dir: Path, exc: OSError) -> str:
    """The message for a refused `exc` in or at the data dir: nothing can be shown when the folder or the file it
    names may not be read (or the folder cannot be made); else the folder may only not be written."""
    target = Path(exc.filename) if exc.filename else data_dir
    if not _readable(data_dir) or (target.exists() and not _readable(target)):
        return unreadable(data_dir, exc)
    return unwritable(data_dir, exc)


def _readable(path: Path) -> bool:
    return os.access(path, os.R_OK | os.X_OK if path.is_dir() else os.R_OK)


def _cause_and_fix(
    folder: Path, exc: OSError, user: str | None, platform: str, *, whole: bool = True, read: bool = False
) -> str:
    """Why this account may not use `folder` and the command that fixes it. A folder (and refused file) of this
    account's own was made read-only (or private to nobody): its permission back is the fix (chmod, as
    server/storage/ownshard.py says for the shard); another account's (an earlier `sudo hivenote`) must be given back
    (chown)."""
    recursive = "-R " if whole else ""
    if platform == "win32":
        return (
            "It was probably created by running Hivenote as another user. To fix it, give your account Full control "
            f"of {folder} (Properties > Security)"
        )
    paths = [folder, *([Path(exc.filename)] if exc.filename else [])]
    if all(_mine(path) for path in paths):
        mode = "u+rwX" if read else "u+w"
        return (
            "The folder is your account's own, but its permission was taken away. To fix it, give your account "
            f"the permission back: chmod {recursive}{mode} {shlex.quote(str(folder))}"
        )
    owner = user or _user()
    return (
        "It was probably created by running Hivenote as another user (sudo hivenote). To fix it, give it back to "
        f"your account: sudo chown {recursive}{shlex.quote(owner)}: {shlex.quote(str(folder))}"
    )


def _mine(path: Path) -> bool:
    """Whether `path` (or, when it does not exist yet, nothing else) belongs to this account."""
    try:
        return path.stat().st_uid == os.geteuid()
    except OSError:
        return False


def _user() -> str:
    with contextlib.suppress(Exception):
        return getpass.getuser()
    return "$USER"


def no_terminal(stream: TextIO) -> bool:
    """Started from a menu, at login or by a file manager: nobody will read this stream."""
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return True


def tell(title: str, text: str, err: TextIO, *, dialog: Callable[[str, str], bool] | None = None) -> None:
    """Write `text` to `err`; also show it in a dialog when nobody reads `err` (no terminal) on a desktop."""
    err.write(f"hivenote: {text}\n")
    err.flush()
    from .backends import graphical_session

    if no_terminal(err) and graphical_session():
        (dialog or show_dialog)(title, text)


def show_dialog(
    title: str,
    text: str,
    *,
    platform: str = sys.platform,
    run: Callable[[list[str]], bool] | None = None,
    message_box: Callable[..., int] | None = None,
) -> bool:
    """A modal error dialog, waiting until it is closed; True if one was shown. `run` (a command) and
    `message_box` (user32.MessageBoxW) are the OS calls, replaceable by tests on any OS."""
    try:
        if platform == "darwin":
            return (run or _run)(mac_dialog_command(title, text))
        if platform == "win32":
            return _windows_dialog(title, text, message_box)
        return _gtk_dialog(title, text) or _notification(title, text)
    except Exception as exc:  # never let the messenger fail louder than the message
        log.info("no dialog shown (%s)", exc)
        return False


def mac_dialog_command(title: str, text: str) -> list[str]:
    """osascript's `display alert`, with the texts passed as arguments (never spliced into the script)."""
    script = (
        "on run argv\n"
        'display alert (item 1 of argv) message (item 2 of argv) as critical buttons {"OK"} default button "OK"\n'
        "end run"
    )
    return ["osascript", "-e", script, title, text]


def _run(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, check=False, capture_output=True).returncode == 0
    except OSError:
        return False


MB_OK_ICONERROR = 0x10


def _windows_dialog(title: str, text: str, message_box: Callable[..., int] | None = None) -> bool:
    if message_box is None:
        import ctypes

        message_box = ctypes.windll.user32.MessageBoxW  # type: ignore[attr-defined]
    return bool(message_box(None, text, title, MB_OK_ICONERROR))


def _gtk_dialog(title: str, text: str) -> bool:
    try:
        import gi

        gi.require_version("Gtk", "3.0")
        from gi.repository import Gtk
    except (ImportError, ValueError):
        return False
    if not Gtk.init_check()[0]:  # no display after all
        return False
    dialog = Gtk.MessageDialog(message_type=Gtk.MessageType.ERROR, buttons=Gtk.ButtonsType.CLOSE, text=title)
    dialog.set_title(title)
    dialog.format_secondary_text(text)
    for label in dialog.get_message_area().get_children():
        label.set_selectable(True)  # the fix is a command to copy
    dialog.set_keep_above(True)
    dialog.run()
    dialog.destroy()
    while Gtk.events_pending():
        Gtk.main_iteration()
    return True


def _notification(title: str, text: str) -> bool:
    """A freedesktop notification (when GTK is missing but a notification daemon runs)."""
    from gi.repository import Gio

    address = os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    if not address:
        return False
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    bus = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
    try:
        notify(bus, title, text, icon="dialog-error", expire_ms=0)
    finally:
        bus.close_sync(None)
    return True


def notify(bus: Any, title: str, body: str, *, icon: str, expire_ms: int) -> None:
    """One desktop notification through org.freedesktop.Notifications on `bus` (a Gio.DBusConnection), named as
    Hivenote's; `expire_ms` 0 keeps it until dismissed, -1 lets the server decide."""
    from gi.repository import Gio, GLib

    args = GLib.Variant("(susssasa{sv}i)", ("Hivenote", 0, icon, title, body, [], {}, expire_ms))
    bus.call_sync(
        "org.freedesktop.Notifications",
        "/org/freedesktop/Notifications",
        "org.freedesktop.Notifications",
        "Notify",
        args,
        GLib.VariantType("(u)"),
        Gio.DBusCallFlags.NONE,
        5000,
        None,
    )
