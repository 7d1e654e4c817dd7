"""Two real Syncthing instances (Debian's `syncthing`) sharing one folder on 127.0.0.1, for tests. The config is
edited before the first start (loopback only; discovery, relays, NAT, crash and usage reporting, upgrades off: a
test must reach nothing beyond this machine), only one side dials the other, and readiness is polled with
deadlines."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.live import free_port
from tests.support.system import program
from tests.support.wait import wait_until

FOLDER_ID = "hivenote-log"
START_S = 30  # 1.19 connects in ~3 s; a stalled Hello exchange can take much longer, so fail clearly instead
ENV = {"STNOUPGRADE": "1", "STNODEFAULTFOLDER": "1", "STNORESTART": "1"}
OFF = (
    "globalAnnounceEnabled",
    "localAnnounceEnabled",
    "relaysEnabled",
    "natEnabled",
    "crashReportingEnabled",
    "startBrowser",
)


def syncthing_binary() -> str:
    return program("syncthing", "apt-get install syncthing")


@dataclass
class Syncthing:
    """One instance: its home, the folder it syncs, its ports and REST key."""

    name: str
    home: Path
    folder: Path
    listen_port: int
    gui_port: int
    api_key: str
    device_id: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.home / "syncthing.log"

    def log_tail(self) -> str:
        try:
            return f"syncthing {self.name}:\n" + self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        except FileNotFoundError:
            return f"syncthing {self.name}: no log"

    def generate(self) -> None:
        binary = syncthing_binary()
        subprocess.run(
            [binary, "generate", f"--home={self.home}", "--no-default-folder", "--skip-port-probing"],
            check=True,
            capture_output=True,
            env=os.environ | ENV,
        )
        done = subprocess.run(
            [binary, "serve", f"--home={self.home}", "--device-id"],
            check=True,
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=os.environ | ENV,
        )
        self.device_id = done.stdout.strip()

    def configure(self, peer: Syncthing, *, dial: bool) -> None:
        """Edit config.xml before the first start: loopback only, nothing reaching out, the peer and the folder.
        Only one side gets the peer's address (`dial`): when both dial at once, 1.19 can stall for 20-40 s."""
        path = self.home / "config.xml"
        tree = ET.parse(path)
        root = tree.getroot()
        options = _child(root, "options")
        for listen in options.findall("listenAddress"):
            options.remove(listen)
        ET.SubElement(options, "listenAddress").text = f"tcp://127.0.0.1:{self.listen_port}"
        for name in OFF:
            _child(options, name).text = "false"
        _child(options, "urAccepted").text = "-1"
        _child(options, "autoUpgradeIntervalH").text = "0"
        gui = _child(root, "gui")
        _child(gui, "address").text = f"127.0.0.1:{self.gui_port}"
        _child(gui, "apikey").text = self.api_key
        defaults = _child(root, "defaults")
        device = copy.deepcopy(_child(defaults, "device"))
        device.set("id", peer.device_id)
        device.set("name", peer.name)
        _child(device, "address").text = f"tcp://127.0.0.1:{peer.listen_port}" if dial else "dynamic"
        root.insert(1, device)
        folder = copy.deepcopy(_child(defaults, "folder"))
        folder.attrib.update(
            id=FOLDER_ID, label=FOLDER_ID, path=str(self.folder), fsWatcherDelayS="1", rescanIntervalS="3600"
        )
        template = _child(folder, "device")
        for member in folder.findall("device"):
            folder.remove(member)
        for device_id in (self.device_id, peer.device_id):
            member = copy.deepcopy(template)
            member.set("id", device_id)
            folder.insert(0, member)
        root.insert(0, folder)
        tree.write(path, encoding="utf-8")
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / ".stfolder").mkdir(exist_ok=True)  # the folder marker, as Syncthing makes it

    def start(self) -> None:
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [syncthing_binary(), "serve", f"--home={self.home}", "--no-browser", "--no-restart", "--no-upgrade"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=os.environ | ENV,
                start_new_session=True,  # its own process group: the monitor and its child stop together
            )

    def stop(self) -> None:
        process = self.process
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with contextlib.suppress(ProcessLookupError):  # the monitor's child, should it outlive the monitor
            os.killpg(process.pid, signal.SIGKILL)
        self.process = None

    def rest(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.gui_port}{path}", method=method, headers={"X-API-Key": self.api_key}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read()
        return json.loads(body) if body else None

    def answers(self) -> bool:
        assert self.process is not None and self.process.poll() is None, f"syncthing {self.name} exited"
        try:
            return bool(self.rest("GET", "/rest/system/ping") == {"ping": "pong"})
        except (OSError, urllib.error.URLError):
            return False

    def connected_to(self, peer: Syncthing) -> bool:
        connections = self.rest("GET", "/rest/system/connections")["connections"]
        return bool(connections.get(peer.device_id, {}).get("connected"))


def _child(element: ET.Element, tag: str) -> ET.Element:
    found = element.find(tag)
    assert found is not None, f"config.xml has no <{tag}> under <{element.tag}>"
    return found


@contextlib.contextmanager
def syncthing_pair(root: Path, folder_a: Path, folder_b: Path) -> Iterator[tuple[Syncthing, Syncthing]]:
    """A and B connected and sharing FOLDER_ID (A's copy in folder_a, B's in folder_b); both stopped on exit."""
    a, b = (
        Syncthing(name, root / f"syncthing-{name}", folder, free_port(), free_port(), f"test-key-{name}")
        for name, folder in (("a", folder_a), ("b", folder_b))
    )
    a.generate()
    b.generate()
    a.configure(b, dial=True)
    b.configure(a, dial=False)
    try:
        for instance in (a, b):  # A answering before B starts, as the recipe does it
            instance.start()
            wait_until(instance.answers, START_S, instance.log_tail)
        wait_until(
            lambda: a.connected_to(b) and b.connected_to(a),
            START_S,
            lambda: f"a and b connected\n{a.log_tail()}\n{b.log_tail()}",
        )
        yield a, b
    finally:
        b.stop()
        a.stop()
