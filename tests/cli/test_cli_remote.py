"""The CLI while a server owns the data dir: writes go through the server's REST API, reads stay local."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from hivenote.server.cli.main import main
from hivenote.server.storage.layout import Layout
from hivenote.server.storage.serverfile import running_server
from tests.support.live import Running


def cli(running: Running, *argv: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--data-dir", str(running.store.data_dir), *argv, "--json"], out=out, err=err)
    return code, json.loads(out.getvalue()) if out.getvalue() else None, err.getvalue()


def test_the_server_announces_itself_only_while_it_holds_the_data_dir(running: Running) -> None:
    assert running_server(running.store.data_dir) == running.url
    record = json.loads(Layout(running.store.data_dir).server_record.read_text(encoding="utf-8"))
    assert record["url"] == running.url


def test_cli_writes_go_through_the_running_server(running: Running, tmp_path: Path) -> None:
    code, made, err = cli(running, "remember", "--kind", "decision", "--title", "Via the server", "--project", "api")
    assert code == 0, err
    note_id = made["note"]["id"]
    assert running.store.state.note(note_id) is not None  # the server's own state has it at once
    assert made["note"]["created_by"]["agent"] == "cli"
    code, updated, err = cli(running, "update", note_id, "--title", "Via the server, edited", "--project", "")
    assert code == 0, err and updated["project"] is None
    assert cli(running, "forget", note_id)[1]["trashed"] is True
    assert cli(running, "restore", note_id)[1]["trashed"] is False
    code, _, err = cli(running, "purge", note_id)
    assert code == 1 and json.loads(err)["error"]["message"].startswith(f"note {note_id} is not in the trash")
    cli(running, "forget", note_id)
    assert cli(running, "purge", note_id)[1] == {"purged": note_id}
    code, _, err = cli(running, "get", note_id)
    assert code == 3 and json.loads(err)["error"]["code"] == "not_found"


def test_cli_reads_see_what_the_server_wrote(running: Running) -> None:
    cli(running, "remember", "--kind", "fact", "--title", "Readable beside the server")
    code, found, _ = cli(running, "search", "readable")
    assert code == 0 and [n["title"] for n in found["results"]] == ["Readable beside the server"]


def test_cli_import_goes_through_the_server_and_reports_bad_lines(running: Running, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    good = json.dumps({"type": "entity", "name": "Ann", "entityType": "person", "observations": ["x"]})
    source.write_text(f"{good}\nnot json", encoding="utf-8")
    code, _, err = cli(running, "import", str(source))
    assert code == 1 and "line 2" in err
    assert running.store.state.graph() == ([], [])
    code, summary, err = cli(running, "import", str(source), "--skip-bad")
    assert code == 0, err
    assert summary["added"] == {"entities": 1, "observations": 1} and summary["rejected"][0]["line"] == 2
