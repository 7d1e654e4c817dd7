"""The `hivenote` CLI in-process (argv in, text/JSON and exit code out) on a real data dir."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from hivenote.server.cli.main import main


class Run:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["--data-dir", str(self.data_dir), *argv], out=out, err=err)
        return code, out.getvalue(), err.getvalue()

    def json(self, *argv: str) -> Any:
        code, out, err = self(*argv, "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path / "data")


def remember(run: Run, title: str, *extra: str) -> str:
    note_id: str = run.json("remember", "--kind", "decision", "--title", title, *extra)["note"]["id"]
    return note_id


def test_status_on_a_fresh_machine_explains_where_the_data_lives(run: Run) -> None:
    code, out, _ = run()
    assert code == 0
    assert "0 notes" in out and str(run.data_dir) in out and "no Hivenote server is running" in out


def test_remember_then_search_with_json_carries_every_field(run: Run) -> None:
    note_id = remember(run, "Use Drizzle, not Prisma", "--body", "cold starts", "--project", "shop-api", "--tag", "db")
    result = run.json("search", "drizzle")
    assert set(result) == {"results", "near", "total", "reasons", "replaced_by", "window"}
    hit = result["results"][0]
    assert hit["id"] == note_id
    for key in ("id", "kind", "title", "project", "tags", "created", "updated", "created_by", "updated_by"):
        assert key in hit
    assert hit["created_by"]["agent"] == "cli" and hit["created_by"]["node"]
    code, out, _ = run("search", "drizzle")
    assert code == 0 and "[decision] Use Drizzle, not Prisma (shop-api) #db" in out and note_id in out


def test_search_without_matches_offers_near_ones_apart(run: Run) -> None:
    remember(run, "Use Drizzle, not Prisma")
    code, out, _ = run("search", "drizzles")
    assert code == 0 and out.startswith("No matching notes. Closest matches:")
    assert "(similar meaning)" in out or "(some words match)" in out
    assert run.json("search", "drizzles")["results"] == []


def test_remember_warns_about_a_note_that_looks_the_same(run: Run) -> None:
    first = remember(run, "Use Drizzle, not Prisma", "--project", "shop-api")
    code, out, _ = run("remember", "--kind", "decision", "--title", "Use Drizzle not Prisma", "--project", "shop-api")
    assert code == 0 and f"Looks like {first}" in out and "hivenote update" in out


def test_body_can_come_from_a_file(run: Run, tmp_path: Path) -> None:
    body = tmp_path / "body.md"
    body.write_text("# Why\n\nBecause.\n", encoding="utf-8")
    note = run.json("remember", "--kind", "fact", "--title", "From a file", "--body-file", str(body))["note"]
    assert note["body"] == "# Why\n\nBecause.\n"


def test_get_update_history_forget_restore_purge(run: Run) -> None:
    note_id = remember(run, "First title", "--tag", "a")
    code, out, _ = run("get", note_id[:10])
    assert code == 0 and out.startswith("First title\nid: " + note_id)
    updated = run.json("update", note_id, "--title", "Second title", "--no-tags")
    assert (updated["title"], updated["tags"]) == ("Second title", [])
    assert run.json("update", note_id, "--tag", "x", "--tag", "y")["tags"] == ["x", "y"]
    history = run.json("history", note_id)
    assert [v["action"] for v in history] == ["set", "set", "set"]
    code, out, _ = run("history", note_id)
    assert code == 0 and out.count("set") == 3
    assert run.json("forget", note_id)["trashed"] is True
    assert run.json("list")["results"] == []
    assert [n["id"] for n in run.json("list", "--trash")["results"]] == [note_id]
    assert run.json("restore", note_id)["trashed"] is False
    code, _, err = run("purge", note_id)
    assert code == 1 and "not in the trash; forget it first" in err
    run("forget", note_id)
    assert run.json("purge", note_id) == {"purged": note_id}
    code, _, err = run("get", note_id)
    assert code == 3 and "No note with id" in err


def test_list_pages_and_filters(run: Run) -> None:
    ids = [remember(run, f"note {i}", "--project", "p1" if i % 2 else "p2") for i in range(5)]
    page = run.json("list", "--limit", "2")
    assert page["total"] == 5 and [n["id"] for n in page["results"]] == ids[::-1][:2]
    assert [n["id"] for n in run.json("list", "--project", "p1")["results"]] == [ids[3], ids[1]]
    code, out, _ = run("list", "--limit", "2")
    assert code == 0 and "(2 of 5 shown" in out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["remember", "--kind", "fact", "--title", "x", "--project", "/srv/app"], 1, "use 'app' instead"),
        (["remember", "--kind", "fact", "--title", ""], 1, "title is required"),
        (["update", "01NOTHERE", "--title", "x"], 3, "No note with id"),
        (["update", "01NOTHERE"], 1, "nothing to update"),
        (["search", "x", "--limit", "0"], 1, "limit must be at least 1"),
        (["import", "/nonexistent/file.jsonl"], 1, "cannot read /nonexistent/file.jsonl"),
    ],
)
def test_mistakes_exit_non_zero_with_a_message_to_act_on(run: Run, argv: list[str], code: int, message: str) -> None:
    got, out, err = run(*argv)
    assert (got, out) == (code, "")
    assert err.startswith("hivenote: ") and message in err


def test_usage_errors_exit_2(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run("remember", "--kind", "opinion", "--title", "x")
    assert exited.value.code == 2
    assert "invalid choice: 'opinion'" in capsys.readouterr().err


def test_doctor_reports_shards_nodes_and_counts(run: Run) -> None:
    remember(run, "one")
    report = run.json("doctor")
    assert report["counts"]["notes"] == 1 and report["running_pid"] is None
    (shard,) = report["shards"].values()
    assert shard["ops"] == 1 and shard["bad_lines"] == 0
    code, out, _ = run("doctor")
    assert code == 0 and "server: not running" in out and "1 ops, ok" in out


def test_compact_reports_lines_before_and_after(run: Run) -> None:
    note_id = remember(run, "v0")
    for i in range(3):
        run("update", note_id, "--title", f"v{i + 1}")
    assert run.json("compact") == {"before": 4, "after": 2}
    assert run.json("get", note_id)["title"] == "v3"


def test_graph_reads_are_paged_and_names_only_on_request(run: Run, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    lines = [
        json.dumps({"type": "entity", "name": f"E{i}", "entityType": "t", "observations": ["acme"]}) for i in range(5)
    ]
    lines.append(json.dumps({"type": "relation", "from": "E0", "to": "E1", "relationType": "knows"}))
    source.write_text("\n".join(lines), encoding="utf-8")
    assert run.json("import", str(source))["added"] == {"entities": 5, "observations": 5, "relations": 1}
    page = run.json("graph", "read", "--limit", "2")
    assert [e["name"] for e in page["entities"]] == ["E0", "E1"] and page["total"] == 5
    assert page["relations"] == [{"from": "E0", "to": "E1", "relationType": "knows"}]
    names = run.json("graph", "search", "acme", "--names-only", "--offset", "3")
    assert names["names"] == ["E3", "E4"] and names["total"] == 5
    opened = run.json("graph", "open", "E1", "Nope")
    assert [e["name"] for e in opened["entities"]] == ["E1"]
    code, out, _ = run("graph", "read", "--names-only")
    assert code == 0 and out.splitlines()[-1] == "(5 of 5 entities)"


def test_export_to_stdout_and_to_a_file(run: Run, tmp_path: Path) -> None:
    remember(run, "exported")
    code, out, _ = run("export", "-", "--format", "notebook")
    assert code == 0 and json.loads(out)["notes"][0]["title"] == "exported"
    target = tmp_path / "backup.json"
    code, out, _ = run("export", str(target))
    assert code == 0 and "Exported 1 notes" in out
    assert json.loads(target.read_text(encoding="utf-8"))["format"] == "hivenote-notebook"


def test_data_dir_comes_from_the_environment_when_no_flag_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIVENOTE_DATA_DIR", str(tmp_path / "from-env"))
    out = io.StringIO()
    assert main(["remember", "--kind", "fact", "--title", "env"], out=out, err=io.StringIO()) == 0
    assert (tmp_path / "from-env" / "node.json").exists()


def test_errors_come_as_json_when_asked(run: Run) -> None:
    code, out, err = run("get", "01NOTHERE", "--json")
    assert (code, out) == (3, "")
    error = json.loads(err)["error"]
    assert error["code"] == "not_found" and "No note with id" in error["message"]


def test_a_large_import_shows_progress_on_stderr(run: Run, tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    lines = [
        json.dumps({"type": "entity", "name": f"E{i}", "entityType": "t", "observations": []}) for i in range(1500)
    ]
    source.write_text("\n".join(lines), encoding="utf-8")
    code, out, err = run("import", str(source))
    assert code == 0 and "added 1500 entities" in out
    assert "importing: 500/1500 (33%)" in err and "importing: 1500/1500 (100%)" in err


def test_remember_replaces_and_search_lists_the_newer_first(run: Run) -> None:
    old = remember(run, "Deploys are done by Argo CD")
    new = remember(run, "Deploys are done by Flux", "--replaces", old)
    assert run.json("get", new)["replaces"] == old
    result = run.json("search", "deploys")
    assert [n["id"] for n in result["results"]] == [new, old] and result["replaced_by"] == {old: new}
    code, out, _ = run("search", "deploys")
    assert code == 0 and f"(replaced by {new})" in out
    assert run.json("update", new, "--replaces", "")["replaces"] is None
