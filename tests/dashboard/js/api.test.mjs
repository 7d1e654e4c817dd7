// api.js: the dashboard's one way to the server. Requests go to a real HTTP server on 127.0.0.1; what it received
// and what api.js makes of its answers are checked.
import assert from "node:assert/strict";
import test from "node:test";
import { VERSION, clearStorage, dashboard, serve, visit } from "./browser.mjs";

let answer = () => ({ json: {} });
const server = await serve((request) => answer(request));
const api = await dashboard("api.js");
test.after(() => server.close());
test.beforeEach(() => {
  api.forgetToken();
  clearStorage();
  server.requests.length = 0;
  visit(`${server.base}/`);
  answer = () => ({ json: {} });
});

const last = () => server.requests.at(-1);

test("a call names the client and its version, asks no cache, and leaves empty query values out", async () => {
  answer = () => ({ json: { ok: 1 } });
  const body = await api.api("/api/notes", { query: { q: "drizzle orm", kind: "", project: null, agent: undefined, limit: 50, trashed: false } });
  assert.deepEqual(body, { ok: 1 });
  assert.equal(last().method, "GET");
  assert.equal(last().url, "/api/notes?q=drizzle+orm&limit=50&trashed=false");
  assert.equal(last().headers["x-hivenote-client"], `hivenote-dashboard/${VERSION}`);
  assert.equal(last().headers["cache-control"], "no-cache"); // what fetch sends for cache: "no-store"
  assert.equal(last().headers.authorization, undefined);
  await api.api("/api/notes", { query: { q: "" } });
  assert.equal(last().url, "/api/notes"); // no dangling "?"
});

test("a body goes as JSON with its content type", async () => {
  await api.api("/api/notes", { method: "POST", body: { title: "Use Drizzle", tags: ["db"] } });
  assert.equal(last().method, "POST");
  assert.equal(last().headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(last().body), { title: "Use Drizzle", tags: ["db"] });
});

test("the server's error answer becomes an ApiError with its status, code and message", async () => {
  answer = () => ({ status: 404, json: { error: { code: "not_found", message: "No note has the id 01X." } } });
  const error = await api.api("/api/notes/01X").catch((e) => e);
  assert.ok(error instanceof api.ApiError);
  assert.equal(error.status, 404);
  assert.equal(error.code, "not_found");
  assert.equal(error.message, "No note has the id 01X.");
});

test("an error answer that is not JSON keeps the status line", async () => {
  answer = () => ({ status: 502, text: "<html>Bad gateway</html>" });
  const error = await api.api("/api/status").catch((e) => e);
  assert.ok(error instanceof api.ApiError);
  assert.deepEqual([error.status, error.code, error.message], [502, "error", "502 Bad Gateway"]);
});

test("a refused credential calls the unauthorized handler with the server's message", async () => {
  const heard = [];
  api.whenUnauthorized((message) => heard.push(message));
  answer = () => ({ status: 401, json: { error: { code: "unauthorized", message: "That token was revoked." } } });
  const error = await api.api("/api/notes").catch((e) => e);
  assert.equal(error.status, 401);
  assert.deepEqual(heard, ["That token was revoked."]);
  answer = () => ({ status: 403, json: { error: { code: "forbidden", message: "Owner only." } } });
  await api.api("/api/tokens").catch((e) => e);
  assert.deepEqual(heard, ["That token was revoked."]); // only a 401 signs out
  api.whenUnauthorized(() => {});
});

test("a pasted token is tried, then sent as a bearer token and kept for the tab, or the browser when asked", async () => {
  answer = (request) => (request.headers.authorization === "Bearer hn_good" ? { json: { results: [] } } : { status: 401, json: {} });
  assert.equal(await api.tryToken("hn_bad", false), false);
  assert.equal(api.storedToken(), null);
  assert.equal(await api.tryToken("hn_good", false), true);
  assert.equal(last().url, "/api/notes?limit=1");
  assert.equal(sessionStorage.getItem("hivenote.token"), "hn_good");
  assert.equal(localStorage.getItem("hivenote.token"), null);
  await api.api("/api/notes");
  assert.equal(last().headers.authorization, "Bearer hn_good");
  assert.equal(await api.tryToken("hn_good", true), true);
  assert.equal(localStorage.getItem("hivenote.token"), "hn_good");
  api.forgetToken();
  assert.equal(api.storedToken(), null);
  await api.api("/api/notes").catch(() => {});
  assert.equal(last().headers.authorization, undefined);
});

test("a server error while trying a token is an error, not a refusal", async () => {
  answer = () => ({ status: 503, json: { error: { code: "unavailable", message: "Starting." } } });
  const error = await api.tryToken("hn_x", false).catch((e) => e);
  assert.ok(error instanceof api.ApiError);
  assert.equal(error.code, "unavailable");
  assert.equal(api.storedToken(), null);
});

test("a one-time code in the address is taken out of it at once and traded for the session key", async () => {
  answer = (request) =>
    request.url === "/api/session" ? { headers: { "X-Hivenote-Key": "k-123" }, json: { ok: true } } : { json: {} };
  visit(`${server.base}/?code=abc&view=1#notes`);
  assert.equal(await api.startSession(), true);
  assert.equal(location.href, `${server.base}/?view=1#notes`);
  const trade = server.requests.find((r) => r.url === "/api/session");
  assert.equal(trade.method, "POST");
  assert.deepEqual(JSON.parse(trade.body), { code: "abc" });
  assert.equal(localStorage.getItem("hivenote.session"), "k-123");
  await api.api("/api/notes");
  assert.equal(last().headers["x-hivenote-key"], "k-123"); // the key that goes with the cookie
  assert.equal(last().headers.authorization, undefined);
});

test("a code the server refuses starts no session, and the address keeps no code", async () => {
  answer = () => ({ status: 401, json: { error: { code: "unauthorized", message: "Used already." } } });
  visit(`${server.base}/?code=old`);
  assert.equal(await api.startSession(), false);
  assert.equal(location.href, `${server.base}/`);
  assert.equal(localStorage.getItem("hivenote.session"), null);
});

test("without a code, a kept token is used; without one, the settings call says whether the cookie works", async () => {
  sessionStorage.setItem("hivenote.token", "hn_kept");
  assert.equal(await api.startSession(), true);
  assert.equal(server.requests.length, 0); // the kept token is trusted until the server refuses it
  await api.api("/api/notes");
  assert.equal(last().headers.authorization, "Bearer hn_kept");
  api.forgetToken();
  answer = () => ({ status: 401, json: {} });
  assert.equal(await api.startSession(), false);
  assert.equal(last().url, "/api/settings");
  answer = () => ({ json: {} });
  assert.equal(await api.startSession(), true);
});

test("a download is the body and the file name the server suggests, or a default name", async () => {
  answer = () => ({ headers: { "Content-Disposition": 'attachment; filename="hivenote-2026-12-07.json"' }, text: "{}" });
  const named = await api.download("/api/export");
  assert.equal(named.name, "hivenote-2026-12-07.json");
  assert.equal(await named.blob.text(), "{}");
  answer = () => ({ text: "{}" });
  assert.equal((await api.download("/api/export")).name, "hivenote-export");
  answer = () => ({ status: 403, json: { error: { code: "forbidden", message: "Owner only." } } });
  const error = await api.download("/api/export").catch((e) => e);
  assert.deepEqual([error.status, error.code], [403, "forbidden"]);
});
