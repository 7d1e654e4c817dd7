"""Ready-to-paste connect snippets: for each MCP client, the config text (JSON, TOML, YAML or a shell command) that
points it at Hivenote, where that text goes on Linux, macOS and Windows, and the few steps around it.

Pure standard library; TOML and YAML are written by hand from tiny templates with every string escaped.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import sysconfig
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .agents import agent_name
from .core.errors import InvalidInput

TOKEN_ENV = "HIVENOTE_TOKEN"  # the variable Codex reads the token from (`bearer_token_env_var`)
VSCODE_INPUT = "hivenote-token"
MCP_REMOTE_HEADER = "Authorization:${AUTH_HEADER}"  # no space: the Windows arg-space workaround from mcp-remote
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1")  # the only hosts mcp-remote accepts over http:// without --allow-http
_PS_QUOTES = "'\u2018\u2019\u201a\u201b"  # PowerShell treats all of these as single quotes
_PS_SAFE = re.compile(r"[A-Za-z0-9_./:=-]+")
_CLAUDE_DESKTOP_CONFIG = {
    "linux": "~/.config/Claude/claude_desktop_config.json",
    "macos": "~/Library/Application Support/Claude/claude_desktop_config.json",
    "windows": "%APPDATA%\\Claude\\claude_desktop_config.json",
}


@dataclass(frozen=True)
class Snippet:
    client: str  # id, e.g. "cursor"
    title: str  # "Cursor"
    format: str  # "json" | "toml" | "yaml" | "shell"
    text: str  # ready to paste; the token is filled in where the client allows it
    where: dict[str, str]  # "linux" / "macos" / "windows" -> where the file lives or where to paste
    steps: list[str]  # short human steps

    def to_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "title": self.title,
            "format": self.format,
            "text": self.text,
            "where": dict(self.where),
            "steps": list(self.steps),
        }


@dataclass(frozen=True)
class _Target:
    """What every builder needs: the server entry's name, the URL, the token (None: auth off), the stdio bridge."""

    name: str
    url: str
    token: str | None
    command: str
    args: list[str]

    @property
    def headers(self) -> dict[str, str]:
        return {} if self.token is None else {"Authorization": f"Bearer {self.token}"}

    def http_entry(self, **fields: Any) -> dict[str, Any]:
        """The client's own fields, then `headers` when there is a token."""
        return {**fields, "headers": self.headers} if self.token is not None else fields

    @property
    def bridge(self) -> dict[str, Any]:
        return {"command": self.command, "args": list(self.args)}


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _quoted(value: str) -> str:
    """A TOML basic string that is also a YAML double-quoted scalar: only `"`, `\\` and unprintable characters
    (controls, line and paragraph separators, format characters, non-ASCII spaces) are escaped."""
    out: list[str] = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(f"\\U{ord(ch):08X}")
    return '"' + "".join(out) + '"'


def _ps_quote(value: str) -> str:
    """A PowerShell single-quoted literal (quote characters doubled, nothing else is special inside)."""
    return "'" + "".join(ch * 2 if ch in _PS_QUOTES else ch for ch in value) + "'"


def _ps_join(argv: Sequence[str]) -> str:
    return " ".join(arg if _PS_SAFE.fullmatch(arg) else _ps_quote(arg) for arg in argv)


def _home(relative: str) -> dict[str, str]:
    """The same dotfile under the home folder on every OS."""
    return {
        "linux": f"~/{relative}",
        "macos": f"~/{relative}",
        "windows": "%USERPROFILE%\\" + relative.replace("/", "\\"),
    }


def _merge(path: str, key: str, also: str = "") -> str:
    return f"Open {path}{also} and merge this into `{key}`; create the file if it is missing."


# --- one builder per client ---------------------------------------------------------------------------------------


def _cursor(t: _Target) -> Snippet:
    return Snippet(
        "cursor",
        agent_name("cursor"),
        "json",
        _json({"mcpServers": {t.name: t.http_entry(url=t.url)}}),
        _home(".cursor/mcp.json"),
        [
            _merge("~/.cursor/mcp.json", "mcpServers", " (or .cursor/mcp.json for one project)"),
            f"Check Cursor Settings → MCP: {t.name} should be listed as connected.",
        ],
    )


def _claude_desktop(t: _Target) -> Snippet:
    return Snippet(
        "claude-desktop",
        agent_name("claude-desktop"),
        "json",
        _json({"mcpServers": {t.name: t.bridge}}),
        dict(_CLAUDE_DESKTOP_CONFIG),
        [
            "In Claude Desktop open Settings → Developer → Edit Config and merge this into `mcpServers`.",
            f"`{shlex.join([t.command, *t.args])}` bridges stdio to the running Hivenote server and brings the "
            "stored token itself: nothing secret goes in this file.",
            f"If Claude cannot find `{t.command}`, put its full path in `command` "
            "(`which hivenote`; `where hivenote` on Windows).",
            "Quit Claude Desktop completely and start it again.",
        ],
    )


def _claude_desktop_remote(t: _Target) -> Snippet:
    args = ["-y", "mcp-remote", t.url]
    parts = urlsplit(t.url)
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
        args.append("--allow-http")
    entry: dict[str, Any] = {"command": "npx", "args": args}
    if t.token is not None:
        args += ["--header", MCP_REMOTE_HEADER]
        entry["env"] = {"AUTH_HEADER": f"Bearer {t.token}"}
    steps = [
        "In Claude Desktop open Settings → Developer → Edit Config and merge this into `mcpServers`.",
        "Needs Node.js (npx); mcp-remote turns the HTTP endpoint into the stdio server Claude Desktop expects.",
    ]
    if t.token is not None:
        steps.append(
            "Keep `Authorization:${AUTH_HEADER}` as written (no space): mcp-remote fills it in from `env`, "
            "which avoids the Windows argument-with-spaces bug."
        )
    steps.append("Quit Claude Desktop completely and start it again.")
    return Snippet(
        "claude-desktop-remote",
        f"{agent_name('claude-desktop')} (mcp-remote)",
        "json",
        _json({"mcpServers": {t.name: entry}}),
        dict(_CLAUDE_DESKTOP_CONFIG),
        steps,
    )


def _claude_code(t: _Target) -> Snippet:
    # --header is variadic, so it goes after the name and URL; user scope makes the notebook visible in every project.
    argv = ["claude", "mcp", "add", "--transport", "http", "--scope", "user", t.name, t.url]
    if t.token is not None:
        argv += ["--header", f"Authorization: Bearer {t.token}"]
    steps = [
        "Run this in a terminal; Claude Code saves the server in ~/.claude.json.",
        "Drop `--scope user` to add it to the current project only.",
    ]
    if _ps_join(argv) != shlex.join(argv):
        steps.append(f"In PowerShell use: {_ps_join(argv)}")
    steps.append(f"Check with `claude mcp get {t.name}`, or /mcp inside Claude Code.")
    return Snippet(
        "claude-code",
        agent_name("claude-code"),
        "shell",
        shlex.join(argv) + "\n",
        {
            "linux": "a terminal",
            "macos": "a terminal",
            "windows": "PowerShell, Git Bash or WSL (the command uses POSIX quoting)",
        },
        steps,
    )


def _claude_code_json(t: _Target) -> Snippet:
    steps = ["Save as .mcp.json in the project root, or merge into its `mcpServers` if the file exists."]
    if t.token is not None:
        steps.append(
            ".mcp.json is meant to be committed: to keep the token out of git write "
            f'"Bearer ${{{TOKEN_ENV}}}" and export {TOKEN_ENV} instead.'
        )
    steps.append("Claude Code asks you to approve project servers the first time it starts there.")
    return Snippet(
        "claude-code-json",
        f"{agent_name('claude-code')} (.mcp.json)",
        "json",
        _json({"mcpServers": {t.name: t.http_entry(type="http", url=t.url)}}),
        dict.fromkeys(("linux", "macos", "windows"), ".mcp.json in the project root"),
        steps,
    )


def _codex(t: _Target) -> Snippet:
    lines = [f"[mcp_servers.{t.name}]", f"url = {_quoted(t.url)}"]
    if t.token is not None:
        lines.insert(
            0, f"# Codex sends the token it finds in the environment variable {TOKEN_ENV} (set it as the steps say)"
        )
    add = ["codex", "mcp", "add", t.name, "--url", t.url]
    steps = ["Add this table to ~/.codex/config.toml; create the file if it is missing."]
    if t.token is not None:
        lines.append(f"bearer_token_env_var = {_quoted(TOKEN_ENV)}")
        add += ["--bearer-token-env-var", TOKEN_ENV]
        steps += [
            f"Codex takes the token only from an environment variable, {TOKEN_ENV}:",
            f"export {TOKEN_ENV}={shlex.quote(t.token)}",
            "Put that export in ~/.bashrc or ~/.zshrc so Codex always sees it.",
            "On Windows (PowerShell), then open a new terminal: "
            f"[Environment]::SetEnvironmentVariable('{TOKEN_ENV}', {_ps_quote(t.token)}, 'User')",
        ]
    steps += [f"Or let Codex write the table: {shlex.join(add)}", "Restart Codex."]
    return Snippet("codex", "OpenAI Codex", "toml", "\n".join(lines) + "\n", _home(".codex/config.toml"), steps)


def _gemini_cli(t: _Target) -> Snippet:
    return Snippet(
        "gemini-cli",
        agent_name("gemini-cli"),
        "json",
        _json({"mcpServers": {t.name: t.http_entry(type="http", url=t.url)}}),
        _home(".gemini/settings.json"),
        [
            _merge("~/.gemini/settings.json", "mcpServers", " (or .gemini/settings.json in a project)"),
            "Restart Gemini CLI; /mcp lists the server and its tools.",
        ],
    )


def _vscode(t: _Target) -> Snippet:
    steps = [
        "Run “MCP: Open User Configuration” from the Command Palette (or open .vscode/mcp.json in a workspace) "
        "and merge this into `servers`."
    ]
    if t.token is not None:
        prompt = {"type": "promptString", "id": VSCODE_INPUT, "description": "Hivenote token", "password": True}
        steps.append(
            "To be asked for the token instead of storing it: add "
            f'"inputs": [{json.dumps(prompt)}] and write "Bearer ${{input:{VSCODE_INPUT}}}" as the Authorization value.'
        )
    steps.append("Start it from the Start link above the entry, or with “MCP: List Servers”.")
    return Snippet(
        "vscode",
        f"{agent_name('vscode')} (Copilot)",
        "json",
        _json({"servers": {t.name: t.http_entry(type="http", url=t.url)}}),
        {
            "linux": "~/.config/Code/User/mcp.json (or .vscode/mcp.json in a workspace)",
            "macos": "~/Library/Application Support/Code/User/mcp.json (or .vscode/mcp.json in a workspace)",
            "windows": "%APPDATA%\\Code\\User\\mcp.json (or .vscode\\mcp.json in a workspace)",
        },
        steps,
    )


def _windsurf(t: _Target) -> Snippet:
    return Snippet(
        "windsurf",
        agent_name("windsurf"),
        "json",
        _json({"mcpServers": {t.name: t.http_entry(serverUrl=t.url)}}),
        _home(".codeium/windsurf/mcp_config.json"),
        [
            _merge("~/.codeium/windsurf/mcp_config.json", "mcpServers", " (Cascade → MCP servers → View raw config)"),
            "Windsurf needs `serverUrl`; a Cursor-style `url` entry does not connect.",
            "Refresh the MCP servers list in Cascade.",
        ],
    )


def _zed(t: _Target) -> Snippet:
    return Snippet(
        "zed",
        agent_name("zed"),
        "json",
        _json({"context_servers": {t.name: t.http_entry(url=t.url)}}),
        {
            "linux": "~/.config/zed/settings.json",
            "macos": "~/.config/zed/settings.json",
            "windows": "%APPDATA%\\Zed\\settings.json",
        },
        [
            "Run “zed: open settings” and merge this into `context_servers`.",
            "Zed uses MCP tools and prompts only (no resources).",
        ],
    )


def _cline(t: _Target) -> Snippet:
    storage = "Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"
    return Snippet(
        "cline",
        agent_name("cline"),
        "json",
        _json(
            {
                "mcpServers": {
                    t.name: {**t.http_entry(type="streamableHttp", url=t.url), "disabled": False, "autoApprove": []}
                }
            }
        ),
        {
            "linux": f"~/.config/{storage}",
            "macos": f"~/Library/Application Support/{storage}",
            "windows": "%APPDATA%\\" + storage.replace("/", "\\"),
        },
        [
            "In Cline open MCP Servers → Installed → Configure MCP Servers and merge this into `mcpServers`.",
            "The Cline CLI keeps the same file under ~/.cline/data/settings/.",
        ],
    )


def _continue(t: _Target) -> Snippet:
    lines = [
        "mcpServers:",
        f"  - name: {_quoted(t.name)}",
        "    type: streamable-http",
        f"    url: {_quoted(t.url)}",
    ]
    if t.token is not None:
        lines += ["    requestOptions:", "      headers:"]
        lines += [f"        {key}: {_quoted(value)}" for key, value in t.headers.items()]
    return Snippet(
        "continue",
        agent_name("continue"),
        "yaml",
        "\n".join(lines) + "\n",
        _home(".continue/config.yaml"),
        [
            "Add the item to the `mcpServers` list in ~/.continue/config.yaml (keep its name/version/schema lines).",
            "As a file of its own in .continue/mcpServers/ it also needs `name:`, `version:` and `schema: v1` on top.",
            "MCP tools are used in Agent mode.",
        ],
    )


def _opencode(t: _Target) -> Snippet:
    entry = {"type": "remote", "url": t.url, "enabled": True, "oauth": False}
    return Snippet(
        "opencode",
        agent_name("opencode"),
        "json",
        _json({"mcp": {t.name: t.http_entry(**entry)}}),
        _home(".config/opencode/opencode.json"),
        [
            _merge("~/.config/opencode/opencode.json", "mcp", " (or opencode.json in a project)"),
            "`oauth: false` stops opencode from trying OAuth against Hivenote's static token.",
        ],
    )


def _junie(t: _Target) -> Snippet:
    return Snippet(
        "junie",
        agent_name("junie"),
        "json",
        _json({"mcpServers": {t.name: t.bridge}}),
        _home(".junie/mcp/mcp.json"),
        [
            _merge("~/.junie/mcp/mcp.json", "mcpServers", " (or .junie/mcp/mcp.json in a project)"),
            f"Junie speaks stdio only: `{shlex.join([t.command, *t.args])}` bridges to the running Hivenote server "
            "and brings the stored token itself.",
            f"If Junie cannot find `{t.command}`, put its full path in `command`.",
        ],
    )


_BUILDERS: dict[str, Callable[[_Target], Snippet]] = {
    "cursor": _cursor,
    "claude-desktop": _claude_desktop,
    "claude-desktop-remote": _claude_desktop_remote,
    "claude-code": _claude_code,
    "claude-code-json": _claude_code_json,
    "codex": _codex,
    "gemini-cli": _gemini_cli,
    "vscode": _vscode,
    "windsurf": _windsurf,
    "zed": _zed,
    "cline": _cline,
    "continue": _continue,
    "opencode": _opencode,
    "junie": _junie,
}

CLIENTS: tuple[str, ...] = tuple(_BUILDERS)


def _check_text(what: str, value: str, fix: str) -> None:
    bad = sorted({f"U+{ord(ch):04X}" for ch in value if unicodedata.category(ch) in ("Cc", "Cs")})
    if bad:
        raise InvalidInput(f"{what} contains control characters ({', '.join(bad)}), which no client can send; {fix}")


def _target(url: str, token: str | None, graph: bool, stdio_command: Sequence[str]) -> _Target:
    _check_text("url", url, "check the URL for a stray newline or tab")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidInput(f"url {url!r} is not a valid URL ({exc}); pass e.g. http://127.0.0.1:7788/mcp") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInput(f"url {url!r} must be an http:// or https:// URL, e.g. http://127.0.0.1:7788/mcp")
    if token is not None:
        if not token:
            raise InvalidInput("token is empty; pass the server's token, or None when auth is off")
        _check_text("token", token, "copy it again (`hivenote token show`)")
    if isinstance(stdio_command, str) or not stdio_command or not all(stdio_command):
        raise InvalidInput(
            f"stdio_command must be a non-empty list of arguments, e.g. ('hivenote', 'stdio'); got {stdio_command!r}"
        )
    return _Target(
        name="hivenote-graph" if graph else "hivenote",
        url=url,
        token=token,
        command=stdio_command[0],
        args=[*stdio_command[1:], *(["--graph"] if graph else [])],
    )


def launcher() -> list[str]:
    """The absolute command that runs this very Hivenote: a frozen build itself, the `hivenote` script beside the
    interpreter (a venv's bin/, which is not on PATH after a venv install), else the interpreter with -m. Clients
    that start a command get this, not a bare `hivenote` they may not find."""
    if getattr(sys, "frozen", False):
        return [str(Path(sys.executable).absolute())]
    exe = Path(sys.executable).absolute()  # not resolved: a venv's python is a link to the base interpreter
    script = "hivenote.exe" if sys.platform == "win32" else "hivenote"
    for folder in (exe.parent, Path(sysconfig.get_path("scripts")).absolute()):
        if (folder / script).is_file():
            return [str(folder / script)]
    return [str(exe), "-m", "hivenote.server.cli"]


def stdio_command(data_dir: Path | None = None, port: int | None = None) -> list[str]:
    """`<launcher> [--data-dir D] stdio [--port N]`: the data dir when it is not the default one (a client does not
    see the shell's HIVENOTE_DATA_DIR), the port when it is not the default one."""
    from .settings import DEFAULT_PORT, default_data_dir

    command = launcher()
    if data_dir is not None and data_dir.absolute() != default_data_dir().absolute():
        command += ["--data-dir", str(data_dir.absolute())]
    command.append("stdio")
    if port is not None and port != DEFAULT_PORT:
        command += ["--port", str(port)]
    return command


def snippet(
    client: str,
    *,
    url: str,
    token: str | None,
    graph: bool = False,
    stdio_command: Sequence[str] = ("hivenote", "stdio"),
) -> Snippet:
    """The connect snippet for one client. `url` is the endpoint itself (…/mcp, or …/mcp/graph with graph=True);
    `token=None` means auth is off, so no header or token variable appears anywhere."""
    builder = _BUILDERS.get(client)
    if builder is None:
        raise InvalidInput(f"unknown client {client!r}; known clients: {', '.join(CLIENTS)}")
    return builder(_target(url, token, graph, stdio_command))


def all_snippets(
    *,
    url: str,
    token: str | None,
    graph: bool = False,
    stdio_command: Sequence[str] = ("hivenote", "stdio"),
) -> list[Snippet]:
    """Every client's snippet, in CLIENTS order."""
    target = _target(url, token, graph, stdio_command)
    return [build(target) for build in _BUILDERS.values()]
