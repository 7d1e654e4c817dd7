"""One place per fact (issue: re-cut): each fact the code states once, and a test that fails when a copy comes back."""

from __future__ import annotations

import re
from pathlib import Path

from hivenote.desktop.supervisor import agents_online
from hivenote.server.agents import AGENT_NAMES, PRODUCTS, AgentTracker, agent_id
from hivenote.server.core.model import Author
from hivenote.server.render import who
from tests.support.live import exchange, serve

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [*(ROOT / "server").rglob("*.py"), *(ROOT / "desktop").rglob("*.py"), *(ROOT / "server").rglob("*.js")]


def test_agent_names_live_in_one_table() -> None:
    names = [product.name for product in PRODUCTS if len(product.name) > 3]
    for path in SOURCES:
        if path == ROOT / "server" / "agents.py":
            continue
        text = path.read_text(encoding="utf-8")
        found = [name for name in names if re.search(rf"[\"'`]{re.escape(name)}[\"'`]", text)]
        assert len(found) < 3, f"{path.relative_to(ROOT)} holds a table of agent names ({found}): use agents.py"


def test_every_recognised_agent_has_a_name_and_every_surface_uses_it() -> None:
    tracker = AgentTracker()
    for product in PRODUCTS:
        assert (product.name and product.name != product.id) or product.id == "opencode", product
        if product.pattern and product.id not in ("cli", "dashboard"):
            assert agent_id(product.id.replace("-", " ")) == product.id or agent_id(product.id) == product.id
            tracker.record(Author(agent=product.id, client=f"{product.id} 1.0"))
    online = {entry.name for entry in agents_online(tracker, owner="")}
    for product in PRODUCTS:
        if product.pattern and product.id not in ("cli", "dashboard"):
            assert product.name in online, f"the tray shows {product.id} as {online}"
            assert who(Author(agent=product.id), "laptop-1a2b").startswith(product.name)


def test_the_dashboard_is_served_the_same_names(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as running:
        status, _, body = exchange(running.url + "/ui/js/agent-names.js")
    assert status == 200
    served = dict(re.findall(r'"([\w-]+)": "([^"]+)"', body.decode()))
    assert served == AGENT_NAMES


# Renames that are not a plain whole-file write: the own shard put back from its open handle, compaction's checked
# swap, and the synced-folder move's verified copy. Everything else calls storage/files.py.
RENAMES_ALLOWED = {
    "server/storage/files.py",
    "server/storage/ownshard.py",
    "server/storage/store.py",
    "server/sync/folder.py",
}


def test_files_are_written_whole_one_way() -> None:
    for path in [*(ROOT / "server").rglob("*.py"), *(ROOT / "desktop").rglob("*.py")]:
        where = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8")
        if where != "server/storage/files.py":
            assert not re.search(r"\b(mkstemp|NamedTemporaryFile|mkdtemp)\(", text), f"{where} makes its own temp file"
        if where not in RENAMES_ALLOWED:
            assert not re.search(r"\bos\.(replace|rename)\(", text), f"{where} renames by hand: use files.write_whole"


def test_provenance_travels_as_an_argument() -> None:
    """One provenance path: every write names its author (`by=`, or the Notebook's/Graph's own); no ambient state
    such as a ContextVar that one entry point sets and another forgets."""
    for path in [*(ROOT / "server").rglob("*.py"), *(ROOT / "desktop").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert "ContextVar" not in text, f"{path.relative_to(ROOT)} keeps ambient state: pass the author instead"


def test_the_fold_state_holds_no_derived_index() -> None:
    """Search, listing and graph-search indexes belong to their modules (`State.derived`), not to the fold: the
    State's fields name no index type, fold.py imports none of their modules, and no module keeps a cache of
    its own keyed by a State (weak references to states)."""
    from dataclasses import fields

    from hivenote.server.core.fold import State

    for spec in fields(State):
        annotation = str(spec.type)
        assert not re.search(r"SubstringIndex|Recent|\bAny\b|NoteIndex|EntityIndex", annotation), spec
    fold = (ROOT / "server" / "core" / "fold.py").read_text(encoding="utf-8")
    assert not re.search(r"from \.(search|listing|graphsearch|textindex) import", fold)
    for path in (ROOT / "server").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "weakref.ref[State]" not in text, f"{path.relative_to(ROOT)} caches per State: use State.derived"


def test_settings_json_has_one_writer() -> None:
    """settings.save_settings is the one writer of settings.json (the CLI, the dashboard, the tray and sync set-up
    all call it), so every writer checks and formats the file the same way."""
    writes = re.compile(r"\b(write_json|write_bytes|write_whole|write_text|open\([^)]*[\"']w)")
    for path in [*(ROOT / "server").rglob("*.py"), *(ROOT / "desktop").rglob("*.py")]:
        if path == ROOT / "server" / "settings.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert not ('"settings.json"' in text and writes.search(text)), f"{path.relative_to(ROOT)} writes settings"


def test_the_data_dirs_files_are_named_in_one_place() -> None:
    """Every file and folder of a data dir is named by storage/layout.py: a path spelled twice drifts."""
    spelled = re.compile(r'"(tokens|settings|node|peers)\.json"|"serve\.log"|/ "(log|cache|sync|rescued)"')
    for path in SOURCES:
        if path == ROOT / "server" / "storage" / "layout.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not spelled.search(line), f"{path.relative_to(ROOT)}:{number} names a data dir's file: use Layout"


# The answer itself, and the command lines' `--json` errors on stderr (the same shape, not an HTTP answer).
SAME_SHAPE_ELSEWHERE = {"server/responses.py", "server/cli/main.py", "desktop/main.py"}


def test_every_http_error_is_answered_one_way_with_a_code_the_table_knows() -> None:
    """responses.py is the one error answer: no module builds the `{"error": {"code", "message"}}` body itself, and
    every code an answer is given has its status in `STATUS` (a code missing there would be a 500)."""
    from hivenote.server.responses import STATUS

    shape = re.compile(r"""["']error["']:\s*\{\s*["']code["']\s*:""")
    named = re.compile(r"""(?:error_response|send_error|self\.error)\(\s*(?:send,\s*)?["']([a-z_]+)["']""")
    refusal = re.compile(r"""Refusal\(\s*["']([a-z_]+)["']""")
    codes: set[str] = set()
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py" and path.relative_to(ROOT).as_posix() not in SAME_SHAPE_ELSEWHERE:
            for line in text.splitlines():
                assert "jsonrpc" in line or not shape.search(line), f"{path.relative_to(ROOT)}: {line.strip()}"
        codes |= set(named.findall(text)) | set(refusal.findall(text))
    assert len(codes) >= 20, codes
    assert codes <= STATUS.keys(), codes - STATUS.keys()
