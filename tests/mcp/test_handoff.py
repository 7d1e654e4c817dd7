"""`hivenote stdio` handing its client's session to the running server over a Unix domain socket (handoff.py,
handoff_stdio.py): real servers on 127.0.0.1, real `hivenote stdio` processes driven by the MCP SDK's client or by raw
JSON-RPC lines, the server stopped, restarted and killed under them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation, TextContent
from starlette.applications import Starlette

from hivenote.server.agents import AgentTracker
from hivenote.server.mcp.handoff import MAX_IN_FLIGHT, OUT_HIGH_WATER
from hivenote.server.mcp.handoff_stdio import peer_uid, same_user
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind
from tests.support.live import GRAPH_URI, INITIALIZED, Inbox, call, free_port, health, initialize, subscribe
from tests.support.wait import wait_until

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(sys.platform == "win32", reason="the handoff is POSIX; Windows keeps the bridge"),
]

NAME = Implementation(name="claude-ai", version="0.1.0")
CLI = [sys.executable, "-m", "hivenote.server.cli"]


@contextlib.contextmanager
def server_for(data_dir: Path, port: int = 0, tracker: AgentTracker | None = None) -> Iterator[Starlette]:
    """A real server for `data_dir` (on `port` when given, so a second one can take the first one's place)."""
    sock = bind("127.0.0.1", port)
    settings = replace(Settings(data_dir=data_dir), port=sock.getsockname()[1])
    with Store(data_dir) as store:
        app = create_app(settings, store, tracker=tracker)
        server = ServerThread(app, settings, sock)
        server.start()
        wait_until(lambda: server.started or not server.thread.is_alive())
        assert server.started, server.error
        try:
            yield app
        finally:
            server.stop()


def port_of(app: Starlette) -> int:
    return int(app.state.services.settings.port)


def stdio_params(data_dir: Path, port: int, *extra: str) -> StdioServerParameters:
    argv = [*CLI[1:], "--data-dir", str(data_dir), "stdio", "--port", str(port), *extra]
    return StdioServerParameters(command=sys.executable, args=argv, env={**os.environ})


def handed(app: Starlette) -> int:
    return len(app.state.handoff.sessions)


GRAPH_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}]}),
    ("create_entities", {"entities": [{"name": "Engine", "entityType": "machine", "observations": []}]}),
    ("create_relations", {"relations": [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]}),
    ("add_observations", {"observations": [{"entityName": "Ada", "contents": ["born 1815", "wrote notes"]}]}),
    ("search_nodes", {"query": "engine"}),
    ("open_nodes", {"names": ["Ada", "Nobody"]}),
    ("read_graph", {}),
    ("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}),  # a tool error
    ("create_entities", {"entities": "not a list"}),  # an argument check
    ("no_such_tool", {}),
    ("delete_observations", {"deletions": [{"entityName": "Ada", "observations": ["born 1815"]}]}),
    ("delete_relations", {"relations": [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]}),
    ("delete_entities", {"entityNames": ["Engine"]}),
    ("read_graph", {}),
]


def test_a_handed_session_answers_the_graph_tools_exactly_as_the_bridge_does(tmp_path: Path) -> None:
    async def session(app: Starlette, *extra: str) -> tuple[int, int, list[dict[str, Any]]]:
        with anyio.fail_after(60):
            params = stdio_params(app.state.services.settings.data_dir, port_of(app), "--graph", *extra)
            async with Client(params, client_info=NAME, mode="legacy") as client:
                answers = [(await client.call_tool(name, args)).model_dump() for name, args in GRAPH_CALLS]
                direct = sum(session.direct for session in app.state.handoff.sessions)
                return handed(app), direct, answers

    with server_for(tmp_path / "handed") as first, server_for(tmp_path / "bridged") as second:
        handed_to, direct, by_handoff = anyio.run(session, first)
        bridged_to, _, by_bridge = anyio.run(session, second, "--bridge")
    assert (handed_to, bridged_to) == (1, 0)  # the first ran in the server, the second went over HTTP
    # Answered directly once a request the SDK served named the session's connection (the client's tools/list).
    assert direct >= len(GRAPH_CALLS) - 1
    assert by_handoff == by_bridge
    assert by_handoff[-1]["structured_content"]["entities"][0]["observations"] == ["wrote notes"]


def test_a_handed_session_names_the_real_client_in_provenance_and_among_agents_online(tmp_path: Path) -> None:
    tracker = AgentTracker()

    async def session(app: Starlette) -> int:
        with anyio.fail_after(60):
            params = stdio_params(app.state.services.settings.data_dir, port_of(app))
            async with Client(params, client_info=NAME, mode="legacy") as client:
                stored = await client.call_tool("brain_remember", {"kind": "fact", "title": "Handed over"})
                assert not stored.is_error
                return handed(app)

    with server_for(tmp_path / "data", tracker=tracker) as app:
        assert anyio.run(session, app) == 1
        (note,) = app.state.services.store.state.iter_notes()
    assert (note.created_by.agent, note.created_by.client) == ("claude-desktop", "claude-ai 0.1.0")
    assert any(seen.agent == "claude-desktop" for seen in tracker.online())


def test_the_server_stopping_mid_session_hands_it_back_and_the_client_goes_on_with_the_next(tmp_path: Path) -> None:
    """The tray's Stop/Start: the session comes back to `hivenote stdio`, which goes on as the bridge and opens it
    again on the next server with the client's own initialize and subscription."""
    data_dir, port = tmp_path / "data", free_port()
    inbox = Inbox()
    entity = {"entities": [{"name": "Before", "entityType": "t", "observations": []}]}

    async def scenario() -> tuple[int, str]:
        with anyio.fail_after(60):
            first = contextlib.ExitStack()
            app = first.enter_context(server_for(data_dir, port))
            params = stdio_params(data_dir, port, "--graph")
            async with Client(params, client_info=NAME, mode="legacy", message_handler=inbox.handle) as client:
                await subscribe(client)
                await client.call_tool("create_entities", entity)
                was_handed = handed(app)
                first.close()  # the server stops, handing the session back
                with server_for(data_dir, port):
                    opened = await client.call_tool("open_nodes", {"names": ["Before"]})
                    heard = len(inbox.updates)
                    token = Tokens(data_dir / "tokens.json").default()
                    body = {"entities": [{"name": "After", "entityType": "t", "observations": []}]}
                    await anyio.to_thread.run_sync(call, port, token, "POST", "/api/graph/entities", body)
                    await inbox.until(heard + 1)  # the subscription came along
                    assert isinstance(opened.content[0], TextContent)
                    return was_handed, opened.content[0].text

    was_handed, text = anyio.run(scenario)
    assert was_handed == 1
    assert json.loads(text)["entities"][0]["name"] == "Before"
    assert inbox.updates[-1] == GRAPH_URI


class Lines:
    """A `hivenote stdio` process driven with raw JSON-RPC lines; its answers collected by a thread."""

    def __init__(self, argv: list[str], stderr: IO[bytes] | None = None) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.answers: list[dict[str, Any]] = []
        self.reading = threading.Event()  # cleared: the client stops taking its answers
        self.reading.set()
        self.raw: list[bytes] = []
        self._reader = threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            self.reading.wait()
            self.raw.append(line)
            with contextlib.suppress(ValueError):
                self.answers.append(json.loads(line))

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        self.stdin.write(b"".join(m if isinstance(m, bytes) else json.dumps(m).encode() + b"\n" for m in messages))
        self.stdin.flush()

    def answer(self, request_id: Any) -> dict[str, Any]:
        wait_until(lambda: any(a.get("id") == request_id for a in self.answers), what=lambda: f"{self.raw[-3:]}")
        return next(a for a in self.answers if a.get("id") == request_id)

    def open(self) -> None:
        self.send(initialize("claude-ai"))
        assert "result" in self.answer(1)
        self.send(INITIALIZED)

    def close(self) -> int:
        self.stdin.close()
        code = self.process.wait(timeout=60)
        self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        """At the end, whatever happened: the process gone and its pipes closed."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)
        self._reader.join(timeout=10)
        streams = [self.process.stdin] + ([] if self._reader.is_alive() else [self.process.stdout])
        for stream in streams:  # (a stdout the reader still blocks on would block its close)
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def tool(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def holds_pipe_of(pid: int, stream: IO[bytes]) -> bool:
    """Whether process `pid` has the pipe `stream` is an end of open (Linux: /proc/<pid>/fd)."""
    inode = os.fstat(stream.fileno()).st_ino
    with contextlib.suppress(OSError):
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == f"pipe:[{inode}]" for fd in os.listdir(f"/proc/{pid}/fd"))
    return False


STOPPED = "Hivenote stopped before answering"
UNREACHABLE = "Hivenote is not reachable"


def test_lines_read_and_answers_unwritten_when_the_server_stops_are_each_passed_on_exactly_once(
    tmp_path: Path,
) -> None:
    """The client stops reading its stdout while it sends 300 read_graph calls: the server writes what the pipe
    takes, keeps answers up to its bound and stops reading (lines wait, read or not). Then it is stopped: the
    answers it could not write and the lines it had read but not handled go to the stdio process, which writes the
    first and serves the second as the bridge. Every request gets exactly one answer, whole (none lost, none twice,
    no line cut), and the session goes on with the next server."""
    data_dir, port = tmp_path / "data", free_port()
    words = "observation " * 8
    seeded = {
        "entities": [
            {"name": f"E{i}", "entityType": "t", "observations": [f"{words}{j}" for j in range(5)]} for i in range(40)
        ]
    }
    first = contextlib.ExitStack()
    app = first.enter_context(server_for(data_dir, port))
    lines = Lines([*CLI, "--data-dir", str(data_dir), "stdio", "--graph", "--port", str(port)])
    ids = range(100, 400)
    try:
        lines.open()
        lines.send(tool(2, "create_entities", seeded))
        lines.answer(2)
        (session,) = app.state.handoff.sessions
        lines.reading.clear()  # the client stops taking its answers
        lines.send(*(tool(i, "read_graph", {}) for i in ids))
        wait_until(lambda: len(session.outbox) > OUT_HIGH_WATER and not session.in_flight)
        assert session.inbox, "lines read and not handled"  # what the test is about
        held = len(session.outbox)
        stopping = threading.Thread(target=first.close)
        stopping.start()
        wait_until(lambda: session.finished.is_set())  # handed back
        lines.reading.set()
        stopping.join(timeout=60)
        with server_for(data_dir, port):
            wait_until(lambda: len({a.get("id") for a in lines.answers} & set(ids)) == len(ids))
            lines.send(tool(1000, "open_nodes", {"names": ["E1"]}))
            after = lines.answer(1000)
        code = lines.close()
    finally:
        first.close()
        lines.kill()
    assert len(lines.answers) == len(lines.raw), "every line written is whole JSON"
    # What a client that does not read costs the server: its bound, and the answers to requests already taken.
    assert held <= OUT_HIGH_WATER + MAX_IN_FLIGHT * max(len(line) for line in lines.raw)
    counts = Counter(a.get("id") for a in lines.answers)
    assert all(counts[i] == 1 for i in ids), {i: counts[i] for i in ids if counts[i] != 1}
    said = Counter(a["error"]["message"][:30] for a in lines.answers if a.get("id") in ids and "error" in a)
    assert set(said) <= {UNREACHABLE[:30]}, said
    for answer in (a for a in lines.answers if a.get("id") in ids and "result" in a):
        assert len(json.loads(answer["result"]["content"][0]["text"])["entities"]) == 40
    assert json.loads(after["result"]["content"][0]["text"])["entities"][0]["name"] == "E1"
    assert code == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see who holds the pipe")
def test_a_server_killed_mid_session_leaves_the_session_to_the_bridge_which_reopens_it_on_the_next(
    tmp_path: Path,
) -> None:
    data_dir, port = tmp_path / "data", free_port()
    serve = [*CLI, "--data-dir", str(data_dir), "serve", "--port", str(port)]
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed at the end, after both servers
    said = open(tmp_path / "stdio.err", "wb")  # noqa: SIM115 - the stdio process's stderr, closed at the end
    servers = [subprocess.Popen(serve, stdout=log, stderr=log, start_new_session=True)]
    lines: Lines | None = None
    try:
        wait_until(lambda: health(port) == 200 and (data_dir / "server.json").exists())
        lines = Lines([*CLI, "--data-dir", str(data_dir), "stdio", "--graph", "--port", str(port)], stderr=said)
        lines.open()
        created = tool(
            2, "create_entities", {"entities": [{"name": "Survivor", "entityType": "t", "observations": []}]}
        )
        lines.send(created)
        lines.answer(2)
        assert holds_pipe_of(servers[0].pid, lines.stdin), "the server should be reading the client's pipe itself"
        os.kill(servers[0].pid, signal.SIGKILL)
        servers[0].wait(timeout=30)
        servers.append(subprocess.Popen(serve, stdout=log, stderr=log, start_new_session=True))
        wait_until(lambda: health(port) == 200)
        lines.send(tool(3, "open_nodes", {"names": ["Survivor"]}))
        opened = lines.answer(3)
        assert json.loads(opened["result"]["content"][0]["text"])["entities"][0]["name"] == "Survivor"
        assert lines.close() == 0
        told = (tmp_path / "stdio.err").read_text(encoding="utf-8")
        assert "the server ended without handing the session back" in told, told
    finally:
        for server in servers:
            if server.poll() is None:
                server.terminate()
                server.wait(timeout=30)
        if lines is not None:
            lines.kill()
        log.close()
        said.close()


def test_the_peer_check_reads_this_user_from_the_kernel() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert peer_uid(left) == os.getuid() and same_user(right)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_another_user_reaching_the_socket_is_refused_and_the_server_reads_nothing(tmp_path: Path) -> None:
    """The socket's directory keeps other users out; here a link to it is put where they can reach it, so the
    server's own check of the peer's uid is what refuses them."""
    other = tempfile.mkdtemp()
    script = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "r, w = os.pipe()\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "try:\n"  # the server may have refused and closed before this is sent
        '    socket.send_fds(s, [b\'{"hivenote":"handoff","version":1,"endpoint":"/mcp/graph"}\\n\'], [r, w])\n'
        "except BrokenPipeError:\n"
        "    pass\n"
        "sys.stdout.write(s.recv(4096).decode())\n"
    )
    try:
        os.chmod(other, 0o755)
        with server_for(tmp_path / "data") as app:
            link = Path(other) / "s"
            os.link(app.state.handoff.listening_at, link)
            os.chmod(link, 0o666)
            done = subprocess.run([sys.executable, "-I", "-c", script, str(link)], capture_output=True, timeout=60)
            refused, sessions = app.state.handoff.refused, handed(app)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(Path(other) / "s")
        os.rmdir(other)
    assert done.stdout, done.stderr
    assert json.loads(done.stdout) == {"refused": "only the user running this Hivenote may hand it a session"}
    assert (refused, sessions) == (1, 0)


def test_with_no_socket_answering_the_client_is_bridged_as_before(tmp_path: Path) -> None:
    async def session(app: Starlette) -> tuple[int, bool]:
        with anyio.fail_after(60):
            params = stdio_params(app.state.services.settings.data_dir, port_of(app), "--graph")
            async with Client(params, client_info=NAME, mode="legacy") as client:
                created = await client.call_tool(*GRAPH_CALLS[0])
                return handed(app), created.is_error

    with server_for(tmp_path / "data") as app:
        os.unlink(app.state.handoff.listening_at)  # announced, but nothing answers there any more
        assert anyio.run(session, app) == (0, False)


def test_bad_lines_on_a_handed_session_get_clear_errors_and_change_nothing(tmp_path: Path) -> None:
    with server_for(tmp_path / "data") as app:
        lines = Lines([*CLI, "--data-dir", str(tmp_path / "data"), "stdio", "--port", str(port_of(app))])
        try:
            lines.open()
            assert handed(app) == 1
            big = tool(7, "brain_remember", {"kind": "fact", "title": "big", "body": "x" * (3 << 19)})
            lines.send(b"not json at all\n", b'{"jsonrpc":"2.0","id":5}\n', big)
            lines.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
            listed = lines.answer(8)
            invalid, too_big = lines.answer(5), lines.answer(7)
            still = handed(app)
            code = lines.close()
        finally:
            lines.kill()

        notes = list(app.state.services.store.state.iter_notes())
    assert {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}} in lines.answers
    assert invalid["error"]["code"] == -32600
    assert "1 MiB" in too_big["error"]["message"] and "nothing was written" in too_big["error"]["message"]
    assert any(t["name"] == "brain_remember" for t in listed["result"]["tools"])
    assert (still, code, notes) == (1, 0, [])


def test_the_socket_is_in_a_directory_only_this_user_may_enter_and_never_in_the_data_dir(tmp_path: Path) -> None:
    """A live socket in the data dir is a file that copies, backups and sync tools of it trip over (reading it fails
    with ENXIO): it lives in this user's runtime dir instead, and goes with the server."""
    data = tmp_path / "data"
    with server_for(data) as app:
        where = app.state.handoff.listening_at
        assert where is not None and not where.is_relative_to(data)
        folder = os.lstat(where.parent)
        assert stat.S_ISSOCK(os.lstat(where).st_mode)
        assert stat.S_ISDIR(folder.st_mode) and folder.st_uid == os.getuid() and not folder.st_mode & 0o077
        assert not [path for path in data.rglob("*") if path.is_socket()]
    assert not where.exists()
