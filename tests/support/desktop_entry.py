"""Desktop Entry files as the spec reads them: an Exec= parser written from the spec (key-file string escapes, then
quoting, then %%), the keys of an entry, and `desktop-file-validate` (desktop-file-utils) on one."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.system import program

# Every character the Desktop Entry spec reserves, plus `%` (field codes) and a slash.
AWKWARD = 'My Apps/it\'s "$HOME" 100% \\ back`tick` (a|b) <x>&y;z~*?#\ttab'

RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def unescape_string(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "\\":
            out.append({"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}[value[i + 1]])  # KeyError: bad escape
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def parse_exec(value: str) -> list[str]:
    text = unescape_string(value)
    args: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == " ":
            i += 1
            continue
        word: list[str] = []
        quoted = text[i] == '"'
        i += quoted
        while True:
            if i == len(text):
                assert not quoted, f"unterminated quote in {value!r}"
                break
            c = text[i]
            if quoted and c == '"':
                i += 1
                assert i == len(text) or text[i] == " ", f"a quote must enclose a whole argument: {value!r}"
                break
            if not quoted and c == " ":
                break
            if c == "%":
                assert text[i + 1] == "%", f"a field code, not a literal %: {value!r}"
                i += 1
            elif quoted and c == "\\":
                assert text[i + 1] in '"`$\\', f"bad escape inside quotes: {value!r}"
                i += 1
                c = text[i]
            else:
                assert quoted or c not in RESERVED, f"reserved {c!r} outside quotes: {value!r}"
            word.append(c)
            i += 1
        args.append("".join(word))
    return args


def desktop_keys(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line)


def validate(path: Path) -> str:
    tool = program("desktop-file-validate", "apt-get install desktop-file-utils")
    done = subprocess.run([tool, str(path)], capture_output=True, text=True, encoding="utf-8", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


# --- Linux ------------------------------------------------------------------------------------------------
