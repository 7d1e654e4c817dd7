"""The dashboard window process itself (`python -m hivenote.desktop.window`, then `open URL` on its stdin), on a
private X display, against a real server: closing it the way a window manager does ends it with status 0 and nothing
on stderr."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivenote.desktop.window import window_command
from tests.support.harness import Desktop
from tests.support.live import Running, serve, sign_in_code, taken_port
from tests.support.wait import eventually

WAIT_S = 30
WINDOW = "^Hivenote$"


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    with serve(tmp_path / "data") as server:
        yield server


def open_window(desktop: Desktop, url: str, query: str = "") -> subprocess.Popen[bytes]:
    """The window process as the tray starts it: stdin and stdout are pipes to the tray, stderr the tray's; the
    address comes on stdin, never on the command line."""
    window = subprocess.Popen(
        window_command(),
        # pywebview's own open() calls name no encoding: the suite's EncodingWarning is for this project's code
        env={k: v for k, v in desktop.env.items() if k != "PYTHONWARNDEFAULTENCODING"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert window.stdin is not None
    window.stdin.write(f"open {url}/{query}\n".encode())
    window.stdin.flush()
    return window


def closed(desktop: Desktop, window_id: str, window: subprocess.Popen[bytes]) -> bool:
    if window.poll() is None:
        desktop.close_window(window_id)
    return eventually(lambda: window.poll() is not None, 0.9)


def close_once(desktop: Desktop, url: str) -> tuple[int, str]:
    """Open the window, close it with the window manager's close button; its exit status and stderr."""
    window = open_window(desktop, url)
    try:
        found = desktop.find_window(WINDOW, WAIT_S)
        assert found is not None, "no window"
        # WM_DELETE_WINDOW, sent again if it came before GTK's loop ran (the window is mapped a moment before)
        assert eventually(lambda: closed(desktop, found, window), WAIT_S, interval=1), "the window did not close"
        window.wait(WAIT_S)  # stdin stays open, as the tray keeps it
        _, err = window.communicate()
    finally:
        if window.poll() is None:
            window.kill()
            window.communicate()
    return window.returncode, err.decode(errors="replace")


def test_closing_the_window_exits_zero_with_nothing_on_stderr(desktop: Desktop, running: Running) -> None:
    for _ in range(3):  # the abort at shutdown was a race with the stdin thread: close it more than once
        assert close_once(desktop, running.url) == (0, "")


def test_the_end_of_stdin_closes_the_window(desktop: Desktop, running: Running) -> None:
    """The tray went away (its end of the pipe closed): the window closes too, cleanly."""
    window = open_window(desktop, running.url)
    try:
        assert desktop.find_window(WINDOW, WAIT_S) is not None
        _, err = window.communicate(timeout=WAIT_S)  # closes stdin, then reads to the end
    finally:
        if window.poll() is None:
            window.kill()
            window.communicate()
    assert (window.returncode, err.decode(errors="replace")) == (0, "")


@pytest.mark.parametrize(
    ("theme", "background"), [("Adwaita:dark", (0x14, 0x14, 0x13)), ("Adwaita", (0xF6, 0xF6, 0xF4))]
)
def test_until_the_page_paints_the_window_shows_the_dashboards_background_not_white(
    desktop: Desktop, theme: str, background: tuple[int, int, int]
) -> None:
    """A server that accepts the connection and never answers: the window shows what it shows before any paint."""
    with taken_port() as (port, _):
        env = {**desktop.env, "GTK_THEME": theme}
        env.pop("PYTHONWARNDEFAULTENCODING", None)
        url = f"http://127.0.0.1:{port}/"
        window = subprocess.Popen(
            window_command(), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            assert window.stdin is not None
            window.stdin.write(f"open {url}\n".encode())
            window.stdin.flush()
            found = desktop.find_window(WINDOW, WAIT_S)
            assert found is not None
            assert eventually(lambda: centre(desktop, found) != (0, 0, 0), WAIT_S)  # mapped and drawn at all
            assert centre(desktop, found) == background
        finally:
            window.kill()
            window.communicate()


def centre(desktop: Desktop, window: str) -> tuple[int, int, int]:
    image = desktop.screenshot(window).convert("RGB")
    pixel = image.getpixel((image.width // 2, image.height // 2))
    assert isinstance(pixel, tuple)
    return pixel[0], pixel[1], pixel[2]


def test_the_address_and_its_code_never_reach_the_command_line(running: Running) -> None:
    """Every account may read a process's command line (/proc/<pid>/cmdline): the one-time code would be theirs to
    trade first. The window takes its address on stdin; on its command line it refuses one."""
    assert not [a for a in window_command() if "://" in a]
    refused = subprocess.run(
        [*window_command(), running.url + "/?code=x"], input=b"", capture_output=True, timeout=60, check=False
    )
    assert refused.returncode == 2 and b"stdin" in refused.stderr


def test_the_window_signs_in_with_the_code_the_tray_hands_it(desktop: Desktop, running: Running) -> None:
    """In WebKitGTK itself: the page trades the code from its address for the cookie, and the code is then spent."""
    code = sign_in_code(running.url, running.token)
    assert running.services.sign_in.pending == 1
    window = open_window(desktop, running.url, f"?code={code}")
    try:
        assert desktop.find_window(WINDOW, WAIT_S) is not None
        assert eventually(lambda: running.services.sign_in.pending == 0, WAIT_S), "the window did not trade its code"
        assert not running.services.sign_in.redeem(code)  # spent by the window
    finally:
        window.kill()
        window.communicate()
