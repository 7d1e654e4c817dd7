"""A private desktop for end-to-end tray tests: Xvfb, a session D-Bus, a stand-in StatusNotifierWatcher (or trayer as
an XEmbed host) and an isolated HOME; plus a D-Bus client that reads a tray item and clicks its menu by label."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import gi
from PIL import Image, ImageGrab

from tests.support.models import share_models
from tests.support.system import needs
from tests.support.wait import eventually

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

WATCHER_NAME = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
ITEM_INTERFACE = "org.kde.StatusNotifierItem"
MENU_INTERFACE = "com.canonical.dbusmenu"
PROPERTIES = "org.freedesktop.DBus.Properties"
# The stock session.conf minus <standard_session_servicedirs/>: nothing is D-Bus-activated (WebKit would start an
# AT-SPI bus, a notification daemon would answer only where one is installed), so the bus holds only what tests start.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
# The host's own session, which children must never reach.
_HOST_SESSION = {
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "AT_SPI_BUS_ADDRESS",
    "XAUTHORITY",
    "SESSION_MANAGER",
}
# Every child inherits this variable, so close() can find processes that left their process group.
MARKER = "HIVENOTE_TEST_DESKTOP"
_HERE = Path(__file__).resolve().parent


class DesktopFailed(RuntimeError):
    """A desktop component did not start; the message includes its captured output."""


@dataclass(frozen=True)
class MenuEntry:
    """One dbusmenu item, as a panel would render it."""

    label: str  # with mnemonic underscores removed
    enabled: bool
    visible: bool
    checked: bool | None  # None when not a toggle
    children: tuple[MenuEntry, ...]
    separator: bool
    id: int = field(default=0, compare=False, repr=False)  # dbusmenu ids change whenever the app rebuilds its menu

    def find(self, label: str) -> MenuEntry | None:
        """The child with this label (mnemonics removed), or None."""
        return next((child for child in self.children if child.label == label), None)


def strip_mnemonic(label: str) -> str:
    """GTK mnemonic syntax: "_x" marks x as the access key and "__" is a literal underscore."""
    return re.sub(r"_(.)", r"\1", label)


def _dbus_call(
    connection: Gio.DBusConnection,
    service: str,
    path: str,
    interface: str,
    method: str,
    args: GLib.Variant | None,
    reply: str | None = None,
) -> Any:
    """A blocking method call (no main loop needed); the reply unpacked to Python values."""
    reply_type = None if reply is None else GLib.VariantType.new(reply)
    result = connection.call_sync(
        service, path, interface, method, args, reply_type, Gio.DBusCallFlags.NONE, 5000, None
    )
    return None if result is None else result.unpack()


def _unknown_id(error: GLib.Error) -> bool:
    """libdbusmenu's DBUSMENU_ERROR_INVALID_MENUITEM_ID (code 0): the id is from a menu that has been replaced."""
    remote = Gio.DBusError.get_remote_error(error) or ""
    return remote.endswith("LIBDBUSMENU_2dGLIB.Code0")


def _get_property(connection: Gio.DBusConnection, service: str, path: str, interface: str, name: str) -> Any:
    args = GLib.Variant("(ss)", (interface, name))
    return _dbus_call(connection, service, path, PROPERTIES, "Get", args, "(v)")[0]


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return text[-4000:]


class TrayItem:
    """One StatusNotifierItem on the private bus, read and driven the way a panel does it."""

    def __init__(self, connection: Gio.DBusConnection, service: str, path: str) -> None:
        self.connection = connection
        self.service = service
        self.path = path

    def _call(self, path: str, interface: str, method: str, args: GLib.Variant | None, reply: str | None = None) -> Any:
        return _dbus_call(self.connection, self.service, path, interface, method, args, reply)

    def prop(self, name: str) -> Any:
        """An org.kde.StatusNotifierItem property (Title, IconName, Status, Id, Menu...); GLib.Error if unknown."""
        return _get_property(self.connection, self.service, self.path, ITEM_INTERFACE, name)

    def icon(self, timeout: float = 5) -> Image.Image:
        """The PNG at IconName (under IconThemePath if relative). pystray writes a new temp file per update and
        deletes the old one, so a failed read re-reads IconName, for up to timeout seconds."""
        error: Exception | None = None
        image: Image.Image | None = None

        def load() -> bool:
            nonlocal error, image
            name = str(self.prop("IconName"))
            path = Path(name)
            if not path.is_absolute():
                path = Path(str(self.prop("IconThemePath"))) / f"{name}.png"
            try:
                with Image.open(path) as opened:
                    opened.load()
                    image = opened.copy()
            except OSError as exc:  # gone, half-written or replaced: read IconName again
                error = exc
                return False
            return True

        if not eventually(load, timeout) or image is None:
            raise AssertionError(f"could not load the tray icon: {error}")
        return image

    def _menu_path(self) -> str:
        return str(self.prop("Menu"))

    def _layout(self) -> MenuEntry:
        _revision, layout = self._call(
            self._menu_path(),
            MENU_INTERFACE,
            "GetLayout",
            GLib.Variant("(iias)", (0, -1, [])),
            "(u(ia{sv}av))",
        )
        return _entry(layout)

    def menu(self) -> list[MenuEntry]:
        """The whole menu tree (dbusmenu GetLayout from the root, all depths)."""
        return list(self._layout().children)

    def about_to_show(self, entry_id: int) -> bool:
        """Tell the app a menu is about to open; True if it says the layout needs fetching again."""
        (need_update,) = self._call(
            self._menu_path(), MENU_INTERFACE, "AboutToShow", GLib.Variant("(i)", (entry_id,)), "(b)"
        )
        return bool(need_update)

    def click(self, *labels: str, timeout: float = 5) -> None:
        """Click the item at this path of labels from the top, e.g. click("Copy connect snippet", "Cursor"), as a panel
        does: AboutToShow on each menu on the way, then Event(id, "clicked"). LookupError if an item is missing,
        disabled or hidden. pystray rebuilds the menu (new ids) after every callback, so a lookup that the rebuild
        overtakes is retried for up to timeout seconds; libdbusmenu never reuses an id, so no click lands twice."""
        if not labels:
            raise ValueError("click() needs the path of labels to the item, e.g. click('Quit')")
        stale: GLib.Error | None = None

        def attempt() -> bool:
            nonlocal stale
            try:
                self._click(labels)
            except GLib.Error as exc:
                if not _unknown_id(exc):
                    raise
                stale = exc
                return False
            return True

        if not eventually(attempt, timeout):
            raise AssertionError(f"the menu kept changing under click{labels!r}: {stale}")

    def _click(self, labels: Sequence[str]) -> None:
        self.about_to_show(0)
        node = self._layout()
        for depth, label in enumerate(labels):
            child = node.find(label)
            where = " > ".join(labels[:depth]) or "the top level"
            if child is None:
                available = ", ".join(repr(c.label) for c in node.children if not c.separator)
                raise LookupError(f"no menu item {label!r} in {where}; available: {available}")
            if not (child.enabled and child.visible):
                raise LookupError(f"menu item {label!r} in {where} is {'disabled' if child.visible else 'hidden'}")
            if depth < len(labels) - 1 and self.about_to_show(child.id):
                child = self._find(labels[: depth + 1]) or child
            node = child
        event = (node.id, "clicked", GLib.Variant("i", 0), int(time.time()) & 0xFFFFFFFF)
        self._call(self._menu_path(), MENU_INTERFACE, "Event", GLib.Variant("(isvu)", event))

    def _find(self, labels: Sequence[str]) -> MenuEntry | None:
        node: MenuEntry | None = self._layout()
        for label in labels:
            node = None if node is None else node.find(label)
        return node

    def wait_for(self, predicate: Callable[[TrayItem], bool], timeout: float = 20, what: str = "") -> None:
        """Poll predicate(self) until it is true. A D-Bus error or LookupError (an item not there yet) counts as
        false; on timeout, AssertionError naming `what` with the last error, the Title and the menu."""
        last_error: Exception | None = None

        def check() -> bool:
            nonlocal last_error
            try:
                return predicate(self)
            except (GLib.Error, LookupError) as exc:
                last_error = exc
                return False

        if eventually(check, timeout):
            return
        error = "" if last_error is None else f" (last error: {last_error})"
        raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate!r}{error}; {self.describe()}")

    def describe(self) -> str:
        """The item's current title and menu, for failure messages."""
        try:
            return f"Title={self.prop('Title')!r}\nmenu:\n{format_menu(self.menu())}"
        except GLib.Error as exc:
            return f"the item did not answer: {exc.message}"


def _entry(layout: tuple[int, dict[str, Any], list[Any]]) -> MenuEntry:
    entry_id, props, children = layout
    toggle = props.get("toggle-type", "")
    return MenuEntry(
        label=strip_mnemonic(str(props.get("label", ""))),
        enabled=bool(props.get("enabled", True)),
        visible=bool(props.get("visible", True)),
        checked=None if not toggle else props.get("toggle-state", 0) == 1,
        children=tuple(_entry(child) for child in children),
        separator=props.get("type") == "separator",
        id=entry_id,
    )


def format_menu(entries: Sequence[MenuEntry], indent: str = "  ") -> str:
    lines = []
    for entry in entries:
        if entry.separator:
            lines.append(f"{indent}----")
            continue
        flags = "" if entry.enabled else " (disabled)"
        flags += "" if entry.visible else " (hidden)"
        flags += "" if entry.checked is None else f" [{'x' if entry.checked else ' '}]"
        lines.append(f"{indent}{entry.label}{flags}")
        if entry.children:
            lines.append(format_menu(entry.children, indent + "  "))
    return "\n".join(lines)


class Desktop:
    """A private X display (Xvfb -displayfd), a private dbus-daemon session bus, optionally the SNI watcher or trayer,
    an isolated HOME/XDG_CONFIG_HOME/XDG_DATA_HOME/XDG_RUNTIME_DIR (0700) under a tmp dir; NO_AT_BRIDGE=1,
    GTK_A11Y=none. Made by start_desktop(); close() (or leaving a with block) kills every process it started."""

    display: str  # e.g. ":7"
    env: dict[str, str]  # the full environment for child processes
    home: Path

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.home = root / "home"
        self.runtime_dir = root / "run"
        self.display = ""
        self.bus_address = ""
        self.marker = uuid.uuid4().hex
        self._processes: list[_Process] = []
        self._pipes: list[IO[bytes]] = []
        self._bus: Gio.DBusConnection | None = None
        self._watcher = False
        self._closed = False
        for folder in (self.logs, self.home, root / "tmp"):
            folder.mkdir(parents=True, exist_ok=True)
        self.runtime_dir.mkdir(mode=0o700, exist_ok=True)
        self.runtime_dir.chmod(0o700)
        self.env = {key: value for key, value in os.environ.items() if key not in _HOST_SESSION}
        self.env.update(
            {
                MARKER: self.marker,
                "HOME": str(self.home),
                "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "XDG_STATE_HOME": str(self.home / ".local" / "state"),
                "XDG_RUNTIME_DIR": str(self.runtime_dir),
                "TMPDIR": str(root / "tmp"),  # pystray's icon files land here, not in the shared /tmp
                "NO_AT_BRIDGE": "1",  # no AT-SPI accessibility bus per GTK process
                "GTK_A11Y": "none",
                "GDK_BACKEND": "x11",
            }
        )
        share_models(self.home / ".cache")  # the sentence model as after a first start (tests/support/models.py)

    # -- processes ------------------------------------------------------------------------------------------------

    def spawn(
        self, name: str, argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start argv in its own process group with stdout and stderr in logs/<name>.log (read them back with
        output(name)). env is the whole environment, by default self.env; pass {**desktop.env, ...} to add to it.
        close() kills the process and everything it started, if still running."""
        return self._spawn(name, argv, env={**(self.env if env is None else env), MARKER: self.marker}, cwd=cwd)

    def _spawn(
        self, name: str, argv: Sequence[str], stdout: int | None = None, **options: Any
    ) -> subprocess.Popen[bytes]:
        log = self.logs / f"{name}.log"
        options.setdefault("env", self.env)
        with log.open("ab") as sink:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=sink if stdout is None else stdout,
                stderr=sink,
                start_new_session=True,
                **options,
            )
        self._processes.append(_Process(name, popen, log))
        return popen

    def output(self, name: str) -> str:
        """The end of what the process(es) started under name wrote to stdout and stderr."""
        return "\n".join(process.output() for process in self._processes if process.name == name)

    def _all_output(self) -> str:
        return "\n".join(f"--- {process.name} ---\n{process.output()}" for process in self._processes)

    def _ready_line(self, name: str, argv: Sequence[str], fd_args: Sequence[str] | None, timeout: float) -> str:
        """Start argv; return the first line it writes to its readiness pipe: the fd put into fd_args, or stdout."""
        read_end, write_end = os.pipe()
        try:
            if fd_args is None:
                popen = self._spawn(name, argv, stdout=write_end)
            else:
                argv = [*argv, *(arg.format(fd=write_end) for arg in fd_args)]
                popen = self._spawn(name, argv, pass_fds=(write_end,))
        finally:
            os.close(write_end)
        pipe = os.fdopen(read_end, "rb", buffering=0)
        self._pipes.append(pipe)  # kept open until close(): a writer must never get SIGPIPE for a late line
        data = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in data:
            readable, _, _ = select.select([pipe], [], [], max(deadline - time.monotonic(), 0))
            chunk = pipe.read(4096) if readable else b""
            if not chunk:
                if readable:  # end of file: it closed the pipe, normally by exiting
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        popen.wait(1)
                why = f"ended with status {popen.returncode}" if readable else f"was not ready within {timeout} s"
                raise DesktopFailed(f"{name} {why}: {' '.join(argv)}\n{self.output(name)}")
            data += chunk
        return data.split(b"\n", 1)[0].decode().strip()

    def _start(self, *, watcher: bool, trayer: bool, timeout: float, notifications: bool = False) -> None:
        for tool in ("Xvfb", "dbus-daemon", "xdotool", *(("trayer",) if trayer else ())):
            if shutil.which(tool) is None:
                raise DesktopFailed(f"{tool} is not installed: apt-get install xvfb dbus xdotool xclip trayer")
        screen = ["Xvfb", "-screen", "0", "1280x800x24", "-nolisten", "tcp", "-noreset"]
        self.display = ":" + self._ready_line("xvfb", screen, ["-displayfd", "{fd}"], timeout)
        self.env["DISPLAY"] = self.display
        # A unix socket path must fit in 108 bytes; a deep tmp dir falls back to dbus's own choice under /tmp.
        listen = f"unix:dir={self.runtime_dir}" if len(str(self.runtime_dir)) < 80 else "unix:tmpdir=/tmp"
        config = self.root / "session-bus.conf"
        config.write_text(BUS_CONFIG, encoding="utf-8")
        daemon = ["dbus-daemon", f"--config-file={config}", "--nofork", "--nopidfile", f"--address={listen}"]
        self.bus_address = self._ready_line("dbus-daemon", daemon, ["--print-address={fd}"], timeout)
        self.env["DBUS_SESSION_BUS_ADDRESS"] = self.bus_address
        if watcher:
            self.start_watcher(timeout)
        elif notifications:  # a notification daemon without a StatusNotifier host (an XEmbed desktop's)
            argv = [sys.executable, str(_HERE / "sni_watcher.py"), "--notifications-only"]
            line = self._ready_line("sni-watcher", argv, None, timeout)
            if line != "ready":
                raise DesktopFailed(f"sni_watcher printed {line!r}, not 'ready'\n{self.output('sni-watcher')}")
        if trayer:
            self._spawn("trayer", ["trayer", "--edge", "top", "--align", "left", "--widthtype", "request"])
            if not eventually(lambda: bool(self._search("--onlyvisible", "--classname", "^panel$")), timeout):
                raise DesktopFailed(f"trayer showed no panel within {timeout} s\n{self.output('trayer')}")

    def start_watcher(self, timeout: float = 20) -> None:
        """Start the StatusNotifierWatcher (and notification daemon) now: a panel that comes up after the app."""
        line = self._ready_line("sni-watcher", [sys.executable, str(_HERE / "sni_watcher.py")], None, timeout)
        if line != "ready":
            raise DesktopFailed(f"sni_watcher printed {line!r}, not 'ready'\n{self.output('sni-watcher')}")
        self._watcher = True

    @property
    def bus(self) -> Gio.DBusConnection:
        """The test side's connection to the private session bus (never the user's own)."""
        if self._bus is None:
            flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
            self._bus = Gio.DBusConnection.new_for_address_sync(self.bus_address, flags, None, None)
        return self._bus

    # -- StatusNotifierItem -----------------------------------------------------------------------------------------

    def tray_items(self) -> list[str]:
        """What the watcher has registered, each as "<bus name><object path>"."""
        if not self._watcher:
            raise RuntimeError("this desktop has no StatusNotifierWatcher: start_desktop(tmp_path, watcher=True)")
        items = _get_property(self.bus, WATCHER_NAME, WATCHER_PATH, WATCHER_NAME, "RegisteredStatusNotifierItems")
        return [str(item) for item in items]

    def tray_item(self, timeout: float = 20) -> TrayItem:
        """The first StatusNotifierItem registered with the watcher, waiting up to timeout seconds for one."""
        items: list[str] = []

        def registered() -> bool:
            items[:] = self.tray_items()
            return bool(items)

        if not eventually(registered, timeout):
            raise AssertionError(f"no StatusNotifierItem registered within {timeout} s\n{self._all_output()}")
        service, _, path = items[0].partition("/")
        return TrayItem(self.bus, service, "/" + path)

    # -- X --------------------------------------------------------------------------------------------------------

    def _run(self, argv: Sequence[str], timeout: float = 10) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, encoding="utf-8", timeout=timeout, check=False
        )

    def _search(self, *criteria: str) -> list[str]:
        result = self._run(["xdotool", "search", *criteria])
        return result.stdout.split() if result.returncode == 0 else []

    def xdotool(self, *args: str) -> str:
        """Run xdotool on this display; its stdout, or RuntimeError with its stderr."""
        result = self._run(["xdotool", *args])
        if result.returncode != 0:
            raise RuntimeError(f"xdotool {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def find_window(self, name_regex: str, timeout: float = 20) -> str | None:
        """The first visible window whose title matches name_regex, waiting up to timeout seconds; else None."""
        found: list[str] = []

        def search() -> bool:
            found[:] = self._search("--onlyvisible", "--name", name_regex)
            return bool(found)

        return found[0] if eventually(search, timeout) else None

    def window_visible(self, name_regex: str) -> bool:
        """Whether a visible window's title matches name_regex now (no waiting)."""
        return bool(self._search("--onlyvisible", "--name", name_regex))

    def window_geometry(self, window_id: str) -> tuple[int, int, int, int]:
        """(x, y, width, height) of the window, relative to the root window."""
        values = dict(line.split("=", 1) for line in self.xdotool("getwindowgeometry", "--shell", window_id).split())
        return int(values["X"]), int(values["Y"]), int(values["WIDTH"]), int(values["HEIGHT"])

    def close_window(self, window_id: str) -> None:
        """Ask the window to close as a window manager's close button does: a WM_PROTOCOLS/WM_DELETE_WINDOW client
        message (xdotool's windowclose destroys the window instead, which no real desktop does)."""
        from Xlib import X, protocol
        from Xlib import display as xdisplay

        x = xdisplay.Display(self.display)
        try:
            window = x.create_resource_object("window", int(window_id, 0))
            protocols, delete = x.intern_atom("WM_PROTOCOLS"), x.intern_atom("WM_DELETE_WINDOW")
            data = (32, [delete, X.CurrentTime, 0, 0, 0])
            window.send_event(protocol.event.ClientMessage(window=window, client_type=protocols, data=data))
            # A round trip, not just a flush: the X server drops a client's requests it has not read yet when it sees
            # the client hang up (ClientReady: CloseDownClient on X_NOTIFY_ERROR), so closing right after a flush
            # lost the message now and then. The reply to sync() means the server has delivered it.
            x.sync()
        finally:
            x.close()

    def screenshot(self, window_id: str | None = None) -> Image.Image:
        """The whole screen, or the window's rectangle of it."""
        bbox = None
        if window_id is not None:
            x, y, width, height = self.window_geometry(window_id)
            bbox = (x, y, x + width, y + height)
        return ImageGrab.grab(bbox=bbox, xdisplay=self.display)

    def notifications(self) -> list[dict[str, str]]:
        """Every desktop notification shown so far ({"title", "body", "app"}), oldest first (needs the watcher)."""
        prefix = "sni_watcher: notification: "
        text = (self.logs / "sni-watcher.log").read_text(encoding="utf-8", errors="replace")
        return [json.loads(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]

    def registrations(self) -> int:
        """How many times items called RegisterStatusNotifierItem (a panel rebuilds the item on each)."""
        text = (self.logs / "sni-watcher.log").read_text(encoding="utf-8", errors="replace")
        return sum(1 for line in text.splitlines() if line.startswith("sni_watcher: register call: "))

    def clipboard(self) -> str:
        """The CLIPBOARD selection's text on this display; '' when nobody owns it."""
        result = self._run(["xclip", "-o", "-selection", "clipboard"])
        return result.stdout if result.returncode == 0 else ""

    def key(self, *keys: str) -> None:
        """Press keys (xdotool names: "Up", "Return", "ctrl+c") into whichever window has the keyboard grab or focus."""
        self.xdotool("key", *keys)

    # -- XEmbed (trayer) ------------------------------------------------------------------------------------------

    def _top_level(self) -> set[str]:
        # Only windows with a WM_CLASS: GTK also maps an off-screen GtkInvisible (no class) for its grabs.
        return set(self._search("--onlyvisible", "--maxdepth", "1", "--classname", "."))

    def xembed_icon(self, timeout: float = 20, classname: str = ".") -> str:
        """The X window id of an icon docked in trayer, found by WM_CLASS (xdotool search --classname; the
        appindicator fallback uses the pystray Icon's name). Without a window manager, every window that is not
        a child of the root window is embedded, so the docked icon is a visible match that is not top-level."""
        docked: list[str] = []

        def search() -> bool:
            matches = self._search("--onlyvisible", "--classname", classname)
            top = set(self._search("--onlyvisible", "--maxdepth", "1", "--classname", classname))
            docked[:] = [window for window in matches if window not in top]
            return bool(docked)

        if not eventually(search, timeout):
            raise AssertionError(
                f"no icon with WM_CLASS matching {classname!r} docked within {timeout} s\n{self._all_output()}"
            )
        return docked[0]

    def click_xembed(self, window_id: str, button: int = 1, *, popup_timeout: float = 10) -> str | None:
        """Click the middle of the docked icon; return the popup window (the menu) it opened, waiting up to
        popup_timeout seconds for one (0: don't wait), or None. Press keys into the menu with key()."""
        before = self._top_level()
        x, y, width, height = self.window_geometry(window_id)
        self.xdotool(
            "mousemove", str(x + width // 2), str(y + height // 2), "click", str(button)
        )  # no --sync: it can hang
        opened: list[str] = []

        def popup() -> bool:
            opened[:] = sorted(self._top_level() - before)
            return bool(opened)

        return opened[0] if popup_timeout > 0 and eventually(popup, popup_timeout) else None

    # -- teardown -------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill every process this desktop started (apps first, Xvfb last), then any leftover that still carries
        its marker in the environment (e.g. a forked xclip). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._bus is not None:
            with contextlib.suppress(GLib.Error):
                self._bus.close_sync(None)
        for process in reversed(self._processes):
            _stop(process.popen)
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pipe in self._pipes:
            pipe.close()

    def processes(self) -> list[int]:
        """Pids of live processes that inherited this desktop's environment (found by its marker variable)."""
        return _marked_processes(self.marker)

    def __enter__(self) -> Desktop:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _stop(popen: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left of it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(3)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(5)


def _marked_processes(marker: str) -> list[int]:
    """Pids whose environment carries this desktop's marker: leftovers that escaped their process group."""
    needle = f"{MARKER}={marker}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone already, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


@needs("Xvfb, a D-Bus session bus and the X tools (xdotool, xclip, trayer; scripts/install-test-deps)")
def start_desktop(
    tmp_path: Path, *, watcher: bool = True, trayer: bool = False, timeout: float = 20, notifications: bool = False
) -> Desktop:
    """Start Xvfb, a session bus, and the SNI watcher and/or trayer (the XEmbed host: use watcher=False so the
    appindicator backend falls back to it; `notifications` adds a notification daemon without the watcher).
    Everything lives under tmp_path/"desktop"; close() ends it."""
    started = Desktop(tmp_path / "desktop")
    try:
        started._start(watcher=watcher, trayer=trayer, timeout=timeout, notifications=notifications)
    except BaseException:
        started.close()
        raise
    return started
