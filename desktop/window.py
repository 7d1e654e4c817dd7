"""The dashboard window: its own process running pywebview on its main thread (`python -m
hivenote.desktop.window`, or `hivenote --window` in a frozen build), started and ended by the tray.

A separate process keeps pywebview's GUI loop away from the tray's (two GLib main loops in one process clash,
and macOS wants both on the main thread). It talks to the server over HTTP like any browser. The tray hands it the
address to load on its stdin (`open <url>`, the first line), never on its command line, which every account of the
machine may read: the address holds a one-time code the page trades for its sign-in cookie (server/web/session.py).
Its Copy buttons post to the tray's /desktop/clipboard (pywebview's own JS bridge needs eval, which the dashboard's
CSP forbids). When pywebview cannot start (no GTK WebKit, no display) the tray opens the dashboard in the default
browser instead, through a private file that holds the address (server/cli/opener.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import platformdirs

from hivenote.server.cli.opener import open_in_browser

log = logging.getLogger(__name__)

TITLE = "Hivenote"
WINDOW_UNAVAILABLE = 3  # the child's exit code when pywebview cannot show a window here
CLOSE_WAIT_S = 5.0
# What the page may ask the tray for through the window itself (the server is stopped, so it cannot over HTTP).
WINDOW_ACTIONS = frozenset({"start-server", "quit"})
BRIDGE = "hivenote"  # the page posts to window.webkit.messageHandlers.hivenote


# The dashboard's own background (app.css --bg): the window shows it, not white, until the page paints.
LIGHT_BG, DARK_BG = "#f6f6f4", "#141413"


def prefers_dark(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> bool:
    """Whether the page will be dark (prefers-color-scheme), as WebKitGTK decides it: a GTK_THEME or GTK theme
    whose variant is dark, or GTK's prefer-dark setting. (WKWebView and WebView2 paint their own background.)"""
    if platform != "linux":
        return False
    theme = environ.get("GTK_THEME", "")
    if theme:
        return theme.lower().endswith(("-dark", ":dark"))
    try:
        import gi

        gi.require_version("Gtk", "3.0")
        from gi.repository import Gtk

        settings = Gtk.Settings.get_default()
    except (ImportError, ValueError):
        return False
    if settings is None:
        return False
    name = str(settings.props.gtk_theme_name or "").lower()
    return bool(settings.props.gtk_application_prefer_dark_theme) or name.endswith("-dark")


def window_command() -> list[str]:
    """The window process's command line: no address on it (the tray sends that on stdin)."""
    if getattr(sys, "frozen", False):  # PyInstaller: no `-m`; the launcher dispatches --window
        return [sys.executable, "--window"]
    return [sys.executable, "-m", "hivenote.desktop.window"]


def _signed_out(url: str) -> str:
    return url


class DashboardWindow:
    """At most one window process. `open()` shows it (or brings it forward); `close()` ends it. `sign_in` turns the
    dashboard's address into the one a new window or browser loads (with a fresh one-time code)."""

    def __init__(
        self,
        browser: bool = False,
        on_action: Callable[[str], None] | None = None,
        sign_in: Callable[[str], str] = _signed_out,
    ) -> None:
        self.browser_only = browser  # pywebview already failed here: go straight to the browser
        self.on_action = on_action  # what the page asks of the tray while the server is down ("start-server")
        self.sign_in = sign_in
        self._proc: subprocess.Popen[bytes] | None = None
        self._unanswered: str | None = None  # "show" was sent to a window that has not confirmed it
        self._closed = False  # the tray is quitting: never (re)open a window
        self._lock = threading.Lock()

    def open(self, url: str) -> None:
        with self._lock:
            if self._closed:
                return
            proc = self._proc
            if proc is not None and proc.poll() is None and proc.stdin is not None:
                try:  # a #fragment (a dialog to show) is loaded in the open window; a plain address only raises it
                    proc.stdin.write(f"show {url}\n".encode() if "#" in url else b"show\n")
                    proc.stdin.flush()
                except OSError:
                    pass  # it is exiting: start another below
                else:
                    self._unanswered = url  # if it exits without saying "shown", it was closing: open a new one
                    return
            if self.browser_only:
                open_in_browser(self.sign_in(url))
                return
            self._unanswered = None
            self._proc = subprocess.Popen(window_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write(f"open {self.sign_in(url)}\n".encode())
                self._proc.stdin.flush()
            except OSError:
                pass  # it ended at once: _watch says why
            threading.Thread(target=self._watch, args=(self._proc, url), name="hivenote-window", daemon=True).start()

    def _watch(self, proc: subprocess.Popen[bytes], url: str) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # until the window process ends
            word, _, action = line.strip().decode(errors="replace").partition(" ")
            if word == "shown":
                with self._lock:
                    self._unanswered = None
            elif word == "action" and action in WINDOW_ACTIONS and self.on_action is not None:
                self.on_action(action)
        code = proc.wait()
        with self._lock:
            reopen, self._unanswered = self._unanswered, None
        if code not in (0, WINDOW_UNAVAILABLE) and not self._closed:
            log.warning("the dashboard window ended with status %s", code)
        if code == WINDOW_UNAVAILABLE:
            log.warning("no dashboard window here (see above); opening %s in the browser instead", url)
            self.browser_only = True
            open_in_browser(self.sign_in(url))
        elif reopen is not None:
            self.open(reopen)

    def close(self) -> None:
        """End the window process for good (Quit)."""
        with self._lock:
            proc, self._proc = self._proc, None
            self._closed, self._unanswered = True, None
        if proc is None:
            return
        if proc.stdin is not None:  # the end of its input: the window closes itself and exits 0
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for end in (proc.terminate, proc.kill):
            try:
                proc.wait(CLOSE_WAIT_S)
                break
            except subprocess.TimeoutExpired:
                end()
        proc.wait()


def _stdin_lines() -> Iterator[bytes]:
    """Lines from the tray, read from file descriptor 0 with os.read. Not through sys.stdin: a daemon thread blocked
    in its buffered reader holds the buffer's lock, and the interpreter, finalizing after the window closed, aborts
    ("could not acquire lock for <_io.BufferedReader name='<stdin>'>", exit 134)."""
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from lines


def _close(window: object) -> None:
    """Close the window unless the user already did: on GTK, checked and done on GTK's own thread, where the close
    button is handled too (pywebview's destroy() looks the window up here and closes it later, by which time a
    click on the close button may have removed it: a KeyError traceback)."""
    if sys.platform != "linux":
        window.destroy()  # type: ignore[attr-defined]
        return
    from gi.repository import GLib
    from webview.platforms.gtk import BrowserView

    def close_if_open() -> bool:
        view = BrowserView.instances.get(window.uid)  # type: ignore[attr-defined]
        if view is not None:
            view.close_window()
        return False

    GLib.idle_add(close_if_open)


_stdout_lock = threading.Lock()


def _tell_parent(line: str) -> None:
    with _stdout_lock:
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass  # the tray is gone


def _bridge(window: object) -> None:
    """GTK only (elsewhere the page names the tray menu's way). The window's title follows the page's. The page may
    ask the tray for WINDOW_ACTIONS while the server is stopped: a WebKit script message handler
    (`webkit.messageHandlers.hivenote.postMessage("start-server")`), which the page's CSP does not restrict
    (pywebview's own bridge evaluates strings, which it does). Installed on GTK's thread once the view exists.
    pywebview listens to every script message for its own bridge: it is narrowed to its "jsBridge" handler so
    that it never sees this one's."""
    if sys.platform != "linux":
        return
    from gi.repository import GLib
    from webview.platforms.gtk import BrowserView

    def install() -> bool:
        view = BrowserView.instances.get(window.uid)  # type: ignore[attr-defined]
        if view is None:
            return True  # not made yet: look again
        # The page's title is the window's (the dashboard says "Hivenote — server stopped" while it is).
        view.webview.connect("notify::title", lambda web, _: view.window.set_title(web.get_title() or TITLE))
        manager = view.manager
        manager.disconnect_by_func(view.on_js_bridge_call)
        manager.connect("script-message-received::jsBridge", view.on_js_bridge_call)
        manager.register_script_message_handler(BRIDGE)
        manager.connect(f"script-message-received::{BRIDGE}", received)
        return False

    def received(_manager: object, message: object) -> None:
        value = message.get_js_value()  # type: ignore[attr-defined]
        action = value.to_string() if value.is_string() else ""
        if action in WINDOW_ACTIONS:
            _tell_parent(f"action {action}")

    GLib.timeout_add(50, install)


def _follow_parent(window: object, lines: Iterator[bytes]) -> None:
    """Lines on stdin from the tray: "show" brings the window forward (answered "shown" on stdout); the end of
    input (the tray is gone, or quits) closes it."""
    for line in lines:
        word, _, url = line.strip().decode(errors="replace").partition(" ")
        if word == "show":
            if url.startswith(("http://", "https://")):  # the same page at another #fragment: no reload
                window.load_url(url)  # type: ignore[attr-defined]
            window.restore()  # type: ignore[attr-defined]
            window.show()  # type: ignore[attr-defined]
            _tell_parent("shown")
    _close(window)


USAGE = "usage: python -m hivenote.desktop.window, then `open http://127.0.0.1:7788/...` on its stdin\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    lines = _stdin_lines()
    word, _, url = (b"" if args else next(lines, b"")).decode(errors="replace").strip().partition(" ")
    if word != "open" or not url.startswith(("http://", "https://")):  # not on argv: /proc shows it to everyone
        sys.stderr.write(USAGE)
        return 2
    if sys.platform == "linux":
        # Blank windows on some GPU drivers (NVIDIA, Wayland) otherwise; WebKitGTK's maintainers suggest it.
        os.environ.setdefault("WEBKIT_DISABLE_DMABUF_RENDERER", "1")
    try:
        import webview

        storage = Path(platformdirs.user_cache_dir("hivenote", appauthor=False)) / "window"
        window = webview.create_window(
            TITLE,
            url,
            width=1200,
            height=820,
            min_size=(640, 480),
            text_select=True,
            background_color=DARK_BG if prefers_dark() else LIGHT_BG,  # what shows until the page paints
        )
        threading.Thread(target=_follow_parent, args=(window, lines), name="hivenote-window-stdin", daemon=True).start()
        if sys.platform == "linux":
            from gi.repository import GLib

            GLib.set_prgname("hivenote")  # WM_CLASS: the window groups under the menu entry's icon
        from .icons import assets_dir

        webview.start(
            _bridge,
            (window,),
            private_mode=False,
            storage_path=str(storage),
            icon=str(assets_dir() / "hivenote.png"),
        )
    except Exception as exc:  # no GUI toolkit, no display, WebKit missing: the tray falls back to the browser
        sys.stderr.write(f"hivenote: cannot open the dashboard window: {exc}\n")
        return WINDOW_UNAVAILABLE
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
