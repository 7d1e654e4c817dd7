// What the dashboard's modules touch of a browser, for running their logic under Node's own test runner: the page's
// address (location, history.replaceState), its storage, its version <meta>, and fetch resolving a path against the
// page's address as a browser does. A test answers the dashboard's requests from a real HTTP server on 127.0.0.1
// (`serve`). No DOM: what renders is left to the Playwright tests in tests/dashboard/.
import { createServer } from "node:http";
import { register } from "node:module";

register("./hooks.mjs", import.meta.url);

export const VERSION = "9.9.9";

class MemoryStorage {
  #items = new Map();
  getItem(key) {
    return this.#items.has(key) ? this.#items.get(key) : null;
  }
  setItem(key, value) {
    this.#items.set(key, String(value));
  }
  removeItem(key) {
    this.#items.delete(key);
  }
  clear() {
    this.#items.clear();
  }
}

let address = new URL("http://127.0.0.1:9/");
const nodeFetch = globalThis.fetch;

const history = {
  state: null,
  replaceState(state, _title, url) {
    this.state = state;
    address = new URL(url, address);
  },
};
const document = {
  title: "Hivenote",
  querySelector: (css) => (css === 'meta[name="hivenote-version"]' ? { content: VERSION } : null),
};
const page = {
  window: globalThis,
  history,
  document,
  localStorage: new MemoryStorage(),
  sessionStorage: new MemoryStorage(),
  fetch: (input, init) => nodeFetch(typeof input === "string" ? new URL(input, address) : input, init),
};
for (const [name, value] of Object.entries(page)) {
  Object.defineProperty(globalThis, name, { value, configurable: true, writable: true });
}
Object.defineProperty(globalThis, "location", { get: () => address, configurable: true });

/** Open the page at `url` (an address or a path and hash on the current server). */
export function visit(url) {
  address = new URL(url, address);
}

/** Forget what the page stored (both storages). */
export function clearStorage() {
  localStorage.clear();
  sessionStorage.clear();
}

/** A dashboard module, by file name (server/dashboard/js/<name>). */
export function dashboard(name) {
  return import(new URL(`../../../server/dashboard/js/${name}`, import.meta.url).href);
}

/**
 * A real HTTP server on 127.0.0.1 that records every request ({method, url, headers, body}) and answers with what
 * `answer(request)` returns: {status, headers, json} or {status, headers, text}. The page's address moves to it.
 */
export async function serve(answer) {
  const requests = [];
  const server = createServer(async (incoming, outgoing) => {
    let body = "";
    for await (const chunk of incoming) body += chunk;
    const request = { method: incoming.method, url: incoming.url, headers: incoming.headers, body };
    requests.push(request);
    const { status = 200, headers = {}, json, text = "" } = (await answer(request)) ?? {};
    const payload = json === undefined ? text : JSON.stringify(json);
    const type = json === undefined ? "text/plain" : "application/json";
    outgoing.writeHead(status, { "Content-Type": type, ...headers });
    outgoing.end(payload);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  visit(`${base}/`);
  return {
    base,
    requests,
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
