// The knowledge graph (the official memory server's entities, observations and relations): searchable list on
// the left, one entity with its observations and relations on the right; related names are links.
import { html, useEffect, useRef, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api } from "./api.js";
import { Icon } from "./icons.js";
import { Empty, ErrorNote, useDebounced } from "./ui.js";
import { plural } from "./util.js";

const LIMIT = 50;

function Entity({ name, onPick }) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    setData(null);
    setError(null);
    api(`/api/graph/entities/${encodeURIComponent(name)}`).then(setData).catch(setError);
  }, [name]);
  if (error) return html`<${ErrorNote} error=${error} />`;
  if (!data) return html`<p class="muted">Loading…</p>`;
  const entity = data.entities[0];
  const out = data.relations.filter((r) => r.from === name);
  const into = data.relations.filter((r) => r.to === name);
  const link = (other) => html`<button type="button" class="link" onClick=${() => onPick(other)}>${other}</button>`;
  return html`<article class="entity" aria-label=${entity.name}>
    <h2>${entity.name} <span class="chip">${entity.entityType}</span></h2>
    <h3>Observations <span class="badge">${entity.observations.length}</span></h3>
    ${entity.observations.length === 0 && html`<p class="muted">None yet.</p>`}
    <ul class="observations">${entity.observations.map((o, i) => html`<li key=${i}>${o}</li>`)}</ul>
    <h3>Relations <span class="badge">${out.length + into.length}</span></h3>
    ${out.length + into.length === 0 && html`<p class="muted">Not related to anything yet.</p>`}
    <ul class="relations">
      ${out.map((r, i) => html`<li key=${`o${i}`}><strong>${entity.name}</strong> <span class="rel">${r.relationType}</span> ${link(r.to)}</li>`)}
      ${into.map((r, i) => html`<li key=${`i${i}`}>${link(r.from)} <span class="rel">${r.relationType}</span> <strong>${entity.name}</strong></li>`)}
    </ul>
  </article>`;
}

export function GraphView({ revision }) {
  const [text, setText] = useState("");
  const query = useDebounced(text.trim(), 120);
  const [page, setPage] = useState(null);
  const [limit, setLimit] = useState(LIMIT);
  const [picked, setPicked] = useState(null);
  const [error, setError] = useState(null);
  const inflight = useRef(null);

  useEffect(() => setLimit(LIMIT), [query]);
  useEffect(() => {
    inflight.current?.abort();
    const controller = new AbortController();
    inflight.current = controller;
    const path = query ? "/api/graph/search" : "/api/graph";
    api(path, { query: { q: query || undefined, limit }, signal: controller.signal })
      .then((body) => {
        setPage(body);
        setError(null);
      })
      .catch((e) => e.name !== "AbortError" && setError(e));
    return () => controller.abort();
  }, [query, limit, revision]);

  const entities = page?.entities || [];
  return html`<section class="view graph-view" aria-label="Knowledge graph">
    <header class="view-head">
      <h1>Knowledge graph</h1>
      <p class="muted">Entities, their observations and relations, as the official memory tools see them.</p>
    </header>
    <div class="toolbar">
      <div class="search">
        <${Icon} name="search" />
        <input type="search" placeholder="Search names, types and observations" value=${text}
          aria-label="Search the graph" onInput=${(e) => setText(e.currentTarget.value)} />
      </div>
      ${page && html`<span class="count">${`${page.total.toLocaleString()} ${page.total === 1 ? "entity" : "entities"}`}</span>`}
    </div>
    <${ErrorNote} error=${error} />
    ${page && page.total === 0 && !query &&
    html`<${Empty} icon="graph" title="The graph is empty.">
      <p>Agents using the memory tools (<code>create_entities</code>, <code>add_observations</code>) fill it, or import a <code>memory.jsonl</code>.</p>
    <//>`}
    ${page && page.total === 0 && query && html`<${Empty} icon="search" title=${`Nothing matches “${query}”`}><p>The search looks in names, types and observations.</p><//>`}
    ${entities.length > 0 &&
    html`<div class="split">
      <ul class="entity-list">
        ${entities.map((e) => html`<li key=${e.name}>
          <button type="button" class=${picked === e.name ? "entity-item on" : "entity-item"} onClick=${() => setPicked(e.name)}>
            <strong>${e.name}</strong><span class="muted small">${e.entityType} · ${plural(e.observations.length, "observation")}</span>
          </button>
        </li>`)}
        ${entities.length < page.total && html`<li><button type="button" class="link" onClick=${() => setLimit((l) => l + LIMIT)}>Load more</button></li>`}
      </ul>
      <div class="entity-pane">
        ${picked ? html`<${Entity} name=${picked} onPick=${setPicked} />` : html`<p class="muted center">Pick an entity to see its observations and relations.</p>`}
      </div>
    </div>`}
  </section>`;
}
