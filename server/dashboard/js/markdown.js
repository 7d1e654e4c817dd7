// Note bodies as Markdown, made safe: marked renders, DOMPurify sanitizes, and only then does the HTML reach the
// page. This is the dashboard's one use of innerHTML; every other note field is rendered as a text node.
// Loaded on first use, so the notes list paints without parsing either library.
import { html, useEffect, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";

let tools = null;

async function load() {
  if (!tools) {
    tools = Promise.all([import("../vendor/marked-18.2.1.esm.js"), import("../vendor/purify-3.5.0.es.mjs")]).then(
      ([{ Marked }, { default: DOMPurify }]) => {
        const marked = new Marked({ gfm: true, breaks: true });
        // Links open outside the dashboard and tell the target nothing about it.
        DOMPurify.addHook("afterSanitizeAttributes", (node) => {
          if (node.tagName === "A" && node.hasAttribute("href")) {
            node.setAttribute("target", "_blank");
            node.setAttribute("rel", "noopener noreferrer");
          }
        });
        return { marked, DOMPurify };
      },
    );
  }
  return tools;
}

export async function renderMarkdown(text) {
  const { marked, DOMPurify } = await load();
  const raw = marked.parse(text || "");
  return DOMPurify.sanitize(raw, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input"] });
}

export function Markdown({ text }) {
  const [safe, setSafe] = useState(null);
  useEffect(() => {
    let live = true;
    renderMarkdown(text).then((out) => live && setSafe(out));
    return () => {
      live = false;
    };
  }, [text]);
  if (safe === null) return html`<div class="markdown muted">…</div>`;
  if (!text.trim()) return html`<div class="markdown muted">No body.</div>`;
  return html`<div class="markdown" dangerouslySetInnerHTML=${{ __html: safe }}></div>`;
}
