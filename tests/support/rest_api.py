"""An HTTP client for the REST API that checks every answer against the OpenAPI document the server serves (status
documented for the operation, body valid for its schema) and remembers which operations answered with a success."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2
import jsonschema

from hivenote.server import __version__
from hivenote.server.web.rest import ENDPOINTS
from hivenote.server.web.rest_schema import openapi_document
from tests.support.live import Running

DOC = openapi_document(ENDPOINTS, __version__)
DASHBOARD = "hivenote-dashboard/0.3.0"
NO_BODY = object()


@dataclass
class Reply:
    status: int
    headers: httpx2.Headers
    body: Any


class Api:
    """An HTTP client that checks every answer against the served OpenAPI document and remembers which
    operations answered with a success."""

    def __init__(self, running: Running, token: str | None = None, client: str | None = DASHBOARD) -> None:
        headers = {"Authorization": f"Bearer {running.token if token is None else token}"} if token != "" else {}
        if client:
            headers["X-Hivenote-Client"] = client
        self.http = httpx2.Client(base_url=running.url, headers=headers, timeout=30)
        self.succeeded: set[tuple[str, str]] = set()

    def close(self) -> None:
        self.http.close()

    def __call__(
        self,
        method: str,
        template: str,
        body: Any = NO_BODY,
        *,
        expect: int | None = None,
        params: dict[str, str] | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        **path: str,
    ) -> Reply:
        url = template.format(**{k: quote(v, safe="") for k, v in path.items()})
        if body is not NO_BODY:
            content = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        response = self.http.request(method, url, content=content, params=params, headers=headers)
        media = response.headers.get("content-type", "").split(";")[0]
        data = response.json() if media == "application/json" else response.text
        reply = Reply(response.status_code, response.headers, data)
        if expect is not None:
            assert reply.status == expect, (reply.status, reply.body)
        self.conforms(method, template, reply, media)
        return reply

    def conforms(self, method: str, template: str, reply: Reply, media: str) -> None:
        documented = DOC["paths"][template][method.lower()]["responses"]
        assert str(reply.status) in documented, f"{method} {template} answered {reply.status}, not documented"
        answer = documented[str(reply.status)]
        if "$ref" in answer:
            answer = DOC["components"]["responses"][answer["$ref"].rsplit("/", 1)[1]]
        schema = answer["content"][media]["schema"]
        jsonschema.Draft202012Validator({**schema, "components": DOC["components"]}).validate(reply.body)
        if reply.status < 300:
            self.succeeded.add((method, template))
