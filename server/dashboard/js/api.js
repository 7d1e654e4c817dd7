// The dashboard's only way to the server: JSON calls under /api with the bearer token and the client header.
//
// On this machine the page never sees a token: the tray (or `hivenote open`) opens it at `/?code=...`, a one-time
// code the page trades for the sign-in cookie (HttpOnly, SameSite=Strict) at POST /api/session; the browser sends
// the cookie with every call here, and the server takes it only with the client header below. A browser on another
// machine asks for a token once and keeps it in sessionStorage (gone when the tab closes), or in localStorage when
// the user ticks "remember on this browser": a long-lived copy on a shared computer should be a decision, not a
// default. A token never goes in a URL.

const VERSION = document.querySelector('meta[name="hivenote-version"]')?.content || "0";
export const CLIENT = `hivenote-dashboard/${VERSION}`;
const KEY = "hivenote.token";
// The key that goes with the sign-in cookie: the cookie reaches every port of 127.0.0.1, this origin's storage does
// not, and the server wants both (server/web/session.py).
const SESSION_KEY = "hivenote.session";

let token = null; // a pasted token; null: none (the cookie, or auth off)

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Called when the server refuses the token (revoked, or the server was reset): the app shows the token screen.
let onUnauthorized = () => {};
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

export function storedToken() {
  return sessionStorage.getItem(KEY) || localStorage.getItem(KEY);
}

export function useToken(value, remember = false) {
  token = value;
  if (remember) localStorage.setItem(KEY, value);
  else sessionStorage.setItem(KEY, value);
}

export function forgetToken() {
  token = null;
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
}

function headers(extra = {}) {
  const out = { "X-Hivenote-Client": CLIENT, ...extra };
  if (token) out.Authorization = `Bearer ${token}`;
  else if (localStorage.getItem(SESSION_KEY)) out["X-Hivenote-Key"] = localStorage.getItem(SESSION_KEY);
  return out;
}

async function failure(response) {
  let code = "error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch {
    // not JSON: keep the status line
  }
  if (response.status === 401) onUnauthorized(message);
  return new ApiError(response.status, code, message);
}

/** GET/POST/... a JSON endpoint. `query` is an object (empty values are left out); `signal` cancels. */
export async function api(path, { method = "GET", query, body, signal } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
    }
    const text = params.toString();
    if (text) url += `?${text}`;
  }
  const init = { method, signal, headers: headers(), cache: "no-store" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(url, init);
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** A download (export): the body as a Blob plus the file name the server suggests. */
export async function download(path) {
  const response = await fetch(path, { headers: headers(), cache: "no-store" });
  if (!response.ok) throw await failure(response);
  const disposition = response.headers.get("Content-Disposition") || "";
  const name = /filename="([^"]+)"/.exec(disposition)?.[1] || "hivenote-export";
  return { blob: await response.blob(), name };
}

/** POST a file as the raw body, reporting upload progress (fetch cannot, XMLHttpRequest can). */
export function upload(path, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    for (const [name, value] of Object.entries(headers({ "Content-Type": "application/octet-stream" }))) {
      xhr.setRequestHeader(name, value);
    }
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onerror = () => reject(new ApiError(0, "network", "The server could not be reached; is Hivenote running?"));
    xhr.onload = () => {
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // not JSON
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else {
        if (xhr.status === 401) onUnauthorized(body?.error?.message || "");
        reject(new ApiError(xhr.status, body?.error?.code || "error", body?.error?.message || xhr.statusText));
      }
    };
    xhr.send(file);
  });
}

/** The one-time code in the address, if any: taken out of the address at once (not kept in history, not sent
 * again by a reload) and traded for the sign-in cookie. */
async function redeemCode() {
  const params = new URLSearchParams(location.search);
  const code = params.get("code");
  if (!code) return false;
  params.delete("code");
  const rest = params.toString();
  history.replaceState(history.state, "", `${location.pathname}${rest ? `?${rest}` : ""}${location.hash}`);
  const response = await fetch("/api/session", {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify({ code }),
    cache: "no-store",
  });
  const key = response.headers.get("X-Hivenote-Key");
  if (response.ok && key) localStorage.setItem(SESSION_KEY, key);
  return response.ok && Boolean(key);
}

/**
 * Find how to call the server: a code in the address (traded for the cookie), else a token kept from an earlier
 * paste, else the cookie from an earlier sign-in (or a server without auth).
 * Returns true when the dashboard can start, false when the user must paste a token.
 */
export async function startSession() {
  if (await redeemCode()) return true;
  const kept = storedToken();
  if (kept) {
    token = kept;
    return true;
  }
  const response = await fetch("/api/settings", { headers: headers(), cache: "no-store" });
  return response.ok;
}

/** Check a pasted token against the server before keeping it. */
export async function tryToken(value, remember) {
  const response = await fetch("/api/notes?limit=1", {
    headers: { "X-Hivenote-Client": CLIENT, Authorization: `Bearer ${value}` },
    cache: "no-store",
  });
  if (response.status === 401) return false;
  if (!response.ok) throw await failure(response);
  useToken(value, remember);
  return true;
}
