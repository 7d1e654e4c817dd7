"""Settings, read once at start-up: command-line flags > environment (`HIVENOTE_*`) > `<data dir>/settings.json`
> defaults, then passed down (no module-level state)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from .core.errors import InvalidInput
from .storage import statefile
from .storage.identity import make_data_dir
from .storage.layout import Layout

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7788  # fixed, so connect snippets pasted into agents' configs stay valid
DEFAULT_MAX_BODY_BYTES = 1 << 20  # a request body past this is refused (413), unless `max_body_bytes` says otherwise
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("hivenote", appauthor=False))


def resolve_data_dir(flag: str | None, environ: Mapping[str, str] = os.environ) -> Path:
    if flag:
        return Path(flag).expanduser()
    env = environ.get("HIVENOTE_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return default_data_dir()


def lan_addresses() -> list[str]:
    """This machine's IPv4 addresses that others on the network may reach, primary first (best effort; nothing is
    sent: connecting a UDP socket only picks the outgoing interface)."""
    found: list[str] = []
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.254.254.254", 1))
        found.append(probe.getsockname()[0])
    with contextlib.suppress(OSError):
        found += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    return [a for a in dict.fromkeys(found) if not is_loopback(a) and a != "0.0.0.0"]


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*\.?")


def is_host(value: str) -> bool:
    """An IP address or a DNS host name (what can be listened on, or sent as a Host header)."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return len(value) <= 253 and _HOST_NAME.fullmatch(value) is not None
    return True


@dataclass(frozen=True)
class Settings:
    """Everything the server needs to know, as data (see SETTINGS_HELP for what each one means)."""

    data_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    auth: bool = True
    graph_extras: bool = False
    meaning: bool = True  # meaning search, where its optional dependency is installed (hivenote[meaning])
    model_dir: str = ""  # "" = the sentence model from its package, or downloaded; else a folder holding its files
    model_download: bool = True  # fetch the sentence model from the Hugging Face Hub once when it is not here
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_import_bytes: int = 64 << 20
    log_dir: str = ""  # "" = <data dir>/log; a synced folder (Syncthing, Dropbox, ...) to share it
    s3_bucket: str = ""  # "" = no bucket sync
    s3_endpoint: str = ""  # "" = AWS; e.g. https://<account>.r2.cloudflarestorage.com or http://127.0.0.1:9000
    s3_prefix: str = "hivenote"
    s3_region: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def log_path(self) -> Path:
        """The folder of shards: log_dir when set (a synced folder), else <data dir>/log."""
        return Path(self.log_dir).expanduser() if self.log_dir else Layout(self.data_dir).log

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    @property
    def share_urls(self) -> list[str]:
        """Where other machines reach this Hivenote: none on loopback; this machine's LAN addresses when listening
        on every interface."""
        if self.loopback:
            return []
        hosts = lan_addresses() if self.host in ("0.0.0.0", "::") else [self.host]
        return [f"http://{f'[{h}]' if ':' in h else h}:{self.port}/" for h in hosts]

    @property
    def settings_path(self) -> Path:
        return Layout(self.data_dir).settings

    def check(self) -> None:
        """Refuse what would be unsafe or cannot work, saying what to do instead."""
        if not is_host(self.host):
            raise InvalidInput(f"host must be an IP address or a host name, like 127.0.0.1 (got {self.host!r})")
        for name in self.allowed_hosts:
            if not is_host(name):
                raise InvalidInput(f"allowed_hosts holds {name!r}: not a host name; list names like myhost.local")
        if not 1 <= self.port <= 65535:
            raise InvalidInput(f"port must be between 1 and 65535 (got {self.port})")
        if self.max_body_bytes < 128 << 10:
            raise InvalidInput(f"max_body_bytes must be at least {128 << 10} (a note alone may be 64 KiB)")
        if self.max_import_bytes < self.max_body_bytes:
            raise InvalidInput("max_import_bytes must be at least max_body_bytes")
        if self.model_dir and not Path(self.model_dir).expanduser().is_absolute():
            raise InvalidInput(f"model_dir must be an absolute path (got {self.model_dir!r})")
        if self.log_dir and not Path(self.log_dir).expanduser().is_absolute():
            raise InvalidInput(f"log_dir must be an absolute path (got {self.log_dir!r})")
        if not self.auth and not self.loopback:
            raise InvalidInput(
                f"--no-auth is only allowed on a loopback address; {self.host} is reachable from other machines. "
                "Keep auth on and give teammates a token (`hivenote token add <name>`)."
            )


SYNC_SETTINGS = frozenset({"log_dir", "s3_bucket", "s3_endpoint", "s3_prefix", "s3_region"})
SETTINGS_HELP = {
    "host": "address to listen on; 127.0.0.1 (default) keeps the notebook on this machine",
    "port": f"TCP port (default {DEFAULT_PORT})",
    "auth": "require a bearer token (only loopback may turn it off)",
    "graph_extras": "offer limit/offset/namesOnly on the MCP graph tools (off keeps the official tool list)",
    "meaning": "search by meaning too (needs the optional hivenote[meaning] packages; off: words only)",
    "model_dir": "a folder holding the sentence model's files (a copy of sentence-transformers/all-MiniLM-L6-v2)",
    "model_download": "download the sentence model (~91 MB) from the Hugging Face Hub once when it is not installed",
    "allowed_hosts": "extra Host names accepted when listening beyond loopback (e.g. a Tailscale name)",
    "max_body_bytes": "largest request body accepted (413 beyond)",
    "max_import_bytes": "largest file accepted by the import endpoint",
    "log_dir": "folder of op-log shards; point it at a synced folder to share the notebook (hivenote sync folder)",
    "s3_bucket": "S3-compatible bucket to sync through (credentials come from the AWS environment/config)",
    "s3_endpoint": "S3 endpoint URL for non-AWS services (R2, MinIO, ...)",
    "s3_prefix": "key prefix inside the bucket",
    "s3_region": "bucket region (default: from the AWS config)",
}


SETTINGS_FIX = "fix or delete the file"


def _read_file(path: Path) -> dict[str, Any]:
    raw: dict[str, Any] | None = statefile.read_json(path, SETTINGS_FIX)
    return {} if raw is None else raw


def _coerce(name: str, value: Any) -> Any:
    kinds = {f.name: f.type for f in fields(Settings)}
    kind = kinds.get(name)
    try:
        if kind == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if kind == "bool":
            if isinstance(value, str):
                if value.lower() in ("1", "true", "yes", "on"):
                    return True
                if value.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError(value)
            return bool(value)
        if kind == "tuple[str, ...]":
            return tuple(v for v in (value.split(",") if isinstance(value, str) else value) if v)
    except (TypeError, ValueError):
        raise InvalidInput(f"setting {name!r} has an invalid value {value!r}") from None
    return value


def load_settings(
    flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] = os.environ, *, data_dir: Path | None = None
) -> Settings:
    """Flags (only those given, i.e. not None) > HIVENOTE_* environment > settings.json > defaults."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    directory = data_dir or resolve_data_dir(flags.pop("data_dir", None), environ)
    known = {f.name for f in fields(Settings)} - {"data_dir", "extra"}
    values: dict[str, Any] = {}
    for name, value in _read_file(Layout(directory).settings).items():
        if name in known:
            values[name] = _coerce(name, value)
    for name in known:
        env = environ.get(f"HIVENOTE_{name.upper()}")
        if env is not None:
            values[name] = _coerce(name, env)
    for name, value in flags.items():
        if name in known:
            values[name] = _coerce(name, value)
    settings = replace(Settings(data_dir=directory), **values)
    settings.check()
    return settings


def save_settings(data_dir: Path, changes: Mapping[str, Any]) -> tuple[dict[str, Any], Settings]:
    """The one writer of settings.json (the CLI, the dashboard, the tray, sync set-up): merge `changes` into the file
    (None removes a value, back to its default) under the file's lock, check the result exactly as a start would,
    then replace the file atomically. Returns what the file now holds and the settings it gives (environment aside).
    An invalid value raises InvalidInput, a damaged file StateFileCorrupt, a failed write StateFileUnwritable; in
    each case the file is left as it was."""
    known = {f.name for f in fields(Settings)} - {"data_dir", "extra"}
    unknown = sorted(name for name in changes if name not in known)
    if unknown:
        raise InvalidInput(f"unknown setting {unknown[0]!r}; known settings: {', '.join(sorted(known))}")
    path = Layout(data_dir).settings
    make_data_dir(data_dir)
    with statefile.locked(path):
        values = _read_file(path)
        for name, value in changes.items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
        upcoming = replace(Settings(data_dir=data_dir), **{k: _coerce(k, v) for k, v in values.items() if k in known})
        upcoming.check()
        statefile.write_json(path, values, sort_keys=True)
    return values, upcoming


def save_setting(data_dir: Path, name: str, value: Any) -> None:
    """Set one value in settings.json (None removes it), keeping the others (see save_settings). Every failure,
    a write the disk refused included, raises InvalidInput saying why; the file is left as it was."""
    try:
        save_settings(data_dir, {name: value})
    except statefile.StateFileUnwritable as exc:
        raise InvalidInput(str(exc)) from None
