// One note in a dialog: its body rendered as (sanitized) Markdown, editing, trash / restore / purge, and its
// history with who changed what, when, and a diff of each change. Also the "New note" form.
import { html, useEffect, useRef, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { diffLines } from "../vendor/diff-9.0.0/diff/line.js";
import { api } from "./api.js";
import { AgentIcon, Icon } from "./icons.js";
import { Markdown } from "./markdown.js";
import { Confirm, Dialog, ErrorNote, toast } from "./ui.js";
import { KINDS, WHEN, agentName, ago, when, whenName, whenQuery, who } from "./util.js";

const FIELDS = ["kind", "title", "project", "tags", "body", "replaces"];

/** Tags as typed ("db, #perf"): each trimmed, without its "#", empty ones left out. */
export function tagsOf(text) {
  return text
    .split(",")
    .map((t) => t.trim().replace(/^#/, ""))
    .filter(Boolean);
}

/** The fields form, shared by "New note" and "Edit". `initial` holds the note's current values. */
function NoteForm({ initial, submit, onCancel, action }) {
  const [kind, setKind] = useState(initial.kind || "fact");
  const [title, setTitle] = useState(initial.title || "");
  const [project, setProject] = useState(initial.project || "");
  const [tags, setTags] = useState((initial.tags || []).join(", "));
  const [body, setBody] = useState(initial.body || "");
  const [replaces, setReplaces] = useState(initial.replaces || "");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const save = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const link = replaces.trim() || null;
      await submit({ kind, title: title.trim(), project: project.trim() || null, tags: tagsOf(tags), body, replaces: link });
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  return html`<form class="note-form" onSubmit=${save}>
    <div class="form-row">
      <label class="field narrow">Kind
        <select name="kind" value=${kind} onChange=${(e) => setKind(e.currentTarget.value)}>
          ${KINDS.map((k) => html`<option key=${k} value=${k}>${k}</option>`)}
        </select>
      </label>
      <label class="field grow">Title
        <input name="title" required value=${title} onInput=${(e) => setTitle(e.currentTarget.value)}
          placeholder="Use Drizzle, not Prisma" />
      </label>
    </div>
    <div class="form-row">
      <label class="field grow">Project
        <input name="project" value=${project} onInput=${(e) => setProject(e.currentTarget.value)}
          placeholder="the codebase's name, e.g. shop-api" />
      </label>
      <label class="field grow">Tags
        <input name="tags" value=${tags} onInput=${(e) => setTags(e.currentTarget.value)} placeholder="db, perf" />
      </label>
    </div>
    <label class="field">Replaces (the id of a note this one takes the place of, e.g. a changed decision)
      <input name="replaces" value=${replaces} onInput=${(e) => setReplaces(e.currentTarget.value)}
        placeholder="01J…" spellcheck="false" />
    </label>
    <label class="field">Body (Markdown)
      <textarea name="body" rows="10" value=${body} onInput=${(e) => setBody(e.currentTarget.value)}></textarea>
    </label>
    <${ErrorNote} error=${error} />
    <div class="actions">
      <button type="button" class="button" onClick=${onCancel}>Cancel</button>
      <button type="submit" class="button primary" disabled=${busy}>${action}</button>
    </div>
  </form>`;
}

export function NewNoteDialog({ onClose, onCreated }) {
  const submit = async (fields) => {
    const body = { ...fields };
    if (body.project === null) delete body.project;
    if (body.replaces === null) delete body.replaces;
    const done = await api("/api/notes", { method: "POST", body });
    const similar = done.similar.filter((n) => n.id !== done.note.replaces);
    toast(
      similar.length
        ? `Saved. It looks like “${similar[0].title}” (${similar[0].id}): if it replaces that note, edit it and set Replaces.`
        : "Saved.",
    );
    onCreated(done.note.id);
  };
  return html`<${Dialog} title="New note" onClose=${onClose} wide>
    <${NoteForm} initial=${{}} submit=${submit} onCancel=${onClose} action="Save note" />
  <//>`;
}

const ACTIONS = { trash: "Moved to the trash", restore: "Restored", purge: "Purged" };

/** A version's heading: the first "set" created the note, a later one edited it; other actions by name. */
export function versionLabel(version) {
  if (version.action === "set") return version.index === 0 ? "Created" : "Edited";
  return ACTIONS[version.action] || version.action;
}

/** The fields an edit changed, as the PATCH sends them (a field the note lacks counts as null). */
export function changedFields(fields, note) {
  const patch = {};
  for (const f of FIELDS) {
    if (JSON.stringify(fields[f]) !== JSON.stringify(note[f] ?? null)) patch[f] = fields[f];
  }
  return patch;
}

/** A field's value as the history shows it. */
export function show(field, value) {
  if (field === "tags") return (value || []).map((t) => `#${t}`).join(" ") || "(none)";
  if (value === null || value === undefined || value === "") return "(none)";
  return String(value);
}

function BodyDiff({ before, after }) {
  // Both end in a newline, so an unchanged last line is not counted as changed when text is added after it.
  const end = (text) => (text && !text.endsWith("\n") ? `${text}\n` : text || "");
  const parts = diffLines(end(before), end(after));
  return html`<pre class="diff">${parts.map((part, i) => {
    const cls = part.added ? "ins" : part.removed ? "del" : "same";
    return html`<span key=${i} class=${cls}>${part.value}</span>`;
  })}</pre>`;
}

/** Each version with the state before it, newest first. */
export function withBefore(versions) {
  const state = {};
  const out = versions.map((v, index) => {
    const before = { ...state };
    if (v.action === "set") Object.assign(state, v.fields);
    return { ...v, before, index };
  });
  return out.reverse();
}

function History({ id, revision }) {
  const [versions, setVersions] = useState(null);
  const [error, setError] = useState(null);
  const [period, setPeriod] = useState(""); // the time filter: the same choices and window as the notes view's
  const [span, setSpan] = useState(null);
  useEffect(() => {
    // The whole history, so each version's "before" is right; the window then picks the versions made in it.
    const all = api(`/api/notes/${encodeURIComponent(id)}/history`);
    const inside = period ? api(`/api/notes/${encodeURIComponent(id)}/history`, { query: whenQuery(period) }) : all;
    Promise.all([all, inside])
      .then(([body, picked]) => {
        const kept = new Set(picked.versions.map((v) => `${v.node}-${v.seq}`));
        setVersions(withBefore(body.versions).filter((v) => kept.has(`${v.node}-${v.seq}`)));
        setSpan(picked.window);
        setError(null);
      })
      .catch(setError);
  }, [id, revision, period]);
  if (error) return html`<${ErrorNote} error=${error} />`;
  if (!versions) return html`<p class="muted">Loading history…</p>`;
  const filter = html`<div class="filters" role="group" aria-label="History filter">
    <label class="filter"><span class="visually-hidden">Any time</span>
      <select name="when" value=${period} class=${period ? "set" : ""} onChange=${(e) => setPeriod(e.currentTarget.value)}>
        <option value="">Any time</option>
        ${Object.keys(WHEN).map((k) => html`<option key=${k} value=${k}>${whenName(k)}</option>`)}
      </select>
    </label>
    ${span && html`<span class="count window">${span.text}</span>`}
  </div>`;
  if (versions.length === 0) return html`${filter}<p class="muted">No changes in that time.</p>`;
  return html`${filter}<ol class="history" aria-label="History">
    ${versions.map((v) => {
      const first = v.index === 0;
      const label = versionLabel(v);
      const changed = FIELDS.filter((f) => v.action === "set" && f in v.fields);
      return html`<li class="version" key=${`${v.node}-${v.seq}`} data-action=${v.action}>
        <div class="version-head">
          <${AgentIcon} agent=${v.by.agent || "cli"} size=${18} />
          <strong>${label}</strong>
          <span class="muted">by ${who({ ...v.by, agent: v.by.agent || "cli", node: v.node })}</span>
          <time class="muted right" title=${when(v.at)}>${ago(v.at)}</time>
        </div>
        ${v.by.imported &&
        html`<p class="muted imported">Imported by ${agentName(v.by.imported.by.agent)}${v.by.imported.by.person ? ` · ${v.by.imported.by.person}` : ""}
          ${" "}<time title=${when(v.by.imported.at)}>${ago(v.by.imported.at)}</time>${v.by.imported.file ? ` from ${v.by.imported.file}` : ""}</p>`}
        ${changed.length > 0 &&
        html`<div class="changes">
          ${changed.map((f) =>
            f === "body"
              ? html`<div class="change" key=${f}><span class="field-name">body</span>
                  <${BodyDiff} before=${first ? "" : v.before.body} after=${v.fields.body} /></div>`
              : html`<div class="change" key=${f}><span class="field-name">${f}</span>
                  ${!first && html`<del>${show(f, v.before[f])}</del> → `}<ins>${show(f, v.fields[f])}</ins></div>`,
          )}
        </div>`}
      </li>`;
    })}
  </ol>`;
}

export function NoteDialog({ id, onClose, onChanged, revision }) {
  const [note, setNote] = useState(null);
  const [error, setError] = useState(null);
  const [tab, setTab] = useState("note");
  const [editing, setEditing] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [seen, setSeen] = useState(0); // bumps after our own changes, so history reloads
  const purging = useRef(false); // a poll landing mid-purge must not ask for the note it is deleting

  useEffect(() => {
    if (purging.current) return;
    api(`/api/notes/${encodeURIComponent(id)}`).then(setNote).catch(setError);
  }, [id, revision, seen]);

  const changed = (next, message) => {
    setNote(next);
    setSeen((n) => n + 1);
    onChanged();
    if (message) toast(message);
  };
  const act = (path, message) => async () => {
    try {
      changed(await api(`/api/notes/${encodeURIComponent(id)}/${path}`, { method: "POST" }), message);
    } catch (e) {
      setError(e);
    }
  };
  const save = async (fields) => {
    const patch = changedFields(fields, note);
    if (Object.keys(patch).length) {
      changed(await api(`/api/notes/${encodeURIComponent(id)}`, { method: "PATCH", body: patch }), "Saved.");
    }
    setEditing(false);
  };
  const purge = async () => {
    purging.current = true;
    try {
      await api(`/api/notes/${encodeURIComponent(id)}`, { method: "DELETE" });
    } catch (e) {
      purging.current = false;
      throw e;
    }
    toast("Deleted for good.");
    onChanged();
    onClose();
  };

  if (!note) {
    return html`<${Dialog} title=${error ? "Note not found" : "Loading…"} onClose=${onClose} wide>
      <${ErrorNote} error=${error} />
    <//>`;
  }
  if (confirming) {
    return html`<${Confirm} title="Delete this note for good?" action="Delete forever"
      message=${`“${note.title}” and its whole history are deleted on every machine. This cannot be undone.`}
      onConfirm=${purge} onCancel=${() => setConfirming(false)} />`;
  }
  const created = note.created_by;
  const updated = note.updated_by;
  return html`<${Dialog} title=${editing ? "Edit note" : note.title} onClose=${onClose} wide label="Note">
    ${editing
      ? html`<${NoteForm} initial=${note} submit=${save} onCancel=${() => setEditing(false)} action="Save changes" />`
      : html`<div class="note-view">
      <div class="note-head">
        <span class=${`kind kind-${note.kind}`}>${note.kind}</span>
        ${note.project && html`<span class="chip project">${note.project}</span>`}
        ${note.tags.map((t) => html`<span class="tag" key=${t}>#${t}</span>`)}
        ${note.trashed && html`<span class="chip trashed">in the trash</span>`}
        ${note.replaces && html`<span class="chip replaces" title="This note takes the place of that one">replaces ${note.replaces}</span>`}
      </div>
      <div class="provenance">
        <span><${AgentIcon} agent=${created.agent} size=${16} /> Written by ${who(created)}, <time title=${when(note.created)}>${ago(note.created)}</time></span>
        ${note.updated !== note.created &&
        html`<span><${AgentIcon} agent=${updated.agent} size=${16} /> ${note.trashed ? "Trashed" : "Last changed"} by ${who(updated)}, <time title=${when(note.updated)}>${ago(note.updated)}</time></span>`}
      </div>
      <div class="tabs" role="tablist">
        <button type="button" role="tab" aria-selected=${tab === "note"} class=${tab === "note" ? "tab on" : "tab"} onClick=${() => setTab("note")}>Note</button>
        <button type="button" role="tab" aria-selected=${tab === "history"} class=${tab === "history" ? "tab on" : "tab"} onClick=${() => setTab("history")}><${Icon} name="history" size=${16} /> History</button>
      </div>
      ${tab === "note" ? html`<${Markdown} text=${note.body} />` : html`<${History} id=${note.id} revision=${seen + revision} />`}
      <${ErrorNote} error=${error} />
      <div class="actions">
        <span class="muted small id" title="The note's id">${note.id}</span>
        ${note.trashed
          ? html`<button type="button" class="button" onClick=${act("restore", "Restored.")}><${Icon} name="restore" /> Restore</button>
            <button type="button" class="button danger" onClick=${() => setConfirming(true)}><${Icon} name="trash" /> Delete forever</button>`
          : html`<button type="button" class="button" onClick=${act("trash", "Moved to the trash.")}><${Icon} name="trash" /> Move to trash</button>
            <button type="button" class="button primary" onClick=${() => setEditing(true)}><${Icon} name="edit" /> Edit</button>`}
      </div>
    </div>`}
  <//>`;
}
