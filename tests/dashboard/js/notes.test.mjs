// notes.js: the query each page of the notes list asks, and how pages merge as the notebook changes.
import assert from "node:assert/strict";
import test from "node:test";
import { dashboard, serve } from "./browser.mjs";

// notes.js imports boot.js, which asks for the session and the first page as soon as it loads: a server answers.
const server = await serve(() => ({ json: { results: [], near: [], total: 0 } }));
visitTrash();
const notes = await dashboard("notes.js");
await (await dashboard("boot.js")).booting;
await server.close();

function visitTrash() {
  globalThis.history.replaceState(null, "", "/#trash"); // not the notes view: boot asks for no first page
}

const note = (id) => ({ id });
const ids = (page) => page.results.map((n) => n.id);
const range = (from, to) => Array.from({ length: to - from }, (_, i) => note(`n${from + i}`));

test("a page's query sends the filters, the time filter as its since/until, the words and the page", () => {
  assert.deepEqual(notes.notesQuery({ kind: "decision", when: "yesterday" }, "drizzle orm", 50, 50), {
    kind: "decision",
    since: "yesterday",
    until: "yesterday",
    q: "drizzle orm",
    limit: 50,
    offset: 50,
  });
});

test("the first page's query leaves out the words, the offset and the time filter when there are none", () => {
  assert.deepEqual(notes.notesQuery({}, "", 0, 50), { q: undefined, limit: 50, offset: undefined });
  assert.deepEqual(notes.notesQuery({ when: "__proto__", project: "shop" }, "", 0, 50), {
    project: "shop",
    q: undefined,
    limit: 50,
    offset: undefined,
  });
});

test("a search asks no page past its window of 200 best matches; a plain list pages on", () => {
  assert.equal(notes.nextLimit("orm", 0), notes.PAGE);
  assert.equal(notes.nextLimit("orm", 180), 20);
  assert.equal(notes.nextLimit("", 180), notes.PAGE);
  assert.equal(notes.canLoadMore(180, 500, "orm"), true);
  assert.equal(notes.canLoadMore(200, 500, "orm"), false);
  assert.equal(notes.canLoadMore(200, 500, ""), true);
  assert.equal(notes.canLoadMore(500, 500, ""), false);
});

test("a refreshed first page keeps what was loaded beyond it, each note once", () => {
  const old = { results: range(0, notes.PAGE + 3), total: 53, loaded: true, query: "q" };
  // n51 was changed: it moves to the top of the first page; the rest keeps n50 and n52 after the new page.
  const first = [note(`n${notes.PAGE + 1}`), ...range(0, notes.PAGE - 1)];
  const page = notes.refreshed(old, { results: first, total: 53, near: [] });
  assert.deepEqual(ids(page), [...first.map((n) => n.id), `n${notes.PAGE}`, `n${notes.PAGE + 2}`]);
  assert.equal(page.query, "q"); // the query the page answered stays the old one
  assert.equal(page.loaded, true);
  assert.equal(page.total, 53);
});

test("after a change the refresh asks for every note loaded, so none pushed down by a new one goes missing", () => {
  assert.equal(notes.refreshLimit(0), notes.PAGE);
  assert.equal(notes.refreshLimit(notes.PAGE + 3), notes.PAGE + 3);
  assert.equal(notes.refreshLimit(5000), 200); // the server's largest page
  const order = range(0, 120); // the list as the server orders it
  for (const loaded of [notes.PAGE, notes.PAGE + 3, 100]) {
    const old = { results: order.slice(0, loaded), total: order.length, loaded: true };
    const now = [note("new"), ...order]; // a note written on top pushes every other one down by one
    const asked = notes.refreshLimit(loaded);
    const page = notes.refreshed(old, { results: now.slice(0, asked), total: now.length }, asked);
    assert.deepEqual(ids(page), ids({ results: now.slice(0, asked) }), `${loaded} loaded`); // no gap
    // "Load more" goes on from there without skipping a note.
    const next = notes.appended(page, { results: now.slice(ids(page).length, ids(page).length + notes.PAGE) });
    assert.deepEqual(ids(next), ids({ results: now.slice(0, ids(next).length) }));
  }
});

test("the next page adds only notes not shown yet", () => {
  const old = { results: range(0, 3), total: 6, loaded: true };
  const page = notes.appended(old, { results: [note("n2"), ...range(3, 6)], total: 6 });
  assert.deepEqual(ids(page), ["n0", "n1", "n2", "n3", "n4", "n5"]);
  assert.equal(page.total, 6);
  assert.deepEqual(ids(old), ["n0", "n1", "n2"]); // the old page is left as it was (React state)
});

test("the count says matches for a search and notes for the list", () => {
  assert.equal(notes.countText(1, "orm"), "1 match");
  assert.equal(notes.countText(3, "orm"), "3 matches");
  assert.equal(notes.countText(3, ""), "3 notes");
  assert.equal(notes.countText(1, ""), "1 note");
});

test("the filters offer every project, agent, person and machine seen so far, sorted, empty ones left out", () => {
  const seen = { project: new Set(), agent: new Set(), person: new Set(), node: new Set() };
  const by = (agent, person, node) => ({ agent, person, node });
  notes.collectSeen(seen, [{ project: "shop", created_by: by("cursor", "ana", "b-0001"), updated_by: by("zed", "", "a-0001") }], null);
  const values = notes.collectSeen(seen, [{ project: "", created_by: by("codex", "bo", "a-0001"), updated_by: by("codex", "bo", "a-0001") }], {
    nodes: { "c-0001": {} },
  });
  assert.deepEqual(values, {
    project: ["shop"],
    agent: ["codex", "cursor", "zed"],
    person: ["ana", "bo"],
    node: ["a-0001", "b-0001", "c-0001"],
  });
});
