// copyText(text): put text on the clipboard. The async Clipboard API needs a secure context (localhost counts;
// a LAN address over plain http does not), so it falls back to selecting a hidden textarea and execCommand.
//
// In the desktop window (pywebview) the page's own clipboard may not reach the system clipboard, so once
// pywebview is ready every Copy button goes through its Python side instead (`window.copyText` is what they call).

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

function useDesktopClipboard() {
  const api = window.pywebview && window.pywebview.api;
  if (api && typeof api.copy_text === "function") window.copyText = (text) => api.copy_text(String(text));
}
window.addEventListener("pywebviewready", useDesktopClipboard);
useDesktopClipboard(); // the event may have fired before this module loaded

/** What the Copy buttons call: whichever copyText is installed on window right now. */
export function copy(text) {
  return Promise.resolve(window.copyText(text));
}
