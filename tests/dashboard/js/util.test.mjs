// util.js: the names, times, previews and time-filter choices every view shows.
import assert from "node:assert/strict";
import test from "node:test";
import { dashboard } from "./browser.mjs";
import { AGENT_NAMES } from "./hooks.mjs";

const util = await dashboard("util.js");
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const NOW = Date.UTC(2026, 11, 7, 20, 0, 0);

test("agentName reads the server's table by own key only: an id like __proto__ is shown as itself", () => {
  assert.equal(util.agentName("claude-code"), AGENT_NAMES["claude-code"]);
  for (const id of ["__proto__", "constructor", "toString", "hasOwnProperty", "some-new-agent"]) {
    assert.equal(util.agentName(id), id);
  }
  assert.equal(util.agentName(""), "unknown");
  assert.equal(util.agentName(undefined), "unknown");
});

test("machine drops a node id's four-character suffix only", () => {
  assert.equal(util.machine("laptop-7f3a"), "laptop");
  assert.equal(util.machine("my-desk-top-0001"), "my-desk-top");
  assert.equal(util.machine("laptop"), "laptop");
  assert.equal(util.machine("laptop-7f3"), "laptop-7f3"); // not a suffix of four
  assert.equal(util.machine("laptop-7f3ab"), "laptop-7f3ab");
  assert.equal(util.machine("-7f3a"), "-7f3a"); // nothing before the dash
  assert.equal(util.machine(""), "");
  assert.equal(util.machine(undefined), "");
});

test("ago counts the largest whole unit, singular for one", () => {
  const cases = [
    [0, "just now"],
    [59_999, "just now"],
    [MINUTE, "1 minute ago"],
    [2 * MINUTE + 59_000, "2 minutes ago"],
    [60 * MINUTE, "1 hour ago"],
    [DAY - 1, "23 hours ago"],
    [DAY, "1 day ago"],
    [29 * DAY, "29 days ago"],
    [30 * DAY, "1 month ago"],
    [364 * DAY, "12 months ago"],
    [365 * DAY, "1 year ago"],
    [3 * 365 * DAY, "3 years ago"],
  ];
  for (const [age, text] of cases) assert.equal(util.ago(NOW - age, NOW), text, `${age} ms ago`);
});

test("ago reads a stamp from a clock ahead of this one as just now", () => {
  assert.equal(util.ago(NOW + 5 * DAY, NOW), "just now");
});

test("a time no date can hold is 'an unknown time', never an exception", () => {
  const bad = [8.64e15 + 1, -8.64e15 - 1, Number.MAX_SAFE_INTEGER, Infinity, NaN, "1700000000000", null, undefined];
  for (const ms of bad) {
    assert.equal(util.knownTime(ms), false, String(ms));
    assert.equal(util.ago(ms, NOW), "at an unknown time");
    assert.equal(util.isoTime(ms), undefined);
    assert.equal(util.when(ms), `at an unknown time (${ms})`);
  }
  assert.equal(util.knownTime(8.64e15), true); // the last date JavaScript has
  assert.equal(util.isoTime(0), "1970-01-01T00:00:00.000Z");
  assert.equal(util.isoTime(NOW), "2026-12-07T20:00:00.000Z");
  assert.match(util.when(NOW), /2026/);
});

test("who joins the agent's name, the person and the machine, leaving out what is missing", () => {
  assert.equal(util.who({ agent: "cursor", person: "ana", node: "laptop-7f3a" }), "Cursor · ana · laptop");
  assert.equal(util.who({ agent: "cursor", node: "laptop-7f3a" }), "Cursor · laptop");
  assert.equal(util.who({ agent: "my-bot" }), "my-bot");
  assert.equal(util.who({}), "unknown");
});

test("preview keeps a body's words: no code blocks, Markdown marks or link targets", () => {
  const body = "# Title\n\n> Use **Drizzle**, _not_ `Prisma`.\n\n```sql\nSELECT 1;\n```\nSee [the docs](https://orm.drizzle.team).";
  assert.equal(util.preview(body), "Title Use Drizzle, not Prisma. See the docs.");
  assert.equal(util.preview("   "), "");
});

test("preview cuts a long body at the length, with an ellipsis and no trailing space", () => {
  const body = "word ".repeat(100);
  const cut = util.preview(body, 12);
  assert.equal(cut, "word word wo…");
  assert.equal(util.preview("a".repeat(240)), "a".repeat(240)); // at the length: whole
  assert.equal(util.preview("a".repeat(241)), `${"a".repeat(240)}…`);
  assert.equal(util.preview("word  ".repeat(3), 5), "word…");
});

test("plural says one thing and many things", () => {
  assert.equal(util.plural(0, "note"), "0 notes");
  assert.equal(util.plural(1, "note"), "1 note");
  assert.equal(util.plural(2, "match", "matches"), "2 matches");
  assert.equal(util.plural(1, "match", "matches"), "1 match");
  assert.match(util.plural(12345, "note"), /^12.?345 notes$/);
});

test("every time-filter choice has a label and a server query; an unknown key asks nothing", () => {
  assert.deepEqual(Object.keys(util.WHEN_LABELS), Object.keys(util.WHEN));
  for (const key of Object.keys(util.WHEN)) {
    assert.notEqual(util.whenName(key), key);
    assert.ok(util.whenQuery(key).since, key);
  }
  assert.deepEqual(util.whenQuery("yesterday"), { since: "yesterday", until: "yesterday" });
  for (const key of ["", undefined, "__proto__", "constructor", "fortnight"]) {
    assert.deepEqual(util.whenQuery(key), {});
    assert.equal(util.whenName(key), key);
  }
});

test("thisOs names the snippet key for the platform the browser reports", () => {
  const seen = [];
  for (const [platform, os] of [
    ["MacIntel", "macos"],
    ["Win32", "windows"],
    ["Linux x86_64", "linux"],
    ["", "linux"],
  ]) {
    Object.defineProperty(globalThis, "navigator", { value: { platform, userAgent: "" }, configurable: true });
    seen.push([platform, util.thisOs(), os]);
  }
  Object.defineProperty(globalThis, "navigator", {
    value: { userAgentData: { platform: "macOS" }, platform: "Linux x86_64" },
    configurable: true,
  });
  seen.push(["userAgentData macOS", util.thisOs(), "macos"]);
  for (const [platform, got, wanted] of seen) assert.equal(got, wanted, platform);
});
