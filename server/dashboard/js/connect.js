// Connect an agent: pick the client, get its ready snippet (URL and token filled in), see where the file lives on
// this OS, and copy it.
import { html, useEffect, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api } from "./api.js";
import { copy } from "./clipboard.js";
import { AgentIcon, Icon } from "./icons.js";
import { Dialog, ErrorNote, toast } from "./ui.js";
import { thisOs } from "./util.js";

const OS_NAMES = { linux: "Linux", macos: "macOS", windows: "Windows" };

// Client ids from /api/connect map onto the agent ids the icons know.
function iconFor(client) {
  if (client.startsWith("claude-desktop")) return "claude-desktop";
  if (client.startsWith("claude-code")) return "claude-code";
  return client;
}

export function ConnectDialog({ onClose }) {
  const [clients, setClients] = useState(null);
  const [chosen, setChosen] = useState(null);
  const [graph, setGraph] = useState(false);
  const [snippet, setSnippet] = useState(null);
  const [error, setError] = useState(null);
  const [copied, setCopied] = useState(false);
  const os = thisOs();

  useEffect(() => {
    api("/api/connect").then((body) => setClients(body.clients)).catch(setError);
  }, []);
  useEffect(() => {
    if (!chosen) return;
    setSnippet(null);
    setCopied(false);
    api(`/api/connect/${encodeURIComponent(chosen)}`, { query: { graph: graph || undefined } })
      .then(setSnippet)
      .catch(setError);
  }, [chosen, graph]);

  const doCopy = async () => {
    const ok = await copy(snippet.text);
    setCopied(ok);
    toast(ok ? "Copied to the clipboard." : "Could not copy: select the text and copy it by hand.", ok ? "ok" : "warn");
  };

  return html`<${Dialog} title="Connect an agent" onClose=${onClose} wide>
    <p class="muted">Pick the agent. Its snippet has this Hivenote's address and token filled in.</p>
    <${ErrorNote} error=${error} />
    <div class="client-grid" role="listbox" aria-label="Agents">
      ${(clients || []).map((c) => html`<button type="button" key=${c.id} role="option" data-client=${c.id}
          aria-selected=${chosen === c.id} class=${chosen === c.id ? "client on" : "client"} onClick=${() => setChosen(c.id)}>
        <${AgentIcon} agent=${iconFor(c.id)} size=${22} /><span>${c.title}</span>
      </button>`)}
    </div>
    ${chosen &&
    html`<label class="check"><input type="checkbox" checked=${graph} onChange=${(e) => setGraph(e.currentTarget.checked)} />
      Official memory tools instead (<code>/mcp/graph</code>, for configs that used <code>server-memory</code>)</label>`}
    ${snippet &&
    html`<div class="snippet">
      <div class="snippet-head">
        <div>
          <div class="label">${snippet.format === "shell" ? "Run this" : `Paste into (${OS_NAMES[os]})`}</div>
          <code class="where">${snippet.where[os] || Object.values(snippet.where)[0] || ""}</code>
        </div>
        <button type="button" class=${copied ? "button primary copied" : "button primary"} onClick=${doCopy}>
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
