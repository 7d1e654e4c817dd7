"""A stand-in for the Hugging Face Hub on 127.0.0.1: real HTTP (the standard library's server), the Hub's URL layout
(`/<repo>/resolve/<revision>/<file>`), Range requests answered with 206, and the faults a download meets: a body cut
off after some bytes, a file whose bytes are not the pinned ones. Tests point HF_ENDPOINT at it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Hub:
    files: dict[str, bytes]  # "<repo>/resolve/<revision>/<name>" -> bytes
    cut_after: dict[str, int] = field(default_factory=dict)  # a path's body ends after this many bytes (once)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header) of each GET
    gate: threading.Event | None = None  # when given: a body's first MB is sent, the rest once it is set
    url: str = ""


@contextlib.contextmanager
def hub(files: dict[str, bytes]) -> Iterator[Hub]:
    state = Hub(files)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            path = self.path.lstrip("/")
            state.requests.append((path, self.headers.get("Range")))
            data = state.files.get(path)
            if data is None:
                self.send_error(404, "Entry not found")
                return
            start = 0
            asked = self.headers.get("Range")
            if asked and asked.startswith("bytes=") and asked.endswith("-"):
                start = int(asked[len("bytes=") : -1])
            body = data[start:]
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(body)))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            cut = state.cut_after.pop(path, None)
            if state.gate is not None and cut is None:
                self.wfile.write(body[: 1 << 20])
                self.wfile.flush()
                state.gate.wait(60)
                body = body[1 << 20 :]
            self.wfile.write(body if cut is None else body[:cut])
            if cut is not None:
                self.wfile.flush()
                self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
