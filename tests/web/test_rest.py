"""The REST API for real: uvicorn on 127.0.0.1 over a real store, plain HTTP (httpx2). Every answer is checked
against the OpenAPI document the server serves (status documented for the operation, body valid for its schema),
and the document itself is validated and compared with the routes actually served."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from openapi_spec_validator import validate as validate_openapi
from starlette.routing import Route

from hivenote.server import __version__
from hivenote.server.agents import AgentTracker
from hivenote.server.core.listing import Filters
from hivenote.server.core.model import Author
from hivenote.server.meaning.both import Meanings
from hivenote.server.notebook import Notebook
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from tests.support.live import Running, serve
from tests.support.rest_api import DASHBOARD, DOC, NO_BODY, Api, Reply
from tests.support.wait import wait_until

OPERATIONS = {(method.upper(), path) for path, ops in DOC["paths"].items() for method in ops}
MEMORY_JSONL = (
    '{"type":"entity","name":"Acme Corp","entityType":"organization","observations":["Pays late","Büro in Köln"]}\n'
    '{"type":"entity","name":"ana/dev","entityType":"person","observations":[]}\n'
    '{"type":"relation","from":"ana/dev","to":"Acme Corp","relationType":"works_at"}'
)


Connect = Callable[..., Api]  # (server, token=None, client=DASHBOARD) -> Api, closed after the test


@pytest.fixture
def connect() -> Iterator[Connect]:
    made: list[Api] = []

    def make(server: Running, token: str | None = None, client: str | None = DASHBOARD) -> Api:
        made.append(Api(server, token, client))
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.fixture
def api(running: Running, connect: Connect) -> Api:
    return connect(running)


def shard_size(running: Running) -> int:
    path = running.store.shard_path
    assert path is not None
    return path.stat().st_size if path.exists() else 0


def remember(api: Api, title: str, **fields: Any) -> dict[str, Any]:
    reply = api("POST", "/api/notes", {"kind": "decision", "title": title, **fields}, expect=201)
    note: dict[str, Any] = reply.body["note"]
    return note


# -- the document -------------------------------------------------------------------------------------------------


def test_the_openapi_document_is_valid_openapi_3_1_and_is_what_the_server_serves(api: Api) -> None:
    validate_openapi(DOC)
    assert DOC["openapi"] == "3.1.0"
    assert api("GET", "/api/openapi.json", expect=200).body == DOC


def test_the_document_lists_exactly_the_routes_served_under_api(tmp_path: Path) -> None:
    with Store(tmp_path / "data") as store:
        app = create_app(Settings(data_dir=tmp_path / "data"), store)
    served = {
        (method, route.path.replace(":path}", "}"))
        for route in app.routes
        if isinstance(route, Route) and route.path.startswith("/api")
        for method in (route.methods or set()) - {"HEAD"}
    }
    assert served == OPERATIONS


def test_every_documented_operation_is_reachable_over_http(running: Running) -> None:
    """No documented route answers as if it did not exist (Starlette's own 404 or 405)."""
    with httpx2.Client(base_url=running.url, headers={"Authorization": f"Bearer {running.token}"}) as http:
        for method, path in sorted(OPERATIONS):
            response = http.request(method, path.replace("{", "").replace("}", "-x"))
            error = response.json().get("error", {}) if response.status_code >= 400 else {}
            assert response.status_code != 405 and error.get("message") != "Not Found", (method, path, error)


# -- notes ----------------------------------------------------------------------------------------------------------


def test_a_note_goes_through_its_whole_life_over_rest(api: Api, running: Running) -> None:
    created = api("POST", "/api/notes", {"kind": "decision", "title": "Use Drizzle", "project": "shop-api"}, expect=201)
    note = created.body["note"]
    assert created.body["similar"] == [] and note["project"] == "shop-api" and note["tags"] == []
    assert api("GET", "/api/notes/{id}", expect=200, id=note["id"][:8]).body == note
    changed = api("PATCH", "/api/notes/{id}", {"body": "Cold starts.", "project": None}, expect=200, id=note["id"])
    assert (changed.body["body"], changed.body["project"]) == ("Cold starts.", None)
    assert changed.body["title"] == "Use Drizzle"
    refused = api("DELETE", "/api/notes/{id}", expect=400, id=note["id"])
    assert "is not in the trash; forget it first" in refused.body["error"]["message"]
    assert api("POST", "/api/notes/{id}/trash", expect=200, id=note["id"]).body["trashed"] is True
    assert api("GET", "/api/notes", expect=200).body["total"] == 0
    trash = api("GET", "/api/notes", params={"trashed": "true"}, expect=200).body
    assert [n["id"] for n in trash["results"]] == [note["id"]]
    assert api("POST", "/api/notes/{id}/restore", expect=200, id=note["id"]).body["trashed"] is False
    history = api("GET", "/api/notes/{id}/history", expect=200, id=note["id"]).body["versions"]
    assert [v["action"] for v in history] == ["set", "set", "trash", "restore"]
    api("POST", "/api/notes/{id}/trash", expect=200, id=note["id"])
    assert api("DELETE", "/api/notes/{id}", expect=200, id=note["id"]).body == {"purged": note["id"]}
    missing = api("GET", "/api/notes/{id}", expect=404, id=note["id"]).body["error"]
    assert missing["code"] == "not_found" and "No note with id" in missing["message"]
    assert api("GET", "/api/notes/{id}/history", expect=404, id="01NOPE0000").status == 404


def test_a_near_copy_comes_back_as_similar(api: Api) -> None:
    first = remember(api, "Deploy on Fridays is forbidden", project="shop-api")
    again = api("POST", "/api/notes", {"kind": "decision", "title": "Deploy, Fridays forbidden", "project": "shop-api"})
    assert [n["id"] for n in again.body["similar"]] == [first["id"]]


@pytest.mark.parametrize(
    ("query", "filters", "limit"),
    [
        ("drizzle", Filters(), None),
        ("orm", Filters(project="shop-api"), None),
        ("deploy", Filters(kind="fact"), 2),
        ("nothing like this", Filters(), None),
        ("drizle prisma", Filters(), None),
        ("", Filters(tag="db"), 5),
    ],
)
def test_search_answers_exactly_what_mcp_and_the_cli_get_from_the_same_store(
    api: Api, running: Running, query: str, filters: Filters, limit: int | None
) -> None:
    for i in range(12):
        kind = "fact" if i % 3 else "decision"
        title = f"Deploy step {i}: use the drizzle ORM" if i % 2 else f"Deploy rule {i} for prisma"
        remember(api, title, kind=kind, project="shop-api" if i % 4 else "blog", tags=["db"] if i % 5 else [])
    params = {"q": query} | {k: v for k, v in (("kind", filters.kind), ("project", filters.project)) if v}
    params |= {"tag": filters.tag} if filters.tag else {}
    params |= {"limit": str(limit)} if limit else {}
    index = running.notebook.meaning  # the meaning indexes too are the same
    assert isinstance(index, Meanings) and index.static._warm.wait(30) and index.sentence is not None
    index.catch_up(running.store, most=10**6)  # the sentence index too, in this thread
    assert index.sentence.warm
    got = api("GET", "/api/notes", params=params, expect=200).body
    want = Notebook(running.store, meaning=index).search(query, filters, limit)
    assert got == {
        "results": [n.to_json() for n in want.hits],
        "near": [n.to_json() for n in want.near],
        "total": want.total,
        "reasons": want.reasons,
        "replaced_by": want.replaced_by,
        "window": None,
    }


def test_lists_and_search_pages_follow_the_notebook(api: Api, running: Running) -> None:
    for i in range(7):
        remember(api, f"Fact number {i}", kind="fact")
    notes, total = Notebook(running.store).list(Filters(kind="fact"), limit=3, offset=2)
    page = api("GET", "/api/notes", params={"kind": "fact", "limit": "3", "offset": "2"}, expect=200).body
    assert page == {
        "results": [n.to_json() for n in notes],
        "near": [],
        "total": total,
        "reasons": {},
        "replaced_by": {},
        "window": None,
    }
    best = Notebook(running.store).search("fact number", limit=5).hits
    paged = api("GET", "/api/notes", params={"q": "fact number", "limit": "3", "offset": "2"}, expect=200).body
    assert [n["id"] for n in paged["results"]] == [n.id for n in best[2:5]] and paged["total"] == 7
    too_deep = api("GET", "/api/notes", params={"q": "fact", "limit": "100", "offset": "150"}, expect=400)
    assert "offset + limit must be at most 200" in too_deep.body["error"]["message"]


# -- what a client can get wrong: each refused, nothing written -----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "raw", "code", "says"),
    [
        ("POST", "/api/notes", b'{"kind": "fact", "title": "x",}', "invalid_json", "not valid JSON"),
        ("POST", "/api/notes", b"", "invalid_json", "the body is empty; send a JSON object"),
        ("POST", "/api/notes", b"\xff\xfe{", "invalid_json", "not valid JSON"),
        ("POST", "/api/notes", b"[" * 100_000, "invalid_json", "not valid JSON"),
        ("POST", "/api/notes", b'{"kind": "fact", "title": "x", "colour": 1}', "invalid", "unknown field 'colour'"),
        ("POST", "/api/notes", b'{"kind": "fact"}', "invalid", "the body needs the field 'title'"),
        ("POST", "/api/notes", b'{"kind": "fact", "title": 7}', "invalid", "title must be text (got 7)"),
        ("POST", "/api/notes", b'{"kind": "fact", "title": "x", "tags": ["a", 2]}', "invalid", "tags[1] must be text"),
        ("POST", "/api/notes", b'{"kind": "memo", "title": "x"}', "invalid", "kind must be one of fact, decision"),
        ("POST", "/api/notes", b'["kind"]', "invalid", "the body must be an object"),
        ("POST", "/api/notes", b'{"kind": "fact", "title": "x", "project": "/home/me/api"}', "invalid", "use 'api'"),
        ("PATCH", "/api/notes/01NOPE0000", b'{"title": "x"}', "not_found", "No note with id"),
        ("PATCH", "/api/notes/01NOPE0000", b"{}", "invalid", "nothing to update: name at least one of"),
        ("PATCH", "/api/notes/01NOPE0000", b'{"title": null}', "invalid", "title must be text (got None)"),
        ("POST", "/api/graph/entities", b'{"entities": [{"name": "a", "entityType": "t"}]}', "invalid",
         "entities[0] needs the field 'observations'"),
        ("POST", "/api/graph/observations", b'{"observations": [{"entityName": "nobody", "contents": ["x"]}]}',
         "not_found", "Entity with name nobody not found"),
        ("POST", "/api/notes/01NOPE0000/trash", b'{"why": 1}', "invalid", "takes no body"),
        ("POST", "/api/tokens", b'{"name": "no/slash"}', "invalid", "a token name is 1-64 letters"),
        ("PUT", "/api/settings", b'{"port": "7790"}', "invalid", "port must be an integer or null"),
        ("PUT", "/api/settings", b'{"auth": false, "host": "0.0.0.0"}', "invalid", "only allowed on a loopback"),
        ("PUT", "/api/settings", b'{"theme": "dark"}', "invalid", "unknown field 'theme'"),
        ("GET", "/api/notes?lmit=3", None, "invalid", "unknown query parameter 'lmit'"),
        ("GET", "/api/notes?limit=ten", None, "invalid", "limit must be an integer (got 'ten')"),
        ("GET", "/api/notes?limit=0", None, "invalid", "limit must be from 1 to 200 (got 0)"),
        ("GET", "/api/notes?trashed=yes", None, "invalid", "trashed must be true or false"),
        ("GET", "/api/notes?tag=a&tag=b", None, "invalid", "'tag' is given twice"),
        ("GET", "/api/graph/search", None, "invalid", "the query needs the field 'q'"),
        ("GET", "/api/export?format=csv", None, "invalid", "format must be one of notebook, memory-jsonl"),
        ("GET", "/api/connect/notepad", None, "not_found", "no connect snippet for 'notepad'"),
        ("GET", "/api/graph/entities/nobody", None, "not_found", "Entity with name nobody not found"),
        ("DELETE", "/api/tokens/nobody", None, "not_found", "no token named 'nobody'"),
    ],
)  # fmt: skip
def test_mistakes_are_refused_with_an_error_saying_what_to_fix_and_write_nothing(
    api: Api, running: Running, method: str, path: str, raw: bytes | None, code: str, says: str
) -> None:
    before = shard_size(running), running.tokens.people()
    settings = running.store.data_dir / "settings.json"
    template = next(t for m, t in OPERATIONS if m == method and _matches(t, path.split("?")[0]))
    reply = api.http.request(method, path, content=raw, headers={"Content-Type": "application/json"})
    assert reply.json()["error"]["code"] == code, reply.json()
    assert says in reply.json()["error"]["message"], reply.json()
    api.conforms(method, template, Reply(reply.status_code, reply.headers, reply.json()), "application/json")
    assert (shard_size(running), running.tokens.people()) == before and not settings.exists()


def _matches(template: str, path: str) -> bool:
    parts, wanted = template.split("/"), path.split("/")
    return len(parts) == len(wanted) and all(p == w or p.startswith("{") for p, w in zip(parts, wanted, strict=True))


@pytest.mark.parametrize("declared", [True, False])
def test_an_oversized_body_is_refused_with_413_and_writes_nothing(api: Api, running: Running, declared: bool) -> None:
    size = shard_size(running)
    body = json.dumps({"kind": "fact", "title": "big", "body": "x" * (2 << 20)}).encode()

    def chunks() -> Iterator[bytes]:  # no Content-Length: the guard counts while the body streams in
        yield from (body[i : i + 65536] for i in range(0, len(body), 65536))

    reply = api.http.post("/api/notes", content=body if declared else chunks())
    assert reply.status_code == 413 and reply.json()["error"]["code"] == "too_large"
    assert shard_size(running) == size


def test_every_route_but_health_needs_a_token(running: Running, connect: Connect) -> None:
    anonymous = connect(running, token="")
    wrong = connect(running, token="hn_wrong")
    for method, path in sorted(OPERATIONS):
        for client in (anonymous, wrong):
            reply = client.http.request(method, path.replace("{", "").replace("}", "-x"))
            want = {"/api/health": 200, "/api/session": 400}.get(path, 401)  # the session: a one-time code, or 400
            assert reply.status_code == want, (method, path, reply.status_code)
            if want == 401:
                assert reply.json()["error"]["code"] == "unauthorized"


def test_only_the_owner_manages_tokens_and_settings(running: Running, connect: Connect) -> None:
    ana = connect(running, token=Tokens(running.tokens.path).add("ana"))
    for method, path, body in [
        ("GET", "/api/tokens", NO_BODY),
        ("POST", "/api/tokens", {"name": "bob"}),
        ("DELETE", "/api/tokens/{name}", NO_BODY),
        ("PUT", "/api/settings", {"graph_extras": True}),
    ]:
        error = ana(method, path, body, expect=403, name="ana").body["error"]
        assert error == {"code": "forbidden", "message": error["message"]} and "Only the owner" in error["message"]
    assert [p.name for p in running.tokens.people()] == ["ana"]
    assert not (running.store.data_dir / "settings.json").exists()
    assert ana("GET", "/api/settings", expect=200).body["values"]["graph_extras"] is False


def test_a_wrong_method_is_a_json_405(api: Api) -> None:
    reply = api.http.put("/api/notes")
    assert reply.status_code == 405 and reply.json()["error"]["code"] == "method_not_allowed"


# -- provenance and agents ------------------------------------------------------------------------------------------


def test_writes_carry_the_client_header_and_the_token_owner(running: Running, connect: Connect) -> None:
    ana = connect(running, token=Tokens(running.tokens.path).add("ana"), client=DASHBOARD)
    cli = connect(running, client="hivenote-cli/0.1.0")
    note = remember(ana, "Ana's decision")
    assert note["created_by"] == {
        "agent": "dashboard",
        "client": "hivenote-dashboard 0.3.0",
        "person": "ana",
        "node": running.store.node,
    }
    updated = cli("PATCH", "/api/notes/{id}", {"tags": ["db"]}, expect=200, id=note["id"]).body
    assert updated["created_by"]["person"] == "ana"
    assert updated["updated_by"] == {"agent": "cli", "client": "hivenote-cli 0.1.0", "node": running.store.node}
    # People at the dashboard or the shell are not connected agents; a script naming itself is.
    assert running.tracker.snapshot() == []
    script = connect(running, client="nightly-sync/2.0")
    remember(script, "From a script")
    agents = cli("GET", "/api/agents", expect=200).body
    online = {(a["agent"], a["client"], a["last_tool"]) for a in agents["agents"] if a["online"]}
    assert online == {("other", "nightly-sync 2.0", "POST /api/notes")}
    assert agents["machine"]["node"] == running.store.node
    running.clock.now += 121_000
    assert not any(a["online"] for a in cli("GET", "/api/agents", expect=200).body["agents"])


def test_without_a_client_header_the_user_agent_names_the_caller(running: Running, connect: Connect) -> None:
    plain = connect(running, client=None)
    note = plain("POST", "/api/notes", {"kind": "fact", "title": "x"}, headers={"User-Agent": "curl/8.5.0"}).body
    assert note["note"]["created_by"] == {"agent": "other", "client": "curl/8.5.0", "node": running.store.node}


def test_store_writes_run_in_worker_threads_not_on_the_event_loop(
    api: Api, running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    write = running.store.write

    def noting_the_thread(decide: Callable[..., Any], by: Author) -> Any:
        threads.append(threading.current_thread().name)
        return write(decide, by)

    monkeypatch.setattr(running.store, "write", noting_the_thread)
    note = remember(api, "Written off the loop")
    api("POST", "/api/notes/{id}/trash", expect=200, id=note["id"])
    api("POST", "/api/import", content=MEMORY_JSONL.encode(), expect=200)
    api("DELETE", "/api/graph/entities/{name}", expect=200, name="Acme Corp")
    assert len(threads) == 5 and "hivenote-server" not in threads, threads


class BrokenTracker(AgentTracker):
    def record(self, author: Author, tool: str = "") -> None:
        raise RuntimeError("tracking is down")


def test_a_failing_tracker_never_breaks_a_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, connect: Connect
) -> None:
    with serve(tmp_path / "data", tracker=BrokenTracker()) as broken:
        client = connect(broken, client="nightly-sync/2.0")
        assert remember(client, "Still stored")["title"] == "Still stored"
    assert "could not record the calling client" in caplog.text


# -- knowledge graph ------------------------------------------------------------------------------------------------


def test_the_knowledge_graph_over_rest_has_the_official_semantics(api: Api) -> None:
    acme = {"name": "Acme Corp", "entityType": "organization", "observations": ["Pays late"]}
    ana = {"name": "ana/dev", "entityType": "person", "observations": []}
    made = api("POST", "/api/graph/entities", {"entities": [acme, ana]}, expect=200).body
    assert made == {"entities": [acme, ana]}
    assert api("POST", "/api/graph/entities", {"entities": [acme]}, expect=200).body == {"entities": []}
    more = {"observations": [{"entityName": "Acme Corp", "contents": ["Pays late", "Büro in Köln"]}]}
    added = api("POST", "/api/graph/observations", more, expect=200).body
    assert added == {"results": [{"entityName": "Acme Corp", "addedObservations": ["Büro in Köln"]}]}
    works = {"from": "ana/dev", "to": "Acme Corp", "relationType": "works_at"}
    assert api("POST", "/api/graph/relations", {"relations": [works]}, expect=200).body == {"relations": [works]}
    opened = api("GET", "/api/graph/entities/{name}", expect=200, name="ana/dev").body
    assert opened == {"entities": [ana], "relations": [works]}
    found = api("GET", "/api/graph/search", params={"q": "köln", "names_only": "true"}, expect=200).body
    assert found == {"names": ["Acme Corp"], "relations": [works], "total": 1}
    page = api("GET", "/api/graph", params={"limit": "1", "offset": "1"}, expect=200).body
    assert page["total"] == 2 and len(page["entities"]) == 1
    deletion = {"deletions": [{"entityName": "Acme Corp", "observations": ["Pays late"]}]}
    assert api("DELETE", "/api/graph/observations", deletion, expect=200).body == {"ok": True}
    assert api("DELETE", "/api/graph/relations", {"relations": [works]}, expect=200).body == {"ok": True}
    assert api("GET", "/api/graph", expect=200).body["relations"] == []
    assert api("DELETE", "/api/graph/entities/{name}", expect=200, name="ana/dev").body == {"ok": True}
    assert api("DELETE", "/api/graph/entities/{name}", expect=200, name="ana/dev").body == {"ok": True}
    assert api("GET", "/api/graph/entities/{name}", expect=404, name="ana/dev").body["error"]["message"] == (
        "Entity with name ana/dev not found"
    )
    final = api("GET", "/api/graph", expect=200).body
    assert final["entities"] == [{"name": "Acme Corp", "entityType": "organization", "observations": ["Büro in Köln"]}]


# -- files ----------------------------------------------------------------------------------------------------------


def test_memory_jsonl_round_trips_byte_for_byte_through_http(api: Api) -> None:
    summary = api("POST", "/api/import", content=MEMORY_JSONL.encode(), expect=200).body
    assert summary == {
        "format": "memory-jsonl",
        "added": {"entities": 2, "observations": 2, "relations": 1},
        "skipped": {},
        "rejected": [],
    }
    exported = api("GET", "/api/export", params={"format": "memory-jsonl"}, expect=200)
    assert exported.body == MEMORY_JSONL
    assert exported.headers["content-type"] == "application/jsonl"
    assert exported.headers["content-disposition"] == 'attachment; filename="memory.jsonl"'
    again = api("POST", "/api/import", params={"format": "memory-jsonl"}, content=MEMORY_JSONL.encode()).body
    assert again["added"] == {} and again["skipped"] == {"entities": 2, "relations": 1}


def test_a_bad_line_refuses_the_whole_import_naming_its_line(api: Api, running: Running) -> None:
    bad = MEMORY_JSONL.replace('"entityType":"person"', '"entityType":7')
    size = shard_size(running)
    error = api("POST", "/api/import", content=bad.encode(), expect=400).body["error"]
    assert error["code"] == "invalid" and error["message"].startswith("line 2: an entity needs string")
    assert "Nothing was imported" in error["message"] and "skip_bad=true" in error["message"]
    assert "--skip-bad" not in error["message"]
    assert shard_size(running) == size and Notebook(running.store).counts()["entities"] == 0
    partial = api("POST", "/api/import", params={"skip_bad": "true"}, content=bad.encode(), expect=200).body
    assert partial["added"] == {"entities": 1, "observations": 2, "relations": 1}
    assert [r["line"] for r in partial["rejected"]] == [2]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"\xff\xfe not text", "the file is not UTF-8 text"),
        (b"hello", "cannot tell the file's format"),
        (b'{"format": "hivenote-notebook", "notes": [{"id": "x"}]}', "note 1: kind must be one of"),
    ],
)
def test_unreadable_files_are_refused_saying_why(api: Api, raw: bytes, says: str) -> None:
    assert says in api("POST", "/api/import", content=raw, expect=400).body["error"]["message"]


def test_a_notebook_export_imports_into_another_notebook_whole(
    api: Api, running: Running, tmp_path: Path, connect: Connect
) -> None:
    kept = remember(api, "Keep this", tags=["db"], project="shop-api")
    gone = remember(api, "Trash this")
    api("POST", "/api/notes/{id}/trash", id=gone["id"])
    api("POST", "/api/import", content=MEMORY_JSONL.encode(), expect=200)
    exported = api("GET", "/api/export", expect=200)
    assert exported.headers["content-disposition"] == 'attachment; filename="notebook.json"'
    assert exported.body["node"] == running.store.node and len(exported.body["notes"]) == 2
    with serve(tmp_path / "other") as other:
        second = connect(other)
        summary = second("POST", "/api/import", content=json.dumps(exported.body).encode(), expect=200).body
        assert summary["added"] == {"notes": 2, "entities": 2, "observations": 2, "relations": 1}
        assert second("GET", "/api/notes/{id}", expect=200, id=kept["id"]).body["tags"] == ["db"]
        assert second("GET", "/api/notes/{id}", expect=200, id=gone["id"]).body["trashed"] is True
        assert second("GET", "/api/export", params={"format": "memory-jsonl"}).body == MEMORY_JSONL


# -- this server ----------------------------------------------------------------------------------------------------


def test_status_reports_counts_machines_and_unreadable_lines(api: Api, running: Running) -> None:
    remember(api, "One note")
    other = running.store.log_dir / "laptop-beef.jsonl"
    other.write_bytes(b'{"v":1,"node":"laptop-beef","seq":1,"hlc":[5,0],"op":"note.trash","id":"X"}\nnot json\n')

    def shards() -> dict[str, Any]:
        found: dict[str, Any] = api("GET", "/api/status", expect=200).body["shards"]
        return found

    wait_until(lambda: "laptop-beef.jsonl" in shards())
    status = api("GET", "/api/status", expect=200).body
    assert status["shards"]["laptop-beef.jsonl"]["bad_lines"] == 1
    assert status["shards"]["laptop-beef.jsonl"]["problems"][0]["line"] == 2
    assert status["counts"] == {"notes": 1, "trashed": 0, "entities": 0, "relations": 0}
    assert status["nodes"]["laptop-beef"]["last_op"] == 5 and status["nodes"]["laptop-beef"]["lag_ms"] > 0
    assert status["nodes"][running.store.node]["ops"] == 1
    assert (status["node"], status["version"], status["auth"]) == (running.store.node, __version__, True)
    assert status["listen"]["shared"] is False and status["fsyncs"] >= 1 and status["agents_online"] == 0
    assert status["desktop"] is False and status["sync"] == {"log_dir": str(running.store.log_dir), "transports": []}
    assert status["data_dir"] == str(running.store.data_dir)


def test_connect_snippets_use_the_name_the_dashboard_was_opened_with(api: Api, running: Running) -> None:
    port = running.url.rsplit(":", 1)[1]
    clients = api("GET", "/api/connect", expect=200).body
    assert {"id": "cursor", "title": "Cursor"} in clients["clients"]
    local = {"Host": f"localhost:{port}"}
    cursor = api("GET", "/api/connect/{client}", headers=local, expect=200, client="cursor").body
    config = json.loads(cursor["text"])["mcpServers"]["hivenote"]
    assert config == {"url": f"http://localhost:{port}/mcp", "headers": {"Authorization": f"Bearer {running.token}"}}
    assert cursor["note"] is None
    graph = api("GET", "/api/connect/{client}", params={"graph": "true"}, expect=200, client="cursor").body
    assert json.loads(graph["text"])["mcpServers"]["hivenote-graph"]["url"] == f"{running.url}/mcp/graph"


def test_a_persons_snippet_holds_a_placeholder_since_their_token_is_not_kept(
    running: Running, connect: Connect
) -> None:
    ana = connect(running, token=Tokens(running.tokens.path).add("ana"))
    cursor = ana("GET", "/api/connect/{client}", expect=200, client="cursor").body
    assert "Bearer <your token>" in cursor["text"] and running.token not in cursor["text"]
    assert "Replace <your token>" in cursor["note"]


def test_without_auth_snippets_carry_no_token_and_status_says_auth_is_off(tmp_path: Path, connect: Connect) -> None:
    with serve(tmp_path / "data", auth=False) as open_server:
        anyone = connect(open_server, token="")
        cursor = anyone("GET", "/api/connect/{client}", expect=200, client="cursor").body
        assert "headers" not in json.loads(cursor["text"])["mcpServers"]["hivenote"]
        assert anyone("GET", "/api/status", expect=200).body["auth"] is False
        assert anyone("GET", "/api/tokens", expect=200).body == {"people": []}  # no token: the owner


def test_settings_are_shown_with_their_help_and_saved_checked_and_atomically(api: Api, running: Running) -> None:
    shown = api("GET", "/api/settings", expect=200).body
    assert shown["values"]["port"] == int(running.url.rsplit(":", 1)[1])
    assert shown["help"]["auth"].startswith("require a bearer token")
    saved = api("PUT", "/api/settings", {"graph_extras": True, "allowed_hosts": ["box.tail"], "auth": True}).body
    assert saved["restart_required"] == ["graph_extras", "allowed_hosts"]
    path = running.store.data_dir / "settings.json"
    assert saved["saved"] == {"graph_extras": True, "allowed_hosts": ["box.tail"], "auth": True}
    assert json.loads(path.read_text(encoding="utf-8")) == saved["saved"]
    cleared = api("PUT", "/api/settings", {"allowed_hosts": None, "port": 7790}, expect=200).body
    assert cleared["saved"] == {"graph_extras": True, "auth": True, "port": 7790}
    assert api("PUT", "/api/settings", {"host": "0.0.0.0", "auth": False}, expect=400).status == 400
    assert json.loads(path.read_text(encoding="utf-8")) == cleared["saved"]
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".settings")] == []


@pytest.mark.parametrize(("content", "says"), [("[1]", "must hold a JSON object"), ("{port", "cannot read")])
def test_a_broken_settings_file_is_reported_and_left_as_it_was(
    api: Api, running: Running, content: str, says: str
) -> None:
    path = running.store.data_dir / "settings.json"
    path.write_text(content, encoding="utf-8")
    error = api("PUT", "/api/settings", {"graph_extras": True}, expect=400).body["error"]
    assert says in error["message"] and "fix or delete the file" in error["message"]
    assert path.read_text(encoding="utf-8") == content


def test_imports_may_be_bigger_than_other_bodies_up_to_their_own_limit(tmp_path: Path, connect: Connect) -> None:
    line = json.dumps({"type": "entity", "name": "e", "entityType": "t", "observations": ["x" * 1500]})
    with serve(tmp_path / "data", max_body_bytes=1000, max_import_bytes=4000) as small:
        client = connect(small)
        assert client("POST", "/api/import", content=line.encode(), expect=200).body["added"]["entities"] == 1
        assert client("POST", "/api/notes", {"kind": "fact", "title": "x" * 1500}, expect=413).status == 413
        too_big = "\n".join([line] * 3).encode()
        assert client("POST", "/api/import", content=too_big, expect=413).body["error"]["code"] == "too_large"


def test_tokens_are_issued_once_work_at_once_and_can_be_revoked(api: Api, running: Running, connect: Connect) -> None:
    assert api("GET", "/api/tokens", expect=200).body == {"people": []}
    reply = api("POST", "/api/tokens", {"name": "ana"}, expect=201)
    issued = reply.body
    assert reply.headers["cache-control"] == "no-store"
    assert issued["name"] == "ana" and issued["token"].startswith("hn_") and "Shown once" in issued["note"]
    ana = connect(running, token=issued["token"])
    assert remember(ana, "Ana was here")["created_by"]["person"] == "ana"
    assert [p["name"] for p in api("GET", "/api/tokens", expect=200).body["people"]] == ["ana"]
    assert "already has a token" in api("POST", "/api/tokens", {"name": "ana"}, expect=400).body["error"]["message"]
    assert api("DELETE", "/api/tokens/{name}", expect=200, name="ana").body == {"revoked": "ana"}
    assert ana.http.get("/api/notes").status_code == 401


def test_every_operation_was_answered_and_checked_by_a_happy_path(running: Running, connect: Connect) -> None:
    """One tour through every documented operation: each success validates against its documented schema."""
    api = connect(running)
    api("GET", "/api/health", expect=200)
    api("GET", "/api/openapi.json", expect=200)
    code = api("POST", "/api/session/code", expect=201).body["code"]
    dashboard = {"X-Hivenote-Client": "hivenote-dashboard/test"}
    assert "set-cookie" in api("POST", "/api/session", {"code": code}, expect=200, headers=dashboard).headers
    note = remember(api, "Tour")
    api("GET", "/api/notes", params={"q": "tour"}, expect=200)
    api("GET", "/api/notes/{id}", expect=200, id=note["id"])
    api("PATCH", "/api/notes/{id}", {"title": "Tour!"}, expect=200, id=note["id"])
    api("GET", "/api/notes/{id}/history", expect=200, id=note["id"])
    api("POST", "/api/notes/{id}/trash", expect=200, id=note["id"])
    api("POST", "/api/notes/{id}/restore", expect=200, id=note["id"])
    api("POST", "/api/notes/{id}/trash", expect=200, id=note["id"])
    api("DELETE", "/api/notes/{id}", expect=200, id=note["id"])
    api("POST", "/api/import", content=MEMORY_JSONL.encode(), expect=200)
    api("GET", "/api/graph", expect=200)
    api("GET", "/api/graph/search", params={"q": "acme"}, expect=200)
    api("GET", "/api/graph/entities/{name}", expect=200, name="Acme Corp")
    api("POST", "/api/graph/entities", {"entities": [{"name": "B", "entityType": "t", "observations": []}]}, expect=200)
    api("POST", "/api/graph/observations", {"observations": [{"entityName": "B", "contents": ["o"]}]}, expect=200)
    api("DELETE", "/api/graph/observations", {"deletions": [{"entityName": "B", "observations": ["o"]}]}, expect=200)
    rel = {"from": "B", "to": "Acme Corp", "relationType": "knows"}
    api("POST", "/api/graph/relations", {"relations": [rel]}, expect=200)
    api("DELETE", "/api/graph/relations", {"relations": [rel]}, expect=200)
    api("DELETE", "/api/graph/entities/{name}", expect=200, name="B")
    api("GET", "/api/export", expect=200)
    api("GET", "/api/export", params={"format": "memory-jsonl"}, expect=200)
    api("GET", "/api/agents", expect=200)
    api("GET", "/api/status", expect=200)
    api("GET", "/api/connect", expect=200)
    api("GET", "/api/connect/{client}", expect=200, client="codex")
    api("GET", "/api/settings", expect=200)
    api("PUT", "/api/settings", {"graph_extras": True}, expect=200)
    api("GET", "/api/tokens", expect=200)
    api("POST", "/api/tokens", {"name": "tour"}, expect=201)
    api("DELETE", "/api/tokens/{name}", expect=200, name="tour")
    assert api.succeeded == OPERATIONS


# -- what fuzzing the API against its document found (tests/fuzz/test_openapi_fuzz.py) -------------------------------

HUGE = "16788569931164696969216"


@pytest.mark.parametrize(
    ("method", "path", "raw", "says"),
    [
        ("POST", "/api/tokens", b'{"name": "bob\\n"}', "a token name is 1-64 letters"),
        ("PUT", "/api/settings", b'{"host": ""}', "host must be an IP address or a host name"),
        ("PUT", "/api/settings", b'{"host": "not a host!!"}', "host must be an IP address or a host name"),
        ("PUT", "/api/settings", b'{"allowed_hosts": ["box.tail", "a b"]}', "allowed_hosts holds 'a b'"),
        ("PUT", "/api/settings", b'{"max_body_bytes": 5594}', "max_body_bytes must be at least 131072"),
        ("GET", f"/api/notes?limit={HUGE}", None, f"limit must be from 1 to 200 (got {HUGE})"),
        ("GET", "/api/notes?q=" + "x" * 1001, None, "the query is 1001 characters; search with a few words"),
        ("POST", "/api/notes", b'{"kind": "fact", "title": "%s"}' % (b"t" * 201), "title is 201 characters"),
        ("POST", "/api/notes", b'{"kind": "fact", "title": "x", "project": "%s"}' % (b" " * 101), "is 101 characters"),
    ],
)  # fmt: skip
def test_what_fuzzing_found_is_refused_saying_what_to_fix_and_writes_nothing(
    api: Api, running: Running, method: str, path: str, raw: bytes | None, says: str
) -> None:
    before = shard_size(running), running.tokens.people()
    settings = running.store.data_dir / "settings.json"
    template = next(t for m, t in OPERATIONS if m == method and _matches(t, path.split("?")[0]))
    reply = api.http.request(method, path, content=raw, headers={"Content-Type": "application/json"})
    assert reply.status_code == 400 and says in reply.json()["error"]["message"], reply.json()
    api.conforms(method, template, Reply(reply.status_code, reply.headers, reply.json()), "application/json")
    assert (shard_size(running), running.tokens.people()) == before and not settings.exists()


def test_a_huge_integer_in_the_query_is_a_number_not_a_type_error(api: Api) -> None:
    """Past 18 digits it used to be refused as 'must be an integer'; the graph pages any limit."""
    assert api("GET", "/api/graph", params={"limit": HUGE, "offset": HUGE}, expect=200).body["entities"] == []


def test_the_documented_note_limits_are_the_notebooks_own(api: Api) -> None:
    new_note = DOC["components"]["schemas"]["NewNote"]["properties"]
    assert (new_note["title"]["minLength"], new_note["title"]["maxLength"]) == (1, 200)
    assert new_note["tags"]["items"]["maxLength"] == 64 and new_note["project"]["maxLength"] == 100
    assert DOC["components"]["schemas"]["NoteChange"]["minProperties"] == 1
    assert remember(api, "t" * 200, tags=["g" * 64], project="p" * 100)["title"] == "t" * 200


def test_a_bad_host_is_a_documented_421_on_every_operation(api: Api) -> None:
    for method, template in sorted(OPERATIONS):
        assert "421" in DOC["paths"][template][method.lower()]["responses"], (method, template)
    reply = api("GET", "/api/export", headers={"Host": "evil.example"}, expect=421)
    assert reply.body["error"]["code"] == "bad_host"


def test_a_note_replaces_another_over_rest(api: Api, running: Running) -> None:
    old = remember(api, "Logs go to Loki", project="infra")
    new = api(
        "POST", "/api/notes", {"kind": "decision", "title": "Logs go to Datadog", "replaces": old["id"]}, expect=201
    )
    assert new.body["note"]["replaces"] == old["id"]
    found = api("GET", "/api/notes", params={"q": "logs go"}, expect=200).body
    assert [n["id"] for n in found["results"]] == [new.body["note"]["id"], old["id"]]
    assert found["replaced_by"] == {old["id"]: new.body["note"]["id"]}
    dropped = api("PATCH", "/api/notes/{id}", {"replaces": None}, expect=200, id=new.body["note"]["id"]).body
    assert dropped["replaces"] is None
    api("PATCH", "/api/notes/{id}", {"replaces": old["id"]}, expect=400, id=old["id"])
