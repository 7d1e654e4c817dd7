// The notes view: search as you type (the server's own search, GET /api/notes?q=), filters, note cards, paging
// with "Load more", and live updates when the notebook changes.
import { html, useEffect, useLayoutEffect, useRef, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api } from "./api.js";
import { FIRST_PAGE, takeFirstPage } from "./boot.js";
import { AgentIcon, Icon } from "./icons.js";
import { Empty, ErrorNote, useDebounced } from "./ui.js";
import { KINDS, WHEN, agentName, ago, isoTime, machine, plural, preview, who, whenName, whenQuery } from "./util.js";

export const PAGE = FIRST_PAGE;
const SEARCH_WINDOW = 200; // the server ranks a search's best 200 matches; pages stay inside that window
const LARGEST_PAGE = 200; // the most one page of /api/notes holds (the server's MAX_LIMIT)
const TYPING_MS = 120;
const FILTERS = ["kind", "project", "agent", "person", "node", "when"];

let painted = false; // the first-paint mark is set once per page load

/** The query of one page of the list: the filters ("when" sent as the since/until it stands for), the words. */
export function notesQuery(filters, query, offset, limit) {
  const { when, ...rest } = filters;
  return { ...rest, ...whenQuery(when), q: query || undefined, limit, offset: offset || undefined };
}

/** How many to ask for after `offset` notes: a search's pages stay inside the window of its best matches. */
export function nextLimit(query, offset) {
  return query ? Math.min(PAGE, SEARCH_WINDOW - offset) : PAGE;
}

/** Whether "Load more" has more to load: notes not shown yet, inside a search's window. */
export function canLoadMore(shown, total, query) {
  return shown < total && (!query || shown < SEARCH_WINDOW);
}

/** How many the refresh after a change asks for: every note loaded (up to the largest page), so that one pushed
 * down by a new note is not left out between the refreshed page and the rest. */
export function refreshLimit(loaded) {
  return Math.min(Math.max(PAGE, loaded), LARGEST_PAGE);
}

/** The page asked again after a change (`asked` notes from the top), followed by what was loaded beyond it that
 * the page does not hold. */
export function refreshed(old, body, asked = PAGE) {
  const ids = new Set(body.results.map((n) => n.id));
  const rest = old.results.slice(asked).filter((n) => !ids.has(n.id));
  return { ...body, results: [...body.results, ...rest], loaded: true, query: old.query };
}

/** The next page after what is shown, without a note twice (a change may have moved one into it). */
export function appended(old, body) {
  const ids = new Set(old.results.map((n) => n.id));
  return { ...old, results: [...old.results, ...body.results.filter((n) => !ids.has(n.id))] };
}

/** The count beside the filters: matches for a search, notes otherwise. */
export function countText(total, query) {
  return query ? plural(total, "match", "matches") : plural(total, "note");
}

/** Add the values these notes and the status name to `seen` (a Set per filter); each filter's values, sorted. */
export function collectSeen(seen, notes, status) {
  for (const n of notes) {
    if (n.project) seen.project.add(n.project);
    for (const by of [n.created_by, n.updated_by]) {
      seen.agent.add(by.agent);
      if (by.person) seen.person.add(by.person);
      seen.node.add(by.node);
    }
  }
  for (const node of Object.keys(status?.nodes || {})) seen.node.add(node);
  const sorted = (set) => [...set].filter(Boolean).sort((a, b) => a.localeCompare(b));
  return { project: sorted(seen.project), agent: sorted(seen.agent), person: sorted(seen.person), node: sorted(seen.node) };
}
/** One note as a card; every field is a text node (titles, tags and names are never parsed as HTML). */
export function NoteCard({ note, onOpen, onFilter, reason, replacedBy, children }) {
  const by = { ...note.updated_by };
  const open = () => onOpen(note.id);
  const keys = (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      open();
    }
  };
  const filter = (name, value) => (event) => {
    event.stopPropagation();
    onFilter?.(name, value);
  };
  return html`<article class="card" tabindex="0" role="button" data-id=${note.id} onClick=${open} onKeyDown=${keys}
      aria-label=${note.title}>
    <div class="card-top">
      <button type="button" class=${`kind kind-${note.kind}`} onClick=${filter("kind", note.kind)}
        title=${`Only ${note.kind} notes`}>${note.kind}</button>
      ${note.project &&
      html`<button type="button" class="chip project" onClick=${filter("project", note.project)}
        title=${`Only notes of ${note.project}`}>${note.project}</button>`}
      ${reason && html`<span class="chip reason" title="Why this note is listed">${reason}</span>`}
      ${replacedBy && html`<span class="chip replaced" title=${`Replaced by ${replacedBy}`}>replaced</span>`}
    </div>
    <h3 class="card-title">${note.title}</h3>
    ${note.body && html`<p class="card-body">${preview(note.body)}</p>`}
    ${note.tags.length > 0 && html`<div class="tags">${note.tags.map((t) => html`<span class="tag" key=${t}>#${t}</span>`)}</div>`}
    <footer class="card-meta">
      <button type="button" class="agent-link" onClick=${filter("agent", by.agent)} title=${`Only notes by ${agentName(by.agent)}`}>
        <${AgentIcon} agent=${by.agent} size=${18} />
      </button>
      <span class="meta-text" title=${by.client || ""}>${who(by)} · <time datetime=${isoTime(note.updated)}>${ago(note.updated)}</time></span>
      ${children}
    </footer>
  </article>`;
}

function FilterSelect({ label, name, value, options, onChange, show = (v) => v }) {
  const known = value && !options.includes(value) ? [value, ...options] : options;
  return html`<label class="filter">
    <span class="visually-hidden">${label}</span>
    <select name=${name} value=${value} onChange=${(e) => onChange(name, e.currentTarget.value)} class=${value ? "set" : ""}>
      <option value="">${label}</option>
      ${known.map((o) => html`<option key=${o} value=${o}>${show(o)}</option>`)}
    </select>
  </label>`;
}

/** Values seen so far for the filters that have no list endpoint (projects, agents, people). */
function useSeen(notes, status) {
  const seen = useRef({ project: new Set(), agent: new Set(), person: new Set(), node: new Set() });
  return collectSeen(seen.current, notes, status);
}

export function NotesView({ revision, status, onOpen, onNew, onConnect, onPainted, searchRef }) {
  const [text, setText] = useState("");
  const [filters, setFilters] = useState({});
  const [page, setPage] = useState({ results: [], near: [], total: 0, loaded: false });
  const [error, setError] = useState(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const query = useDebounced(text.trim(), TYPING_MS);
  const inflight = useRef(null);
  const seen = useSeen(page.results, status);

  const params = (offset, limit) => notesQuery(filters, query, offset, limit);

  // A new query or filter: cancel whatever is still on its way (its answer would be stale) and ask again.
  // (A layout effect: it runs right after the render, not after the next frame, so the request leaves at once.)
  useLayoutEffect(() => {
    inflight.current?.abort();
    const controller = new AbortController();
    inflight.current = controller;
    const plain = !query && Object.keys(filters).length === 0;
    const early = takeFirstPage();
    const request = plain && early ? early : api("/api/notes", { query: params(0, PAGE), signal: controller.signal });
    request
      .then((body) => {
        if (controller.signal.aborted) return;
        setPage({ ...body, loaded: true, query });
        setError(null);
      })
      .catch((e) => e.name !== "AbortError" && setError(e));
    return () => controller.abort();
  }, [query, JSON.stringify(filters)]);

  // The notebook changed (a poll saw new ops): ask again for what is loaded (up to the largest page), keeping the rest.
  const lastRevision = useRef(revision);
  useEffect(() => {
    const before = lastRevision.current;
    lastRevision.current = revision;
    // The first status poll refreshes too: notes written between the first page and that poll (an agent, another
    // machine's shard) would otherwise wait for the next change to show.
    if (revision === null || revision === before || !page.loaded) return;
    const controller = new AbortController();
    const asked = refreshLimit(page.results.length);
    api("/api/notes", { query: params(0, asked), signal: controller.signal })
      .then((body) => {
        setPage((old) => refreshed(old, body, asked));
      })
      .catch(() => {}); // the next poll tries again
    return () => controller.abort();
  }, [revision]);

  // "hivenote:first-cards": navigation start to the first cards in the document (the first-paint figure).
  useLayoutEffect(() => {
    if (!painted && page.loaded) {
      painted = true;
      performance.mark("hivenote:first-cards");
    }
    if (page.loaded) onPainted?.();
  }, [page]);

  const more = async () => {
    setLoadingMore(true);
    try {
      const offset = page.results.length;
      const body = await api("/api/notes", { query: params(offset, nextLimit(query, offset)) });
      setPage((old) => appended(old, body));
    } catch (e) {
      setError(e);
    } finally {
      setLoadingMore(false);
    }
  };

  const setFilter = (name, value) => setFilters((old) => {
    const next = { ...old, [name]: value };
    if (!value) delete next[name];
    return next;
  });
  const active = FILTERS.filter((f) => filters[f]);
  const searching = Boolean(query) || active.length > 0;
  const shown = page.results.length;
  const canMore = canLoadMore(shown, page.total, query);
  const pending = text.trim() !== query;

  return html`<section class="view notes-view" aria-label="Notes">
    <div class="toolbar">
      <div class="search">
        <${Icon} name="search" />
        <input ref=${searchRef} id="search" type="search" placeholder="Search notes" value=${text}
          autocomplete="off" spellcheck="false" aria-label="Search notes"
          onInput=${(e) => setText(e.currentTarget.value)} />
        <kbd class="hint">/</kbd>
      </div>
      <button type="button" class="button primary" onClick=${onNew}><${Icon} name="plus" /> New note</button>
    </div>
    <div class="filters" role="group" aria-label="Filters">
      <${FilterSelect} label="Any kind" name="kind" value=${filters.kind || ""} options=${KINDS} onChange=${setFilter} />
      <${FilterSelect} label="Any project" name="project" value=${filters.project || ""} options=${seen.project} onChange=${setFilter} />
      <${FilterSelect} label="Any agent" name="agent" value=${filters.agent || ""} options=${seen.agent} onChange=${setFilter} show=${agentName} />
      <${FilterSelect} label="Anyone" name="person" value=${filters.person || ""} options=${seen.person} onChange=${setFilter} />
      <${FilterSelect} label="Any machine" name="node" value=${filters.node || ""} options=${seen.node} onChange=${setFilter} show=${machine} />
      <${FilterSelect} label="Any time" name="when" value=${filters.when || ""} options=${Object.keys(WHEN)} onChange=${setFilter} show=${whenName} />
      ${active.length > 0 && html`<button type="button" class="link" onClick=${() => setFilters({})}>Clear filters</button>`}
      <span class=${pending ? "count pending" : "count"} aria-live="polite">
        ${page.loaded && countText(page.total, query)}
        ${page.loaded && page.window && html` <span class="window" title="Created or changed in this time (the server's local time)">${page.window.text}</span>`}
      </span>
    </div>
    <${ErrorNote} error=${error} />
    ${page.loaded && shown === 0 && !searching &&
    html`<${Empty} title="No notes yet.">
      <p>Agents write here as they work: decisions, facts, preferences, project notes.</p>
      <p><button type="button" class="button primary" onClick=${onConnect}>Connect an agent <${Icon} name="arrow" /></button>
        <button type="button" class="button" onClick=${onNew}>Write one by hand</button></p>
    <//>`}
    ${page.loaded && shown === 0 && searching &&
    html`<${Empty} icon="search" title=${query ? `Nothing matches “${query}”` : "No notes match these filters"}>
      <p>No note holds every word (case and accents do not matter). Try fewer words${active.length ? " or clear the filters" : ""}.</p>
      ${page.near.length > 0 && html`<p class="near-title">Closest notes, by meaning or by some of the words:</p>`}
    <//>`}
    <div class="cards" data-query=${page.query ?? ""}>
      ${(shown ? page.results : page.near).map((n) => html`<${NoteCard} key=${n.id} note=${n} onOpen=${onOpen} onFilter=${setFilter}
        reason=${page.reasons?.[n.id]} replacedBy=${page.replaced_by?.[n.id]} />`)}
    </div>
    ${canMore &&
    html`<div class="more">
      <button type="button" class="button" onClick=${more} disabled=${loadingMore}>
        ${loadingMore ? "Loading…" : `Load more (${(page.total - shown).toLocaleString()} more)`}
      </button>
    </div>`}
    ${query && shown >= SEARCH_WINDOW && page.total > shown &&
    html`<p class="muted center">Showing the best ${SEARCH_WINDOW} of ${page.total.toLocaleString()} matches: add a word to narrow it down.</p>`}
  </section>`;
}
