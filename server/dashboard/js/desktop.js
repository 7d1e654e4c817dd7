// The dashboard as the tray app's window: what it shows when the server is stopped (and the way to start it again
// without a server to ask), and the tray menu's controls when this desktop shows no tray icon. Imported by main.js
// at start (not lazily): it must work while the server that serves the dashboard's files is down.
import { html, useEffect, useRef, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api } from "./api.js";
import { toast } from "./ui.js";

/** The tray's window relays these to the tray while the server is down (desktop/window.py); a browser has none. */
function bridge() {
  return window.webkit?.messageHandlers?.hivenote || null;
}

export function askTray(action) {
  const found = bridge();
  if (!found) return false;
  found.postMessage(action);
  return true;
}

/** In place of the current view while the server does not answer; the page recovers by itself when it does. */
export function ServerDown({ desktop, trayShown }) {
  const [asked, setAsked] = useState("");
  const canAsk = desktop && bridge() !== null;
  const start = useRef(null);
  useEffect(() => start.current?.focus(), []); // Enter starts it
  const ask = (action) => {
    if (askTray(action)) setAsked(action);
  };
  return html`<section class="server-down" role="alert" aria-live="assertive">
    <h1>${desktop ? "Hivenote's server is stopped" : "Hivenote is not answering"}</h1>
    <p class="muted">Agents cannot read or write the notebook until it runs again. This page comes back by itself
      when it does: nothing to reload.</p>
    ${canAsk
      ? html`<div class="server-down-actions">
          <button type="button" class="button primary" ref=${start} disabled=${asked === "start-server"} onClick=${() => ask("start-server")}>
            ${asked === "start-server" ? "Starting…" : "Start server"}
          </button>
          ${trayShown === false &&
          html`<button type="button" class="button" onClick=${() => ask("quit")}>Quit Hivenote</button>`}
        </div>`
      : html`<p>${desktop
          ? html`Start it from the Hivenote icon's menu: <strong>Start server</strong>.`
          : html`Start it: the Hivenote tray app, or <code>hivenote serve</code>.`}</p>`}
  </section>`;
}

/** The tray menu, in the window, for a desktop that shows no tray icon (GET/POST /desktop/app). */
export function TrayStandIn({ state, onChanged }) {
  const [busy, setBusy] = useState("");
  const [quitting, setQuitting] = useState(false);
  const act = async (action, done) => {
    setBusy(action);
    try {
      await api("/desktop/app", { method: "POST", body: { action } });
      if (done) toast(done);
      if (action === "quit") setQuitting(true);
    } catch (e) {
      toast(e.message, "warn");
    } finally {
      await onChanged();
      setBusy("");
    }
  };
  if (quitting) return html`<section class="tray-stand-in" role="status"><p><strong>Hivenote is quitting…</strong></p></section>`;
  const running = state.server === "running";
  return html`<section class="tray-stand-in" aria-label="Hivenote app">
    <p><strong>${state.tray.why}</strong> ${state.tray.how} Until then, the tray menu is here; Hivenote keeps
      running when you close this window.</p>
    <div class="tray-stand-in-actions">
      <button type="button" class="button small" disabled=${busy !== "" || state.server === "starting"}
        onClick=${() => act("toggle-server")}>${running ? "Stop server" : "Start server"}</button>
      <label class="check"><input type="checkbox" checked=${busy === "toggle-lan" ? !state.sharing : state.sharing} disabled=${busy !== "" || !state.auth}
        onChange=${() => act("toggle-lan")} /> Share on LAN</label>
      <label class="check"><input type="checkbox" checked=${busy === "toggle-autostart" ? !state.autostart : state.autostart} disabled=${busy !== ""}
        onChange=${() => act("toggle-autostart")} /> Start at login</label>
      <button type="button" class="button small" disabled=${busy !== ""}
        onClick=${() => act("open-data-folder", "Opening the data folder…")}>Open data folder</button>
      <button type="button" class="button small danger" disabled=${busy !== ""} onClick=${() => act("quit")}>Quit Hivenote</button>
    </div>
  </section>`;
}
