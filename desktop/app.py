"""The tray app: what `hivenote` with no command runs.

Main thread: the tray (pystray's loop). Beside it: the supervisor's worker (server start/stop), uvicorn's thread,
a ticker that refreshes the status once a second (redrawing only on change), and the single-instance listener.
The dashboard window is a child process. Quit: icon gone → server stopped (log flushed) → window ended → exit 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hivenote.server.core.errors import HivenoteError
from hivenote.server.heap import tune_heap
from hivenote.server.logs import configure_logging, report_crashes
from hivenote.server.settings import load_settings
from hivenote.server.stop_signals import on_stop_signal

from . import clipboard, problems
from .autostart import Autostart, autostart, launcher_command
from .backends import INSTALL_HINT, SNI_HOST, graphical_session, tray_backend, tray_host
from .instance import Instance
from .menu import Item, build_menu
from .supervisor import Status, Supervisor
from .tray import Tray
from .window import DashboardWindow

log = logging.getLogger(__name__)

HINT_MARKER = "tray-hint-shown"  # in the data dir: the first-launch notification was shown
NOT_AT_LOGIN = ("HIVENOTE_DATA_DIR", "HIVENOTE_EXTRA", "HIVENOTE_PORT")  # not copied into the Start-at-login entry
TICK_S = 1.0  # "online" is a two-minute window and last-seen labels change by the minute
NO_TRAY_WHY = "This desktop shows no tray icons (no StatusNotifier host and no XEmbed tray is running)."
NO_TRAY_HOW = (
    "On GNOME, turn on the 'AppIndicator and KStatusNotifierItem Support' extension (Fedora: sudo dnf install "
    "gnome-shell-extension-appindicator; Debian: sudo apt install gnome-shell-extension-appindicator), then log "
    "out and in. The icon appears by itself as soon as a panel shows tray icons."
)


class DesktopApp:
    def __init__(
        self,
        data_dir: Path,
        flags: Mapping[str, Any] | None = None,
        *,
        login: Autostart | None = None,
        window: DashboardWindow | None = None,
    ) -> None:
        from hivenote.server.connect import all_snippets

        self.data_dir = data_dir
        self.login = login or autostart(login_command(data_dir))
        self.window = window or DashboardWindow(on_action=self.on_window_action, sign_in=self.signed_in_url)
        self.supervisor = Supervisor(data_dir, flags, on_change=self.refresh, extra_routes=self._routes, tell=self.tell)
        self.tray: Tray | None = None
        self.quitting = threading.Event()
        self.clients = tuple((s.client, s.title) for s in all_snippets(url="http://127.0.0.1", token=None))
        self._refresh_lock = threading.Lock()
        self._storage_problem = ""  # the last one told, so a notification comes once per change
        self._told_download = False  # the sentence model's download is told once per run of the tray
        self.tray_missing = False  # no panel showed tray icons at start: the window stands in for the menu

    def _routes(self) -> list[Any]:
        from .routes import desktop_routes  # imports the server's app module: loaded once the icon is up

        return desktop_routes(clipboard.copy, self.supervisor, self)

    # -- state → tray --------------------------------------------------------------------------------

    def menu(self, status: Status) -> tuple[Item, ...]:
        return build_menu(status, autostart=self._autostart_enabled(), clients=self.clients)

    def refresh(self) -> None:
        tray = self.tray
        if tray is None or self.quitting.is_set():
            return
        with self._refresh_lock:  # the worker and the ticker both refresh; one at a time keeps "last drawn" true
            status = self.supervisor.status()
            tray.show(status, self.menu(status))
            # Told as the running server's problem changes (a stop and start in between is no change).
            if status.running and status.storage_problem != self._storage_problem:
                if status.storage_problem:
                    self.tell(f"Hivenote cannot save notes. {status.storage_problem}")
                else:
                    self.tell("Hivenote saves notes again.")
                self._storage_problem = status.storage_problem
            # The one network request Hivenote makes on its own is said where the person looks, once.
            if status.running and status.meaning.startswith("downloading") and not self._told_download:
                self.tell(
                    "Hivenote is downloading its search model (all-MiniLM-L6-v2, 91 MB, once) from huggingface.co. "
                    "Search works meanwhile; the model_download setting turns this off."
                )
                self._told_download = True

    def _tick(self) -> None:
        while not self.quitting.wait(TICK_S):
            self.supervisor.check_alive()
            self.refresh()

    def _autostart_enabled(self) -> bool:
        try:
            return self.login.is_enabled()
        except HivenoteError:
            return False

    # -- actions (menu clicks, later launches) -----------------------------------------------------------

    def on_action(self, action: str) -> None:
        try:
            self._run_action(action)
        except HivenoteError as exc:
            self.tell(str(exc))
        except Exception:  # a menu click must never take the tray down
            log.exception("menu action %s failed", action)
            self.tell(f"{action} failed; see the log")
        self.refresh()

    def _first_launch_hint(self, started: threading.Event) -> None:
        """The first time: where Hivenote went (a menu launch shows no window, only an icon), said once the server's
        first start is over, as it went: running, or what stops it."""
        marker = self.data_dir / HINT_MARKER
        if marker.exists():
            return
        started.wait(60)
        status = self.supervisor.status()
        self.tell(first_launch_hint(status, middle_click=self._middle_click_works()))
        with contextlib.suppress(OSError):
            marker.touch()

    def _middle_click_works(self) -> bool:
        """A middle click opens the dashboard where a StatusNotifier host shows the icon (GNOME, KDE). In an XEmbed
        tray libayatana's fallback reads a size it never set, and the click is lost about one time in two."""
        return sys.platform == "linux" and tray_host() == SNI_HOST

    def on_window_action(self, action: str) -> None:
        """The window asks while the server is stopped (window.WINDOW_ACTIONS)."""
        if action == "start-server" and self.supervisor.status().server in ("stopped", "error"):
            self.on_action("toggle-server")
        elif action == "quit":
            self.on_action("quit")

    def tray_shown(self) -> bool:
        """Whether a panel shows the icon now (a host may come up after Hivenote, or go away)."""
        if self.tray is None:
            return False
        if sys.platform != "linux":
            return True
        return tray_host() is not None

    def desktop_state(self) -> dict[str, Any]:
        """What the window shows of the tray (GET /desktop/app): where the menu's controls are when no icon is."""
        status = self.supervisor.status()
        shown = self.tray_shown()
        return {
            "tray": {"shown": shown, **({} if shown else {"why": NO_TRAY_WHY, "how": NO_TRAY_HOW})},
            "server": status.server,
            "sharing": status.sharing,
            "auth": status.auth,
            "autostart": self._autostart_enabled(),
            "data_dir": str(self.data_dir),
        }

    def _run_action(self, action: str) -> None:
        status = self.supervisor.status()
        if action == "toggle-server":
            (self.supervisor.stop if status.running else self.supervisor.start)()
        elif action == "open-dashboard":
            self.open_dashboard()
        elif action.startswith("copy:"):
            self.copy_snippet(action.removeprefix("copy:"))
        elif action == "connect" or action.startswith("connect:"):
            self.open_connect(action.removeprefix("connect").removeprefix(":"))
        elif action == "use-free-port":
            self.supervisor.use_free_port()
        elif action == "toggle-lan":
            self.supervisor.share_on_lan(not status.sharing)
        elif action == "toggle-autostart":
            if self._autostart_enabled():
                self.login.disable()
            else:
                settings = self.supervisor.settings or load_settings(self.supervisor.flags, data_dir=self.data_dir)
                keep_port(self.data_dir, settings.port)  # the login-started tray reads it from settings.json
                self.login.enable()
        elif action == "open-data-folder":
            open_path(self.data_dir, self.tell)
        elif action == "quit":
            self.quit()
        else:
            raise ValueError(f"unknown tray action {action!r}")

    def show(self) -> None:
        """Launched again (from the menu): the person wants the notebook, so a stopped server starts first."""
        if self.supervisor.status().server in ("stopped", "error"):
            self.supervisor.start().wait(60)
            self.refresh()
        self._open_window()

    def open_dashboard(self, fragment: str = "") -> None:
        """The menu's Open dashboard and the icon's middle click. A stopped server is started first, as a second launch
        does (on a thread of its own: a click runs on the GUI's loop, which must not wait for a start)."""
        status = self.supervisor.status()
        if status.running or status.elsewhere:
            self._open_window(fragment)
            return

        def start_then_open() -> None:
            self.show()
            if fragment:
                self._open_window(fragment)

        threading.Thread(target=start_then_open, name="hivenote-open-dashboard", daemon=True).start()

    def _open_window(self, fragment: str = "") -> None:
        settings = self.supervisor.settings
        status = self.supervisor.status()
        if status.elsewhere:  # `hivenote serve` holds the data dir: its dashboard is this notebook's
            self.window.open(status.elsewhere.rstrip("/") + "/" + fragment)
            return
        if settings is None or not status.running:
            self.tell(f"The dashboard cannot open: the server did not start. {status.message}".strip())
            return
        self.window.open(f"http://127.0.0.1:{settings.port}/{fragment}")

    def connect_target(self) -> tuple[str, str | None, list[str]]:
        """Where agents reach this notebook (the MCP URL: another Hivenote's that holds the data dir, else this one's),
        the owner's token (None: auth is off), and the stdio bridge command for clients that start one."""
        from urllib.parse import urlsplit

        from hivenote.server.connect import stdio_command

        settings = self.supervisor.settings or load_settings(self.supervisor.flags, data_dir=self.data_dir)
        base = self.supervisor.status().elsewhere.rstrip("/") or settings.base_url
        token = self.supervisor.owner_token() if settings.auth else None
        return f"{base}/mcp", token, stdio_command(self.data_dir, urlsplit(base).port or settings.port)

    def open_connect(self, client: str) -> None:
        """The window at the connect dialog, `client` chosen (the tray menu's Connect an agent)."""
        self.open_dashboard(f"#connect/{client}" if client else "#connect")

    def signed_in_url(self, url: str) -> str:
        """The address a new window or browser loads: with a one-time code the page trades for its sign-in cookie,
        asked of the server with the owner's token from this data dir (the tray is this account). A `#fragment`
        (the dialog to show) stays at the end."""
        from hivenote.server.cli.opener import signed_in_url

        url, hash_, fragment = url.partition("#")
        try:
            token = self.supervisor.owner_token()
        except HivenoteError:  # no token file, and none can be saved: the page asks for one
            return url + hash_ + fragment
        return signed_in_url(url, self.data_dir, token=token) + hash_ + fragment

    def copy_snippet(self, client: str) -> None:
        from hivenote.server.connect import TOKEN_ENV, snippet

        status = self.supervisor.status()
        if status.port_busy:  # the snippet would point the agent at another program
            raise HivenoteError(
                f"Another program holds {status.address}, so a connect snippet would point your agent at it. Choose "
                "Use another port first (or quit that program)."
            )
        settings = self.supervisor.settings or load_settings(self.supervisor.flags, data_dir=self.data_dir)
        token = self.supervisor.owner_token() if settings.auth else None
        base = self.supervisor.status().elsewhere.rstrip("/") or settings.base_url  # where the notebook answers
        found = snippet(client, url=f"{base}/mcp", token=token)
        clipboard.copy(found.text)
        system = {"darwin": "macos", "win32": "windows"}.get(sys.platform, "linux")
        where = found.where.get(system, "")
        told = f"Copied the {found.title} snippet. Paste it into {where}." if where else f"Copied: {found.title}."
        if token and TOKEN_ENV in found.text and token not in found.text:  # Codex: the token is not in the snippet
            told += (
                f" {found.title} reads the token from the environment variable {TOKEN_ENV}: set it to your token "
                "(`hivenote token show` prints it) where the agent starts."
            )
        self.tell(told)

    def tell(self, message: str) -> None:
        log.info("%s", message)
        if self.tray is not None:
            self.tray.notify(message)

    def quit(self) -> None:
        if self.quitting.is_set():
            return
        self.quitting.set()
        if self.tray is not None:
            self.tray.stop()

    # -- lifecycle -------------------------------------------------------------------------------------

    def run(self, pystray: Any | None) -> int:
        """Serve, with the tray when `pystray` is given (else until SIGTERM/Ctrl-C); returns the exit code."""
        # Signals first: a SIGTERM as soon as the port answers must still quit cleanly; `quit` runs on a thread of
        # its own (hivenote.server.stop_signals says why). GTK trays get GLib's handlers once their loop runs, below:
        # pystray resets SIGINT while it starts.
        undo_signals = on_stop_signal(self.quit)
        started = self.supervisor.start()
        ticker = threading.Thread(target=self._tick, name="hivenote-ticker", daemon=True)

        def tray_up() -> None:
            if self.quitting.is_set() and self.tray is not None:  # a signal came before the tray's loop ran
                self.tray.stop()
                return
            gtk = os.environ.get("PYSTRAY_BACKEND") in ("appindicator", "gtk")
            clipboard.use_gtk(gtk)
            if gtk:
                _quit_on_glib_signals(self.quit)
            ticker.start()
            self.refresh()
            if self.tray_missing:  # nothing shows the icon (yet): the window says why and offers the menu
                started.wait()
                self.open_dashboard()
            else:
                threading.Thread(target=self._first_launch_hint, args=(started,), daemon=True).start()

        try:
            if pystray is None:
                started.wait()
                status = self.supervisor.status()
                where = f"on http://{status.address}/" if status.running else f"not: {status.message}"
                sys.stderr.write(f"Hivenote is serving {where}\n")
                if graphical_session():  # else a browser here would be a text one, in this terminal
                    self.open_dashboard()
                ticker.start()
                while not self.quitting.wait(0.5):  # a timeout, so Python runs signal handlers on Windows too
                    pass
            else:
                status = self.supervisor.status()
                self.tray = Tray(pystray, self.on_action, status, self.menu(status))
                self.tray.run(setup=tray_up)
        finally:
            undo_signals()
            self.quitting.set()
            self.supervisor.shutdown()
            self.window.close()
        return 0


def login_command(data_dir: Path, environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> list[str]:
    """The command *Start at login* runs: this launcher with what this launch was given that login would not
    know: a data dir other than the default, and HIVENOTE_* settings from the environment (a login session does not
    have the shell's; through `env` where there is one: Windows' Run key has none). Never the port: settings.json
    holds it (`keep_port` saves this tray's there as Start at login is turned on), the one place "Use another port"
    writes too, so a port in the entry could never shadow a port chosen later."""
    from dataclasses import fields

    from hivenote.server.settings import Settings, default_data_dir

    argv = launcher_command(platform=platform)
    names = {f"HIVENOTE_{f.name.upper()}" for f in fields(Settings)} - set(NOT_AT_LOGIN)
    settings = [f"{name}={environ[name]}" for name in sorted(names) if environ.get(name)]
    if settings and platform != "win32":
        argv = ["/usr/bin/env", *settings, *argv]
    if data_dir.expanduser().absolute() != default_data_dir().absolute():
        argv += ["--data-dir", str(data_dir.expanduser().absolute())]
    return argv


def keep_port(data_dir: Path, port: int) -> bool:
    """Save `port` in settings.json when the file (with the defaults) gives another: the port a launch without this
    one's flags and environment (at login) starts on is then this one's. True if it was saved."""
    from hivenote.server.settings import save_setting

    if load_settings({}, environ={}, data_dir=data_dir).port == port:
        return False
    save_setting(data_dir, "port", port)
    return True


def first_launch_hint(status: Status, *, middle_click: bool) -> str:
    """The first launch's notification: where Hivenote went, and the truth about its server."""
    click = " (a middle click on the icon opens the dashboard)" if middle_click else ""
    menu = f"Its icon in your panel has the menu: open the dashboard, connect an agent, start at login, quit{click}."
    if status.running:
        return f"Hivenote is running. {menu}"
    if status.elsewhere:
        return f"Hivenote is in your panel; the notebook is served by the Hivenote at {status.elsewhere}. {menu}"
    return f"Hivenote is in your panel, but its server is not running: {status.message or status.server}. {menu}"


def _quit_on_glib_signals(quit_app: Callable[[], None]) -> None:
    """GTK's loop runs in C and does not return to Python, so Python's handlers would wait; GLib's run in it."""
    from gi.repository import GLib

    def handle() -> bool:
        quit_app()
        return False  # once is enough

    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_HIGH, signum, handle)


def open_path(
    path: Path,
    tell: Callable[[str], None] | None = None,
    *,
    platform: str = sys.platform,
    popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
    startfile: Callable[[Path], None] | None = None,
) -> None:
    """Show the folder in the file manager: Explorer (os.startfile), Finder (`open`) or xdg-open. `popen` and
    `startfile` are the OS calls, replaceable by tests on any OS."""
    if platform == "win32":
        try:
            (startfile or os.startfile)(path)  # type: ignore[attr-defined, unused-ignore]
        except OSError as exc:
            raise HivenoteError(f"Windows could not open the data folder ({exc.strerror}); it is {path}") from None
        return
    opener = "open" if platform == "darwin" else "xdg-open"
    try:
        proc = popen([opener, str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise HivenoteError(f"cannot open folders here ({opener} is missing); the data folder is {path}") from None

    def reap() -> None:  # waited for (no zombie), and a failure is told, not lost
        _, err = proc.communicate()
        if proc.returncode != 0 and tell is not None:
            why = err.decode(errors="replace").strip().splitlines()[-1:] or [f"{opener} exited {proc.returncode}"]
            tell(f"No app opened the data folder ({why[0]}). It is {path}")

    threading.Thread(target=reap, name="hivenote-open-folder", daemon=True).start()


def load_pystray(backend: str) -> Any:
    """pystray with the chosen backend. Importing it can fail in ways other than ImportError (no display).

    On Linux GTK starts with OpenGL off: the first GTK program on an X display tries OpenGL to choose its visuals
    (later ones read the choice from the display), and in the tray that loaded Mesa and LLVM for good, +53 MB of
    RSS for an icon and a menu, on exactly the login where an autostarted tray is the first GTK program. Only this
    process: the variable is gone again once GTK has read it, so the dashboard window and what the tray opens get
    the environment as it was."""
    os.environ["PYSTRAY_BACKEND"] = backend
    no_gl = sys.platform.startswith("linux") and "GDK_GL" not in os.environ
    if no_gl:
        os.environ["GDK_GL"] = "disable"
    try:
        import pystray
    finally:
        if no_gl:
            os.environ.pop("GDK_GL", None)
    return pystray


def run_tray(data_dir: Path, flags: Mapping[str, Any], err: Any) -> int:
    """`hivenote`: the single tray app for this data dir, or ask the running one to show its dashboard. A data dir
    this account may read but not write is served read-only (the supervisor says why in the tray); one it cannot make
    or read, or a full disk, ends it with the error's exit code and a message (a dialog when started from a menu:
    every failure that ends the app is said where the person looks)."""
    tune_heap()  # before any thread starts (hivenote.server.heap says why)
    configure_logging()  # before the MCP SDK's server sets it its way (hivenote.server.logs says why)
    report_crashes()
    try:
        return _run_tray(data_dir, flags, err)
    except HivenoteError as exc:  # e.g. a full disk: the tray's own record cannot be saved
        problems.tell("Hivenote cannot start", str(exc), err)
        return exc.exit_code
    except OSError as exc:
        if not problems.cannot_write(exc):
            problems.tell("Hivenote cannot start", f"Hivenote could not start: {exc}", err)
            raise
        problems.tell("Hivenote cannot start", problems.refused(data_dir, exc), err)
        return problems.EXIT_STORE


def _run_tray(data_dir: Path, flags: Mapping[str, Any], err: Any) -> int:
    app: DesktopApp | None = None

    def message(text: str) -> None:
        if app is None:
            return
        if text == "show":
            app.show()
        elif text == "quit":
            app.quit()

    instance = Instance(data_dir)
    if not instance.acquire(message):
        instance.send("show")
        err.write("Hivenote is already running; asked it to show its dashboard (it starts its server if stopped).\n")
        return 0
    try:
        app = DesktopApp(data_dir, flags)
        choice = tray_backend()
        pystray = None
        if choice.name is None:
            hint = f"\n{INSTALL_HINT}" if graphical_session() else ""
            err.write(f"hivenote: no tray icon: {choice.reason}.{hint}\nServing without one; Ctrl-C stops.\n")
        else:
            try:
                pystray = load_pystray(choice.name)
            except Exception as exc:
                err.write(f"hivenote: no tray icon: pystray cannot start here ({exc}). Serving without one.\n")
            if pystray is not None and sys.platform == "linux" and tray_host() is None:
                # The icon is made anyway: it appears by itself when a panel comes up later (libayatana registers
                # with a StatusNotifierWatcher as soon as one appears; GTK docks in an XEmbed tray likewise).
                err.write(
                    f"hivenote: {NO_TRAY_WHY} {NO_TRAY_HOW} The dashboard opens in a window, which has the tray "
                    "menu's controls; the server keeps running after you close it (`hivenote quit` stops it).\n"
                )
                app.tray_missing = True
        return app.run(pystray)
    finally:
        instance.release()
