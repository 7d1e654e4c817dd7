// Import and export: a notebook JSON or the official memory.jsonl in, with upload progress and a summary of what
// was added, skipped and rejected (and why); the notebook or the graph out, as a download.
import { html, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { download, upload } from "./api.js";
import { Icon } from "./icons.js";
import { toast } from "./ui.js";

const LABELS = { notes: "notes", entities: "entities", relations: "relations", observations: "observations" };

/** A refused import that names a bad line can be sent again keeping the good lines (skip_bad). */
export function canSkipBad(error) {
  return error?.status === 400 && /line \d+/i.test(error.message);
}

/** The counts worth showing: those above zero. */
export function shownCounts(counts) {
  return Object.entries(counts || {}).filter(([, n]) => n > 0);
}

function Counts({ title, counts, tone }) {
  const entries = shownCounts(counts);
  return html`<div class=${`tally ${tone}`}>
    <div class="tally-label">${title}</div>
    ${entries.length === 0 && html`<div class="tally-line muted">nothing</div>`}
    ${entries.map(([k, n]) => html`<div class="tally-line" key=${k}><strong>${n.toLocaleString()}</strong> ${LABELS[k] || k}</div>`)}
  </div>`;
}

function Summary({ summary }) {
  return html`<section class="summary" aria-label="Import summary">
    <h3>Imported ${summary.format === "memory-jsonl" ? "a memory.jsonl" : "a notebook"}</h3>
    <div class="tallies">
      <${Counts} title="Added" counts=${summary.added} tone="good" />
      <${Counts} title="Already there" counts=${summary.skipped} tone="neutral" />
      <div class=${summary.rejected.length ? "tally bad" : "tally neutral"}>
        <div class="tally-label">Rejected</div>
        <div class="tally-line"><strong>${summary.rejected.length}</strong> line${summary.rejected.length === 1 ? "" : "s"}</div>
      </div>
    </div>
    ${summary.rejected.length > 0 &&
    html`<ul class="rejected">${summary.rejected.map((r) => html`<li key=${r.line}><strong>Line ${r.line}</strong>: ${r.reason}</li>`)}</ul>`}
  </section>`;
}

export function TransferView({ onChanged }) {
  const [file, setFile] = useState(null);
  const [progress, setProgress] = useState(null);
  const [summary, setSummary] = useState(null);
  const [error, setError] = useState(null);
  const [over, setOver] = useState(false);

  const send = async (chosen, skipBad = false) => {
    setFile(chosen);
    setSummary(null);
    setError(null);
    setProgress(0);
    try {
      // The file's name goes with it: each imported note's history says where it came from.
      const query = new URLSearchParams({ file: chosen.name || "", ...(skipBad ? { skip_bad: "true" } : {}) });
      const done = await upload(`/api/import?${query}`, chosen, setProgress);
      setSummary(done);
      onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setProgress(null);
    }
  };
  const pick = (event) => {
    const chosen = event.currentTarget.files[0];
    event.currentTarget.value = ""; // choosing the same file again still imports it
    if (chosen) send(chosen);
  };
  const drop = (event) => {
    event.preventDefault();
    setOver(false);
    const chosen = event.dataTransfer.files[0];
    if (chosen) send(chosen);
  };
  const save = (format) => async () => {
    try {
      const { blob, name } = await download(`/api/export${format ? `?format=${format}` : ""}`);
      const url = URL.createObjectURL(blob);
      const a = document.createElement("a");
      a.href = url;
      a.download = name;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      toast(`Exported ${name}.`);
    } catch (e) {
      setError(e);
    }
  };

  return html`<section class="view" aria-label="Import and export">
    <header class="view-head">
      <h1>Import / export</h1>
      <p class="muted">Bring in a Hivenote notebook export or the official memory server's <code>memory.jsonl</code>. Importing the same file twice adds nothing.</p>
    </header>
    <div class="panel">
      <h2><${Icon} name="upload" /> Import</h2>
      <label class=${over ? "dropzone over" : "dropzone"} onDragOver=${(e) => { e.preventDefault(); setOver(true); }}
          onDragLeave=${() => setOver(false)} onDrop=${drop}>
        <input type="file" accept=".json,.jsonl,application/json" onChange=${pick} aria-label="File to import" />
        <strong>Drop a file here, or choose one</strong>
        <span class="muted small">notebook.json or memory.jsonl</span>
      </label>
      ${progress !== null &&
      html`<div class="progress" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow=${Math.round(progress * 100)}>
        <div class="bar" style=${{ width: `${Math.round(progress * 100)}%` }}></div>
        <span class="small">${progress < 1 ? `Uploading ${file?.name}… ${Math.round(progress * 100)}%` : "Importing…"}</span>
      </div>`}
      ${error &&
      html`<div class="import-error" role="alert">
        <strong>Nothing was imported.</strong> ${error.message}
        ${canSkipBad(error) &&
        html`<div><button type="button" class="button" onClick=${() => send(file, true)}>Import the good lines and list the bad ones</button></div>`}
      </div>`}
      ${summary && html`<${Summary} summary=${summary} />`}
    </div>
    <div class="panel">
      <h2><${Icon} name="download" /> Export</h2>
      <div class="export-buttons">
        <button type="button" class="button" onClick=${save("")}>
          <strong>Notebook</strong><span class="muted small">notebook.json: every note and the knowledge graph</span>
        </button>
        <button type="button" class="button" onClick=${save("memory-jsonl")}>
          <strong>Knowledge graph</strong><span class="muted small">memory.jsonl, as the official memory server writes it</span>
        </button>
      </div>
    </div>
  </section>`;
}

