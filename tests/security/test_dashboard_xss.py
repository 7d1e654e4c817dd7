"""Hostile text in every place the dashboard shows it, in a real Chromium: notes, authors, agents' client names,
people, machines (node ids from another machine's shard), as HTML, Markdown links and JavaScript's own property
names. Nothing runs, nothing breaks the page, and the text reads literally."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Dialog, Page, expect

from hivenote.server.core.model import Author, Op
from hivenote.server.notebook import Notebook
from tests.support.live import Running, dashboard_url, serve

WAIT_MS = 10_000
IMG = '<img src="data:," onerror="window.pwned=\'img\'">'  # an image that fails to load, without a request
SCRIPT = "</script><script>window.pwned='script'</script>"
SVG = "<svg onload=\"window.pwned='svg'\"></svg>"
NODE = "evil<img src=data:, onerror=window.pwned=1>-1a2b"
BODY = "\n\n".join(
    [
        f"{IMG} {SCRIPT} {SVG}",
        "[md link](javascript:window.pwned='md')",
        "[data link](data:text/html,<script>window.pwned='data'</script>)",
        "<a href=\"javascript:window.pwned='raw'\">raw link</a>",
        "<a href=\"  JaVaScRiPt:window.pwned='case'\">case link</a>",
        "<iframe srcdoc=\"<script>parent.pwned='iframe'</script>\"></iframe>",
        "<form action=\"javascript:window.pwned='form'\"><button>go</button></form>",
        "<math><mi xlink:href=\"javascript:window.pwned='math'\">m</mi></math>",
        "![beacon](http://203.0.113.9/track.png)",
        "[ok](https://example.com/)",
    ]
)
PROTOTYPE_NAMES = ("constructor", "__proto__", "toString", "hasOwnProperty", "valueOf")


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    with serve(tmp_path / "data") as server:
        yield server


def write_foreign_shard(running: Running) -> list[str]:
    """Another machine's shard as a synced folder or a peer brings it: its node id and its `by` are whatever that
    machine (or whoever wrote the folder) put there; the fold takes any strings."""
    assert running.store.shard_path is not None
    ids = []
    with open(running.store.shard_path.parent / "evil-1a2b.jsonl", "wb") as fh:
        for seq, agent in enumerate(PROTOTYPE_NAMES, 1):
            note_id = f"01EVIL{seq:020d}"
            ids.append(note_id)
            by = Author(agent=agent, client=f"{IMG} {agent}", person=SVG)
            fields = {"kind": "fact", "title": f"{IMG} from {agent}", "body": BODY, "tags": [SCRIPT], "project": None}
            op = Op(NODE, seq, 1_800_000_000_000 + seq, 0, "note.set", {"id": note_id, "fields": fields}, by)
            fh.write(op.encode())
    return ids


def watch(page: Page) -> list[str]:
    """Dialogs (alert/confirm) a payload opened; any means script ran."""
    opened: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        opened.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    return opened


def assert_inert(page: Page, opened: list[str], errors: list[str]) -> None:
    assert page.evaluate("window.pwned") is None
    assert opened == []
    assert page.locator("[onerror], [onload], [onclick], iframe, script:not([src]), .markdown form").count() == 0
    # CSP's own refusals are logged (the beacon; Chromium also reports handlers in the sanitizer's inert parse, see
    # the next test): any other error means a payload broke the page
    assert [e for e in errors if "Content Security Policy" not in e] == []


def test_notes_from_another_machine_with_hostile_names_everywhere_render_inert_and_literal(
    running: Running, page: Page, errors: list[str]
) -> None:
    ids = write_foreign_shard(running)
    opened = watch(page)
    page.goto(dashboard_url(running, "/"))
    expect(page.locator(".card")).to_have_count(len(PROTOTYPE_NAMES), timeout=WAIT_MS)
    card = page.locator(f'.card[data-id="{ids[0]}"]')
    expect(card.locator(".card-title")).to_have_text(f"{IMG} from constructor")
    expect(card.locator(".tag")).to_have_text(f"#{SCRIPT}")
    assert_inert(page, opened, errors)

    for note_id in ids:
        page.locator(f'.card[data-id="{note_id}"]').click()
        body = page.locator("dialog[open] .markdown")
        expect(body.locator("a", has_text="ok")).to_have_attribute("href", "https://example.com/", timeout=WAIT_MS)
        expect(page.locator("dialog[open]")).to_contain_text(SVG)  # the person, as text
        for name in ("md link", "data link", "raw link", "case link"):
            link = body.locator("a", has_text=name)
            href = link.get_attribute("href") if link.count() else None
            assert href is None or not href.strip().lower().startswith(("javascript:", "data:")), (name, href)
        for link in body.locator("a").all():
            link.click(modifiers=["Alt"])  # follow each link that survived, in place
        body.locator("button").all()  # a sanitized form leaves no button to press
        assert_inert(page, opened, errors)
        page.keyboard.press("Escape")
        expect(page.locator("dialog[open]")).to_have_count(0)


def test_the_agents_and_settings_views_show_hostile_client_people_and_machine_names_as_text(
    running: Running, page: Page, errors: list[str]
) -> None:
    write_foreign_shard(running)
    for agent in PROTOTYPE_NAMES:
        running.tracker.record(Author(agent=agent, client=f"{IMG} {agent}", person=SVG))
    Notebook(running.store).remember(kind="fact", title="mine", by=Author(agent="other", client=SCRIPT))
    opened = watch(page)
    page.goto(dashboard_url(running, "/#agents"))
    expect(page.locator("h1")).to_have_text("Connected agents", timeout=WAIT_MS)
    expect(page.locator("main")).to_contain_text(f"{IMG} constructor", timeout=WAIT_MS)
    expect(page.locator("main")).to_contain_text(SVG)
    assert_inert(page, opened, errors)
    page.goto(dashboard_url(running, "/#settings"))
    expect(page.locator("main")).to_contain_text(NODE, timeout=WAIT_MS)
    assert_inert(page, opened, errors)


def test_the_raw_op_lines_used_here_are_what_the_fold_accepts(running: Running) -> None:
    """The hostile shard above is not refused as unreadable (which would make the page tests pass vacuously)."""
    ids = write_foreign_shard(running)
    assert running.store.shard_path is not None
    lines = (running.store.shard_path.parent / "evil-1a2b.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["node"] for line in lines] == [NODE] * len(PROTOTYPE_NAMES)
    running.store.refresh()
    with running.store.reading() as state:
        assert all(state.note(i) is not None for i in ids)


def test_the_sanitizer_alone_stops_every_payload_without_the_content_security_policy(
    running: Running, page: Page
) -> None:
    """Two layers: the page's CSP blocks inline script, and DOMPurify strips it first. Served without the CSP, the
    note body's HTML is inserted into the live page and nothing still runs."""
    bare = running.url + "/ui/no-csp.html"
    page.route(bare, lambda route: route.fulfill(status=200, content_type="text/html", body="<main></main>"))
    opened = watch(page)
    page.goto(bare)
    for piece in [*BODY.split("\n\n"), BODY]:
        page.evaluate(
            "t => import('/ui/js/markdown.js').then(m => m.renderMarkdown(t))"
            ".then(html => { document.querySelector('main').innerHTML = html; })",
            piece,
        )
        for link in page.locator("main a").all():
            href = link.get_attribute("href") or ""
            assert not href.strip().lower().startswith(("javascript:", "data:")), href
            if "example.com" not in href:
                link.click()
        page.wait_for_function("() => document.readyState === 'complete'")
        assert_inert(page, opened, [])
