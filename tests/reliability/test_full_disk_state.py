"""A full disk under the state files (issue 14 item 8): adding a token or saving settings says why it failed, leaves
the file as it was and leaves no temp file behind (a real tmpfs, filled up)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from tests.support.disks import fill, tmpfs
from tests.support.live import exchange, fetch, serve


def test_token_and_settings_writes_on_a_full_disk_say_why_and_leave_nothing_behind(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "8m") as disk, serve(disk / "data") as running:
        data = disk / "data"
        before = {name: (data / name).read_bytes() for name in ("tokens.json",)}
        filler = fill(disk)
        try:
            owner = {"Authorization": f"Bearer {running.token}", "Content-Type": "application/json"}
            status, _, body = fetch(running.url + "/api/tokens", owner, b'{"name": "eve"}')
            assert status == 503, (status, body)
            assert "No space left on device" in body["error"]["message"] and "tokens.json" in body["error"]["message"]
            request = json.dumps({"graph_extras": True}).encode()
            put = urllib.request.Request(running.url + "/api/settings", request, owner, method="PUT")
            status, _, raw = exchange(put)
            error = json.loads(raw)["error"]
            assert status == 503 and "No space left on device" in error["message"], (status, error)
            assert "settings.json" in error["message"] and "nothing was changed" in error["message"]
            assert {name: (data / name).read_bytes() for name in before} == before
            assert not (data / "settings.json").exists()
            assert [p.name for p in data.iterdir() if p.name.endswith(".tmp")] == []
        finally:
            filler.unlink()
        # Space again: the same calls go through.
        assert fetch(running.url + "/api/tokens", owner, b'{"name": "eve"}')[0] == 201
