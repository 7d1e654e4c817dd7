"""The other views in a real Chromium: agents, connect, import / export, settings, the token screen, and a
screenshot of each view in light and dark."""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image
from playwright.sync_api import Page, expect

from hivenote.server.core.hlc import wall_ms
from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from hivenote.server.transfer import export_notebook
from tests.support.browser import Pages, Scheme
from tests.support.dashboard import CURSOR, api, screenshot, seed
from tests.support.disks import vanish
from tests.support.live import Running, dashboard_url

WAIT_MS = 10_000
MEMORY_JSONL = (
    '{"type":"entity","name":"Acme Corp","entityType":"organization","observations":["Pays late"]}\n'
    '{"type":"entity","name":"Ana","entityType":"person"\n'
    '{"type":"relation","from":"Ana","to":"Acme Corp","relationType":"works_at"}\n'
    '{"type":"entity","name":"Ana","entityType":"person","observations":["Leads billing"]}\n'
)


def test_the_agents_panel_shows_a_client_that_just_connected_and_drops_it_after_two_minutes(
    running: Running, page: Page
) -> None:
    page.goto(dashboard_url(running, "/#agents"))
    expect(page.get_by_text("No agent has connected yet.")).to_be_visible(timeout=WAIT_MS)
    running.tracker.record(CURSOR, "brain_search")
    running.tracker.record(Author(agent="claude-code", client="claude-code 2.0.1", person="ana"), "brain_remember")
    online = page.locator("#online")
    expect(online.locator(".agent-row[data-agent=cursor]")).to_contain_text("brain_search", timeout=WAIT_MS)
    expect(online.locator(".agent-row[data-agent=claude-code]")).to_contain_text("claude-code 2.0.1")
    expect(online.locator(".person")).to_contain_text(["You (this Hivenote's owner)", "ana"])
    expect(page.locator("a[data-view=agents] .nav-badge")).to_have_text("2")
    screenshot(page, "agents")
    running.clock.now += 121_000
    expect(page.locator("#earlier .agent-row[data-agent=cursor]")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#online .agent-row")).to_have_count(0)
    expect(page.locator("#online")).to_contain_text("No agent is online right now")
    expect(page.locator("a[data-view=agents] .nav-badge")).to_have_count(0)
    assert [a["online"] for a in api(running, "/api/agents")["agents"]] == [False, False]


def test_the_connect_dialog_copies_a_snippet_that_parses(running: Running, pages: Pages) -> None:
    page = pages(clipboard=True)
    page.goto(dashboard_url(running, "/"))
    page.get_by_role("button", name="Connect an agent").first.click()
    dialog = page.locator("dialog[open]")
    dialog.locator("[data-client=cursor]").click()
    expect(dialog.locator("pre.code")).to_contain_text("mcpServers", timeout=WAIT_MS)
    expect(dialog.locator(".where")).to_contain_text(".cursor/mcp.json")
    # Issue 35: the header read "Paste into (Linux) ~/.cursor/mcp.json", and Claude Code's "Run this / a terminal".
    expect(dialog.locator(".where-line")).to_have_text("paste it into ~/.cursor/mcp.json on Linux")
    screenshot(page, "connect")
    dialog.get_by_role("button", name="Copy").click()
    expect(dialog.get_by_role("button", name="Copied")).to_be_visible()
    config = json.loads(page.evaluate("navigator.clipboard.readText()"))
    (server,) = config["mcpServers"].values()
    assert server["url"] == running.url + "/mcp"
    assert running.token in json.dumps(server)
    dialog.locator("[data-client=claude-code]").click()
    expect(dialog.locator("pre.code")).to_have_attribute("data-format", "shell", timeout=WAIT_MS)
    expect(dialog.locator(".where-line")).to_have_text("run it in a terminal on Linux")
    dialog.locator("[data-client=codex]").click()
    expect(dialog.locator("pre.code")).to_have_attribute("data-format", "toml", timeout=WAIT_MS)
    page.keyboard.press("Escape")
    expect(page.locator("dialog[open]")).to_have_count(0)


def test_copy_falls_back_to_a_selected_textarea_without_the_clipboard_api(running: Running, page: Page) -> None:
    page.goto(dashboard_url(running, "/"))
    expect(page.locator(".sidebar")).to_be_visible(timeout=WAIT_MS)
    page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined})")
    copied = page.evaluate("""async () => {
        let seen = null;
        document.addEventListener('copy', (e) => { seen = document.getSelection().toString() || e.target.value; });
        const ok = await window.copyText('hello from the fallback');
        return {ok, seen, left: document.querySelectorAll('textarea').length};
    }""")
    assert copied == {"ok": True, "seen": "hello from the fallback", "left": 0}


def test_importing_a_memory_jsonl_with_a_bad_line_names_it_then_imports_the_good_lines(
    running: Running, page: Page
) -> None:
    page.goto(dashboard_url(running, "/#transfer"))
    upload = {"name": "memory.jsonl", "mimeType": "application/jsonl", "buffer": MEMORY_JSONL.encode()}
    page.locator("input[type=file]").set_input_files(upload)  # type: ignore[arg-type]
    error = page.locator(".import-error")
    expect(error).to_contain_text("Nothing was imported.", timeout=WAIT_MS)
    expect(error).to_contain_text("line 2")
    assert api(running, "/api/graph")["total"] == 0
    error.get_by_role("button", name="Import the good lines").click()
    summary = page.locator(".summary")
    expect(summary).to_contain_text("Line 2", timeout=WAIT_MS)
    expect(summary.locator(".tally.good")).to_contain_text("2 entities")
    expect(summary.locator(".tally.good")).to_contain_text("1 relations")
    expect(summary.locator(".tally.bad")).to_contain_text("1 line")
    screenshot(page, "import")
    assert api(running, "/api/graph")["total"] == 2
    page.locator("a[data-view=graph]").click()
    page.get_by_role("button", name="Acme Corp").click()
    expect(page.locator(".entity")).to_contain_text("Pays late", timeout=WAIT_MS)
    page.locator(".relations").get_by_role("button", name="Ana").click()
    expect(page.locator(".entity h2")).to_contain_text("Ana", timeout=WAIT_MS)
    expect(page.locator(".observations")).to_contain_text("Leads billing")
    page.locator("input[aria-label='Search the graph']").fill("billing")
    expect(page.locator(".entity-item")).to_have_count(1, timeout=WAIT_MS)
    screenshot(page, "graph")


def test_settings_issue_a_token_once_revoke_it_and_show_sync_status(running: Running, page: Page) -> None:
    seed(running)
    page.goto(dashboard_url(running, "/#settings"))
    page.get_by_placeholder("A person's name").fill("bob")
    page.get_by_role("button", name="Add token").click()
    issued = page.locator(".issued code.token")
    expect(issued).to_contain_text("hn_", timeout=WAIT_MS)
    assert running.tokens.owner(issued.inner_text()) == "bob"
    expect(page.locator(".token-row", has_text="bob")).to_be_visible()
    expect(page.get_by_text("This machine only")).to_be_visible()
    expect(page.locator(".table tbody tr")).to_have_count(1)
    expect(page.get_by_text("Every log line readable")).to_be_visible()
    expect(page.get_by_text("No sync set up")).to_be_visible()
    expect(page.locator(".transports code").first).to_have_text(str(running.store.log_dir))
    screenshot(page, "settings")
    page.get_by_role("button", name="Done").click()
    page.locator(".token-row", has_text="bob").get_by_role("button", name="Revoke").click()
    page.locator("dialog[open]").get_by_role("button", name="Revoke").click()
    expect(page.locator(".token-row", has_text="bob")).to_have_count(0, timeout=WAIT_MS)
    assert running.tokens.people() == []


def test_a_browser_without_a_sign_in_asks_for_a_token_once(running: Running, page: Page) -> None:
    """What a teammate's browser on the LAN sees (and a browser here not opened by Hivenote): no code, no cookie."""
    seed(running)
    ana = running.tokens.add("ana")
    page.goto(running.url + "/")
    gate = page.locator(".gate-card")
    expect(gate).to_contain_text("Paste your token", timeout=WAIT_MS)
    screenshot(page, "token")
    gate.locator("input[name=token]").fill("hn_wrong")
    gate.get_by_role("button", name="Open the notebook").click()
    expect(gate).to_contain_text("not accepted")
    gate.locator("input[name=token]").fill(ana)
    gate.get_by_role("button", name="Open the notebook").click()
    expect(page.locator(".card")).to_have_count(8, timeout=WAIT_MS)
    assert page.evaluate("sessionStorage.getItem('hivenote.token')") == ana
    assert page.evaluate("localStorage.getItem('hivenote.token')") is None
    page.locator("a[data-view=settings]").click()
    expect(page.get_by_text("Only this Hivenote's owner manages tokens.")).to_be_visible(timeout=WAIT_MS)
    running.tokens.revoke("ana")
    # The next request the page makes is refused: the notes view's, or the status poll's if it comes first (the gate
    # then replaces the page, its links too, so the view is asked for by its address, not by a click).
    page.evaluate("location.hash = 'notes'")
    expect(page.locator(".gate-card")).to_contain_text("no longer accepted", timeout=WAIT_MS)


def test_every_view_renders_without_errors_in_light_and_dark(running: Running, pages: Pages, errors: list[str]) -> None:
    seed(running)
    running.tracker.record(CURSOR, "brain_search")
    running.tracker.record(Author(agent="codex", client="codex-mcp-client 0.42", person="ana"), "brain_remember")
    schemes: tuple[Scheme, ...] = ("light", "dark")
    backgrounds: dict[str, str] = {}
    for scheme in schemes:
        page = pages(color_scheme=scheme)
        page.goto(dashboard_url(running, "/"))
        expect(page.locator(".card")).to_have_count(8, timeout=WAIT_MS)
        screenshot(page, f"notes-{scheme}")
        page.locator(".card", has_text="Billing moves").click()
        expect(page.locator("dialog[open] .markdown li")).to_have_text("phase 1: web", timeout=WAIT_MS)
        screenshot(page, f"note-{scheme}")
        page.keyboard.press("Escape")
        for view, ready in [
            ("trash", "The trash is empty."),
            ("agents", "Online now"),
            ("graph", "The graph is empty."),
            ("transfer", "Drop a file here"),
            ("settings", "Every log line readable"),
        ]:
            page.locator(f"a[data-view={view}]").click()
            expect(page.get_by_text(ready)).to_be_visible(timeout=WAIT_MS)
            screenshot(page, f"{view}-{scheme}")
        backgrounds[scheme] = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert errors == []
    assert backgrounds == {"light": "rgb(246, 246, 244)", "dark": "rgb(20, 20, 19)"}  # the theme follows the OS


def test_a_storage_problem_shows_as_a_banner_until_it_clears(running: Running, page: Page) -> None:
    seed(running)
    page.goto(dashboard_url(running, "/#settings"))
    expect(page.get_by_text("Every log line readable")).to_be_visible()
    log_dir = running.store.log_dir
    vanish(log_dir, leave_file=True)  # a file where the folder was: it cannot be made again
    banner = page.locator(".storage-problem")
    expect(banner).to_contain_text("Notes cannot be saved right now.", timeout=WAIT_MS)
    expect(banner).to_contain_text(f"The log folder {log_dir} is gone")
    screenshot(page, "storage-problem")
    log_dir.unlink()
    expect(banner).to_have_count(0, timeout=WAIT_MS)
    assert running.store.shard_path is not None and running.store.shard_path.exists()


def test_the_copied_toast_shows_above_the_connect_dialog(running: Running, pages: Pages) -> None:
    """A modal dialog is in the browser's top layer: a toast under it cannot be seen (the backdrop covers it)."""
    page = pages(clipboard=True)
    page.goto(dashboard_url(running, "/"))
    page.get_by_role("button", name="Connect an agent").first.click()
    dialog = page.locator("dialog[open]")
    dialog.locator("[data-client=cursor]").click()
    expect(dialog.locator("pre.code")).to_contain_text("mcpServers", timeout=WAIT_MS)
    dialog.get_by_role("button", name="Copy").click()
    toast = page.locator(".toast", has_text="Copied to the clipboard")
    expect(toast).to_be_visible()
    # Drawn, not dimmed by the dialog's backdrop: its padding has exactly the toast's own background colour.
    toast.evaluate("t => Promise.all(t.getAnimations().map(a => a.finished))")  # it fades in
    painted = toast.evaluate("t => getComputedStyle(t).backgroundColor")
    box = toast.bounding_box()
    assert box is not None
    shot = Image.open(io.BytesIO(page.screenshot(clip={"x": box["x"] + 3, "y": box["y"] + 3, "width": 2, "height": 2})))
    r, g, b = shot.convert("RGB").getpixel((0, 0))  # type: ignore[misc]
    assert f"rgb({r}, {g}, {b})" == painted, "the toast is under the dialog's backdrop"


def test_an_imported_notebook_keeps_its_times_and_the_history_names_the_import(
    running: Running, page: Page, tmp_path: Path
) -> None:
    """A notebook export from another machine, uploaded here: its note shows when and by whom it was written, and
    its history says who imported it and from which file."""
    written = wall_ms() - 3 * 86_400_000
    with Store(tmp_path / "other", now_ms=lambda: written) as other:
        note_id = Notebook(other).remember(kind="fact", title="Deploys need a green main", by=CURSOR).note.id
        export = json.dumps(export_notebook(other.state, node=other.node, now_ms=written))
    page.goto(dashboard_url(running, "/#transfer"))
    upload = {"name": "team-export.json", "mimeType": "application/json", "buffer": export.encode()}
    page.locator("input[type=file]").set_input_files(upload)  # type: ignore[arg-type]
    expect(page.locator(".summary .tally.good")).to_contain_text("1 notes", timeout=WAIT_MS)
    note = api(running, f"/api/notes/{note_id}")
    assert (note["created"], note["created_by"]["agent"]) == (written, "cursor")
    page.goto(dashboard_url(running, "/"))
    card = page.locator(f".card[data-id='{note_id}']")
    expect(card).to_contain_text("3 days ago", timeout=WAIT_MS)
    card.click()
    dialog = page.locator("dialog[open]")
    dialog.get_by_role("tab", name="History").click()
    expect(dialog.locator(".version .imported")).to_contain_text("from team-export.json", timeout=WAIT_MS)
    expect(dialog.locator(".version .imported")).to_contain_text("Imported by")
