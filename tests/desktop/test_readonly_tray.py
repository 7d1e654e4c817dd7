"""The tray on a data dir this account may read but not write (a read-only disk, a folder another account made or
made read-only, a log folder left by `sudo hivenote`): it serves the notebook read-only (the dashboard, listing and
search work; a write is refused with why and what to do), the tray says so, a second launch finds it, and once the
folder is writable again it takes writes by itself. Run where file permissions apply to the child even as root
(tests.support.privileges)."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import urllib.error
from pathlib import Path

from hivenote.desktop.instance import fallback_home
from tests.support.disks import run, tmpfs
from tests.support.harness import Desktop
from tests.support.live import call, exchange, free_port
from tests.support.privileges import without_root_powers
from tests.support.tray import WINDOW, has_brand_colour, title
from tests.support.wait import eventually

WAIT_S = 30
READ_ONLY = "cannot save notes"  # the tray's title while the notebook cannot take writes
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "desktop"


def notebook(tmp_path: Path) -> Path:
    """A data dir as an earlier Hivenote left it: a note, and the owner's token."""
    data_dir = tmp_path / "data"
    base = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)]
    subprocess.run(
        [*base, "remember", "--kind", "fact", "--title", "A note from before"], check=True, capture_output=True
    )
    subprocess.run([*base, "token", "show"], check=True, capture_output=True)
    return data_dir


def set_modes(root: Path, folders: int, files: int) -> None:
    for path in (root, *root.rglob("*")):
        path.chmod(folders if path.is_dir() else files)


def token(data_dir: Path) -> str:
    return str(json.loads((data_dir / "tokens.json").read_text(encoding="utf-8"))["default"])


def tray(desktop: Desktop, data_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    argv = [*without_root_powers(), sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), *args]
    return desktop.spawn("app", argv)


def remember(port: int, data_dir: Path, text: str) -> tuple[int, str]:
    """POST /api/notes: the status, and the error's message when refused."""
    try:
        call(port, token(data_dir), "POST", "/api/notes", {"kind": "fact", "title": text})
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, str(json.loads(refused.read())["error"]["message"])
    return 201, ""


def titles(port: int, data_dir: Path, query: str) -> list[str]:
    found = json.loads(call(port, token(data_dir), "GET", f"/api/notes?q={query}"))
    return [note["title"] for note in found["results"]]


def test_an_unwritable_data_dir_is_served_read_only_until_writable_again(desktop: Desktop, tmp_path: Path) -> None:
    data_dir = notebook(tmp_path)
    set_modes(data_dir, 0o555, 0o444)
    port = free_port()
    app = tray(desktop, data_dir, "tray", "--port", str(port))
    item = desktop.tray_item()
    item.wait_for(lambda i: READ_ONLY in title(i), what="the tray says it cannot save notes")
    shown = title(item)
    assert str(data_dir) in shown and "chmod -R u+w" in shown and "read-only" in shown, shown  # where, what, the fix
    # The icon asks for attention as the error icon does (a panel shows NeedsAttention items first, or blinking).
    item.wait_for(lambda i: i.prop("Status") == "NeedsAttention", WAIT_S, what="SNI Status NeedsAttention (read-only)")
    told = lambda: [n["body"] for n in desktop.notifications() if READ_ONLY in n["body"].lower()]  # noqa: E731
    assert eventually(told, WAIT_S), desktop.notifications()  # a person not looking at the icon is told too

    # Reading works: search, and the dashboard.
    assert titles(port, data_dir, "before") == ["A note from before"]
    assert exchange(f"http://127.0.0.1:{port}/")[0] == 200
    # A write is refused with why and what to do; nothing changed on disk.
    status, message = remember(port, data_dir, "A note while read-only")
    assert status == 503, (status, message)
    assert "read-only" in message and str(data_dir) in message and "chmod -R u+w" in message, message

    # The fix (the folder given back): the tray notices and takes writes, without a restart.
    set_modes(data_dir, 0o700, 0o600)
    item.wait_for(lambda i: title(i).startswith("Hivenote — running") and READ_ONLY not in title(i), what="writable")
    assert remember(port, data_dir, "A note once fixed") == (201, "")
    item.wait_for(lambda i: i.prop("Status") == "Active", WAIT_S, what="SNI Status Active again")
    assert titles(port, data_dir, "fixed") == ["A note once fixed"]
    item.click("Quit Hivenote")
    assert app.wait(WAIT_S) == 0, desktop.output("app")


def test_a_second_launch_finds_the_read_only_tray_and_shows_its_dashboard(desktop: Desktop, tmp_path: Path) -> None:
    """tray.lock cannot be made in the data dir: the single-instance lock lives in the user's runtime folder then."""
    data_dir = notebook(tmp_path)
    set_modes(data_dir, 0o555, 0o444)
    app = tray(desktop, data_dir, "tray", "--port", str(free_port()))
    item = desktop.tray_item()
    item.wait_for(lambda i: READ_ONLY in title(i), what="read-only")
    lock_home = fallback_home(data_dir, desktop.env)  # this user's own, as tray.json holds the instance's key
    assert stat.S_IMODE(lock_home.stat().st_mode) == 0o700 and str(lock_home).startswith(desktop.env["XDG_RUNTIME_DIR"])
    assert stat.S_IMODE((lock_home / "tray.json").stat().st_mode) == 0o600
    argv = [*without_root_powers(), sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)]
    again = subprocess.run(argv, env=desktop.env, capture_output=True, text=True, encoding="utf-8", timeout=WAIT_S)
    assert again.returncode == 0 and "already running" in again.stderr, again.stderr
    window = desktop.find_window(WINDOW, WAIT_S)
    assert window is not None, desktop.output("app")
    assert len(desktop.tray_items()) == 1
    assert eventually(lambda: has_brand_colour(desktop.screenshot(window)), WAIT_S), "the dashboard did not render"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    desktop.screenshot(window).save(ARTIFACTS / "window-read-only.png")
    item.click("Quit Hivenote")
    assert app.wait(WAIT_S) == 0, desktop.output("app")


def test_a_read_only_log_folder_is_served_read_only_with_the_fix_in_the_tray(desktop: Desktop, tmp_path: Path) -> None:
    """The data dir is writable but its log/ is not (made by `sudo hivenote`): the same read-only tray."""
    data_dir = notebook(tmp_path)
    set_modes(data_dir / "log", 0o555, 0o444)
    port = free_port()
    app = tray(desktop, data_dir, "tray", "--port", str(port))
    item = desktop.tray_item()
    item.wait_for(lambda i: READ_ONLY in title(i), what="the tray says it cannot save notes")
    shown = title(item)
    assert str(data_dir / "log") in shown and "chmod -R u+w" in shown and "Errno" not in shown, shown
    assert titles(port, data_dir, "before") == ["A note from before"]
    assert remember(port, data_dir, "Refused")[0] == 503
    item.click("Quit Hivenote")
    assert app.wait(WAIT_S) == 0, desktop.output("app")


def test_a_shard_it_may_not_read_is_an_error_with_the_fix_until_fixed(desktop: Desktop, tmp_path: Path) -> None:
    """A shard left by `sudo hivenote` that this account may not read: nothing can be served, the tray says which
    file and the fix, and starts by itself once the file is given back."""
    data_dir = notebook(tmp_path)
    (shard,) = (data_dir / "log").glob("*.jsonl")
    shard.chmod(0)
    port = free_port()
    app = tray(desktop, data_dir, "tray", "--port", str(port))
    item = desktop.tray_item()
    item.wait_for(lambda i: title(i).startswith("Hivenote — error"), what="the error")
    shown = title(item)
    assert "cannot open" in shown and str(shard) in shown and "chmod -R u+rwX" in shown, shown  # the own file's fix
    assert "Reading still works" not in shown, shown
    shard.chmod(0o600)
    item.wait_for(lambda i: title(i).startswith("Hivenote — running") and READ_ONLY not in title(i), what="running")
    assert titles(port, data_dir, "before") == ["A note from before"]
    item.click("Quit Hivenote")
    assert app.wait(WAIT_S) == 0, desktop.output("app")


def test_a_read_only_file_system_without_a_token_file_is_served_read_only(desktop: Desktop, tmp_path: Path) -> None:
    """Issue 35: a notebook on a read-only file system that never had a token file went to an error state (the owner
    token could not be saved) instead of read-only. The token is held in memory for the run; the window signs in."""
    with tmpfs(tmp_path / "disk", "8m") as disk:
        data_dir = disk / "data"
        base = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)]
        subprocess.run([*base, "remember", "--kind", "fact", "--title", "A note from before"], check=True)
        assert not (data_dir / "tokens.json").exists()
        run("mount", "-o", "remount,ro", str(disk))
        port = free_port()
        app = tray(desktop, data_dir, "tray", "--port", str(port))
        item = desktop.tray_item()
        item.wait_for(lambda i: READ_ONLY in title(i), what="served read-only, not an error")
        assert title(item).startswith("Hivenote — running") and "read-only file system" in title(item), title(item)
        item.click("Open dashboard")
        window = desktop.find_window(WINDOW, WAIT_S)
        assert window is not None, desktop.output("app")
        assert eventually(lambda: has_brand_colour(desktop.screenshot(window)), WAIT_S), "the dashboard did not render"
        item.click("Quit Hivenote")
        assert app.wait(WAIT_S) == 0, desktop.output("app")
