// Connect an agent: pick the client; in the desktop app, one click connects it (its own command run, or the entry
// merged into its config file, the change shown first); everywhere, its ready snippet (URL and token filled in),
// where it goes on this OS, and a Copy button. The tray app also says which agents are installed on this machine
// and which already name this Hivenote (GET /desktop/connect).
import { html, useEffect, useRef, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api } from "./api.js";
import { copy } from "./clipboard.js";
import { AgentIcon, Icon } from "./icons.js";
import { Dialog, ErrorNote, toast } from "./ui.js";
import { thisOs } from "./util.js";

const OS_NAMES = { linux: "Linux", macos: "macOS", windows: "Windows" };

// Client ids from /api/connect map onto the agent ids the icons know.
export function iconFor(client) {
  if (client.startsWith("claude-desktop")) return "claude-desktop";
  if (client.startsWith("claude-code")) return "claude-code";
  return client;
}

/** Where a snippet goes on this OS: its own entry, else the first one there is. */
export function whereFor(where, os) {
  return where[os] || Object.values(where)[0] || "";
}

function Presence({ agent }) {
  if (!agent) return null;
  if (agent.connected) return html`<span class="pill good small" title="Its config names this Hivenote">connected</span>`;
  if (agent.installed) return html`<span class="pill small" title="Found on this machine">installed</span>`;
  return null;
}

/** The one-click part (desktop app only): what will change, the button that changes it, and what happened. */
function Install({ plan, onDone, focus }) {
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(null);
  const [error, setError] = useState(null);
  const button = useRef(null);
  useEffect(() => {
    if (focus) button.current?.focus(); // asked for from the tray menu: Enter connects, after reading the change
  }, []);
  // The window's title says where the connect stands (the tray's window shows the page's title).
  useEffect(() => {
    const outcome = done ? (done.ok ? `${plan.title} connected` : `connecting ${plan.title} failed`) : `connect ${plan.title}`;
    document.title = `Hivenote — ${outcome}`;
    return () => {
      document.title = "Hivenote";
    };
  }, [done, plan]);
  if (plan.way === "none") return html`<p class="note install-none">${plan.summary}</p>`;
  const go = async () => {
    setBusy(true);
    setError(null);
    try {
      const result = await api(`/desktop/connect/${encodeURIComponent(plan.client)}`, {
        method: "POST",
        body: { diff: plan.diff, commands: plan.commands },
      });
      setDone(result);
      if (result.ok) onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="install">
    <p>${plan.connected ? html`<strong>Already connected to this Hivenote.</strong> ` : ""}${plan.summary}</p>
    ${plan.diff && html`<pre class="code diff" aria-label="The change">${plan.diff}</pre>`}
    ${plan.commands.length > 0 && html`<pre class="code" aria-label="The command">${plan.commands.map((c) => `$ ${c}`).join("\n")}</pre>`}
    <${ErrorNote} error=${error} />
    ${done
      ? html`<div class=${done.ok ? "install-done ok" : "install-done failed"} role="status">
          <p><${Icon} name=${done.ok ? "check" : "close"} /> ${done.message}</p>
          ${done.ok && html`<p class="muted small">It shows under Agents online once it calls Hivenote: start it, or ask it something.</p>`}
          ${done.output && html`<pre class="code output" aria-label="Its output">${done.output}</pre>`}
        </div>`
      : html`<div class="install-actions">
          <button type="button" class="button primary" ref=${button} disabled=${busy} onClick=${go}>
            <${Icon} name="plug" /> ${busy ? "Connecting…" : plan.update ? `Update ${plan.title}` : `Connect ${plan.title}`}
          </button>
          ${plan.link && html`<a class="button" href=${plan.link}>Or use ${plan.title}'s install link</a>`}
        </div>`}
  </div>`;
}

export function ConnectDialog({ onClose, initial = null }) {
  const [clients, setClients] = useState(null);
  const [agents, setAgents] = useState(null); // null: not the desktop app (or not yet)
  const [chosen, setChosen] = useState(initial);
  const [graph, setGraph] = useState(false);
  const [snippet, setSnippet] = useState(null);
  const [plan, setPlan] = useState(null);
  const [error, setError] = useState(null);
  const [copied, setCopied] = useState(false);
  const [looked, setLooked] = useState(0); // bumped after a connect: presence and plan are read again
  const os = thisOs();

  useEffect(() => {
    api("/api/connect").then((body) => setClients(body.clients)).catch(setError);
  }, []);
  useEffect(() => {
    api("/desktop/connect").then((body) => setAgents(body.agents)).catch(() => setAgents(null));
  }, [looked]);
  useEffect(() => {
    if (!chosen) return;
    setSnippet(null);
    setCopied(false);
    api(`/api/connect/${encodeURIComponent(chosen)}`, { query: { graph: graph || undefined } })
      .then(setSnippet)
      .catch(setError);
  }, [chosen, graph]);
  useEffect(() => {
    setPlan(null);
    if (!chosen || graph) return;
    api(`/desktop/connect/${encodeURIComponent(chosen)}`).then(setPlan).catch(() => setPlan(null));
  }, [chosen, graph]);

  const doCopy = async () => {
    const ok = await copy(snippet.text);
    setCopied(ok);
    toast(ok ? "Copied to the clipboard." : "Could not copy: select the text and copy it by hand.", ok ? "ok" : "warn");
  };
  const presence = Object.fromEntries((agents || []).map((a) => [a.id, a]));
  const where = snippet ? whereFor(snippet.where, os) : "";

  return html`<${Dialog} title="Connect an agent" onClose=${onClose} wide>
    <p class="muted">Pick the agent.${agents ? " Hivenote connects it for you, showing the change first." : ""} Its snippet has this Hivenote's address and token filled in.</p>
    <${ErrorNote} error=${error} />
    <div class="client-grid" role="listbox" aria-label="Agents">
      ${(clients || []).map((c) => html`<button type="button" key=${c.id} role="option" data-client=${c.id}
          aria-selected=${chosen === c.id} class=${chosen === c.id ? "client on" : "client"} onClick=${() => setChosen(c.id)}>
        <${AgentIcon} agent=${iconFor(c.id)} size=${22} /><span class="client-name">${c.title}</span><${Presence} agent=${presence[c.id]} />
      </button>`)}
    </div>
    ${chosen &&
    html`<label class="check"><input type="checkbox" checked=${graph} onChange=${(e) => setGraph(e.currentTarget.checked)} />
      Official memory tools instead (<code>/mcp/graph</code>, for configs that used <code>server-memory</code>)</label>`}
    ${plan &&
    html`<${Install} key=${plan.client} plan=${plan} focus=${plan.client === initial}
      onDone=${() => setLooked((n) => n + 1)} />`}
    ${snippet &&
    html`<div class="snippet">
      <div class="snippet-head">
        <div class="where-line">
          ${plan && plan.way !== "none" ? "Or by hand: " : ""}${snippet.format === "shell"
            ? `run it in ${where}`
            : html`paste it into <code class="where">${where}</code>`}${" "}<span class="os">on ${OS_NAMES[os]}</span>
        </div>
        <button type="button" class=${copied ? "button copied" : "button"} onClick=${doCopy}>
          <${Icon} name=${copied ? "check" : "copy"} /> ${copied ? "Copied" : "Copy"}
        </button>
      </div>
      <pre class="code" data-format=${snippet.format}>${snippet.text}</pre>
      ${snippet.note && html`<p class="warn-note">${snippet.note}</p>`}
      ${snippet.steps.length > 0 && html`<ol class="steps">${snippet.steps.map((s, i) => html`<li key=${i}>${s}</li>`)}</ol>`}
      <details class="other-os"><summary>On other systems</summary>
        <dl>${Object.entries(snippet.where).map(([k, v]) => html`<dt key=${`t${k}`}>${OS_NAMES[k] || k}</dt><dd key=${`d${k}`}><code>${v}</code></dd>`)}</dl>
      </details>
    </div>`}
  <//>`;
}
