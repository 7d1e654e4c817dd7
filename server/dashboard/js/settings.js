// Settings: people's tokens (owner only: add, shown once, revoke), sharing on the LAN, sync status (and, in the
// desktop app, moving the log into a synced folder), and the running settings.
import { html, useEffect, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api } from "./api.js";
import { copy } from "./clipboard.js";
import { Icon } from "./icons.js";
import { Confirm, ErrorNote, toast } from "./ui.js";
import { ago, machine, plural, when } from "./util.js";

function Tokens() {
  const [people, setPeople] = useState(null);
  const [error, setError] = useState(null);
  const [name, setName] = useState("");
  const [issued, setIssued] = useState(null);
  const [revoking, setRevoking] = useState(null);
  const load = () =>
    api("/api/tokens")
      .then((body) => setPeople(body.people))
      .catch(setError);
  useEffect(() => {
    load();
  }, []);

  const add = async (event) => {
    event.preventDefault();
    setError(null);
    try {
      setIssued(await api("/api/tokens", { method: "POST", body: { name: name.trim() } }));
      setName("");
      load();
    } catch (e) {
      setError(e);
    }
  };
  const revoke = async () => {
    try {
      await api(`/api/tokens/${encodeURIComponent(revoking)}`, { method: "DELETE" });
      toast(`Revoked ${revoking}'s token.`);
      load();
    } catch (e) {
      setError(e);
    }
    setRevoking(null);
  };

  if (error?.status === 403) {
    return html`<p class="muted">Only this Hivenote's owner manages tokens. You are signed in with a person's token.</p>`;
  }
  return html`<div>
    <p class="muted">Give each teammate their own token: the notes they write carry their name, and you can revoke it alone.</p>
    <${ErrorNote} error=${error} />
    ${issued &&
    html`<div class="issued" role="alert">
      <p><strong>${issued.name}'s token</strong>: shown this once, Hivenote keeps only its digest. Copy it now.</p>
      <div class="token-line"><code class="token">${issued.token}</code>
        <button type="button" class="button primary" onClick=${async () => toast((await copy(issued.token)) ? "Copied." : "Copy failed.")}>
          <${Icon} name="copy" /> Copy</button>
        <button type="button" class="button" onClick=${() => setIssued(null)}>Done</button></div>
    </div>`}
    <ul class="token-list">
      <li class="token-row"><${Icon} name="key" /><strong>Owner (this machine)</strong><span class="muted small">the default token, used by your own agents</span></li>
      ${(people || []).map((p) => html`<li class="token-row" key=${p.name}>
        <${Icon} name="key" /><strong>${p.name}</strong><span class="muted small" title=${when(p.created)}>created ${ago(p.created)}</span>
        <button type="button" class="button small danger" onClick=${() => setRevoking(p.name)}>Revoke</button>
      </li>`)}
    </ul>
    <form class="inline-form" onSubmit=${add}>
      <input name="person" placeholder="A person's name, e.g. ana" value=${name} required maxlength="64"
        onInput=${(e) => setName(e.currentTarget.value)} aria-label="Name for the new token" />
      <button type="submit" class="button"><${Icon} name="plus" /> Add token</button>
    </form>
    ${revoking &&
    html`<${Confirm} title=${`Revoke ${revoking}'s token?`} action="Revoke"
      message=${`Agents using ${revoking}'s token stop working at once. Their notes stay.`}
      onConfirm=${revoke} onCancel=${() => setRevoking(null)} />`}
  </div>`;
}

const LOOPBACK = /^(127\.|localhost$|\[?::1\]?$)/;

/** The addresses teammates open: the server's own list, else this page's host, never a loopback one (a teammate
 * cannot open 127.0.0.1). */
export function shareUrls(listen, host) {
  return listen.urls.length ? listen.urls : LOOPBACK.test(host) ? [] : [`http://${host}:${listen.port}/`];
}

/** How far behind another machine is: "up to date" within a second, else its lag in words. */
export function lagText(ms) {
  if (ms < 1000) return "up to date";
  if (ms < 60_000) return `${plural(Math.floor(ms / 1000), "second")} behind`;
  return `${ago(0, ms).replace(" ago", "")} behind`;
}

/** A transport's traffic in KiB (a unit: no plural s). */
export function movedText(transport) {
  const kib = (bytes) => `${Math.round(bytes / 1024).toLocaleString()} KiB`;
  return `${kib(transport.bytes_in)} in · ${kib(transport.bytes_out)} out`;
}

function Sharing({ status, host }) {
  const listen = status.listen;
  const urls = shareUrls(listen, host);
  return listen.shared
    ? html`<div><p><span class="pill good">Shared on the network</span></p>
        ${urls.length
          ? html`<p>Teammates open ${urls.map((url, i) => html`${i ? " or " : ""}<code class="select" key=${url}>${url}</code>`)}
          and paste the token you give them.</p>`
          : html`<p>Teammates open this machine's network address on port ${listen.port}; Hivenote found none yet
          (is the network connected?).</p>`}</div>`
    : html`<div><p><span class="pill">This machine only</span> Listening on ${listen.host}:${listen.port}.</p>
        <p class="muted">To share on your LAN, turn on <strong>Share on LAN</strong> in the tray menu (on a desktop that shows no tray icon: in the
          bar at the top of this window), or start${" "}
          <code>hivenote serve --host 0.0.0.0</code>; tokens stay required.</p></div>`;
}

function Sync({ status }) {
  const nodes = Object.entries(status.nodes).sort((a, b) => b[1].last_op - a[1].last_op);
  const shards = Object.entries(status.shards);
  const bad = shards.reduce((sum, [, s]) => sum + s.bad_lines + s.unknown_ops, 0);
  const skew = Object.entries(status.clock_skew_ms).filter(([, ms]) => ms > 0);
  return html`<div>
    <table class="table">
      <thead><tr><th>Machine</th><th>Operations</th><th>Last activity</th><th>Behind</th></tr></thead>
      <tbody>
        ${nodes.map(([node, n]) => html`<tr key=${node}>
          <td><strong>${machine(node)}</strong> <span class="muted small">${node}${node === status.node ? " (this one)" : ""}</span></td>
          <td>${n.ops.toLocaleString()}</td>
          <td title=${when(n.last_op)}>${ago(n.last_op)}</td>
          <td>${node === status.node ? "—" : lagText(n.lag_ms)}</td>
        </tr>`)}
      </tbody>
    </table>
    ${nodes.length === 0 && html`<p class="muted">Nothing written yet.</p>`}
    <p>${skew.length === 0
      ? html`<span class="pill good">Clocks agree</span>`
      : skew.map(([node, ms]) => html`<span class="pill warn" key=${node}>${machine(node)}'s clock is ${(ms / 1000).toFixed(1)} s ahead</span> `)}
      ${" "}${bad === 0
      ? html`<span class="pill good">Every log line readable</span>`
      : html`<span class="pill warn">${plural(bad, "unreadable line")} skipped (kept, not deleted)</span>`}</p>
    ${bad > 0 &&
    html`<ul class="problems">${shards.flatMap(([name, s]) => s.problems.map((p) => html`<li key=${`${name}:${p.line}`}><code>${name}</code> line ${p.line}: ${p.reason}</li>`))}</ul>`}
    <${Transports} sync=${status.sync} desktop=${status.desktop} />
  </div>`;
}

/** In the desktop app (the tray serves /desktop/sync/folder): move the log into a synced folder, or back. The
 * tray stops its server for the move and starts it again, so this waits for it to answer with the outcome. */
function SyncedFolder() {
  const [folder, setFolder] = useState(null); // null: not the desktop app (or not loaded yet)
  const [path, setPath] = useState("");
  const [moving, setMoving] = useState(false);
  const [error, setError] = useState(null);
  useEffect(() => {
    api("/desktop/sync/folder").then(setFolder).catch(() => setFolder(null));
  }, []);
  if (!folder) return null;

  const move = async (target) => {
    setError(null);
    setMoving(true);
    try {
      const before = JSON.stringify(folder.last_move);
      await api("/desktop/sync/folder", { method: "POST", body: { path: target } });
      for (let tries = 0; tries < 600; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        const now = await api("/desktop/sync/folder").catch(() => null); // down while it moves
        if (now && JSON.stringify(now.last_move) !== before) {
          setFolder(now);
          toast(now.last_move.ok ? "Moved." : "Not moved: see below.", now.last_move.ok ? "ok" : "warn");
          return;
        }
      }
      setError(new Error("The server did not come back within 150 s; check the tray icon."));
    } catch (err) {
      setError(err);
    } finally {
      setMoving(false);
    }
  };

  const last = folder.last_move;
  return html`<form class="synced-folder" onSubmit=${(e) => { e.preventDefault(); move(path.trim()); }}>
    <label for="synced-folder">Keep the log in a synced folder (Syncthing, Dropbox, ...)</label>
    <div class="inline-form">
      <input id="synced-folder" type="text" placeholder="/home/you/Sync/hivenote" value=${path} disabled=${moving}
        onInput=${(e) => setPath(e.currentTarget.value)} />
      <button type="submit" class="button" disabled=${moving || !path.trim()}>${moving ? "Moving…" : "Use this folder"}</button>
      ${folder.synced &&
      html`<button type="button" class="button" disabled=${moving} onClick=${() => move(null)}>Move back</button>`}
    </div>
    <p class="muted small">The server stops for the move and starts again; shards already in the folder are kept.</p>
    <${ErrorNote} error=${error} />
    ${last && html`<p class=${last.ok ? "move ok" : "move warn"}>${last.message}</p>`}
  </form>`;
}

const KINDS = { folder: "Synced folder", s3: "Bucket", peer: "Peer" };

/** How the log travels: the folder it lives in, and each transport's last success or failure. */
function Transports({ sync, desktop }) {
  const transports = sync.transports;
  return html`<div class="transports">
    <p class="muted small">Log folder: <code class="select">${sync.log_dir}</code></p>
    ${desktop && html`<${SyncedFolder} />`}
    ${transports.length === 0
      ? html`<p class="muted">No sync set up: this notebook stays on this machine. <code>hivenote sync folder</code>,${" "}
          <code>hivenote sync s3</code> or <code>hivenote sync peer add</code> share it (see the README).</p>`
      : html`<table class="table">
          <thead><tr><th>Transport</th><th>Last success</th><th>State</th><th>Moved</th></tr></thead>
          <tbody>${transports.map((t) => html`<tr key=${t.name}>
            <td><strong>${KINDS[t.kind] || t.kind}</strong> <span class="muted small">${t.target}</span></td>
            <td title=${t.last_ok ? when(t.last_ok) : ""}>${t.last_ok ? ago(t.last_ok) : "never"}</td>
            <td>${t.failing ? html`<span class="pill warn">${t.error}</span>` : html`<span class="pill good">OK</span>`}</td>
            <td>${movedText(t)}</td>
          </tr>`)}</tbody>
        </table>`}
  </div>`;
}

// `listening` is where the server listens now: a restart that changes it (Share on LAN in the tray) reads the
// running settings again, so the page never keeps showing the address it had before.
function Values({ listening }) {
  const [settings, setSettings] = useState(null);
  useEffect(() => {
    api("/api/settings").then(setSettings).catch(() => {});
  }, [listening]);
  if (!settings) return null;
  return html`<section class="panel">
    <h2><${Icon} name="settings" /> Running settings</h2>
    <p class="muted small">From <code>${settings.file}</code>; read at start-up.</p>
    <dl class="values">${Object.entries(settings.values).map(([k, v]) => html`
      <dt key=${`k${k}`}><code>${k}</code></dt><dd key=${`v${k}`}><strong>${JSON.stringify(v)}</strong><span class="muted small">${settings.help[k]}</span></dd>`)}</dl>
  </section>`;
}

export function SettingsView({ status, host }) {
  return html`<section class="view" aria-label="Settings">
    <header class="view-head"><h1>Settings</h1></header>
    <section class="panel"><h2><${Icon} name="key" /> Tokens</h2><${Tokens} /></section>
    <section class="panel"><h2><${Icon} name="wifi" /> Share on your network</h2>${status ? html`<${Sharing} status=${status} host=${host} />` : "…"}</section>
    <section class="panel"><h2><${Icon} name="sync" /> Sync</h2>${status ? html`<${Sync} status=${status} />` : "…"}</section>
    ${status && html`<p class="muted small center">Hivenote ${status.version} · data in <code>${status.data_dir}</code> · up ${Math.round(status.uptime_s / 60)} min</p>`}
    <${Values} listening=${status ? `${status.listen.host}:${status.listen.port}:${status.listen.shared}` : ""} />
  </section>`;
}
