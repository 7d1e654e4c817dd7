"""A data dir this account cannot use (made by an earlier `sudo hivenote`): the tray, started from a terminal or
from the applications menu, on a folder it may not even open, and `hivenote remember` on one it may not write, say
what happened and how to fix it, with the documented exit code and no traceback; from the menu (no terminal) a
dialog shows it. (A folder it may read is served read-only: tests/desktop/test_readonly_tray.py.) Run where file
permissions apply to the child even as root (tests.support.privileges)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from tests.support.disks import fill, tmpfs
from tests.support.harness import Desktop
from tests.support.live import free_port
from tests.support.privileges import without_root_powers
from tests.support.wait import eventually

WAIT_S = 30
EXIT_STORE = 5  # the command line's documented "storage error"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "desktop"


def readonly_data_dir(tmp_path: Path) -> Path:
    """A data dir as `sudo hivenote` leaves it for the user: there, with notes, and not writable."""
    data_dir = tmp_path / "data"
    remember = ["remember", "--kind", "fact", "--title", "A note from before"]
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), *remember]
    subprocess.run(argv, check=True, capture_output=True)
    for path in (data_dir, *data_dir.rglob("*")):
        path.chmod(0o555 if path.is_dir() else 0o444)
    return data_dir


def unreadable_data_dir(tmp_path: Path) -> Path:
    """A data dir with notes that this account may not open, as another account's private folder is to it."""
    data_dir = readonly_data_dir(tmp_path)
    data_dir.chmod(0)
    return data_dir


def hivenote(desktop: Desktop, data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [*without_root_powers(), sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), *args]
    return subprocess.run(argv, env=desktop.env, capture_output=True, text=True, encoding="utf-8", timeout=WAIT_S)


def says_what_and_how(text: str, data_dir: Path) -> None:
    assert "Traceback" not in text, text
    assert str(data_dir) in text, text  # names the folder
    assert "chown" in text or re.search(r"chmod (-R )?u\+", text), text  # and the fix (chmod for this account's own)


def says_nothing_can_be_shown(text: str, data_dir: Path) -> None:
    says_what_and_how(text, data_dir)
    assert "Reading still works" not in text and "cannot open its data folder" in text, text


def in_a_terminal(desktop: Desktop, argv: list[str]) -> tuple[int, str]:
    """Run argv with its stdout and stderr on a pseudo-terminal, as from a shell; its exit code and output."""
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(argv, env=desktop.env, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
        os.close(terminal)
        output = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            output += chunk
        code = process.wait(WAIT_S)
    finally:
        os.close(controller)
    return code, output.decode(errors="replace").replace("\r\n", "\n")


def test_the_tray_from_a_terminal_says_why_and_exits_with_the_storage_code(desktop: Desktop, tmp_path: Path) -> None:
    data_dir = unreadable_data_dir(tmp_path)
    argv = [*without_root_powers(), sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)]
    code, output = in_a_terminal(desktop, [*argv, "tray", "--port", str(free_port())])
    says_nothing_can_be_shown(output, data_dir)
    assert code == EXIT_STORE, output
    assert not desktop.window_visible("^Hivenote cannot start$")  # the terminal has it: no dialog


def test_the_tray_from_the_menu_shows_a_dialog(desktop: Desktop, tmp_path: Path) -> None:
    """Launched from the applications menu, stdout and stderr go nowhere a person looks: a dialog says it."""
    data_dir = unreadable_data_dir(tmp_path)
    argv = [*without_root_powers(), sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)]
    app = desktop.spawn("app", argv)  # not a terminal: its output goes to a log file
    dialog = desktop.find_window("^Hivenote cannot start$", WAIT_S)
    assert dialog is not None, f"no dialog; exit {app.poll()}\n{desktop.output('app')}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    desktop.screenshot(dialog).save(ARTIFACTS / "error-dialog-unwritable-data-dir.png")
    desktop.close_window(dialog)
    assert eventually(lambda: app.poll() is not None, WAIT_S), "the dialog did not close"
    assert app.returncode == EXIT_STORE
    says_nothing_can_be_shown(desktop.output("app"), data_dir)


def test_remember_with_a_read_only_log_says_why_and_reading_still_works(desktop: Desktop, tmp_path: Path) -> None:
    data_dir = readonly_data_dir(tmp_path)
    done = hivenote(desktop, data_dir, "remember", "--kind", "fact", "--title", "Another note")
    says_what_and_how(done.stderr, data_dir)
    assert done.returncode == EXIT_STORE, done.stderr
    listed = hivenote(desktop, data_dir, "list")
    assert listed.returncode == 0 and "A note from before" in listed.stdout, listed.stderr


def test_a_shard_this_account_may_not_read_is_named_as_such_not_as_a_write(desktop: Desktop, tmp_path: Path) -> None:
    """`sudo hivenote remember` in a data dir of the user's own leaves a shard only root may read: even `hivenote
    list` cannot work then, and the message must not send the person back to `hivenote list`."""
    data_dir = readonly_data_dir(tmp_path)
    for folder in (data_dir, data_dir / "log"):
        folder.chmod(0o700)
    for shard in (data_dir / "log").glob("*.jsonl"):
        shard.chmod(0)
    listed = hivenote(desktop, data_dir, "list")
    says_what_and_how(listed.stderr, data_dir)
    assert listed.returncode == EXIT_STORE, listed.stderr
    assert "Reading still works" not in listed.stderr and "cannot open" in listed.stderr, listed.stderr


def test_the_tray_from_the_menu_on_a_full_disk_shows_a_dialog(desktop: Desktop, tmp_path: Path) -> None:
    """Issue 35: launched from the applications menu with the data dir on a full disk there was no icon, no window
    and no notification: only stderr, which nobody reads there (rc 5)."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        fill(disk)
        data_dir = disk / "data"
        app = desktop.spawn("app", [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)])
        dialog = desktop.find_window("^Hivenote cannot start$", WAIT_S)
        assert dialog is not None, f"no dialog; exit {app.poll()}\n{desktop.output('app')}"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        desktop.screenshot(dialog).save(ARTIFACTS / "error-dialog-full-disk.png")
        desktop.close_window(dialog)
        assert eventually(lambda: app.poll() is not None, WAIT_S), "the dialog did not close"
        assert app.returncode == EXIT_STORE
        said = desktop.output("app")
        assert "No space left on device" in said and "Free some disk space" in said and "Traceback" not in said, said
