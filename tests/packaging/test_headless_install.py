"""`pip install hivenote` on a headless machine: in a fresh venv, every dependency from a wheel (`--only-binary=:all:`,
so nothing could be compiled; Hivenote itself is pure Python and built from this source tree), no GUI toolkit
installed, and the launcher then serves REST, the dashboard and MCP, and `hivenote` alone says how to get the tray.

Real pip against the package index (pip's cache makes a second run faster): about a minute on 2 cores."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.headless import assert_refused_without_desktop_parts, home_env, run, serve_and_use

pytestmark = pytest.mark.system  # real pip and the package index

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 900  # a cold cache downloads about 30 wheels; the limit only stops a hung install
# The desktop parts and what they would drag in: none of them may come with the base install.
DESKTOP = {"pystray", "pywebview", "pillow", "pyperclip", "pygobject", "pycairo", "python-xlib", "pyobjc-core"}


@dataclass(frozen=True)
class Install:
    venv: Path
    source: Path  # the source tree pip built Hivenote from
    report: dict[str, object]  # pip's installation report (pip install --report)

    @property
    def hivenote(self) -> list[str]:
        return [str(self.venv / "bin" / "hivenote")]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def source_tree(into: Path) -> Path:
    """What a source distribution of Hivenote holds: pyproject.toml, the README and the package folders it names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    into.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, into / name)
    folders = {Path(folder).parts[0] for folder in project["tool"]["setuptools"]["package-dir"].values()}
    for folder in sorted(folders):
        shutil.copytree(ROOT / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return into


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Install:
    root = tmp_path_factory.mktemp("headless")
    source, venv, report = source_tree(root / "src"), root / "venv", root / "report.json"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=INSTALL_TIMEOUT_S)
    made = time.monotonic()
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--only-binary=:all:", "--report", str(report)]
    done = subprocess.run(
        [*pip, str(source)], capture_output=True, text=True, encoding="utf-8", timeout=INSTALL_TIMEOUT_S
    )
    assert done.returncode == 0, f"pip could not install Hivenote from wheels:\n{done.stdout[-4000:]}{done.stderr}"
    installed = Install(venv, source, json.loads(report.read_text(encoding="utf-8")))
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # shown in CI's log: what a headless install brings, and how fast
        print(f"\nheadless install: venv {made - started:.0f} s, pip install {time.monotonic() - made:.0f} s")
        for name, version, url in _installed(installed):
            print(f"  {name} {version}  {url.rsplit('/', 1)[-1] or url}")
    return installed


def _installed(install: Install) -> list[tuple[str, str, str]]:
    items = install.report["install"]
    assert isinstance(items, list)
    return sorted(
        (item["metadata"]["name"], item["metadata"]["version"], item["download_info"]["url"]) for item in items
    )


def test_every_dependency_is_a_wheel_and_no_gui_toolkit_is_installed(install: Install) -> None:
    installed = _installed(install)
    names = {name.lower().replace("_", "-") for name, _, _ in installed}
    assert {"hivenote", "mcp", "starlette", "uvicorn"} <= names
    assert not names & DESKTOP, f"the base install brought desktop parts: {sorted(names & DESKTOP)}"
    built = [(name, url) for name, _, url in installed if not url.endswith(".whl")]
    assert built == [("hivenote", install.source.as_uri())], f"built from source besides Hivenote: {built}"
    probe = "import importlib.util as u; print([m for m in ('pystray', 'webview', 'PIL', 'pyperclip', 'gi', 'Xlib')"
    probe += " if u.find_spec(m)])"
    found = subprocess.run([str(install.python), "-c", probe], capture_output=True, check=True).stdout
    assert found.strip() == b"[]"


def test_the_headless_install_serves_rest_the_dashboard_and_mcp(install: Install, tmp_path: Path) -> None:
    serve_and_use(install.hivenote, home_env(tmp_path), tmp_path / "serve.log")


def test_hivenote_alone_says_how_to_get_the_tray_app(install: Install, tmp_path: Path) -> None:
    env = home_env(tmp_path)
    done = run(install.hivenote, env)
    # The command that adds the extra to this very install: its own pip, the source tree it came from.
    command = f"{shlex.quote(str(install.python))} -m pip install {shlex.quote(f'{install.source}[desktop]')}"
    assert_refused_without_desktop_parts(done, command)
    assert subprocess.run([str(install.python), "-m", "pip", "--version"], capture_output=True).returncode == 0
    doctor = run(install.hivenote, env, "doctor")
    assert doctor.returncode == 0 and "desktop parts: not installed" in doctor.stdout, doctor.stderr
    assert command in doctor.stdout
