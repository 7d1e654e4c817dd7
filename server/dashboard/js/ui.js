// Shared pieces of interface: the modal dialog (native <dialog>: focus trapping and Esc for free), confirmation,
// empty states, toasts, and the polling hook that pauses while the tab is hidden.
import { html, useEffect, useLayoutEffect, useRef, useState } from "../vendor/htm-preact-3.1.1.standalone.module.js";
import { Icon } from "./icons.js";

/** A modal dialog, open while mounted. Esc (the browser's `cancel` event) and the close button call onClose. */
export function Dialog({ title, onClose, children, wide = false, label }) {
  const ref = useRef(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog.open) dialog.showModal();
    const cancel = (event) => {
      event.preventDefault(); // let the parent unmount us, so state and DOM stay in step
      onClose();
    };
    dialog.addEventListener("cancel", cancel);
    return () => dialog.removeEventListener("cancel", cancel);
  }, [onClose]);
  // A click on the backdrop lands on the <dialog> element itself (its content box is the inner panel).
  const backdrop = (event) => {
    if (event.target === ref.current) onClose();
  };
  return html`<dialog ref=${ref} class=${wide ? "modal wide" : "modal"} onClick=${backdrop} aria-label=${label || title}>
    <div class="modal-panel">
      <header class="modal-head">
        <h2>${title}</h2>
        <button class="icon-button" type="button" onClick=${onClose} aria-label="Close" title="Close (Esc)">
          <${Icon} name="close" />
        </button>
      </header>
      <div class="modal-body">${children}</div>
    </div>
  </dialog>`;
}

/** "Are you sure?" with the consequence spelled out; the confirming button names the action. */
export function Confirm({ title, message, action, danger = true, onConfirm, onCancel }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const go = async () => {
    setBusy(true);
    setError(null);
    try {
      await onConfirm();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<${Dialog} title=${title} onClose=${onCancel} label=${title}>
    <p class="confirm-text">${message}</p>
    <${ErrorNote} error=${error} />
    <div class="actions">
      <button type="button" class="button" onClick=${onCancel}>Cancel</button>
      <button type="button" class=${danger ? "button danger" : "button primary"} onClick=${go} disabled=${busy}>
        ${action}
      </button>
    </div>
  <//>`;
}

/** An empty state that says what to do next. */
export function Empty({ icon = "notes", title, children }) {
  return html`<div class="empty">
    <div class="empty-icon"><${Icon} name=${icon} size=${32} /></div>
    <h3>${title}</h3>
    <div class="empty-text">${children}</div>
  </div>`;
}

export function ErrorNote({ error }) {
  if (!error) return null;
  return html`<div class="error-note" role="alert">${error.message || String(error)}</div>`;
}

// Toasts: short confirmations ("Copied", "Moved to the trash") in one corner.
let pushToast = () => {};
export function toast(text, tone = "ok") {
  pushToast({ text, tone, id: Math.random() });
}

export function Toasts() {
  const [items, setItems] = useState([]);
  const box = useRef(null);
  useEffect(() => {
    pushToast = (item) => {
      setItems((old) => [...old, item]);
      setTimeout(() => setItems((old) => old.filter((i) => i !== item)), 3200);
    };
    return () => {
      pushToast = () => {};
    };
  }, []);
  // A modal dialog (Connect an agent, a note) sits in the browser's top layer, above any z-index: the toasts are
  // a popover, shown again for each new toast so that they come out above whatever is open.
  useLayoutEffect(() => {
    const el = box.current;
    if (!el?.showPopover) return;
    if (el.matches(":popover-open")) el.hidePopover();
    if (items.length) el.showPopover();
  }, [items]);
  return html`<div class="toasts" role="status" aria-live="polite" popover="manual" ref=${box}>
    ${items.map((item) => html`<div key=${item.id} class=${`toast ${item.tone}`}>${item.text}</div>`)}
  </div>`;
}

/** Call `tick` now and every `ms` while the page is visible (and `enabled`); a hidden tab makes no requests. */
export function usePolling(tick, ms, enabled = true) {
  const saved = useRef(tick);
  saved.current = tick;
  useEffect(() => {
    if (!enabled) return undefined;
    let timer = null;
    const run = () => {
      if (document.visibilityState === "visible") saved.current();
    };
    const start = () => {
      clearInterval(timer);
      if (document.visibilityState === "visible") {
        timer = setInterval(run, ms);
      }
    };
    const visibility = () => {
      if (document.visibilityState === "visible") run();
      start();
    };
    run();
    start();
    document.addEventListener("visibilitychange", visibility);
    return () => {
      clearInterval(timer);
      document.removeEventListener("visibilitychange", visibility);
    };
  }, [enabled, ms]);
}

/** Text typed in a field, settled: the value once it has not changed for `ms` milliseconds. */
export function useDebounced(value, ms) {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}
