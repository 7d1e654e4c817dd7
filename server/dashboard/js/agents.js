// Connected agents: who is online (a request in the last two minutes), when each was last seen and what it last
// did, grouped by person. Refreshes on its own every few seconds while visible.
import { html, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api } from "./api.js";
import { AgentIcon, Icon } from "./icons.js";
import { Empty, ErrorNote, usePolling } from "./ui.js";
import { agentName, ago, machine, when } from "./util.js";

const EVERY_MS = 3000;

/** Agents grouped by the person whose token they use ("" for the owner), in the order first seen. */
export function byPerson(list) {
  const groups = new Map();
  for (const a of list) {
    const key = a.person || "";
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(a);
  }
  return [...groups.entries()];
}

/** The machine this Hivenote runs on: its host name, with its node id's machine part when the two differ. */
export function hostName(where) {
  const node = machine(where.node);
  return node === where.host ? node : `${where.host} (${node})`;
}

function describeTool(tool) {
  return tool || "—";
}

function AgentRow({ seen }) {
  return html`<li class=${seen.online ? "agent-row online" : "agent-row"} data-agent=${seen.agent}>
    <span class="presence" title=${seen.online ? "Online" : "Offline"} aria-label=${seen.online ? "online" : "offline"}></span>
    <${AgentIcon} agent=${seen.agent} size=${28} />
    <div class="agent-main">
      <strong>${agentName(seen.agent)}</strong>
      <span class="muted small" title="The client's own name and version">${seen.client}</span>
    </div>
    <div class="agent-stat"><span class="label">Last seen</span><time title=${when(seen.last_seen)}>${ago(seen.last_seen)}</time></div>
    <div class="agent-stat"><span class="label">Last tool</span><code>${describeTool(seen.last_tool)}</code></div>
    <div class="agent-stat"><span class="label">Requests</span>${seen.requests.toLocaleString()}</div>
  </li>`;
}

export function AgentsView({ onConnect, onAgents }) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  usePolling(() => {
    api("/api/agents")
      .then((body) => {
        setData(body);
        setError(null);
        onAgents?.(body);
      })
      .catch(setError);
  }, EVERY_MS);

  const agents = data?.agents || [];
  const online = agents.filter((a) => a.online);
  const earlier = agents.filter((a) => !a.online);
  const host = data ? hostName(data.machine) : "";

  const section = (title, list, id) => html`<section class="panel" aria-label=${title} id=${id}>
    <h2>${title} <span class="badge">${list.length}</span></h2>
    ${list.length === 0 && html`<p class="muted">No agent is online right now: one shows up here at its next request.</p>`}
    ${byPerson(list).map(([person, rows]) => html`<div class="person-group" key=${person}>
      <h3 class="person">${person || "You (this Hivenote's owner)"}<span class="muted small"> · via ${host}</span></h3>
      <ul class="agent-list">${rows.map((a) => html`<${AgentRow} key=${`${a.agent}|${a.person}|${a.client}`} seen=${a} />`)}</ul>
    </div>`)}
  </section>`;

  return html`<section class="view" aria-label="Agents">
    <header class="view-head">
      <h1>Connected agents</h1>
      <p class="muted">Online means a request in the last two minutes. Updated every few seconds.</p>
    </header>
    <${ErrorNote} error=${error} />
    ${data && agents.length === 0 &&
    html`<${Empty} icon="agents" title="No agent has connected yet.">
      <p>Add Hivenote to Cursor, Claude, Codex, Gemini CLI or VS Code: it takes one pasted snippet.</p>
      <p><button type="button" class="button primary" onClick=${onConnect}><${Icon} name="plug" /> Connect an agent</button></p>
    <//>`}
    ${agents.length > 0 && section("Online now", online, "online")}
    ${earlier.length > 0 && section("Seen earlier", earlier, "earlier")}
  </section>`;
}
