"""Connecting an agent for the person: Hivenote's entry put into a client's own config, and what is on this machine.

Each client its own way, as its documentation says: Claude Code, Gemini CLI and Codex by their own command (`claude mcp
add`, `gemini mcp add`, `codex mcp add`; an entry already there is replaced, not doubled); clients configured by a
JSON file (Cursor, Claude Desktop, VS Code, Windsurf, Zed, Cline, opencode, Junie; Gemini CLI without its command) by
merging the snippet's entry into the file: every other entry kept, the file's indent kept, a backup beside it, written
whole in one step. A file that does not parse (comments, a typo) is left alone and the person is told. Continue (YAML),
a project's .mcp.json and the mcp-remote variant keep the copy-and-paste snippet. `plan` says what will change (a diff
or a command) without changing anything; `apply` makes that change. `agents` says which clients are installed here
(their config folder or their command) and which already name this Hivenote.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .connect import CLIENTS, TOKEN_ENV, snippet
from .core.errors import InvalidInput
from .storage.files import PRIVATE_FILE, write_whole

ENTRY = "hivenote"
BACKUP_SUFFIX = ".hivenote-backup"  # the file as it was before Hivenote's last change, beside it
RUN_TIMEOUT_S = 120.0
Way = Literal["command", "file", "none"]
# The client's command: run to connect (claude, gemini, codex), or only a sign that it is installed.
COMMANDS = {
    "claude-code": "claude",
    "gemini-cli": "gemini",
    "codex": "codex",
    "cursor": "cursor",
    "vscode": "code",
    "windsurf": "windsurf",
    "zed": "zed",
    "opencode": "opencode",
}
RUN_BY_COMMAND = ("claude-code", "gemini-cli", "codex")
# No way to install for these: the snippet is the way, and why.
SNIPPET_ONLY = {
    "continue": "Continue keeps its servers in YAML (~/.continue/config.yaml), which Hivenote does not edit: copy the "
    "snippet into it.",
    "claude-code-json": "A project's .mcp.json belongs to that project: copy the snippet into the project's root.",
    "claude-desktop-remote": "Connect Claude Desktop (it needs no Node.js); this variant is for copying by hand.",
}


@dataclass(frozen=True)
class Plan:
    """What connecting `client` will do, before it is done."""

    client: str
    title: str
    way: Way
    summary: str  # one sentence: what will change, or why nothing can
    update: bool = False  # an entry named hivenote is there already: it is replaced
    connected: bool = False  # the config names this Hivenote already
    path: str = ""  # the file changed (way == "file")
    diff: str = ""  # the change, as a unified diff (way == "file")
    commands: tuple[tuple[str, ...], ...] = ()  # run in order (way == "command")
    shown: tuple[str, ...] = ()  # the commands as shown (the token shortened)
    link: str = ""  # the client's own install link, another way to the same entry (Cursor, VS Code)
    next: str = ""  # what the person does after it (restart the client, set a variable)
    old: str | None = field(default=None, repr=False)  # the file's text when planned (None: no file)
    new: str = field(default="", repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "title": self.title,
            "way": self.way,
            "summary": self.summary,
            "update": self.update,
            "connected": self.connected,
            "path": self.path,
            "diff": self.diff,
            "commands": list(self.shown),
            "link": self.link,
            "next": self.next,
        }


@dataclass(frozen=True)
class Applied:
    ok: bool
    message: str  # what happened and what to do next
    output: str = ""  # the client command's own output

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "message": self.message, "output": self.output}


@dataclass(frozen=True)
class Agent:
    client: str
    title: str
    installed: bool
    connected: bool
    way: Way

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.client,
            "title": self.title,
            "installed": self.installed,
            "connected": self.connected,
            "way": self.way,
        }


@dataclass(frozen=True)
class Machine:
    """Where to look: the home folder, the OS and the environment (PATH, XDG_CONFIG_HOME, APPDATA)."""

    home: Path
    platform: str = sys.platform
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    @classmethod
    def here(cls) -> Machine:
        return cls(Path.home())

    @property
    def system(self) -> str:
        return {"darwin": "macos", "win32": "windows"}.get(self.platform, "linux")

    def app_config(self) -> Path:
        """Where desktop apps keep their settings: ~/.config, ~/Library/Application Support, %APPDATA%."""
        if self.system == "macos":
            return self.home / "Library" / "Application Support"
        if self.system == "windows":
            return Path(self.environ.get("APPDATA") or self.home / "AppData" / "Roaming")
        return Path(self.environ.get("XDG_CONFIG_HOME") or self.home / ".config")

    def which(self, command: str) -> str | None:
        return shutil.which(command, path=self.environ.get("PATH", os.defpath))

    def tilde(self, path: Path) -> str:
        """`path` as the person writes it: ~/... under the home folder."""
        with contextlib.suppress(ValueError):
            return "~/" + path.relative_to(self.home).as_posix()
        return str(path)


def config_file(client: str, machine: Machine) -> Path | None:
    """The client's own (user-wide) config file that names its MCP servers, on this OS."""
    home, apps = machine.home, machine.app_config()
    cline = "Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"
    files = {
        "cursor": home / ".cursor" / "mcp.json",
        "claude-desktop": apps / "Claude" / "claude_desktop_config.json",
        "claude-code": home / ".claude.json",
        "gemini-cli": home / ".gemini/settings.json",
        "codex": home / ".codex" / "config.toml",
        "vscode": apps / "Code" / "User" / "mcp.json",
        "windsurf": home / ".codeium" / "windsurf" / "mcp_config.json",
        "zed": apps / "Zed/settings.json" if machine.system == "windows" else home / ".config/zed/settings.json",
        "cline": apps / cline,
        "continue": home / ".continue" / "config.yaml",
        "opencode": home / ".config" / "opencode" / "opencode.json",
        "junie": home / ".junie" / "mcp" / "mcp.json",
    }
    return files.get(client)


def _sign_of_install(client: str, machine: Machine) -> Path | None:
    """The folder (or file) a client makes when it is installed and first run."""
    found = config_file(client, machine)
    if found is None:
        return None
    if client == "cline":
        return found.parents[1]  # the extension's storage folder
    if client in ("claude-code", "vscode"):
        return found if client == "claude-code" else found.parent
    return found.parent


# --- what is here --------------------------------------------------------------------------------------------------


def agents(machine: Machine, *, url: str, stdio_command: Sequence[str]) -> list[Agent]:
    """Every client: installed on this machine (its config folder or its command is there), and connected to this
    Hivenote (its config names `url`, or runs this Hivenote's `stdio_command`)."""
    found = []
    for client in CLIENTS:
        if client in ("claude-code-json", "claude-desktop-remote"):
            continue  # variants of Claude Code and Claude Desktop, which are listed
        title = snippet(client, url=url, token=None).title
        sign = _sign_of_install(client, machine)
        command = COMMANDS.get(client)
        installed = bool((sign is not None and sign.exists()) or (command and machine.which(command)))
        found.append(
            Agent(client, title, installed, _names(client, machine, url, stdio_command), _way(client, machine))
        )
    return found


def _way(client: str, machine: Machine) -> Way:
    if client in SNIPPET_ONLY:
        return "none"
    if client in RUN_BY_COMMAND and machine.which(COMMANDS[client]):
        return "command"
    if client in ("claude-code", "codex"):
        return "none"  # their own command is the documented way; not installed here
    return "file"


def _servers(client: str, document: Any) -> dict[str, Any]:
    """The MCP servers a client's config names: {name: entry}."""
    if not isinstance(document, dict):
        return {}
    key = {"vscode": "servers", "zed": "context_servers", "opencode": "mcp", "codex": "mcp_servers"}.get(
        client, "mcpServers"
    )
    servers = document.get(key)
    return servers if isinstance(servers, dict) else {}


def _entry_names(entry: Any, url: str, stdio_command: Sequence[str]) -> bool:
    if not isinstance(entry, dict):
        return False
    wanted = url.rstrip("/")
    for key in ("url", "serverUrl", "httpUrl"):
        value = entry.get(key)
        if isinstance(value, str) and value.rstrip("/") == wanted:
            return True
    command, args = entry.get("command"), entry.get("args")
    return isinstance(args, list) and [command, *args][: len(stdio_command)] == list(stdio_command)


def _names(client: str, machine: Machine, url: str, stdio_command: Sequence[str]) -> bool:
    path = config_file(client, machine)
    if path is None or not path.is_file():
        return False
    try:
        text = path.read_text(encoding="utf-8")
        if client == "continue":
            return url in text  # YAML: named is enough
        document = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return any(_entry_names(entry, url, stdio_command) for entry in _servers(client, document).values())


# --- planning ------------------------------------------------------------------------------------------------------


def plan(
    client: str, machine: Machine, *, url: str, token: str | None, stdio_command: Sequence[str] = ("hivenote", "stdio")
) -> Plan:
    """What connecting `client` to the Hivenote at `url` changes on this machine; nothing is changed yet."""
    if client not in CLIENTS:
        raise InvalidInput(f"unknown client {client!r}; known clients: {', '.join(CLIENTS)}")
    found = snippet(client, url=url, token=token, stdio_command=stdio_command)
    connected = _names(client, machine, url, stdio_command)
    link = install_link(client, found.text)
    if client in SNIPPET_ONLY:
        return Plan(client, found.title, "none", SNIPPET_ONLY[client], connected=connected)
    if _way(client, machine) == "command":
        return _command_plan(client, found.title, machine, url, token, connected)
    if client in ("claude-code", "codex"):
        command = COMMANDS[client]
        why = (
            f"{found.title}'s command `{command}` is not on PATH here, and it is the way {found.title} documents: "
            f"install {found.title}, or run the snippet where `{command}` is."
        )
        return Plan(client, found.title, "none", why, connected=connected)
    return _file_plan(client, found.title, found.text, found.steps[-1], machine, connected, link)


def install_link(client: str, text: str) -> str:
    """The client's own install link for the snippet's entry, where it has one: Cursor's deeplink (a base64 JSON
    config), VS Code's `vscode:mcp/install?` (the URL-encoded entry with its name)."""
    from base64 import b64encode
    from urllib.parse import quote

    if client == "cursor":
        entry = json.loads(text)["mcpServers"][ENTRY]
        config = b64encode(json.dumps(entry, separators=(",", ":")).encode()).decode()
        return f"cursor://anysphere.cursor-deeplink/mcp/install?name={ENTRY}&config={quote(config, safe='')}"
    if client == "vscode":
        entry = {"name": ENTRY, **json.loads(text)["servers"][ENTRY]}
        return "vscode:mcp/install?" + quote(json.dumps(entry, separators=(",", ":")), safe="")
    return ""


def _short(argv: Sequence[str], token: str | None) -> str:
    shown = shlex.join(argv)
    return shown.replace(token, token[:6] + "…") if token else shown


def _command_plan(client: str, title: str, machine: Machine, url: str, token: str | None, connected: bool) -> Plan:
    command = machine.which(COMMANDS[client]) or COMMANDS[client]
    header = [] if token is None else [f"Authorization: Bearer {token}"]
    next_step = f"Start {title} again (or /mcp in a running one); it lists {ENTRY}."
    if client == "claude-code":
        add = [command, "mcp", "add", "--transport", "http", "--scope", "user", ENTRY, url]
        add += [arg for value in header for arg in ("--header", value)]
        remove = [command, "mcp", "remove", "--scope", "user", ENTRY]
    elif client == "gemini-cli":
        add = [command, "mcp", "add", "--scope", "user", "--transport", "http"]
        add += [arg for value in header for arg in ("--header", value)] + [ENTRY, url]
        remove = []  # gemini mcp add updates an entry of the same name
    else:
        add = [command, "mcp", "add", ENTRY, "--url", url]
        remove = [command, "mcp", "remove", ENTRY]
        if token is not None:
            add += ["--bearer-token-env-var", TOKEN_ENV]
            next_step = (
                f"Codex sends the token it finds in the environment variable {TOKEN_ENV}: add "
                f"`export {TOKEN_ENV}=<your token>` (`hivenote token show` prints it) to ~/.bashrc or ~/.zshrc, then "
                "restart Codex."
            )
    update = _has_entry(client, machine)
    commands = ([tuple(remove)] if update and remove else []) + [tuple(add)]
    shown = tuple(_short([COMMANDS[client], *argv[1:]], token) for argv in commands)
    verb = "replaces" if update else "adds"
    summary = f"Runs {title}'s own command, which {verb} the {ENTRY} entry in its user settings."
    return Plan(
        client, title, "command", summary, update, connected, commands=tuple(commands), shown=shown, next=next_step
    )


def _has_entry(client: str, machine: Machine) -> bool:
    path = config_file(client, machine)
    try:
        text = path.read_text(encoding="utf-8") if path is not None else ""
        document = tomllib.loads(text) if path is not None and path.suffix == ".toml" else json.loads(text or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return ENTRY in _servers(client, document)


def _file_plan(
    client: str, title: str, text: str, last_step: str, machine: Machine, connected: bool, link: str
) -> Plan:
    path = config_file(client, machine)
    assert path is not None
    shown = machine.tilde(path)
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        why = f"Hivenote cannot read {shown} ({exc}), so it leaves it alone: copy the snippet into it by hand."
        return Plan(client, title, "none", why, connected=connected, path=shown, link=link)
    try:
        new, update = merged(old, json.loads(text))
    except NotMergeable as exc:
        why = f"{shown} {exc}, so Hivenote leaves it alone: copy the snippet into it by hand."
        return Plan(client, title, "none", why, connected=connected, path=shown, link=link)
    diff = "".join(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=shown if old is not None else "/dev/null",
            tofile=shown,
        )
    )
    if old is None:
        summary = f"Creates {shown} with the {ENTRY} entry."
    else:
        verb = "Replaces" if update else "Adds"
        summary = f"{verb} the {ENTRY} entry in {shown}; every other entry stays, and the file as it was is kept "
        summary += f"beside it ({path.name}{BACKUP_SUFFIX})."
    return Plan(
        client, title, "file", summary, update, connected, shown, diff, link=link, next=last_step, old=old, new=new
    )


class NotMergeable(Exception):
    """The file is not a JSON object Hivenote can add an entry to; the message says why."""


def merged(old: str | None, addition: Mapping[str, Any]) -> tuple[str, bool]:
    """The config text `old` with the snippet document `addition` ({"mcpServers": {"hivenote": {...}}}) merged in:
    every other key and entry kept, an entry of the same name replaced where it stood. The rest of the text is kept
    byte for byte (the new entry is written into it, in the file's own indent); only where that cannot be done is the
    whole file written again, in its indent. Also whether an entry was replaced."""
    if old is None or not old.strip():
        document: Any = {}
    else:
        try:
            document = json.loads(old)
        except json.JSONDecodeError as exc:
            raise NotMergeable(
                f"is not plain JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}; comments or trailing commas?)"
            ) from None
    if not isinstance(document, dict):
        raise NotMergeable("does not hold a JSON object at its top")
    wanted, replaced = dict(document), False
    for key, servers in addition.items():
        section = wanted.get(key, {})
        if not isinstance(section, dict):
            raise NotMergeable(f"has a {key!r} that is not an object")
        section = dict(section)
        for name, entry in servers.items():
            replaced = replaced or name in section
            section[name] = entry
        wanted[key] = section
    unit = _indent_unit(old)
    if old is not None and old.strip():
        with contextlib.suppress(ValueError, IndexError):
            spliced = _splice(old, addition, unit)
            if json.loads(spliced) == wanted:  # the splice is checked against the merge it stands for
                return spliced, replaced
    text = json.dumps(wanted, indent=unit, ensure_ascii=False)
    return text + ("\n" if old is None or old.endswith("\n") or not old.strip() else ""), replaced


def _indent_unit(text: str | None) -> int | str:
    found = re.search(r"^([ \t]+)\S", text or "", re.MULTILINE)
    if found is None:
        return 2
    return found.group(1) if "\t" in found.group(1) else len(found.group(1))


_WS = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()


def _members(text: str, at: int) -> tuple[dict[str, tuple[int, int]], int]:
    """The members of the JSON object whose `{` is at `at`: {key: (value start, value end)}, and where its `}` is.
    ValueError if it is not an object (or a key is there twice: the splice could not say which one counts)."""
    if text[at] != "{":
        raise ValueError("not an object")
    spans: dict[str, tuple[int, int]] = {}
    i = _WS.match(text, at + 1).end()  # type: ignore[union-attr]
    if text[i] == "}":
        return spans, i
    while True:
        key, i = _DECODER.raw_decode(text, i)
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        if text[i] != ":" or key in spans:
            raise ValueError("not a plain object")
        start = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
        _, end = _DECODER.raw_decode(text, start)
        spans[key] = (start, end)
        i = _WS.match(text, end).end()  # type: ignore[union-attr]
        if text[i] == "}":
            return spans, i
        if text[i] != ",":
            raise ValueError("not a plain object")
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]


def _line_indent(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    return re.match(r"[ \t]*", text[start:at]).group(0)  # type: ignore[union-attr]


def _put(text: str, at: int, name: str, value: Any, unit: int | str) -> str:
    """`text` with member `name` set to `value` in the object whose `{` is at `at` (replaced where it stands, else
    added after the last member), written in the file's indent."""
    spans, close = _members(text, at)
    outer = _line_indent(text, at)
    step = unit if isinstance(unit, str) else " " * unit
    inner = _line_indent(text, spans[next(iter(spans))][0]) if spans else outer + step
    if not inner or inner == outer:  # members on the brace's own line: one step in from it
        inner = outer + step

    def dumped(indent: str) -> str:
        return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)

    if name in spans:
        start, end = spans[name]
        return text[:start] + dumped(_line_indent(text, start)) + text[end:]
    member = f"{json.dumps(name, ensure_ascii=False)}: {dumped(inner)}"
    if not spans:
        return text[:at] + "{\n" + inner + member + "\n" + outer + "}" + text[close + 1 :]
    last_end = max(end for _, end in spans.values())
    return text[:last_end] + ",\n" + inner + member + text[last_end:]


def _splice(old: str, addition: Mapping[str, Any], unit: int | str) -> str:
    text = old
    for key, servers in addition.items():
        top = _WS.match(text).end()  # type: ignore[union-attr]
        spans, _ = _members(text, top)
        if key not in spans:
            text = _put(text, top, key, servers, unit)
            continue
        for name, entry in servers.items():
            spans, _ = _members(text, top)
            text = _put(text, spans[key][0], name, entry, unit)
    return text


# --- doing it ------------------------------------------------------------------------------------------------------


def apply(
    planned: Plan, machine: Machine, *, run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
) -> Applied:
    """Make the planned change: run the commands (their output kept), or write the file (after a backup of it). A
    file that changed since it was planned is left alone (plan again, and look at the new change)."""
    if planned.way == "command":
        return _run(planned, machine, run)
    if planned.way == "file":
        return _write(planned, machine)
    return Applied(False, planned.summary)


def _run(planned: Plan, machine: Machine, run: Callable[..., subprocess.CompletedProcess[str]]) -> Applied:
    output: list[str] = []
    env = {**machine.environ, "HOME": str(machine.home)}
    for argv, shown in zip(planned.commands, planned.shown, strict=True):
        try:
            done = run(
                list(argv),
                env=env,
                cwd=str(machine.home),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Applied(False, f"`{shown}` could not run ({exc}); copy the snippet instead.", "".join(output))
        output.append(f"$ {shown}\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            text = "".join(output).strip()
            return Applied(False, f"`{shown}` failed (exit {done.returncode}); its output is below.", text)
    return Applied(True, f"{planned.title} is connected to Hivenote. {planned.next}", "".join(output).strip())


def _write(planned: Plan, machine: Machine) -> Applied:
    path = config_file(planned.client, machine)
    assert path is not None
    target = path.resolve() if path.is_symlink() else path  # a linked dotfile is written where it lives
    try:
        now = target.read_text(encoding="utf-8") if target.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        return Applied(False, f"Hivenote cannot read {planned.path} ({exc}); nothing was changed.")
    if now != planned.old:
        return Applied(False, f"{planned.path} changed since the change was shown; nothing was changed. Look again.")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = PRIVATE_FILE
        if now is not None:
            mode = target.stat().st_mode & 0o777
            backup = target.with_name(target.name + BACKUP_SUFFIX)
            write_whole(backup, [now.encode("utf-8")], mode=mode)
        write_whole(target, [planned.new.encode("utf-8")], mode=mode)
    except OSError as exc:
        return Applied(False, f"Hivenote could not write {planned.path} ({exc.strerror or exc}); nothing was changed.")
    kept = f" The file as it was is beside it: {target.name}{BACKUP_SUFFIX}." if now is not None else ""
    return Applied(True, f"{planned.title} is connected to Hivenote in {planned.path}.{kept} {planned.next}")
