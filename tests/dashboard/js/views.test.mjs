// The logic inside the views that needs no page: a note's history and edits (note.js), where a snippet goes
// (connect.js), the sharing and sync lines of the settings (settings.js), the agents by person (agents.js) and the
// import's summary and retry (transfer.js).
import assert from "node:assert/strict";
import test from "node:test";
import { dashboard } from "./browser.mjs";

const note = await dashboard("note.js");
const connect = await dashboard("connect.js");
const settings = await dashboard("settings.js");

test("tags are read from what was typed: trimmed, without '#', empty ones left out", () => {
  assert.deepEqual(note.tagsOf(" db, #perf ,, #, ops "), ["db", "perf", "ops"]);
  assert.deepEqual(note.tagsOf(""), []);
});

test("an edit sends only the fields that changed; a field the note lacks is null", () => {
  const current = { kind: "fact", title: "Use Drizzle", project: null, tags: ["db"], body: "x" };
  const same = { kind: "fact", title: "Use Drizzle", project: null, tags: ["db"], body: "x", replaces: null };
  assert.deepEqual(note.changedFields(same, current), {});
  const edited = { ...same, title: "Use Drizzle ORM", tags: ["db", "orm"], replaces: "01J" };
  assert.deepEqual(note.changedFields(edited, current), { title: "Use Drizzle ORM", tags: ["db", "orm"], replaces: "01J" });
  assert.deepEqual(note.changedFields({ ...same, project: "shop" }, current), { project: "shop" });
});

test("each version carries the note as it was before it, newest first", () => {
  const versions = [
    { action: "set", fields: { title: "A", body: "one" } },
    { action: "set", fields: { body: "two" } },
    { action: "trash" },
    { action: "set", fields: { title: "B" } },
  ];
  const out = note.withBefore(versions);
  assert.deepEqual(
    out.map((v) => [v.index, v.before]),
    [
      [3, { title: "A", body: "two" }],
      [2, { title: "A", body: "two" }],
      [1, { title: "A", body: "one" }],
      [0, {}],
    ],
  );
  assert.deepEqual(out.map(note.versionLabel), ["Edited", "Moved to the trash", "Edited", "Created"]);
  assert.equal(note.versionLabel({ action: "note.future", index: 4 }), "note.future"); // an action this page does not know
});

test("the history shows empty values as (none) and tags with '#'", () => {
  assert.equal(note.show("project", null), "(none)");
  assert.equal(note.show("project", ""), "(none)");
  assert.equal(note.show("tags", []), "(none)");
  assert.equal(note.show("tags", ["db", "perf"]), "#db #perf");
  assert.equal(note.show("title", 0), "0");
});

test("a client id maps onto the agent the icons know", () => {
  assert.equal(connect.iconFor("claude-desktop-remote"), "claude-desktop");
  assert.equal(connect.iconFor("claude-code-stdio"), "claude-code");
  assert.equal(connect.iconFor("cursor"), "cursor");
});

test("a snippet goes where this OS keeps it, else where the first OS does", () => {
  const where = { linux: "~/.cursor/mcp.json", windows: "%USERPROFILE%\\.cursor\\mcp.json" };
  assert.equal(connect.whereFor(where, "windows"), where.windows);
  assert.equal(connect.whereFor(where, "macos"), where.linux);
  assert.equal(connect.whereFor({}, "linux"), "");
});

test("teammates are given the server's addresses, else this page's host, never a loopback one", () => {
  const listen = { urls: [], port: 7788 };
  assert.deepEqual(settings.shareUrls({ ...listen, urls: ["http://192.168.1.5:7788/"] }, "127.0.0.1"), ["http://192.168.1.5:7788/"]);
  assert.deepEqual(settings.shareUrls(listen, "laptop.lan"), ["http://laptop.lan:7788/"]);
  for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) {
    assert.deepEqual(settings.shareUrls(listen, host), [], host);
  }
  assert.deepEqual(settings.shareUrls(listen, "localhost.example"), ["http://localhost.example:7788/"]);
});

test("another machine's lag reads 'up to date' within a second, else in words", () => {
  assert.equal(settings.lagText(0), "up to date");
  assert.equal(settings.lagText(999), "up to date");
  assert.equal(settings.lagText(1_000), "1 second behind");
  assert.equal(settings.lagText(59_999), "59 seconds behind"); // not "just now behind"
  assert.equal(settings.lagText(3 * 60_000), "3 minutes behind");
  assert.equal(settings.lagText(2 * 86_400_000), "2 days behind");
});

test("a transport's traffic is counted in KiB, a unit with no plural", () => {
  assert.equal(settings.movedText({ bytes_in: 0, bytes_out: 1024 }), "0 KiB in · 1 KiB out");
  assert.equal(settings.movedText({ bytes_in: 5 * 1024 + 600, bytes_out: 2048 }), "6 KiB in · 2 KiB out");
});

const agents = await dashboard("agents.js");
const transfer = await dashboard("transfer.js");

test("agents are grouped by person, the owner's ('') as one group, in the order first seen", () => {
  const seen = [
    { agent: "cursor", person: "ana" },
    { agent: "codex" },
    { agent: "zed", person: "ana" },
    { agent: "cline", person: "" },
  ];
  assert.deepEqual(
    agents.byPerson(seen).map(([person, rows]) => [person, rows.map((a) => a.agent)]),
    [
      ["ana", ["cursor", "zed"]],
      ["", ["codex", "cline"]],
    ],
  );
  assert.deepEqual(agents.byPerson([]), []);
});

test("the host line names the machine once when its node id agrees, else both", () => {
  assert.equal(agents.hostName({ host: "laptop", node: "laptop-7f3a" }), "laptop");
  assert.equal(agents.hostName({ host: "laptop", node: "old-name-7f3a" }), "laptop (old-name)");
});

test("only an import refused for a named line offers to keep the good lines", () => {
  assert.equal(transfer.canSkipBad({ status: 400, message: "Line 12: not JSON." }), true);
  assert.equal(transfer.canSkipBad({ status: 400, message: "The file is empty." }), false);
  assert.equal(transfer.canSkipBad({ status: 413, message: "line 3 is too long" }), false);
  assert.equal(transfer.canSkipBad(null), false);
});

test("an import summary shows only counts above zero", () => {
  assert.deepEqual(transfer.shownCounts({ notes: 3, entities: 0, relations: 1 }), [
    ["notes", 3],
    ["relations", 1],
  ]);
  assert.deepEqual(transfer.shownCounts(undefined), []);
});
