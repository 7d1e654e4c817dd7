// boot.js: the first requests, started as the page loads. A real HTTP server on 127.0.0.1 answers them.
import assert from "node:assert/strict";
import test from "node:test";
import { dashboard, serve, visit } from "./browser.mjs";

const server = await serve((request) => (request.url.startsWith("/api/notes") ? { json: { results: [], total: 0 } } : { json: {} }));
visit(`${server.base}/#trash`);
const boot = await dashboard("boot.js"); // starts at once
test.after(() => server.close());

test("away from the notes view, boot finds the session and asks for no first page", async () => {
  assert.equal(await boot.booting, true);
  assert.deepEqual(
    server.requests.map((r) => r.url),
    ["/api/settings"],
  );
  assert.equal(boot.takeFirstPage(), null);
});

test("on the notes view, boot asks for the first page, which the notes view takes once", async () => {
  for (const hash of ["", "#notes", "#/notes"]) {
    server.requests.length = 0;
    visit(`${server.base}/${hash}`);
    assert.equal(await boot.restart(), true);
    const first = boot.takeFirstPage();
    assert.deepEqual(await first, { results: [], total: 0 });
    assert.equal(boot.takeFirstPage(), null);
    assert.deepEqual(
      server.requests.map((r) => r.url),
      ["/api/settings", `/api/notes?limit=${boot.FIRST_PAGE}`],
      hash,
    );
  }
});

test("without a session (the token screen) boot asks for no notes", async () => {
  await server.close();
  const refusing = await serve(() => ({ status: 401, json: { error: { code: "unauthorized", message: "No." } } }));
  try {
    visit(`${refusing.base}/#notes`);
    assert.equal(await boot.restart(), false);
    assert.deepEqual(refusing.requests.map((r) => r.url), ["/api/settings"]);
    assert.equal(boot.takeFirstPage(), null);
  } finally {
    await refusing.close();
  }
});
