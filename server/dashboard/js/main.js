// The dashboard's shell: finds the token (or asks for it), polls the server's status while the tab is visible,
// and lays out the sidebar, the current view and the dialogs. Views live in their own modules.
import { html, render, useCallback, useEffect, useLayoutEffect, useRef, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api, ApiError, forgetToken, startSession, tryToken, whenUnauthorized } from "./api.js";
import { booting, restart } from "./boot.js";
import "./clipboard.js"; // installs window.copyText at start, for the desktop window to replace
import { ServerDown, TrayStandIn } from "./desktop.js";
import { Icon, Logo } from "./icons.js";
import { NotesView } from "./notes.js";
import { Toasts, usePolling } from "./ui.js";
import { machine, plural } from "./util.js";

const STATUS_MS = 3000;
const DOWN_MS = 1000; // while the server does not answer: notice its return within a second

// Views other than notes load on first visit, so the first paint only pays for the notes list.
const LAZY = {
  trash: () => import("./trash.js").then((m) => m.TrashView),
  agents: () => import("./agents.js").then((m) => m.AgentsView),
  graph: () => import("./graph.js").then((m) => m.GraphView),
  transfer: () => import("./transfer.js").then((m) => m.TransferView),
  settings: () => import("./settings.js").then((m) => m.SettingsView),
  note: () => import("./note.js"),
  connect: () => import("./connect.js").then((m) => m.ConnectDialog),
};

function useModule(name, wanted = true) {
  const [loaded, setLoaded] = useState(null);
  useEffect(() => {
    if (wanted && !loaded) LAZY[name]().then((m) => setLoaded(() => m));
  }, [name, wanted]);
  return loaded;
}

function Lazy({ name, ...props }) {
  const View = useModule(name);
  return View ? html`<${View} ...${props} />` : html`<p class="muted center">Loading…</p>`;
}

const NAV = [
  ["notes", "Notes", "notes"],
  ["trash", "Trash", "trash"],
  ["agents", "Agents", "agents"],
  ["graph", "Knowledge graph", "graph"],
  ["transfer", "Import / export", "transfer"],
  ["settings", "Settings", "settings"],
];

// "#connect" or "#connect/<client>" (the tray menu's Connect an agent): the connect dialog, that client chosen.
function connectAsked() {
  const found = location.hash.match(/^#\/?connect(?:\/([a-z0-9-]+))?$/);
  return found ? found[1] || true : false;
}

function currentView() {
  const name = location.hash.replace(/^#\/?/, "");
  return NAV.some(([id]) => id === name) ? name : "notes";
}

/** The op count across every machine: it moves whenever anything is written, anywhere. */
// The sentence model downloading or indexing: search answers by the static model meanwhile, and says so.
function meaningBusy(status) {
  const phase = status?.meaning?.sentence?.phase;
  return phase === "downloading" || phase === "indexing" || phase === "loading";
}

function revisionOf(status) {
  return Object.values(status.nodes).reduce((sum, n) => sum + n.ops, 0);
}

function App() {
  const [view, setView] = useState(currentView());
  const [status, setStatus] = useState(null);
  const [revision, setRevision] = useState(null); // null until the first status poll
  const [agents, setAgents] = useState(null);
  const [openNote, setOpenNote] = useState(null);
  const [creating, setCreating] = useState(false);
  const [connecting, setConnecting] = useState(connectAsked());
  const searchRef = useRef(null);
  const noteModule = useModule("note", openNote !== null || creating);

  useEffect(() => {
    const follow = () => {
      const asked = connectAsked();
      if (asked) setConnecting(asked);
      else setView(currentView());
    };
    window.addEventListener("hashchange", follow);
    return () => window.removeEventListener("hashchange", follow);
  }, []);

  // One poll drives live updates everywhere: when the notebook's op count moves, views refetch. On the notes
  // view it starts once the first cards are in, so it does not compete with them. A poll the server does not
  // answer (stopped from the tray, restarting) puts the "stopped" panel in place of the view; the first answer
  // after it brings the view back, fetched afresh (`epoch` remounts it), with no reload.
  const [polling, setPolling] = useState(view !== "notes");
  const [down, setDown] = useState(false);
  const [epoch, setEpoch] = useState(0);
  const [desk, setDesk] = useState(null); // GET /desktop/app: the tray app's state, in its own window
  const painted = useCallback(() => setPolling(true), []);
  const wasDown = useRef(false);
  const pollDesktop = useCallback(
    () =>
      api("/desktop/app")
        .then(setDesk)
        .catch(() => {}),
    [],
  );
  usePolling(() => {
    api("/api/status")
      .then((body) => {
        if (wasDown.current) {
          wasDown.current = false;
          setDown(false);
          setEpoch((e) => e + 1);
        }
        setStatus(body);
        setRevision(revisionOf(body));
        if (body.desktop) pollDesktop();
      })
      .catch((e) => {
        if (e instanceof ApiError) return; // it answered: an error the views report themselves
        wasDown.current = true;
        setDown(true);
        setAgents(null); // who was online is not known any more
      });
    api("/api/agents")
      .then(setAgents)
      .catch(() => {});
  }, down ? DOWN_MS : STATUS_MS, polling || down);
  // The window's title says it too (the tray's window takes the page's title; so does a browser tab).
  useEffect(() => {
    document.title = down ? "Hivenote — server stopped" : "Hivenote";
  }, [down]);
  // A first page that never comes (the server stopped meanwhile) must not keep the poll that notices it off.
  useEffect(() => {
    const timer = setTimeout(() => setPolling(true), 2000);
    return () => clearTimeout(timer);
  }, []);
  const changed = useCallback(() => setRevision((r) => (r || 0) + 0.5), []);

  // Keyboard: "/" focuses the search (from anywhere but a text field). Esc is the dialogs' own.
  useEffect(() => {
    const keys = (event) => {
      const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName) || event.target.isContentEditable;
      if (event.key === "/" && !typing && !document.querySelector("dialog[open]")) {
        event.preventDefault();
        if (view !== "notes") location.hash = "#notes";
        setTimeout(() => searchRef.current?.focus(), 0);
      }
    };
    document.addEventListener("keydown", keys);
    return () => document.removeEventListener("keydown", keys);
  }, [view]);

  const online = agents ? agents.agents.filter((a) => a.online).length : 0;
  const counts = status?.counts;
  const badge = { notes: counts?.notes, trash: counts?.trashed, agents: online || null, graph: counts?.entities };
  const closeNote = useCallback(() => setOpenNote(null), []);
  const closeNew = useCallback(() => setCreating(false), []);
  const closeConnect = useCallback(() => {
    setConnecting(false);
    if (connectAsked()) history.replaceState(null, "", `#${currentView()}`); // the next ask is a hash change again
  }, []);

  return html`<div class="shell">
    <nav class="sidebar" aria-label="Sections">
      <a class="brand" href="#notes"><${Logo} /> <span>Hivenote</span></a>
      <ul>
        ${NAV.map(([id, label, icon]) => html`<li key=${id}>
          <a href=${`#${id}`} class=${view === id ? "nav on" : "nav"} aria-current=${view === id ? "page" : undefined} data-view=${id}>
            <${Icon} name=${icon} /> <span>${label}</span>
            ${badge[id] ? html`<span class=${id === "agents" ? "nav-badge live" : "nav-badge"}>${badge[id].toLocaleString()}</span>` : null}
          </a>
        </li>`)}
      </ul>
      <div class="sidebar-foot">
        <button type="button" class="button primary wide" onClick=${() => setConnecting(true)}><${Icon} name="plug" /> Connect an agent</button>
        <p class="muted small">${down ? "Server stopped" : online ? `${plural(online, "agent")} online` : "No agent online"}${status ? html` · <span title=${status.node}>${machine(status.node)}</span>` : ""}</p>
      </div>
    </nav>
    <main class="main">
      ${desk && desk.tray && !desk.tray.shown && !down && html`<${TrayStandIn} state=${desk} onChanged=${pollDesktop} />`}
      ${!down && status?.storage?.problem &&
      html`<p class="error-note storage-problem" role="alert"><strong>Notes cannot be saved right now.</strong> ${status.storage.problem.message}</p>`}
      ${!down && meaningBusy(status) &&
      html`<p class="note meaning-progress" role="status">Search by meaning: ${status.meaning.summary}.</p>`}
      ${down
        ? html`<${ServerDown} desktop=${Boolean(status?.desktop)} trayShown=${desk?.tray?.shown} />`
        : view === "notes"
        ? html`<${NotesView} key=${epoch} revision=${revision} status=${status} onOpen=${setOpenNote} onNew=${() => setCreating(true)}
            onConnect=${() => setConnecting(true)} onPainted=${painted} searchRef=${searchRef} />`
        : html`<${Lazy} key=${`${view}-${epoch}`} name=${view} revision=${revision} status=${status} host=${agents?.machine.host || location.hostname}
            onOpen=${setOpenNote} onChanged=${changed} onConnect=${() => setConnecting(true)} />`}
    </main>
    ${openNote && noteModule &&
    html`<${noteModule.NoteDialog} key=${openNote} id=${openNote} onClose=${closeNote} onChanged=${changed} revision=${revision} />`}
    ${creating && noteModule &&
    html`<${noteModule.NewNoteDialog} onClose=${closeNew} onCreated=${(id) => { setCreating(false); changed(); setOpenNote(id); }} />`}
    ${connecting &&
    html`<${Lazy} key=${String(connecting)} name="connect" initial=${connecting === true ? null : connecting} onClose=${closeConnect} />`}
    <${Toasts} />
  </div>`;
}

/** The screen a browser on another machine sees: paste a token once. */
function TokenScreen({ reason, onReady }) {
  const [value, setValue] = useState("");
  const [remember, setRemember] = useState(false);
  const [error, setError] = useState(reason || "");
  const submit = async (event) => {
    event.preventDefault();
    setError("");
    try {
      if (await tryToken(value.trim(), remember)) onReady();
      else setError("That token was not accepted. Check it, or ask the owner for a new one.");
    } catch (e) {
      setError(e.message);
    }
  };
  return html`<div class="gate">
    <form class="gate-card" onSubmit=${submit}>
      <div class="brand big"><${Logo} size=${40} /> <span>Hivenote</span></div>
      <h1>Paste your token</h1>
      <p class="muted">On this notebook's own machine, open it from Hivenote's tray (Open dashboard) or with
        <code>hivenote open</code>. On another machine, ask its owner for a token
        (<code>hivenote token add your-name</code>); the notes you write will carry your name.</p>
      <input type="password" name="token" placeholder="hn_…" autocomplete="off" required value=${value}
        onInput=${(e) => setValue(e.currentTarget.value)} aria-label="Token" />
      <label class="check"><input type="checkbox" checked=${remember} onChange=${(e) => setRemember(e.currentTarget.checked)} />
        Remember on this browser (otherwise it is forgotten when the tab closes)</label>
      ${error && html`<p class="error-note" role="alert">${error}</p>`}
      <button type="submit" class="button primary wide">Open the notebook</button>
    </form>
  </div>`;
}

function Root() {
  const [state, setState] = useState({ phase: "starting" });
  const start = useCallback(async () => {
    try {
      setState({ phase: (await booting) ? "ready" : "token" });
    } catch {
      restart(); // for the "try again" button
      setState({ phase: "down" });
    }
  }, []);
  useLayoutEffect(() => {
    // A refused token or cookie (revoked, too old, or the data dir was reset): a cookie still good is used again;
    // otherwise the user opens the dashboard again from the tray, or pastes a current token.
    whenUnauthorized(async () => {
      forgetToken();
      const local = await startSession().catch(() => false);
      if (!local) setState({ phase: "token", reason: "This sign-in is no longer accepted: open the dashboard again, or paste a current token." });
    });
    start();
  }, []);
  if (state.phase === "ready") return html`<${App} />`;
  if (state.phase === "token") return html`<${TokenScreen} reason=${state.reason} onReady=${() => setState({ phase: "ready" })} />`;
  if (state.phase === "down")
    return html`<div class="gate"><div class="gate-card"><h1>Hivenote is not answering</h1>
      <p class="muted">Start it (<code>hivenote serve</code> or the tray app), then <button type="button" class="link" onClick=${start}>try again</button>.</p></div></div>`;
  return html`<div class="boot" aria-busy="true">Hivenote</div>`;
}

render(html`<${Root} />`, document.getElementById("app"));
