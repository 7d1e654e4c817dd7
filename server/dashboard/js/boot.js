// The first requests, started before the rest of the dashboard has even downloaded: this module is loaded with
// `async` and imports only api.js, so it runs as soon as those two files arrive. main.js then finds the session
// (and, on the notes view, the first page of notes) already on its way.
import { api, startSession } from "./api.js";

export const FIRST_PAGE = 50;

function onNotesView() {
  const name = location.hash.replace(/^#\/?/, "");
  return name === "" || name === "notes";
}

let firstPage = null;

async function begin() {
  performance.mark("hivenote:start");
  const ready = await startSession();
  performance.mark("hivenote:session");
  if (ready && onNotesView()) {
    firstPage = api("/api/notes", { query: { limit: FIRST_PAGE } }).then((body) => {
      performance.mark("hivenote:first-page");
      return body;
    });
    firstPage.catch(() => {}); // the notes view reports errors when it uses the answer
  }
  return ready;
}

export let booting = begin();

/** Start over (the "try again" button after the server did not answer). */
export function restart() {
  booting = begin();
  return booting;
}

/** The unfiltered first page of notes if it was asked for at boot; once only. */
export function takeFirstPage() {
  const taken = firstPage;
  firstPage = null;
  return taken;
}
