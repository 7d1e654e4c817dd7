// clipboard.js: every Copy button's way to the clipboard: the tray's in the desktop window (and the page's own when
// the tray cannot), the async Clipboard API in a secure context, else a hidden textarea and execCommand.
import assert from "node:assert/strict";
import test from "node:test";
import { dashboard, serve } from "./browser.mjs";

let answer = () => ({ json: { ok: true } });
const server = await serve((request) => answer(request));
const clipboard = await dashboard("clipboard.js");
test.after(() => server.close());

/** What the page offers for the old way: a textarea in the body and execCommand's answer. */
function oldWay(result) {
  const seen = { areas: [], commands: [] };
  document.createElement = (tag) => {
    const area = { tag, value: "", attributes: {}, selected: false, removed: false };
    area.setAttribute = (name, value) => (area.attributes[name] = value);
    area.select = () => (area.selected = true);
    area.remove = () => (area.removed = true);
    seen.areas.push(area);
    return area;
  };
  document.body = { append: (area) => (area.appended = true) };
  document.execCommand = (command) => {
    seen.commands.push(command);
    if (result instanceof Error) throw result;
    return result;
  };
  return seen;
}

function secure(writeText) {
  globalThis.isSecureContext = writeText !== null;
  Object.defineProperty(globalThis, "navigator", { value: writeText ? { clipboard: { writeText } } : {}, configurable: true });
}

test("loading it installs copyText on window, where the desktop window may replace it", () => {
  assert.equal(window.copyText, clipboard.copyText);
});

test("in a secure context the Clipboard API takes the text", async () => {
  const written = [];
  secure(async (text) => written.push(text));
  const seen = oldWay(true);
  assert.equal(await clipboard.copyText("hn_token"), true);
  assert.deepEqual(written, ["hn_token"]);
  assert.equal(seen.areas.length, 0);
});

test("a refused Clipboard API, or none (plain http on a LAN address), falls back to a hidden textarea", async () => {
  for (const writeText of [async () => Promise.reject(new Error("NotAllowedError")), null]) {
    secure(writeText);
    const seen = oldWay(true);
    assert.equal(await clipboard.copyText("<b>not markup</b>"), true);
    const [area] = seen.areas;
    assert.equal(area.tag, "textarea");
    assert.equal(area.value, "<b>not markup</b>");
    assert.equal(area.attributes.readonly, "");
    assert.ok(area.appended && area.selected && area.removed);
    assert.deepEqual(seen.commands, ["copy"]);
  }
});

test("the textarea goes even when execCommand fails or throws, and the answer says it did not copy", async () => {
  secure(null);
  let seen = oldWay(false);
  assert.equal(await clipboard.copyText("x"), false);
  assert.equal(seen.areas[0].removed, true);
  seen = oldWay(new Error("not allowed"));
  await assert.rejects(clipboard.copyText("x"), /not allowed/);
  assert.equal(seen.areas[0].removed, true);
});

test("Copy goes through window.copyText outside the desktop window", async () => {
  const copied = [];
  window.copyText = async (text) => copied.push(text) > 0;
  delete window.pywebview;
  server.requests.length = 0;
  assert.equal(await clipboard.copy("snippet"), true);
  assert.deepEqual(copied, ["snippet"]);
  assert.equal(server.requests.length, 0);
});

test("in the desktop window Copy asks the tray, and falls back to the page when the tray cannot", async () => {
  const copied = [];
  window.copyText = async (text) => copied.push(text) > 0;
  window.pywebview = {};
  secure(async (text) => copied.push(`api:${text}`));
  try {
    server.requests.length = 0;
    answer = () => ({ json: { ok: true } });
    assert.equal(await clipboard.copy("snippet"), true);
    assert.deepEqual(
      server.requests.map((r) => [r.method, r.url, JSON.parse(r.body)]),
      [["POST", "/desktop/clipboard", { text: "snippet" }]],
    );
    assert.deepEqual(copied, []);
    answer = () => ({ status: 500, json: { error: { code: "error", message: "no clipboard" } } });
    assert.equal(await clipboard.copy("again"), true);
    assert.deepEqual(copied, ["api:again"]); // the page's own copyText, not the replaceable window.copyText
  } finally {
    delete window.pywebview;
    window.copyText = clipboard.copyText;
  }
});
