// The trash: notes moved there, who trashed them and when; restore, or delete for good after a confirmation.
import { html, useEffect, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { api } from "./api.js";
import { AgentIcon, Icon } from "./icons.js";
import { Confirm, Empty, ErrorNote, toast } from "./ui.js";
import { ago, plural, preview, when, who } from "./util.js";
import { PAGE } from "./notes.js";

export function TrashView({ revision, onOpen, onChanged }) {
  const [page, setPage] = useState(null);
  const [error, setError] = useState(null);
  const [purging, setPurging] = useState(null);
  const [limit, setLimit] = useState(PAGE);

  useEffect(() => {
    const controller = new AbortController();
    api("/api/notes", { query: { trashed: true, limit }, signal: controller.signal })
      .then(setPage)
      .catch((e) => e.name !== "AbortError" && setError(e));
    return () => controller.abort();
  }, [revision, limit]);

  const restore = async (note) => {
    try {
      await api(`/api/notes/${encodeURIComponent(note.id)}/restore`, { method: "POST" });
      toast(`Restored “${note.title}”.`);
      onChanged();
    } catch (e) {
      setError(e);
    }
  };
  const purge = async () => {
    try {
      await api(`/api/notes/${encodeURIComponent(purging.id)}`, { method: "DELETE" });
      toast("Deleted for good.");
      onChanged();
    } catch (e) {
      setError(e);
    }
    setPurging(null);
  };

  return html`<section class="view" aria-label="Trash">
    <header class="view-head">
      <h1>Trash</h1>
      <p class="muted">Trashed notes are hidden from every agent's search but kept, with their history, until deleted for good.</p>
    </header>
    <${ErrorNote} error=${error} />
    ${page && page.results.length === 0 &&
    html`<${Empty} icon="trash" title="The trash is empty.">
      <p>When an agent or you forget a note, it waits here: restore it, or delete it for good.</p>
    <//>`}
    ${page && page.results.length > 0 && html`<p class="count">${plural(page.total, "note")} in the trash</p>`}
    <ul class="rows">
      ${page?.results.map((note) => html`<li class="row trash-row" key=${note.id} data-id=${note.id}>
        <div class="row-main" onClick=${() => onOpen(note.id)}>
          <div class="row-title"><span class=${`kind kind-${note.kind}`}>${note.kind}</span> <strong>${note.title}</strong>
            ${note.project && html` <span class="chip project">${note.project}</span>`}</div>
          ${note.body && html`<p class="row-body">${preview(note.body, 160)}</p>`}
          <p class="row-meta"><${AgentIcon} agent=${note.updated_by.agent} size=${16} />
            Trashed by ${who(note.updated_by)} · <time title=${when(note.updated)}>${ago(note.updated)}</time></p>
        </div>
        <div class="row-actions">
          <button type="button" class="button" onClick=${() => restore(note)}><${Icon} name="restore" /> Restore</button>
          <button type="button" class="button danger" onClick=${() => setPurging(note)}><${Icon} name="trash" /> Delete forever</button>
        </div>
      </li>`)}
    </ul>
    ${page && page.results.length < page.total &&
    html`<div class="more"><button type="button" class="button" onClick=${() => setLimit((l) => Math.min(l + PAGE, 200))}>Load more</button></div>`}
    ${purging &&
    html`<${Confirm} title="Delete this note for good?" action="Delete forever"
      message=${`“${purging.title}” and its whole history are deleted on every machine. This cannot be undone.`}
      onConfirm=${purge} onCancel=${() => setPurging(null)} />`}
  </section>`;
}
