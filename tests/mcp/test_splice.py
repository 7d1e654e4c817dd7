"""Values spliced into an answer at the ASGI boundary (`splice`), driven as a server drives an ASGI app: a request
message in, the messages the app sends collected."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from hivenote.server.mcp.splice import Splices, Splicing, splices_of

TEXT = 'a "quoted" line\nand é'
OBJECT = {"entities": [{"name": "Ada"}], "relations": []}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def escaped(text: str) -> bytes:
    """`text` as it sits inside a JSON string (what `Splices.string` takes)."""
    return json.dumps(text, ensure_ascii=False).encode()[1:-1]


async def run(app: Any, scope_type: str = "http") -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await Splicing(app)({"type": scope_type, "method": "POST", "path": "/", "headers": []}, receive, send)
    return sent


def content_length(start: Message) -> int | None:
    lengths = [int(v) for k, v in start["headers"] if k.lower() == b"content-length"]
    assert len(lengths) <= 1
    return lengths[0] if lengths else None


@pytest.mark.anyio
async def test_a_json_answer_gets_its_values_and_a_content_length_that_counts_them() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        splices = splices_of(scope)
        assert splices is not None
        answer = {
            "id": 7,
            "text": splices.string(escaped(TEXT)),
            "structured": splices.object(json.dumps(OBJECT).encode()),
        }
        await JSONResponse(answer)(scope, receive, send)

    start, body = await run(app)
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert json.loads(body["body"]) == {"id": 7, "text": TEXT, "structured": OBJECT}
    assert content_length(start) == len(body["body"])
    assert b"hivenote-splice-" not in body["body"]


@pytest.mark.anyio
async def test_an_answer_without_values_passes_through_untouched() -> None:
    messages: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        assert splices_of(scope) is not None
        messages.extend(
            [
                {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]},
                {"type": "http.response.body", "body": b"{}"},
            ]
        )
        for message in messages:
            await send(message)

    sent = await run(app)
    assert len(sent) == 2
    assert all(a is b for a, b in zip(sent, messages, strict=True))


@pytest.mark.anyio
async def test_a_stream_started_before_its_values_gets_them_in_the_chunk_that_holds_them() -> None:
    """An SSE answer starts before the handler runs: no Content-Length to fix, the chunk carries the value."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        splices = splices_of(scope)
        assert splices is not None
        data = json.dumps({"text": splices.string(escaped(TEXT))}).encode()
        await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})  # not in this part
        await send({"type": "http.response.body", "body": b"data: " + data + b"\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    start, ping, event, end = await run(app)
    assert content_length(start) is None
    assert ping["body"] == b": ping\n\n"
    assert json.loads(event["body"].removeprefix(b"data: ")) == {"text": TEXT}
    assert event["more_body"] is True and end["more_body"] is False


@pytest.mark.anyio
async def test_a_body_sent_in_parts_is_framed_by_the_server_not_by_a_stale_length() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        splices = splices_of(scope)
        assert splices is not None
        mark = splices.string(escaped(TEXT))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"99")]})
        await send({"type": "http.response.body", "body": f'["{mark}"'.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b"]", "more_body": False})

    start, first, last = await run(app)
    assert content_length(start) is None  # uvicorn then frames it chunked
    assert json.loads(first["body"] + last["body"]) == [TEXT]


@pytest.mark.anyio
async def test_other_scopes_get_no_splices() -> None:
    seen: list[Splices | None] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(splices_of(scope))

    await run(app, scope_type="websocket")
    assert seen == [None]
    assert splices_of({"type": "http"}) is None
    assert splices_of(None) is None


def test_only_the_placeholders_handed_out_are_replaced_each_once() -> None:
    splices = Splices()
    first = splices.string(b"one")
    second = splices.object(b'{"two":2}')
    assert first != second.popitem()[0]  # new random bits for every value
    lookalike = "hivenote-splice-" + "0" * 32  # text a client wrote that looks like one is left alone
    other = Splices()
    body = json.dumps([lookalike, other.string(b"x"), first, {"k": True}]).encode()
    assert json.loads(splices.apply(body))[:3] == [lookalike, json.loads(body)[1], "one"]


def test_a_body_without_its_placeholders_is_returned_as_it_was() -> None:
    splices = Splices()
    splices.string(b"never used")
    body = bytes(Response(b'{"error":"Session terminated"}').body)
    assert splices.apply(body) == body
