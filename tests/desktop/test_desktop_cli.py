"""The launcher's desktop commands (autostart, install-desktop, quit, doctor's desktop section) and the tray's
`/desktop/clipboard` route on a real server: loopback only, behind the token, bad input refused."""

from __future__ import annotations

import io
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivenote.desktop.main import cmd_tray, desktop_commands, doctor_desktop
from hivenote.desktop.routes import desktop_routes
from hivenote.server.cli import main as cli
from hivenote.server.core.errors import HivenoteError
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.serve import ServerThread, bind
from tests.support.live import exchange


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        list(args), out=out, err=err, extend=desktop_commands, default=cmd_tray, doctor_checks=(doctor_desktop,)
    )
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / ".local" / "share"))
    return tmp_path


def test_autostart_on_off_status(home: Path) -> None:
    entry = home / ".config" / "autostart" / "hivenote.desktop"
    assert run("autostart")[1].startswith("Start at login: off")
    code, out, _ = run("autostart", "on")
    assert code == 0 and out.startswith("Start at login: on") and entry.is_file()
    assert json.loads(run("--json", "autostart")[1])["enabled"] is True
    assert run("autostart", "off")[1].startswith("Start at login: off") and not entry.exists()
    with pytest.raises(SystemExit) as usage:
        run("autostart", "sideways")
    assert usage.value.code == 2


def test_install_and_uninstall_desktop(home: Path) -> None:
    code, out, _ = run("install-desktop")
    assert code == 0 and "applications menu" in out
    menu = home / ".local" / "share" / "applications" / "hivenote.desktop"
    assert menu.is_file() and (home / ".local/share/icons/hicolor/256x256/apps/hivenote.png").is_file()
    code, out, _ = run("uninstall-desktop")
    assert code == 0 and str(menu) in out and not menu.exists()
    assert run("uninstall-desktop")[1].strip() == "Nothing to remove."


def test_quit_without_a_running_tray(tmp_path: Path) -> None:
    code, out, _ = run("--data-dir", str(tmp_path / "data"), "quit")
    assert (code, out.strip()) == (0, "Hivenote's tray app is not running.")


def test_doctor_reports_the_desktop_backends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    code, out, _ = run("--data-dir", str(tmp_path / "data"), "--json", "doctor")
    report = json.loads(out)
    assert code == 0
    assert report["desktop"]["tray"] == {"backend": None, "why": report["desktop"]["tray"]["why"], "host": None}
    assert "no graphical session" in report["desktop"]["tray"]["why"]
    assert report["listen"] == {"host": "127.0.0.1", "port": 7788, "auth": True}
    assert report["token_set"] is False
    monkeypatch.setenv("DISPLAY", ":999")  # a session whose packages are all here (this machine has them)
    text = run("--data-dir", str(tmp_path / "data"), "doctor")[1]
    assert "tray: appindicator — AyatanaAppIndicator3" in text and "window: gtk — WebKitGTK" in text
    assert "missing system packages" not in text


# -- the clipboard route ------------------------------------------------------------------------------


class Board:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.fail = False

    def copy(self, text: str) -> None:
        if self.fail:
            raise HivenoteError("no clipboard program found: install xclip")
        self.texts.append(text)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, Board]]:
    from hivenote.server.web.app import create_app

    board = Board()
    sock = bind("127.0.0.1", 0)
    settings = Settings(data_dir=tmp_path / "data", port=sock.getsockname()[1])
    with Store(settings.data_dir) as store:
        server = ServerThread(create_app(settings, store, extra_routes=desktop_routes(board.copy)), settings, sock)
        server.start()
        while not server.started and server.thread.is_alive():
            server.thread.join(0.05)
        try:
            yield f"http://127.0.0.1:{server.port}", Tokens(settings.data_dir / "tokens.json").default(), board
        finally:
            server.stop()


def post(url: str, body: bytes, token: str | None) -> tuple[int, object]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    status, _, answer = exchange(urllib.request.Request(f"{url}/desktop/clipboard", body, headers, method="POST"))
    return status, json.loads(answer)


def test_clipboard_route_copies_for_this_machine_with_the_token(served: tuple[str, str, Board]) -> None:
    url, token, board = served
    assert post(url, json.dumps({"text": "claude mcp add …"}).encode(), token) == (200, {"copied": 16})
    assert board.texts == ["claude mcp add …"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"not json", 400, "invalid_json"),
        (b'{"text": ""}', 400, "invalid"),
        (b'{"text": 42}', 400, "invalid"),
        (b"[1]", 400, "invalid"),
    ],
)
def test_clipboard_route_refuses_bad_input(served: tuple[str, str, Board], body: bytes, status: int, code: str) -> None:
    url, token, board = served
    got_status, got = post(url, body, token)
    assert got_status == status and got["error"]["code"] == code, got  # type: ignore[index]
    assert board.texts == []


def test_clipboard_route_needs_the_token_and_reports_a_missing_clipboard(served: tuple[str, str, Board]) -> None:
    url, token, board = served
    assert post(url, b'{"text": "x"}', None)[0] == 401
    board.fail = True
    status, body = post(url, b'{"text": "x"}', token)
    assert status == 503 and "install xclip" in body["error"]["message"]  # type: ignore[index]
    assert board.texts == []
