"""Sync through an S3-compatible bucket (AWS S3, Cloudflare R2, MinIO, ...) with boto3, the `hivenote[s3]` extra.
Credentials come from boto3's standard chain (environment, AWS config and profiles); the calls are in bucket.py.

Layout under `<prefix>/`, each node writing only under its own name:
    <node>/HEAD                              {"v": 1, "node", "generation"}: the node's current generation;
                                             created with If-None-Match: *, replaced only with If-Match
    <node>/<generation>/<offset:015d>.jsonl  complete lines of the shard from byte <offset> of that generation;
                                             immutable (If-None-Match: *), contiguous
A generation (`<number:06d>-<random hex>`) is one version of the shard: the first upload, then one per compaction.
Up: new lines of the own shard go up as the next chunk (a 412 is fine only if the object holds the same bytes). A
shard that no longer continues what was sent (compacted) goes up whole as a new generation, then HEAD is swapped
with If-Match on the ETag this node wrote; a 412 there means another process writes as this node: reported, never
overwritten. Older generations are deleted after the swap.
Down: per node, one listing after the last key applied. A new HEAD ETag naming a new generation: the generation is
fetched whole, chunk by chunk to a spool file, never to memory (appended if the replica is a prefix of it, else
`Replicas.settle_copy`); new chunks are appended at
their offset. Progress is kept in `<data dir>/sync/s3-state.json`, so restarts stay incremental. While the bucket
cannot be reached the shard itself is the queue: failures are reported and retried with backoff.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

from ..core.errors import InvalidInput
from ..core.model import MAX_LINE_BYTES
from ..settings import Settings, load_settings, save_setting
from ..storage.files import private_dir
from ..storage.identity import previous_nodes
from ..storage.layout import Layout
from ..storage.shards import hash_range
from ..storage.statefile import write_json
from .bucket import BadObject, Bucket, BucketConflict, BucketError, BucketUnreachable
from .replica import Replicas, SyncRefused, check_node_name, classify_lines, lines_of, pieces, same_bytes

if TYPE_CHECKING:
    from ..storage.store import Store
    from ..web.services import Services

__all__ = ["BucketConflict", "BucketError", "BucketSync", "after_compaction", "configure", "run"]

log = logging.getLogger(__name__)

NAME = KIND = "s3"
CHUNK_BYTES = 8 << 20  # most bytes in one chunk object (a big first upload becomes several)
TICK_S = 0.25  # how often the own shard is looked at (locally; the bucket is contacted only when it changed)
POLL_S = 2.0  # how often the bucket is listed for other nodes' chunks (settings.extra["s3_poll_s"])
BACKOFF_MAX_S = 60.0  # longest wait between attempts while failing (settings.extra["s3_backoff_max_s"])
UNREACHABLE_BACKOFF_S = 4.0  # longest wait while the bucket does not answer (one cheap request an attempt)
TAIL = 1 << 16  # bytes read back from a shard's end to find its last seq
HEAD_BYTES = 1 << 16  # a HEAD object is a few dozen bytes of JSON; a bigger one is not ours
GENERATION = re.compile(r"^(\d{6})-[0-9a-f]{8}$")
CHUNK = re.compile(r"^(\d{15})\.jsonl$")
MAX_GENERATION_BYTES = 1 << 30  # a generation is fetched whole (to disk, never to memory); a bigger one is not taken


def _last_seq(data: bytes) -> int:
    """The seq of the last readable line of `data` (0 when none)."""
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        with contextlib.suppress(ValueError, AttributeError, RecursionError):
            seq = json.loads(data[start:end]).get("seq")
            if isinstance(seq, int):
                return seq
        end = start
    return 0


class BucketSync:
    """One data dir's exchange with the bucket. Blocking: the server runs `step()` in a worker thread."""

    def __init__(self, settings: Settings, replicas: Replicas, bucket: Bucket) -> None:
        self.replicas, self.bucket, self.data_dir = replicas, bucket, settings.data_dir
        self.path = Layout(settings.data_dir).sync / "s3-state.json"
        self.target = f"{settings.s3_endpoint}|{settings.s3_bucket}|{bucket.root}"
        self.state = self._load()
        self.blocked = ""  # why uploads stopped (another writer claims this node); kept until restart
        self.bytes_in = self.bytes_out = 0
        self._lock = threading.Lock()
        self._branch_seen: dict[str, tuple[int, int]] = {}  # branch -> (size, mtime) when last settled with the bucket

    @property
    def node(self) -> str:
        """This install's node id now (the store moves to a new one when its own is found forked)."""
        return self.replicas.own_node

    @classmethod
    def open(cls, settings: Settings, replicas: Replicas) -> BucketSync:
        return cls(settings, replicas, Bucket(settings))

    def close(self) -> None:
        self.bucket.close()

    def _load(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError):
            state = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(state, dict) and state.get("target") == self.target and isinstance(state.get("nodes"), dict):
                return state
        return {"target": self.target, "own": self._fresh_own(), "nodes": {}}

    def _fresh_own(self) -> dict[str, Any]:
        own = {"node": self.node, "gen": "", "etag": "", "sent": 0, "tail": [0, ""], "seq": 0, "verified": False}
        return own | {"pending": None}

    def _save(self) -> None:
        """statefile's one durable, atomic write: a temp file made exclusively (never through a link at its name),
        0600, fsynced, renamed; on failure (StateFileUnwritable, an OSError) nothing changed and no temp is left."""
        private_dir(self.path.parent)
        write_json(self.path, self.state)

    def _folder(self, node: str, gen: str = "") -> str:
        return f"{self.bucket.root}{node}/{gen + '/' if gen else ''}"

    def _fetch(self, key: str) -> bytes | None:
        got = self.bucket.get(key)
        self.bytes_in += len(got[0]) if got else 0
        return got[0] if got else None

    def _read_head(self, node: str) -> tuple[str, str] | None:
        """(generation, ETag) of a node's HEAD; None while it has none."""
        key = self._folder(node) + "HEAD"
        got = self.bucket.get(key, cap=HEAD_BYTES)
        if got is None:
            return None
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            head = json.loads(got[0])
            if head["node"] == node and GENERATION.match(head["generation"]):
                return str(head["generation"]), got[1]
        raise BadObject(f"{key} is not a Hivenote HEAD of {node}; left alone")

    def _conflict(self, what: str) -> BucketConflict:
        """Another install writes to the bucket as this node: its generation is kept here beside ours as another
        history of the node (folded; the store then moves to a new node id and uploads go on under it)."""
        self.blocked = (
            f"{what}: another install writes to the bucket as node {self.node} (a copied data dir or a cloned "
            "machine). Nothing was overwritten; both histories are kept, and this machine goes on as a new node"
        )
        with contextlib.suppress(BucketError, BadObject, SyncRefused, OSError):
            head = self._read_head(self.node)
            got = self._generation(self.node, head[0]) if head else None
            if got is not None:
                with got[0] as copy:
                    self.replicas.add_branch_copy(self.node, copy)
        return BucketConflict(self.blocked)

    def report(self) -> dict[str, Any]:
        """Bytes moved since the last report and where the upload stands, for SyncStatus."""
        moved = {"bytes_in": self.bytes_in, "bytes_out": self.bytes_out}
        self.bytes_in = self.bytes_out = 0
        own = self.state["own"]
        return moved | {"generation": own["gen"], "uploaded": own["sent"], "nodes": sorted(self.state["nodes"])}

    def step(self, pull: bool) -> tuple[bool, list[str]]:
        """Upload what is new and, when `pull`, download what others added. Returns whether the bucket was contacted
        and the problems met (a conflict, refused objects); raises BucketError when the bucket cannot be used."""
        with self._lock:
            problems: list[str] = []
            try:
                contacted = self.upload()
            except BucketConflict as exc:
                contacted, problems = False, [str(exc)]
            contacted = self._upload_branches() or contacted
            return contacted or pull, problems + (self.download() if pull else [])

    def _upload_branches(self) -> bool:
        """Another history of a node kept here (`<node>~<hex>.jsonl`, named by its bytes) goes up as a shard of its own
        name: the only way the writes of an install that found its node forked reach machines that share nothing but
        the bucket. Once up, it goes up again only as a compaction of what the bucket holds (a compaction drops a
        purged note's text from every branch held here, `Store._scrub_branches`): a new generation, then HEAD swapped
        and the older one deleted, so the purged text leaves the bucket too. Returns whether the bucket was
        contacted."""
        done = self.state.setdefault("branches", [])  # names gone up once (their bytes then unknown: compared)
        sent: dict[str, str] = self.state.setdefault("branch_sent", {})  # name -> digest of what the bucket holds
        contacted = False
        for path in sorted(self.replicas.log_dir.glob("*~*.jsonl")):
            name = path.name.removesuffix(".jsonl")
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            if self._branch_seen.get(name) == (st.st_size, st.st_mtime_ns) or self.replicas.size(name) == 0:
                continue
            check_node_name(name)
            with open(self.replicas.path(name), "rb") as held:
                end = self.replicas.size(name)
                digest = _digest(held, end)
                if sent.get(name) != digest:
                    contacted = True
                    self._upload_branch(name, held, end, digest)
                    sent[name] = digest
                if name not in done:
                    done.append(name)
                self._save()
            self._branch_seen[name] = (st.st_size, st.st_mtime_ns)
        return contacted

    def _upload_branch(self, name: str, held: IO[bytes], end: int, digest: str) -> None:
        """Make the bucket hold branch `name` as the first `end` bytes of `held` (their digest `digest`): its first
        generation, or a new one when they are a compaction of the one there; anything else (the bucket's continues
        ours, or is another history) is the download side's to settle. Neither copy is held whole."""
        head = self._read_head(name)
        if head is None:
            self._put_branch(name, f"000001-{digest[:8]}", held, end, "")
            return
        got = self._generation(name, head[0])
        if got is None:
            return
        with got[0] as copy:
            there = copy.seek(0, os.SEEK_END)
            if (there == end and same_bytes(copy, held, end)) or classify_lines(
                lines_of(copy, there, strict=False), lines_of(held, end, strict=False)
            ) != "replaces":
                return
        number = int(head[0][:6]) + 1
        self._put_branch(name, f"{number:06d}-{digest[:8]}", held, end, head[1])

    def _put_pieces(self, name: str, gen: str, held: IO[bytes], end: int, start: int = 0) -> str:
        """Upload bytes `start` to `end` of `held` (complete lines of a shard held here) as the chunks of generation
        `gen` of `name`, each ending at a line's end and read as it goes up. From byte 0 (a generation named by its
        bytes' digest) an object already there is left as it is (the same bytes under the same name); from further
        on (continuing a generation someone else began) one already there is another writer's, and the upload stops
        there: the next pull settles what it holds. Returns the last chunk's key put ("" for none)."""
        last, continuing = "", start > 0
        while start < end:
            held.seek(start)
            piece = held.read(min(CHUNK_BYTES, end - start))
            if not piece:
                raise SyncRefused(f"{name}'s shard here ended before byte {end} while it went up; sent again later")
            piece = piece[: piece.rfind(b"\n") + 1] or piece
            key = f"{self._folder(name, gen)}{start:015d}.jsonl"
            if self.bucket.put(key, piece) is not None:
                self.bytes_out += len(piece)
            elif continuing:
                return last
            last, start = key, start + len(piece)
        return last

    def _put_branch(self, name: str, gen: str, held: IO[bytes], end: int, etag: str) -> None:
        """Upload generation `gen` of branch `name`, then HEAD (created, or swapped If-Match `etag`); on a swap the
        older generations are deleted. Another machine scrubbing the same branch uploads the same bytes under the
        same name: its chunks and HEAD are the ones already there."""
        self._put_pieces(name, gen, held, end)
        body = json.dumps({"v": 1, "node": name, "generation": gen}).encode()
        if self.bucket.put(self._folder(name) + "HEAD", body, etag) is None:
            head = self._read_head(name)
            if head is None or head[0] != gen:
                return  # another machine swapped it first: the next look settles ours against it
        if etag:
            keep = (self._folder(name, gen), self._folder(name) + "HEAD")
            with contextlib.suppress(BucketError):  # left for the next swap
                self.bucket.delete([k for k, _, _ in self.bucket.listing(self._folder(name)) if not k.startswith(keep)])

    # -- up -----------------------------------------------------------------------------------------

    def upload(self) -> bool:
        """Send what the own shard gained; a rewritten (compacted) one goes up as a new generation. Returns whether
        the bucket was contacted."""
        if self.state["own"].get("node", self.node) != self.node:  # a new node id: its shard starts its own history
            self.state["own"], self.blocked = self._fresh_own(), ""
            self._save()
        if self.blocked:
            raise BucketConflict(self.blocked)
        own, size = self.state["own"], self.replicas.size(self.node)
        if size == 0:  # nothing written yet, or the shard is missing here: an empty shard is never published
            return False
        if own["pending"]:  # a HEAD swap whose answer never came: did it get in?
            head = self._read_head(self.node)
            if head is not None and head[0] == own["pending"]["gen"]:
                own.update(own["pending"], etag=head[1], verified=True, pending=None)
                self._save()
                self._drop_older()
            own["pending"] = None
            self._save()
        if not own["gen"]:
            head = self._read_head(self.node)
            if head is None:
                self._publish(size)
                return True
            own.update(gen=head[0], etag=head[1])  # this node's once its chunks prove to be this shard's bytes
        if own["sent"] > size or (own["sent"] and self._hash(own["tail"][0], own["sent"]) != own["tail"][1]):
            if not own["verified"]:
                raise self._conflict(f"the bucket's generation {own['gen']} is not this machine's shard")
            self._publish(size)
            return True
        if size == own["sent"]:
            return False
        if own["verified"]:
            found = self.bucket.call("head_object", ok=(404,), Key=self._folder(self.node) + "HEAD")
            if (found is None or found["ETag"] != own["etag"]) and not self._adopt(size):
                raise self._conflict(f"the HEAD of {self.node} was changed by someone else")
            if size == own["sent"]:
                return True
        self._put_chunks(own, size)
        own["verified"] = True
        self._save()
        return True

    def _adopt(self, size: int) -> bool:
        """This node's HEAD is not the one it wrote: still ours when the bucket holds nothing of this node any more (its
        objects were deleted: the whole shard goes up again) or a generation of only this shard's bytes (a machine
        that held a copy put it back: uploads go on from its end). False: someone else's bytes (a clone)."""
        own, head = self.state["own"], self._read_head(self.node)
        if head is None:
            if self.bucket.listing(self._folder(self.node)):
                return False  # chunks without a HEAD: not a state this layout leaves; looked at as a conflict
            return self._publish_again(size)
        got = self._generation(self.node, head[0])
        if got is None:
            raise BucketError(f"generation {head[0]} of {self.node} changed while it was read; trying again")
        with got[0] as copy, open(self.replicas.path(self.node), "rb") as mine:
            there = copy.seek(0, os.SEEK_END)
            if there > size or not same_bytes(copy, mine, there):
                return False
            copy.seek(max(0, there - MAX_LINE_BYTES - 2))
            end_of = copy.read()  # its last line (no op's is longer), and what comes before it
        at = there - len(end_of)
        last = at + end_of.rfind(b"\n", 0, len(end_of) - 1) + 1 if end_of else 0
        tail = [last, hashlib.sha256(end_of[last - at :]).hexdigest()]
        own.update(gen=head[0], etag=head[1], sent=there, tail=tail, seq=_last_seq(end_of), verified=True)
        self._save()
        log.warning("generation %s of %s (put back by a machine that held it) is this shard's", head[0], self.node)
        return True

    def _publish_again(self, size: int) -> bool:
        """Nothing of this node is left in the bucket: the whole shard goes up as its next generation, named as a
        machine putting it back names it (the number after ours, the bytes' digest), so the same bytes race to the
        same objects. A holder's put-back that wins HEAD first is settled as one (`_adopt`)."""
        own = self.state["own"]
        with open(self.replicas.path(self.node), "rb") as mine:
            digest = _digest(mine, size)
        number = int(own["gen"][:6]) + 1 if own["gen"] else 1
        pending: dict[str, Any] = {"gen": f"{number:06d}-{digest[:8]}", "sent": 0}
        pending |= {"tail": [0, ""], "seq": 0}
        log.warning("the bucket no longer holds %s: this machine's shard goes up again", self.node)
        self._put_chunks(pending, size)
        body = json.dumps({"v": 1, "node": self.node, "generation": pending["gen"]}).encode()
        etag = self.bucket.put(self._folder(self.node) + "HEAD", body)
        if etag is None:
            head = self._read_head(self.node)
            if head is None or head[0] != pending["gen"]:
                with contextlib.suppress(BucketError):
                    self.bucket.delete(
                        [key for key, _, _ in self.bucket.listing(self._folder(self.node, pending["gen"]))]
                    )
                return self._adopt(size)
            etag = head[1]
        own.update(pending, etag=etag, verified=True, pending=None)
        self._save()
        return True

    def _hash(self, start: int, end: int) -> str:
        """Digest of the own shard's bytes start..end (the last line sent: a rewritten shard no longer has it)."""
        return hashlib.sha256(self.replicas.read(self.node, start, end - start)[: end - start]).hexdigest()

    def _put_chunks(self, into: dict[str, Any], end: int) -> None:
        """Upload the own shard from into["sent"] to `end` as chunks of generation into["gen"], saving progress."""
        while into["sent"] < end:
            start = into["sent"]
            data = self.replicas.read(self.node, start, CHUNK_BYTES)
            if not data:  # deleted or shortened while it went up (an empty chunk would be put, then looped on)
                raise SyncRefused(f"{self.node}'s shard here ended at byte {start} while it went up; looked at again")
            key = f"{self._folder(self.node, into['gen'])}{start:015d}.jsonl"
            if self.bucket.put(key, data) is None:  # there already: an earlier attempt whose answer was lost?
                existing = self.bucket.get(key)
                if existing is None or self.replicas.read(self.node, start, len(existing[0])) != existing[0]:
                    raise self._conflict(f"{key} holds other bytes than this machine's shard")
                data = existing[0]
            else:
                self.bytes_out += len(data)
            last = start + data.rfind(b"\n", 0, len(data) - 1) + 1
            into.update(sent=start + len(data), tail=[last, hashlib.sha256(data[last - start :]).hexdigest()])
            into["seq"] = max(into["seq"], _last_seq(data))
            self._save()

    def _publish(self, size: int) -> None:
        """Upload the whole own shard as the next generation, then swap HEAD to it (If-Match the ETag we wrote)."""
        own = self.state["own"]
        seq = _last_seq(self.replicas.read(self.node, max(0, size - TAIL)))
        if seq < own["seq"]:
            raise BucketError(
                f"this machine's shard ends at seq {seq} but the bucket already has seq {own['seq']} of {self.node}: "
                "it was restored from an older copy. It is not uploaded, so nothing in the bucket is lost"
            )
        number = int(own["gen"][:6]) + 1 if own["gen"] else 1
        pending: dict[str, Any] = {"gen": f"{number:06d}-{secrets.token_hex(4)}", "sent": 0, "tail": [0, ""], "seq": 0}
        own["pending"] = pending
        self._put_chunks(pending, size)
        body = json.dumps({"v": 1, "node": self.node, "generation": pending["gen"]}).encode()
        etag = self.bucket.put(self._folder(self.node) + "HEAD", body, own["etag"])
        if etag is None:  # 412: someone else swapped HEAD (or our own earlier attempt did)
            head = self._read_head(self.node)
            if head is None or (head[0] != pending["gen"] and self._older_copy(head[0], size)):
                # This node's objects were deleted, and nobody put them back, or a machine that held them did from a
                # copy older than this shard, which was compacted since: ours, not a clone's. Ours goes in.
                etag = self.bucket.put(self._folder(self.node) + "HEAD", body, head[1] if head else "")
                head = self._read_head(self.node) if etag is None else (pending["gen"], etag)
        if etag is None:
            if head is None or head[0] != pending["gen"]:
                self.bucket.delete([key for key, _, _ in self.bucket.listing(self._folder(self.node, pending["gen"]))])
                own["pending"] = None
                self._save()
                now = head[0] if head else "nothing"
                raise self._conflict(f"the HEAD of {self.node} changed to {now} before generation {pending['gen']}")
            etag = head[1]
        own.update(pending, etag=etag, verified=True, pending=None)
        self._save()
        self._drop_older()

    def _older_copy(self, gen: str, size: int) -> bool:
        """Whether generation `gen` of this node holds only an older copy of the own shard's first `size` bytes (a
        prefix, or the shard before a compaction ours comes from: `replica.classify_lines`), never ops of another
        writer. The very same bytes are not older: a clone that compacted the same shard publishes them (told as a
        clone)."""
        got = self._generation(self.node, gen)
        if got is None:
            return False
        with got[0] as copy, open(self.replicas.path(self.node), "rb") as mine:
            there = copy.seek(0, os.SEEK_END)
            if there == size and same_bytes(copy, mine, size):
                return False
            held, theirs = lines_of(mine, size, strict=False), lines_of(copy, there, strict=False)
            return classify_lines(held, theirs, own=True) == "behind"

    def _drop_older(self) -> None:
        """Delete this node's objects outside its current generation (older ones, failed attempts)."""
        keep = (self._folder(self.node, self.state["own"]["gen"]), self._folder(self.node) + "HEAD")
        try:  # readers still on an older generation move on when they see the new HEAD ETag
            self.bucket.delete(
                [k for k, _, _ in self.bucket.listing(self._folder(self.node)) if not k.startswith(keep)]
            )
        except BucketError as exc:
            log.info("older generations of %s stay in the bucket for now: %s", self.node, exc)

    # -- down ---------------------------------------------------------------------------------------

    def download(self) -> list[str]:
        """Fetch what other nodes added; returns the problems met (refused or malformed objects), per node."""
        problems = self._check_own()
        listed = set()
        for folder, _, _ in self.bucket.listing(self.bucket.root, folders=True):
            node = folder[len(self.bucket.root) :].rstrip("/")
            listed.add(node)
            if node != self.node:
                try:
                    check_node_name(node)
                    self._pull(node)
                except (SyncRefused, BadObject) as exc:
                    problems.append(f"{node}: {exc}")
        for node, st in sorted(self.state["nodes"].items()):
            if node not in listed and st.get("gen") and node != self.node:
                try:
                    check_node_name(node)
                    self._put_back(node, st)
                except (SyncRefused, BadObject) as exc:
                    problems.append(f"{node}: {exc}")
        for node in previous_nodes(self.data_dir):  # ops only this install holds, of a node the bucket never held
            if node in listed or node == self.node or self.state["nodes"].get(node, {}).get("gen"):
                continue
            try:
                check_node_name(node)
                fresh = {"gen": "", "etag": "", "after": "", "end": 0}
                self._put_back(node, self.state["nodes"].setdefault(node, fresh))
            except (SyncRefused, BadObject) as exc:
                problems.append(f"{node}: {exc}")
        self._save()
        return problems

    def _put_back(self, node: str, st: dict[str, Any]) -> None:
        """A node this machine pulled is gone from the bucket (its objects deleted), or one it wrote as before that the
        bucket never held (it wrote while the bucket was out of reach, then moved to a new node id): the copy held
        here goes up as its next (or first) generation, so no deletion in the bucket, and no move to a new id, loses
        what one machine still holds. The owner, writing again, takes it as its own (`_adopt`, or its first upload
        finding its own bytes there); two machines putting it back race on HEAD (If-None-Match) and the loser's
        chunks are deleted."""
        size = self.replicas.size(node)
        if size == 0:
            return
        number = int(st["gen"][:6]) + 1 if st["gen"] else 1
        with open(self.replicas.path(node), "rb") as held:
            gen = f"{number:06d}-{_digest(held, size)[:8]}"
            last = self._put_pieces(node, gen, held, size)
        body = json.dumps({"v": 1, "node": node, "generation": gen}).encode()
        etag = self.bucket.put(self._folder(node) + "HEAD", body)
        if etag is None:  # another machine put it back first (or the owner published): taken from there
            head = self._read_head(node)
            if head is None or head[0] != gen:
                with contextlib.suppress(BucketError):
                    self.bucket.delete([k for k, _, _ in self.bucket.listing(self._folder(node, gen))])
            return
        st.update(gen=gen, etag=etag, after=last, end=size)
        what = "was deleted from the bucket" if number > 1 else "(written here before) was never in the bucket"
        log.warning("%s %s: put back from the copy this machine holds (%d bytes)", node, what, size)

    def _check_own(self) -> list[str]:
        """Bytes of this node in the bucket past what this machine sent: another install (a clone of this one)
        appended them as this node. Kept here as another history (the store then moves to a new node id)."""
        own = self.state["own"]
        if not own.get("gen") or not own.get("sent") or self.blocked:
            return []
        folder = self._folder(self.node, own["gen"])
        if not self.bucket.listing(folder, f"{folder}{own['sent'] - 1:015d}.jsonl"):
            return []
        return [str(self._conflict(f"the bucket holds bytes of {self.node} past the {own['sent']} this machine sent"))]

    def _pull(self, node: str) -> None:
        st = self.state["nodes"].setdefault(node, {"gen": "", "etag": "", "after": "", "end": 0})
        before, folder = dict(st), self._folder(node)
        objects = self.bucket.listing(folder, st["after"])
        etag = next((etag for key, _, etag in objects if key == folder + "HEAD"), None)
        head = self._read_head(node) if etag is not None and etag != st["etag"] else None
        if head is not None and head[0] != st["gen"]:
            self._fetch_generation(node, st, head[0])
        elif st["gen"]:
            for key, size, _ in objects:
                gen, _, name = key[len(folder) :].partition("/")
                match = CHUNK.match(name)
                if gen != st["gen"] or not match:
                    continue
                if int(match[1]) != st["end"] or not self._merge(node, st["end"], self._fetch(key)):
                    self._fetch_generation(node, st, st["gen"])  # something in between went missing: start over
                    break
                st.update(after=key, end=st["end"] + size)
        if head is not None:
            st["etag"] = head[1]
        if st != before:
            self._save()

    def _merge(self, node: str, offset: int, data: bytes | None) -> bool:
        """Append what `data` (bytes from `offset` of the node's shard) adds to the replica; False when the replica
        does not line up with it (a gap, another generation, a chunk gone)."""
        held = self.replicas.size(node)
        if data is None or held < offset:
            return False
        have = self.replicas.read(node, offset, len(data))[: len(data)] if held > offset else b""
        if have != data[: len(have)]:
            return False
        if held < offset + len(data):
            self.replicas.append(node, data[held - offset :], held)
        return True

    def _generation(self, node: str, gen: str) -> tuple[IO[bytes], str] | None:
        """A whole generation, written chunk by chunk to a spool file (`Replicas.spool`, returned open: the caller
        closes it), and its last chunk's key; None when a chunk went away (a newer one is coming). Never held in
        memory; one over MAX_GENERATION_BYTES is not taken (BadObject)."""
        folder, end, last = self._folder(node, gen), 0, ""
        copy = self.replicas.spool()
        try:
            for key, size, _ in self.bucket.listing(folder):
                match = CHUNK.match(key[len(folder) :])
                if not match:
                    continue
                if int(match[1]) != end:
                    raise BadObject(f"{key} does not continue generation {gen}; retrying")
                if end + size > MAX_GENERATION_BYTES:
                    raise BadObject(
                        f"generation {gen} of {node} is over {MAX_GENERATION_BYTES} bytes, more than sync takes whole; "
                        "left alone"
                    )
                data = self._fetch(key)
                if data is None:
                    copy.close()
                    return None
                copy.write(data)
                end, last = end + len(data), key
        except BaseException:
            copy.close()
            raise
        return copy, last

    def _merge_copy(self, node: str, copy: IO[bytes], end: int) -> bool:
        """`_merge` from byte 0 for a whole generation in a spool file: compared and appended a piece at a time."""
        held = self.replicas.size(node)
        if held:
            with open(self.replicas.path(node), "rb") as mine:
                if not same_bytes(copy, mine, min(held, end)):
                    return False
        at = held
        for piece in pieces(copy, end, start=held) if held < end else ():
            written = self.replicas.append(node, piece, at)
            at += written
            if written < len(piece):
                break  # damage: the rest is refused by the next append, saying so
        return True

    def _fetch_generation(self, node: str, st: dict[str, Any], gen: str) -> None:
        """Download a whole generation and make the replica hold it (a continuation, or a replacement); to disk, a
        piece at a time, never whole in memory."""
        got = self._generation(node, gen)
        if got is None:
            return
        with contextlib.ExitStack() as stack:
            copy, last = stack.enter_context(got[0]), got[1]
            end = copy.seek(0, os.SEEK_END)
            # A node this install wrote as before (it moved to a new id: a fork, a lost shard, a copied data dir) may
            # hold ops here the bucket lacks (written while the bucket was out of reach). When the generation is a
            # strict prefix of the copy held, that is one history ahead of the bucket: the rest goes up as the chunks
            # that continue the generation (the owner, if it lives, finds its own bytes there; if it wrote there first,
            # its chunk stays and the next pull settles ours against it). Only a copy that is another history (two
            # different ops at one position) is kept as a branch. A copy held that the generation covers (an older
            # copy, or the shard before the owner compacted it) holds nothing to send: kept as a branch, it kept a
            # purged note's text in every machine and the bucket (#32).
            mine: IO[bytes] | None = None
            if node in previous_nodes(self.data_dir) and (held := self.replicas.size(node)):
                mine = stack.enter_context(self.replicas.spool())
                with open(self.replicas.path(node), "rb") as source:
                    for piece in pieces(source, held, strict=False):
                        mine.write(piece)
            try:
                if not self._merge_copy(node, copy, end) and self.replicas.settle_copy(node, copy) != "replaced":
                    end = -1  # behind ours, or another history kept as a branch: looked at again when it grows
            except SyncRefused:  # damage in it: reported once, and looked at again when it grows (never re-read)
                st.update(gen=gen, after=last, end=-1)
                raise
            if mine is not None:
                size, there = mine.seek(0, os.SEEK_END), copy.seek(0, os.SEEK_END)
                if there < size and same_bytes(copy, mine, there):
                    if self._put_pieces(node, gen, mine, size, start=there):
                        log.warning("%s: ops this install held that the bucket lacked went up (bytes %d-%d of %s)",
                                    node, there, size, gen)  # fmt: skip
                elif not (size <= there and same_bytes(copy, mine, size)) and (
                    classify_lines(lines_of(copy, None, strict=False), lines_of(mine, size, strict=False)) != "behind"
                ):
                    self.replicas.add_branch_copy(node, mine)
            st.update(gen=gen, after=last, end=end)


def _digest(fh: IO[bytes], end: int) -> str:
    """SHA-256 (hex) of an open file's first `end` bytes, read a piece at a time."""
    h = hashlib.sha256()
    hash_range(h, fh, 0, end)
    return str(h.hexdigest())


async def run(services: Services) -> None:
    """Sync with the configured bucket until cancelled; each exchange is reported to services.sync."""
    settings, status = services.settings, services.sync
    poll = float(settings.extra.get("s3_poll_s", POLL_S))
    backoff_max = float(settings.extra.get("s3_backoff_max_s", BACKOFF_MAX_S))
    target = f"s3://{settings.s3_bucket}/{settings.s3_prefix.strip('/')}"
    sync: BucketSync | None = None
    delay, next_pull, said, unreachable = 0.0, 0.0, "", False
    try:
        while True:
            try:
                if sync is None:
                    sync = await anyio.to_thread.run_sync(BucketSync.open, settings, services.replicas)
                pull = time.monotonic() >= next_pull
                contacted, problems = await anyio.to_thread.run_sync(sync.step, pull)
                if sync.bucket.clock_offset_ms is not None:
                    services.store.clock.note_offset("bucket", sync.bucket.clock_offset_ms)
                next_pull = time.monotonic() + poll if pull else next_pull
                if problems:
                    status.failed(NAME, "; ".join(problems), kind=KIND, target=target)
                elif contacted:
                    status.ok(NAME, kind=KIND, target=target, **sync.report())
                if said:
                    log.warning("S3 sync works again")
                delay, said, unreachable = 0.0, "", False
            except BucketError as exc:
                status.failed(NAME, f"{exc} (changes are kept here and sent once it works)", kind=KIND, target=target)
                if str(exc) != said:  # one line per new failure (a timeline in the log), not one per attempt
                    log.warning("S3 sync: %s", exc)
                outage = isinstance(exc, BucketUnreachable)
                # An outage's waits (doubling up to UNREACHABLE_BACKOFF_S) are not carried into the first error met
                # once the bucket answers again: that one starts its own doubling at 1 s.
                delay = min(backoff_max, max(1.0, (delay if outage or not unreachable else 0.0) * 2))
                if outage:  # a network outage: tried again within seconds of its end
                    delay = min(delay, UNREACHABLE_BACKOFF_S)
                said, unreachable = str(exc), outage
            except (OSError, SyncRefused) as exc:
                # A shard deleted, shortened or replaced while it was read (a person, a sync tool, a restore), or a
                # disk error: one line saying what, tried again within seconds (the next look reads it afresh).
                what = f"a shard changed or could not be read while syncing ({exc}); trying again"
                if what != said:
                    log.warning("S3 sync: %s", what)
                said, unreachable = what, False
                status.failed(NAME, what, kind=KIND, target=target)
                delay = min(UNREACHABLE_BACKOFF_S, max(1.0, delay * 2))
            except Exception as exc:  # a programming error: keep trying, and say so
                log.exception("S3 sync failed")
                status.failed(NAME, f"unexpected error: {exc!r}", kind=KIND, target=target)
                delay = backoff_max
            await anyio.sleep(delay or min(TICK_S, poll))
    finally:
        services.store.clock.forget_offset("bucket")  # a bucket no longer asked measures this clock no more
        if sync is not None:
            sync.close()


def after_compaction(settings: Settings, store: Store) -> str:
    """Publish the just-compacted own shard as a new generation (for `hivenote compact`, which runs while no server
    does; a running server notices a rewritten shard by itself). Raises BucketError, or BucketConflict when another
    writer claims this node; either way the compacted shard stays here and goes up with the next sync."""
    with contextlib.closing(
        BucketSync.open(settings, Replicas(store.log_dir, store.node, Layout(store.data_dir).cache))
    ) as sync:
        sync.upload()
        own = sync.state["own"]
    return f"The bucket now holds generation {own['gen']} of {store.node} ({own['sent']} bytes)."


def configure(
    data_dir: Path, bucket: str, *, endpoint: str | None = None, prefix: str | None = None, region: str | None = None
) -> str:
    """`hivenote sync s3 <bucket> [--endpoint URL] [--prefix P] [--region R]` (None keeps the saved value): checks
    with the standard AWS credentials that the bucket is reachable, writable and honours conditional writes, then
    saves the settings. Raises InvalidInput or BucketError (saying what failed), saving nothing."""
    current = load_settings(environ={}, data_dir=data_dir)
    endpoint = current.s3_endpoint if endpoint is None else endpoint.strip()
    prefix = current.s3_prefix if prefix is None else prefix.strip().strip("/")
    region = current.s3_region if region is None else region.strip()
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$", bucket):
        raise InvalidInput(f"{bucket!r} is not a bucket name (letters, digits, '.', '_', '-'; 2 to 255)")
    if endpoint and not re.match(r"^https?://[^\s/]+(/\S*)?$", endpoint):
        raise InvalidInput(f"endpoint {endpoint!r} must be a URL like https://<account>.r2.cloudflarestorage.com")
    if ".." in prefix or not re.match(r"^[\w./-]*$", prefix):
        raise InvalidInput(f"prefix {prefix!r} may hold letters, digits, '.', '_', '-' and '/'")
    values: dict[str, Any] = {"s3_endpoint": endpoint, "s3_prefix": prefix, "s3_region": region, "s3_bucket": bucket}
    with contextlib.closing(Bucket(replace(current, **values))) as target:
        target.check()
    for name, value in values.items():  # the bucket last: sync starts only once the rest is in place
        save_setting(data_dir, name, value if value or name == "s3_prefix" else None)
    return f"Syncing through s3://{bucket}/{prefix} at {endpoint or 'AWS S3'} from the next start of Hivenote."
