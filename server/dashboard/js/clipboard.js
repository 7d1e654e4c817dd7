import { api } from "./api.js";

// copyText(text): put text on the clipboard. The async Clipboard API needs a secure context (localhost counts;
// a LAN address over plain http does not), so it falls back to selecting a hidden textarea and execCommand.
//
// Every Copy button calls `copy` below: in the desktop window it goes through the tray, elsewhere through
// `window.copyText` (which a test or an embedding page may replace).

export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // permission refused or no focus: try the old way
    }
  }
  const area = document.createElement("textarea");
  area.value = text; // a property, not markup: nothing is parsed
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  let done = false;
  try {
    done = document.execCommand("copy");
  } finally {
    area.remove();
  }
  return done;
}

if (!window.copyText) window.copyText = copyText;

// In the desktop window (pywebview), the page's clipboard may not reach the system's (WebKitGTK without a
// focused window, or a permission prompt), and pywebview's own JS bridge needs eval, which the CSP forbids. The
// tray serving this page puts the text on the system clipboard for it instead.
async function desktopCopy(text) {
  try {
    await api("/desktop/clipboard", { method: "POST", body: { text } });
    return true;
  } catch {
    return copyText(text);
  }
}

/** What the Copy buttons call: whichever copyText is installed on window right now. */
export function copy(text) {
  // pywebview adds window.pywebview once its script is in, which may be after this module ran: check per call
  return Promise.resolve(window.pywebview ? desktopCopy(text) : window.copyText(text));
}
