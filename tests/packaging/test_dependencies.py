"""Every third-party package the code imports is declared in pyproject.toml, where it belongs: what server/ imports
in the base dependencies (or, inside functions only, in a server extra such as [s3]), what desktop/ imports in the
base or the [desktop] extra, what tests/ and bench/ import in what `pip install -e ".[test]"` brings. server/
imports nothing of the [desktop] extra, and desktop/parts.py's table is the [desktop] extra.

Imports are read from the source (ast), import names are mapped to distributions by the installed packages'
metadata; a platform's package not installed here is in ELSEWHERE."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# Import names whose distribution is not installed on this (Linux) machine: another platform's.
ELSEWHERE = {"PyObjCTools": "pyobjc-core"}
# Imported only to see whether the user installed it instead of a declared package, never required.
OPTIONAL = {"qtpy": "desktop/backends.py: Qt for the window, when pywebview[qt] was installed instead of WebKitGTK"}


@dataclass(frozen=True)
class Import:
    top: str  # the top-level import name: `PIL` for `from PIL import Image`
    path: Path
    line: int
    at_import_time: bool  # runs when the module is imported (module or class body, not a function nor TYPE_CHECKING)

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} imports {self.top}"


def _imports(path: Path) -> Iterator[Import]:
    def visit(nodes: list[ast.stmt], at_import_time: bool) -> Iterator[Import]:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(alias.name.split(".")[0], path, node.lineno, at_import_time)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield Import(node.module.split(".")[0], path, node.lineno, at_import_time)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from visit(node.body, False)
            elif isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                yield from visit(node.body, False)
                yield from visit(node.orelse, at_import_time)
            else:  # class bodies run on import; so do if/try/with/for/match blocks
                for field in ("body", "orelse", "finalbody"):
                    yield from visit(getattr(node, field, []), at_import_time)
                for clause in [*getattr(node, "handlers", []), *getattr(node, "cases", [])]:
                    yield from visit(clause.body, at_import_time)

    yield from visit(ast.parse(path.read_text(encoding="utf-8"), str(path)).body, True)


def third_party(*folders: str, by_name: bool = False) -> list[Import]:
    """The imports of everything under `folders` that are neither the standard library nor Hivenote; `by_name`:
    nor one of these folders' own modules (tests and benchmarks import their helpers by name: `bench_core`)."""
    paths = [  # not what npm installs for the CLI tests (tests/tools/node_modules ships Python 2 scripts)
        path for folder in folders for path in sorted((ROOT / folder).rglob("*.py")) if "node_modules" not in path.parts
    ]
    own = {"hivenote", "__future__"} | ({*folders} | {p.stem for p in paths} if by_name else set())
    return [
        found
        for path in paths
        for found in _imports(path)
        if found.top not in sys.stdlib_module_names and found.top not in own
    ]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def names(requirements: list[str]) -> dict[str, set[str]]:
    """{distribution: its extras} of PEP 508 strings (`hivenote[desktop,s3]` -> {"hivenote": {"desktop", "s3"}})."""
    found: dict[str, set[str]] = {}
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", requirement)
        assert match, f"pyproject.toml: cannot read the requirement {requirement!r}"
        extras = {canonical(e) for e in (match[2] or "").split(",") if e.strip()}
        found.setdefault(canonical(match[1]), set()).update(extras)
    return found


def declared(extra: str | None) -> set[str]:
    """The distributions `pip install hivenote[extra]` brings directly (None: the base), extras of extras included."""
    project = PYPROJECT["project"]
    requirements = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    found: set[str] = set()
    for name, extras in names(requirements).items():
        if name == "hivenote":
            for nested in extras:
                found |= declared(nested)
        else:
            found.add(name)
    return found | (declared(None) if extra is not None else set())


_DISTRIBUTIONS = importlib.metadata.packages_distributions()


def distribution(found: Import) -> str:
    if found.top in ELSEWHERE:
        return canonical(ELSEWHERE[found.top])
    dists = _DISTRIBUTIONS.get(found.top)
    assert dists, f"{found}, which no installed distribution provides: install it and declare it in pyproject.toml"
    return canonical(dists[0])


def undeclared(imports: list[Import], allowed: set[str]) -> str:
    """One line per import whose distribution is not in `allowed` ("" when there is none)."""
    return "\n".join(
        sorted(
            f"  {found} ({distribution(found)})"
            for found in imports
            if found.top not in OPTIONAL and distribution(found) not in allowed
        )
    )


def server_extras() -> list[str]:
    """The extras that add to the server (such as [s3]): every one but the tray app's and the tests'."""
    return [extra for extra in PYPROJECT["project"]["optional-dependencies"] if extra not in ("desktop", "test")]


def desktop_only() -> set[str]:
    """What only the tray app needs: the [desktop] extra less the base and the server extras it may include."""
    return declared("desktop") - set().union(declared(None), *(declared(extra) for extra in server_extras()))


def test_every_server_import_is_a_base_dependency_or_imported_late_from_a_server_extra() -> None:
    imports = third_party("server")
    assert {"starlette", "mcp", "anyio"} <= {found.top for found in imports}  # the scan sees the code
    base = declared(None)
    late = [found for found in imports if not found.at_import_time]
    extras = set().union(*(declared(extra) for extra in server_extras()))
    missing = undeclared([found for found in imports if found.at_import_time], base)
    assert not missing, (
        "every server module imports on a base install (`pip install hivenote`): declare these in pyproject's "
        "dependencies, or import an extra's package inside the function that needs it and say which extra to "
        f"install when it is missing (as server/sync/bucket.py does for boto3):\n{missing}"
    )
    missing = undeclared(late, extras - desktop_only())
    assert not missing, f"declare these in pyproject's dependencies or a server extra:\n{missing}"


def test_nothing_under_server_imports_a_desktop_package() -> None:
    desktop = desktop_only()
    assert {"pystray", "pywebview", "pillow", "pyperclip"} <= desktop
    found = [str(found) for found in third_party("server") if distribution(found) in desktop]
    assert not found, "server/ runs without the desktop parts: " + ", ".join(found)


def test_every_desktop_import_is_in_the_desktop_extra() -> None:
    imports = third_party("desktop")
    assert {"pystray", "webview", "PIL", "gi"} <= {found.top for found in imports}
    missing = undeclared(imports, declared("desktop"))
    assert not missing, f"declare these in pyproject's [desktop] extra:\n{missing}"


def test_what_tests_and_benchmarks_import_comes_with_the_test_extra() -> None:
    imports = third_party("tests", "bench", by_name=True)
    assert {"pytest", "hypothesis", "PIL"} <= {found.top for found in imports}
    missing = undeclared(imports, declared("test"))
    assert not missing, f"declare these in pyproject's [test] extra (what CI installs):\n{missing}"


def test_the_test_extra_brings_the_desktop_parts_ci_tests() -> None:
    assert declared("desktop") <= declared("test")


def test_the_launchers_table_of_desktop_parts_is_the_desktop_extra() -> None:
    from hivenote.desktop import parts

    requirements = PYPROJECT["project"]["optional-dependencies"]["desktop"]
    for platform in ("linux", "darwin", "win32"):
        marked = {
            canonical(name)
            for requirement in requirements
            for name in names([requirement])
            if name != "hivenote"  # an extra of its own (hivenote[meaning]) is no launcher part
            and (";" not in requirement or f"sys_platform == '{platform}'" in requirement)
        }
        assert marked == {canonical(dist) for dist in parts.modules(platform).values()}, platform


def test_the_optional_imports_are_still_there() -> None:
    tops = {found.top for found in third_party("server", "desktop")}
    assert set(OPTIONAL) | set(ELSEWHERE) <= tops, "drop the names no longer imported from this test's tables"


def test_every_requirement_has_a_lower_bound() -> None:
    project = PYPROJECT["project"]
    for requirement in [*project["dependencies"], *(r for rs in project["optional-dependencies"].values() for r in rs)]:
        name = next(iter(names([requirement])))
        assert name == "hivenote" or re.search(r"(>=|==)\s*\d", requirement), f"{requirement!r} has no lower bound"
