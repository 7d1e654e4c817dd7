"""The server inside the tray app: started, stopped and restarted on the same port by one worker thread, and a
`Status` that says how it is doing (the tray draws its icon, title and menu from it and nothing else).

Start = bind the port first (so "port in use" is an error shown in the tray, not a thread dying quietly), take
the data dir's lock and fold the log, then run uvicorn in its thread. Stop = stop uvicorn, then close the store
(the log is flushed and the lock released). Commands run in order on the worker, never on the GUI thread.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from starlette.routing import BaseRoute

from hivenote.server.agents import PEOPLE_NOT_AGENTS, AgentTracker, agent_name
from hivenote.server.core.errors import HivenoteError, ShardLocked, StoreError
from hivenote.server.core.hlc import wall_ms
from hivenote.server.render import ago
from hivenote.server.settings import Settings, is_loopback, load_settings
from hivenote.server.storage.layout import Layout
from hivenote.server.storage.ownshard import DiskProblem, ProblemKind, disk_writable
from hivenote.server.storage.store import Store
from hivenote.server.sync.status import SyncStatus
from hivenote.server.tokens import Tokens, new_token
from hivenote.server.web.serve import PortInUse, ServerThread, bind

from . import problems

log = logging.getLogger(__name__)

ServerState = Literal["starting", "running", "stopped", "error"]
LAN_HOST = "0.0.0.0"
RETRY_S = 5.0  # a taken port or data dir is tried again this often, so the tray recovers by itself
AGENT_NAME_MAX = 40  # an agent's name in the menu and tooltip (any MCP client names itself, up to 200 characters)


@dataclass(frozen=True)
class AgentOnline:
    name: str  # "Claude Code", or "Claude Code (alice)" for someone else's token
    last_seen: str  # "just now", "3 minutes ago"


@dataclass(frozen=True)
class Status:
    """Everything the tray shows. Equal statuses draw the same icon, title and menu."""

    server: ServerState
    address: str  # "127.0.0.1:7788"
    message: str = ""  # why it is in the error state, and what to do
    agents: tuple[AgentOnline, ...] = ()
    sharing: bool = False  # listening beyond loopback
    auth: bool = True
    share_urls: tuple[str, ...] = ()  # where teammates open it, while shared
    sync_problems: tuple[str, ...] = ()  # "peer http://…: cannot reach …" for each failing sync transport
    storage_problem: str = ""  # why notes cannot be saved right now (disk full, log folder gone, ...)
    port_busy: bool = False  # the error is "port in use": the menu offers another port, and it is tried again
    elsewhere: str = ""  # the URL of another Hivenote that holds this data dir (`hivenote serve`): use that one
    meaning: str = ""  # the sentence model's progress while it downloads or indexes ("" once it answers, or off)

    @property
    def warning(self) -> bool:
        """Running, but something needs the user: the icon gets a red "!"."""
        return bool(self.sync_problems or self.storage_problem)

    @property
    def running(self) -> bool:
        return self.server == "running"

    @property
    def title(self) -> str:
        """The tooltip: 'Hivenote — running · 3 agents online: Cursor, Claude Code, Codex'."""
        if self.server == "error":
            return f"Hivenote — error: {self.message}"
        if self.server != "running":
            return f"Hivenote — {self.server}"
        shared = " · shared on LAN" if self.sharing else ""
        sync = f" · sync problem: {self.sync_problems[0]}" if self.sync_problems else ""
        if self.storage_problem:
            sync = f" · cannot save notes: {self.storage_problem}{sync}"
        if self.meaning:
            sync = f"{sync} · {self.meaning}"
        if not self.agents:
            return f"Hivenote — running{shared} · no agents online{sync}"
        names = ", ".join(dict.fromkeys(a.name for a in self.agents))
        count = len(self.agents)
        return f"Hivenote — running{shared} · {count} agent{'s' if count != 1 else ''} online: {names}{sync}"


def meaning_progress(index: object) -> str:
    """The sentence model's download or indexing progress for the tooltip, while search does not ask it yet."""
    from hivenote.server.meaning.both import Meanings, progress

    return progress(index.status()) if isinstance(index, Meanings) else ""


def agents_online(tracker: AgentTracker, owner: str) -> tuple[AgentOnline, ...]:
    """Agents with a request in the last two minutes, newest first; people at the dashboard or CLI are not agents."""
    now = tracker.now_ms()
    seen: dict[str, AgentOnline] = {}
    for agent in tracker.online():  # newest first: the first entry per name has the latest time
        if agent.agent in PEOPLE_NOT_AGENTS:
            continue
        name = agent.client or "Other agent" if agent.agent == "other" else agent_name(agent.agent)
        name = name if len(name) <= AGENT_NAME_MAX else name[: AGENT_NAME_MAX - 1].rstrip() + "…"
        if agent.person and agent.person != owner:
            name = f"{name} ({agent.person})"
        seen.setdefault(name, AgentOnline(name, ago(agent.last_seen, now)))
    return tuple(seen.values())


class Supervisor:
    """Owns the store and the server thread. `start()`, `stop()` and the others queue a command and return at once;
    `on_change` is called (from the worker thread) after every state change."""

    def __init__(
        self,
        data_dir: Path,
        flags: Mapping[str, Any] | None = None,
        *,
        tracker: AgentTracker | None = None,
        on_change: Callable[[], None] = lambda: None,
        owner: str = "",
        extra_routes: Callable[[], list[BaseRoute]] = list,
        tell: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.data_dir = data_dir
        self.flags = dict(flags or {})
        self.tracker = tracker or AgentTracker()
        self.on_change = on_change
        self.owner = owner
        self.extra_routes = extra_routes
        self.tell = tell  # a message for the user (the tray shows a notification)
        self._state: ServerState = "stopped"
        self._message = ""
        self._settings: Settings | None = None
        self._share_urls: tuple[str, ...] = ()  # looked up once per start (it may ask the resolver)
        self._sync: SyncStatus | None = None  # the running server's sync transports
        self._meaning: object = None  # the running server's meaning indexes (their progress, for the tooltip)
        self._server: ServerThread | None = None
        self._store: Store | None = None
        self._tokens: Tokens | None = None  # the running server's (the tray's window and snippets use its owner token)
        self._lock = threading.Lock()
        self._commands: queue.Queue[tuple[str, threading.Event, str | None]] = queue.Queue()
        self.last_move: dict[str, Any] | None = None  # the outcome of the last use_folder: {"ok", "message", ...}
        self._retry_at: float | None = None  # when to try a start again (the port or the data dir was taken)
        self._port_busy = False
        self._elsewhere = ""
        self._refused: Path | None = None  # serving read-only: the path the writer could not write
        self._worker = threading.Thread(target=self._work, name="hivenote-supervisor", daemon=True)
        self._worker.start()

    # -- commands (any thread) -----------------------------------------------------------------------

    def start(self) -> threading.Event:
        return self._queue("start")

    def stop(self) -> threading.Event:
        self._retry_at = None  # the user wants it stopped: no retry
        return self._queue("stop")

    def use_free_port(self) -> threading.Event:
        """Save a free port in settings.json (the --port of this launch no longer applies) and start on it."""
        return self._queue("free-port")

    def share_on_lan(self, on: bool) -> threading.Event:
        """Listen on every interface (tokens stay required) or on loopback only; restarts a running server."""
        return self._queue("lan-on" if on else "lan-off")

    def use_folder(self, path: str | None) -> threading.Event:
        """Move the log into a synced folder (None: back into the data dir): the server stops (the log cannot
        move under its writer), the shards move, the server starts again. The outcome is in `last_move`."""
        return self._queue("move-log", path)

    def shutdown(self, timeout: float = 30) -> None:
        """Stop the server (flushing the log) and end the worker. Blocks until done."""
        done = self._queue("exit")
        done.wait(timeout)
        self._worker.join(timeout)

    def _queue(self, command: str, arg: str | None = None) -> threading.Event:
        done = threading.Event()
        self._commands.put((command, done, arg))
        return done

    # -- state (any thread) --------------------------------------------------------------------------

    def status(self) -> Status:
        with self._lock:
            state, message, settings = self._state, self._message, self._settings
        if settings is None:
            settings = self._load_settings_quietly()
        address = f"{settings.base_url.removeprefix('http://')}" if settings else "127.0.0.1"
        status = Status(
            server=state,
            address=address,
            message=message,
            sharing=bool(settings and not is_loopback(settings.host)),
            auth=bool(settings is None or settings.auth),
            port_busy=state == "error" and self._port_busy,
            elsewhere=self._elsewhere if state == "error" else "",
        )
        if state == "running":
            sync = self._sync.problems() if self._sync is not None else []
            problem = self._store.problem if self._store is not None else None
            status = replace(
                status,
                agents=agents_online(self.tracker, self.owner),
                share_urls=self._share_urls,
                sync_problems=tuple(sync),
                storage_problem=problem.message if problem is not None else "",
                meaning=meaning_progress(self._meaning),
            )
        return status

    def owner_token(self) -> str:
        """The owner's token: the running server's (held in memory when a read-only data dir has no token file),
        else the data dir's."""
        tokens = self._tokens or Tokens(Layout(self.data_dir).tokens)
        return tokens.default()

    @property
    def settings(self) -> Settings | None:
        with self._lock:
            return self._settings

    def check_alive(self) -> None:
        """Turn a server thread that ended by itself into the error state (called by the tray's ticker)."""
        with self._lock:
            server = self._server
            died = self._state == "running" and server is not None and not server.thread.is_alive()
        if died:
            self._queue("died")
        retry = self._retry_at
        if retry is not None and time.monotonic() >= retry:
            self._retry_at = None
            self._queue("retry")
        refused = self._refused
        if refused is not None and may_write(refused):  # given back: the writer tries again, once per change
            self._refused = None
            self._queue("writable")

    # -- worker -----------------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            command, done, arg = self._commands.get()
            try:
                if command == "writable":
                    self._take_writes()
                if command == "move-log":
                    self._move_log(arg)
                if command in ("stop", "exit", "died", "lan-on", "lan-off"):
                    error = self._server.error if command == "died" and self._server else None
                    self._stop()
                    if command == "died":
                        self._set("error", f"the server stopped unexpectedly ({error or 'no error given'})")
                if command in ("lan-on", "lan-off"):
                    self._save_host(LAN_HOST if command == "lan-on" else None)
                if command == "free-port" and self._server is None:
                    self._save_free_port()
                if command == "retry" and self._state != "error":
                    continue  # started, or stopped by the user, meanwhile
                if command in ("start", "lan-on", "lan-off", "free-port", "retry"):
                    self._start()
            except Exception as exc:  # never let the worker die: the tray must keep answering
                log.exception("supervisor command %s failed", command)
                self._set("error", str(exc))
            finally:
                done.set()
            if command == "exit":
                return

    def _move_log(self, path: str | None) -> None:
        from hivenote.server.sync.folder import use_default_folder, use_folder

        running = self._server is not None
        self._stop()
        try:
            move = use_folder(self.data_dir, Path(path).expanduser()) if path else use_default_folder(self.data_dir)
        except HivenoteError as exc:
            self.last_move = {"ok": False, "path": path, "message": str(exc)}
        else:
            self.last_move = {"ok": True, "path": str(move.target), "message": move.summary()}
        if running:
            self._start()
        self.tell(self.last_move["message"])

    def _start(self) -> None:
        if self._server is not None:
            return
        self._set("starting")
        try:
            settings = load_settings(self.flags, data_dir=self.data_dir)
            with self._lock:
                self._settings = settings
            sock = bind(settings.host, settings.port)
            try:
                store = self._open_store(settings)
            except BaseException:
                sock.close()
                raise
            try:
                from hivenote.server.web.app import create_app  # the server's imports load once the tray is up

                tokens = owner_tokens(settings.data_dir, readonly=store.readonly)
                app = create_app(settings, store, tracker=self.tracker, tokens=tokens, extra_routes=self.extra_routes())
                server = ServerThread(app, settings, sock)
                server.start()
                while not server.started and server.thread.is_alive():
                    server.thread.join(0.05)
                if not server.started:
                    server.stop()
                    raise HivenoteError(f"the server did not start: {server.error or 'unknown error'}")
            except BaseException:  # e.g. no token file, and none can be saved: nothing is left open
                store.close()
                sock.close()
                raise
        except PortInUse:
            self._retry_later(port_busy=True)
            self._set(
                "error",
                f"port {settings.port} on {settings.host} is already in use by another program. Hivenote tries it "
                f"again every {RETRY_S:.0f} s; or choose Use another port.",
            )
            return
        except ShardLocked as exc:  # `hivenote serve` (or another tray) has the data dir: point at it, and wait
            from hivenote.server.storage.serverfile import running_server

            self._retry_later(elsewhere=running_server(self.data_dir) or "")
            where = f" at {self._elsewhere}" if self._elsewhere else ""
            self._set(
                "error",
                f"another Hivenote{where} (pid {exc.pid or 'unknown'}) holds this data dir; Open dashboard and Copy "
                "connect snippet use it. This one starts when it stops.",
            )
            return
        except (HivenoteError, OSError) as exc:  # e.g. a data dir without a token file that cannot save one
            refusal = problems.write_refusal(exc)
            if refusal is None and not isinstance(exc, HivenoteError):
                raise
            if refusal is not None:  # which folder, and how to fix it; tried again once it is writable
                self._refused = Path(refusal.filename) if refusal.filename else self.data_dir
            self._set("error", str(exc) if refusal is None else problems.refused(self.data_dir, refusal))
            return
        self._server, self._store, self._tokens = server, store, tokens
        self._retry_at, self._port_busy, self._elsewhere = None, False, ""
        self._share_urls = tuple(settings.share_urls)
        self._sync = app.state.services.sync
        self._meaning = app.state.services.notebook.meaning
        self._set("running")

    def _open_store(self, settings: Settings) -> Store:
        """The writer. When this account may not write the data dir or its log folder (a read-only disk, a folder
        made by `sudo hivenote`), a reader instead, serving the notebook read-only: its problem says why and how to
        fix it (the tray's title and notification, the dashboard, and every refused write say it), and once the
        refused path is writable again (`check_alive`) the writer takes over."""
        self._refused = None
        try:
            return Store(settings.data_dir, log_dir=settings.log_path).open()
        except (StoreError, OSError) as exc:
            refusal = problems.write_refusal(exc)
            if refusal is None:
                raise
        store = Store(settings.data_dir, readonly=True, log_dir=settings.log_path).open()
        message = problems.unwritable(self.data_dir, refusal, serving=True)
        kind: ProblemKind = "read_only" if refusal.errno == errno.EROFS else "no_permission"
        store.problem = DiskProblem(kind, message, wall_ms())
        self._refused = Path(refusal.filename) if refusal.filename else self.data_dir
        log.warning("%s", message)
        return store

    def _take_writes(self) -> None:
        """The data dir is writable again: the server starts again over the writer (or stays read-only, saying
        why, if something else in the folder still refuses); one that could not start for it starts now."""
        store = self._store
        if store is not None and store.readonly:
            self._stop("starting")
            self._start()
        elif self._server is None and self._state == "error":
            self._start()

    def _stop(self, then: ServerState = "stopped") -> None:
        server, store = self._server, self._store
        if server is None or store is None:
            return
        self._server = self._store = self._tokens = None
        self._refused = None
        server.stop()
        store.close()
        self._set(then)

    def _set(self, state: ServerState, message: str = "") -> None:
        with self._lock:
            self._state, self._message = state, message
        self.on_change()

    def _load_settings_quietly(self) -> Settings | None:
        try:
            return load_settings(self.flags, data_dir=self.data_dir)
        except HivenoteError:
            return None

    def _retry_later(self, *, port_busy: bool = False, elsewhere: str = "") -> None:
        self._port_busy, self._elsewhere = port_busy, elsewhere
        self._retry_at = time.monotonic() + RETRY_S

    def _save_free_port(self) -> None:
        from hivenote.server.settings import save_setting

        settings = self._settings or load_settings(self.flags, data_dir=self.data_dir)
        with socket.socket() as probe:  # the system picks a free one (a moment before it is bound: good enough)
            probe.bind((settings.host, 0))
            port = probe.getsockname()[1]
        save_setting(self.data_dir, "port", port)  # what every later launch starts on (Start at login too)
        self.flags["port"] = port  # and this one, even with HIVENOTE_PORT set: the port told is the port used
        shadow = os.environ.get("HIVENOTE_PORT")
        told = f"Hivenote now uses port {port}: connect snippets copied from now on name it."
        if shadow and shadow != str(port):
            told += (
                f" HIVENOTE_PORT={shadow} is set where this Hivenote was started: remove it, or a launch from there "
                f"uses {shadow} again."
            )
        self.tell(told)

    def _save_host(self, host: str | None) -> None:
        from hivenote.server.settings import save_setting

        save_setting(self.data_dir, "host", host)
        self.flags.pop("host", None)  # the saved setting decides from now on


class UnsavedTokens(Tokens):
    """The token file of a data dir served read-only that has none (a read-only disk no Hivenote wrote to): the owner's
    token is made for this run and kept in memory, since it cannot be saved, so the notebook is served read-only
    rather than not at all. A token file that appears meanwhile is read as usual."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._unsaved = new_token()

    def default(self) -> str:
        with self._lock:
            self._load()
            return self._default or self._unsaved


def owner_tokens(data_dir: Path, *, readonly: bool) -> Tokens:
    path = Layout(data_dir).tokens
    return UnsavedTokens(path) if readonly and not path.exists() else Tokens(path)


def may_write(path: Path) -> bool:
    """Whether a write refused at `path` could succeed now (its folder writable, with room; the file itself too when
    it exists). Never writes."""
    folder = path if path.is_dir() else path.parent
    if not disk_writable(folder):
        return False
    return path.is_dir() or not path.exists() or os.access(path, os.W_OK)
