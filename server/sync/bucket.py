"""The S3-compatible bucket as sync uses it: one boto3 client (the `hivenote[s3]` extra, credentials from boto3's
standard chain), the few calls the layout in s3.py needs, conditional writes, and failures turned into errors that
say what to do (credentials, missing bucket, unreachable endpoint)."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

from ..core.errors import HivenoteError
from ..core.hlc import date_offset, wall_ms
from ..core.model import MAX_LINE_BYTES
from ..settings import Settings


class BucketError(HivenoteError):
    """The bucket could not be used (network, credentials, missing bucket); nothing changed, retried later."""

    code = "sync_s3"


class BucketUnreachable(BucketError):
    """The bucket did not answer (refused, timed out, the connection dropped): retried within seconds."""


class BucketConflict(BucketError):
    """The bucket holds objects under this node's name that it did not write; nothing was overwritten."""


class BadObject(BucketError):
    """An object under another node's name that is not what this layout puts there; reported, left alone."""


MAX_OBJECT_BYTES = (8 << 20) + MAX_LINE_BYTES  # a chunk (s3.CHUNK_BYTES, at least one line): no object is bigger
MAX_LISTED = 100_000  # objects (or folders) taken from one listing


class Bucket:
    """The few S3 calls sync needs, over one boto3 client; failures become BucketError saying what to do."""

    def __init__(self, settings: Settings) -> None:
        try:
            import boto3
            import botocore.exceptions
            from botocore.config import Config
        except ImportError:
            raise BucketError("S3 sync needs boto3: install it with `pip install 'hivenote[s3]'`") from None
        self.exc = botocore.exceptions
        self.name, self.endpoint = settings.s3_bucket, settings.s3_endpoint or "AWS S3"
        self.root = settings.s3_prefix.strip("/") + "/" if settings.s3_prefix.strip("/") else ""
        self.clock_offset_ms: int | None = None  # the bucket's clock minus ours, from its last answer's Date
        config = Config(
            s3={"addressing_style": "path"} if settings.s3_endpoint else {},
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=30,
        )
        try:
            self.client = boto3.session.Session().client(
                "s3", endpoint_url=settings.s3_endpoint or None, region_name=settings.s3_region or None, config=config
            )
        except (self.exc.BotoCoreError, ValueError) as exc:
            raise BucketError(self.explain(exc, "setup")) from None

    def close(self) -> None:
        self.client.close()

    def explain(self, exc: Exception, action: str) -> str:
        where = f"bucket {self.name!r} at {self.endpoint}"
        code = str(_response(exc).get("Error", {}).get("Code", ""))
        if isinstance(exc, self.exc.NoCredentialsError | self.exc.PartialCredentialsError | self.exc.ProfileNotFound):
            return f"no usable S3 credentials ({exc}); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        if code == "NoSuchBucket" or (action == "head_bucket" and code == "404"):
            return f"{where} does not exist; create it first, or check the name, --endpoint and --region"
        if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"):
            return f"the S3 credentials were refused for {where} ({code}); check the keys and their permissions"
        if isinstance(exc, self.exc.ConnectionError | self.exc.HTTPClientError):
            return f"cannot reach {self.endpoint} ({exc}); check the network and the endpoint URL"
        return f"S3 {action} on {where} failed: {exc}"

    def call(self, action: str, *, ok: tuple[int, ...] = (), **params: Any) -> Any:
        """client.<action>(Bucket=..., **params); an HTTP status in `ok` returns None instead of raising. Each answer's
        `Date` says how far the bucket's clock is from ours (`clock_offset_ms`)."""
        sent = wall_ms()
        try:
            result = getattr(self.client, action)(Bucket=self.name, **params)
            self._clock(result, sent)
            return result
        except (self.exc.BotoCoreError, self.exc.ClientError) as exc:
            answer = _response(exc)
            self._clock(answer, sent)
            if answer.get("ResponseMetadata", {}).get("HTTPStatusCode") in ok:
                return None
            if isinstance(exc, self.exc.ConnectionError | self.exc.HTTPClientError):
                raise BucketUnreachable(self.explain(exc, action)) from None
            raise BucketError(self.explain(exc, action)) from None

    def _clock(self, answer: Any, sent: int) -> None:
        with contextlib.suppress(AttributeError, TypeError):
            date = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
            offset = date_offset(date, sent, wall_ms())
            if offset is not None:
                self.clock_offset_ms = offset

    def put(self, key: str, body: bytes, etag: str = "") -> str | None:
        """Create `key`, or replace it if it still has `etag`: the new ETag, or None when the condition failed."""
        condition: dict[str, Any] = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        done = self.call("put_object", ok=(404, 412), Key=key, Body=body, **condition)
        return None if done is None else str(done["ETag"])

    def get(self, key: str, cap: int = MAX_OBJECT_BYTES) -> tuple[bytes, str] | None:
        """An object's bytes and ETag (None when missing), read as they come and never past `cap`: a bigger object is
        not one this layout writes (BadObject), and is never held whole."""
        got = self.call("get_object", ok=(404,), Key=key)
        if got is None:
            return None
        with contextlib.closing(got["Body"]) as body:
            data = body.read(cap + 1)
        if len(data) > cap:
            raise BadObject(f"{key} is over {cap} bytes, more than any object sync writes; left alone")
        return data, str(got["ETag"])

    def listing(self, prefix: str, after: str = "", folders: bool = False) -> list[tuple[str, int, str]]:
        """(key, size, ETag) of the objects under `prefix` after key `after`; with `folders`, the sub-prefixes."""
        params: dict[str, Any] = {"Prefix": prefix, **({"StartAfter": after} if after else {})}
        params |= {"Delimiter": "/"} if folders else {}
        found: list[tuple[str, int, str]] = []
        while True:
            page = self.call("list_objects_v2", **params)
            if folders:
                found += [(p["Prefix"], 0, "") for p in page.get("CommonPrefixes", [])]
            else:
                found += [(o["Key"], int(o["Size"]), str(o["ETag"])) for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return found
            if len(found) >= MAX_LISTED:
                raise BadObject(f"over {MAX_LISTED} objects under {prefix}: more than sync writes; left alone")
            params["ContinuationToken"] = page["NextContinuationToken"]

    def check(self) -> None:
        """Raise BucketError unless the bucket exists, can be written and honours If-None-Match (probe removed)."""
        self.call("head_bucket")
        probe = f"{self.root}.hivenote-probe-{secrets.token_hex(6)}"
        try:
            if self.put(probe, b"probe\n") is None or self.put(probe, b"again\n") is not None:
                raise BucketError(
                    f"{self.endpoint} does not honour conditional writes (If-None-Match: *), which keep machines "
                    "from overwriting each other; use a service that does (AWS S3, R2, recent MinIO)"
                )
        finally:
            self.call("delete_object", ok=(404,), Key=probe)

    def delete(self, keys: list[str]) -> None:
        for at in range(0, len(keys), 1000):
            self.call("delete_objects", Delete={"Objects": [{"Key": k} for k in keys[at : at + 1000]], "Quiet": True})


def _response(exc: Exception) -> dict[str, Any]:
    """The answer a botocore error carries: none for a connection that dropped or was refused (botocore sets
    `response` to None on some of those, and has no attribute on others)."""
    answer = getattr(exc, "response", None)
    return answer if isinstance(answer, dict) else {}
