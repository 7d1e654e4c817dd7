// copyText(text): put text on the clipboard. The async Clipboard API needs a secure context (localhost counts;
// a LAN address over plain http does not), so it falls back to selecting a hidden textarea and execCommand.
//
// The desktop window (pywebview) may swap this out: the app always calls `window.copyText`, so assigning a
// native implementation there (e.g. one that calls the tray's Python clipboard) takes over every Copy button.

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

/** What the Copy buttons call: whichever copyText is installed on window right now. */
export function copy(text) {
  return Promise.resolve(window.copyText(text));
}
