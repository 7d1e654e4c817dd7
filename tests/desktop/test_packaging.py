"""The files in packaging/ pass the tools that judge them (desktop-file-validate, systemd-analyze, plistlib)."""

from __future__ import annotations

import os
import plistlib
import subprocess
from pathlib import Path

import pytest

from hivenote.desktop.autostart import autostart, launcher_command
from tests.support.system import program

PACKAGING = Path(__file__).resolve().parent.parent.parent / "packaging"
# systemd.exec(5): only for system services, or for user services with PrivateUsers= (user namespaces).
SYSTEM_ONLY = (
    "User=",
    "Group=",
    "PrivateTmp=",
    "PrivateDevices=",
    "PrivateNetwork=",
    "ProtectSystem=",
    "ProtectHome=",
    "ProtectKernel",
    "ProtectControlGroups=",
    "ReadOnlyPaths=",
    "InaccessiblePaths=",
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
)


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, encoding="utf-8", env=env, check=False)


def test_the_menu_entry_passes_desktop_file_validate() -> None:
    tool = program("desktop-file-validate", "apt-get install desktop-file-utils")
    done = run([tool, str(PACKAGING / "hivenote.desktop")])
    assert done.returncode == 0, done.stdout + done.stderr
    assert (done.stdout + done.stderr).strip() == ""  # no hint either: one main category, listed once in a menu


def test_the_menu_entry_starts_the_launcher_on_path() -> None:
    lines = (PACKAGING / "hivenote.desktop").read_text(encoding="utf-8").splitlines()
    keys = dict(line.split("=", 1) for line in lines[1:] if line)
    assert lines[0] == "[Desktop Entry]"
    assert keys["Exec"] == "hivenote" and keys["Icon"] == "hivenote" and keys["StartupWMClass"] == "hivenote"
    assert keys["GenericName"] == "Shared memory for AI agents" and keys["Terminal"] == "false"
    assert keys["Categories"] == "Development;" and keys["StartupNotify"] == "false"


def verify_user_unit(unit: Path, home: Path, runtime: Path) -> subprocess.CompletedProcess[str]:
    tool = program("systemd-analyze", "apt-get install systemd")
    runtime.mkdir(mode=0o700, exist_ok=True)
    # verify --user builds a user manager in memory: it needs XDG_RUNTIME_DIR, not a running systemd.
    env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_COLOR": "0"}
    return run([tool, "verify", "--user", "--man=no", str(unit)], env)


def install_launcher(home: Path) -> None:
    """Where the unit's ExecStart=%h/.local/bin/hivenote looks: this venv's real launcher."""
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "hivenote").symlink_to(launcher_command()[0])


def test_the_user_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    install_launcher(tmp_path / "home")
    done = verify_user_unit(PACKAGING / "hivenote.service", tmp_path / "home", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == ""  # unknown keys only warn, with status 0


def test_systemd_analyze_verify_catches_a_bad_key_and_a_missing_launcher(tmp_path: Path) -> None:
    broken = tmp_path / "hivenote.service"
    text = (PACKAGING / "hivenote.service").read_text(encoding="utf-8")
    broken.write_text(text.replace("RestartSec=3", "RestartSecs=3"), encoding="utf-8")
    (tmp_path / "home").mkdir()
    done = verify_user_unit(broken, tmp_path / "home", tmp_path / "run")
    assert "Unknown key 'RestartSecs'" in done.stderr
    assert "hivenote is not executable" in done.stderr and done.returncode != 0


def test_the_user_unit_runs_hivenote_serve_with_hardening_a_user_manager_supports() -> None:
    lines = (PACKAGING / "hivenote.service").read_text(encoding="utf-8").splitlines()
    settings = [line for line in lines if line and not line.startswith("#")]
    assert "ExecStart=%h/.local/bin/hivenote serve" in settings
    assert {"Restart=on-failure", "RestartSec=3", "NoNewPrivileges=true", "WantedBy=default.target"} <= set(settings)
    assert [line for line in settings if line.startswith(SYSTEM_ONLY)] == []
    assert not [line for line in settings if line.startswith("After=")]  # default.target would be an ordering cycle


def test_the_launch_agent_template_is_the_plist_start_at_login_writes(tmp_path: Path) -> None:
    template = (PACKAGING / "com.hivenote.app.plist").read_text(encoding="utf-8")
    assert plistlib.loads(template.encode("utf-8"))["Label"] == "com.hivenote.app"
    home = tmp_path / "Users" / "ana"
    filled = template.replace("@HIVENOTE@", "/Users/ana/.local/bin/hivenote").replace("@HOME@", str(home))
    assert "@" not in filled.split("-->", 1)[1]
    autostart(["/Users/ana/.local/bin/hivenote"], platform="darwin", home=home).enable()
    written = (home / "Library" / "LaunchAgents" / "com.hivenote.app.plist").read_bytes()
    assert plistlib.loads(filled.encode("utf-8")) == plistlib.loads(written)


FILES = sorted(p.name for p in PACKAGING.iterdir() if p.name != "README.md" and not p.name.startswith("."))


@pytest.mark.parametrize("name", FILES)
def test_every_packaging_file_is_explained_in_its_readme(name: str) -> None:
    assert f"`{name}`" in (PACKAGING / "README.md").read_text(encoding="utf-8")
