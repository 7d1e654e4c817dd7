"""Import rules (ARCHITECTURE.md): the core is pure standard library; nothing under server/ imports a GUI."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "server" / "core"  # every module in this folder, new ones included
GUI = {"pystray", "webview", "PIL", "tkinter", "gi", "PyQt5", "PyQt6", "PySide6", "wx"}


def imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) for every import; level > 0 for relative imports."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def test_core_modules_import_only_the_standard_library_and_each_other() -> None:
    modules = sorted(CORE.glob("*.py"))
    assert len(modules) > 5, f"no core modules found in {CORE}"
    for path in modules:
        name = path.stem
        for level, module in imports(path):
            if level:
                assert level == 1 and (CORE / f"{module}.py").exists(), f"core module {name} imports .{module}"
            else:
                top = module.split(".")[0]
                assert top in sys.stdlib_module_names or top == "__future__", f"core module {name} imports {module}"


def test_nothing_under_server_imports_a_gui_library_or_the_desktop_package() -> None:
    for path in sorted((ROOT / "server").rglob("*.py")):
        for level, module in imports(path):
            top = module.split(".")[0]
            assert not (level == 0 and top in GUI), f"{path.name} imports {module}"
            assert "desktop" not in module.split("."), f"{path.name} imports {module}"


def test_every_module_opens_with_a_docstring_saying_what_it_owns() -> None:
    for path in sorted([*(ROOT / "server").rglob("*.py"), *(ROOT / "desktop").rglob("*.py")]):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc, f"{path} has no module docstring"


def error_classes() -> dict[str, str]:
    """Every exception class under server/ and desktop/ that descends from HivenoteError: name -> its file."""
    bases: dict[str, tuple[list[str], str]] = {}
    for path in sorted([*(ROOT / "server").rglob("*.py"), *(ROOT / "desktop").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                bases[node.name] = (names, str(path.relative_to(ROOT)))

    def descends(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name == "HivenoteError":
            return True
        return name in bases and name not in seen and any(descends(b, seen | {name}) for b in bases[name][0])

    return {name: where for name, (_, where) in bases.items() if descends(name)}


def test_the_error_table_names_every_error_class() -> None:
    from hivenote.server.core import errors

    tree = errors.__doc__ or ""
    classes = error_classes()
    assert len(classes) > 20, classes
    missing = sorted(name for name in classes if f" {name} " not in tree.replace("(", " ").replace("\n", " \n"))
    assert not missing, f"core/errors.py's docstring tree lacks {missing}: add them where they descend"


def test_the_readme_exit_codes_are_the_error_table() -> None:
    from hivenote.server.core.errors import HivenoteError, NotFound, ShardLocked, StoreError

    readme = (ROOT / "README.md").read_text(encoding="utf-8").replace("\n", " ")
    table: list[tuple[type[HivenoteError], str]] = [
        (HivenoteError, "invalid input"),
        (NotFound, "not found"),
        (ShardLocked, "data dir in use"),
        (StoreError, "storage error"),
    ]
    for family, words in table:
        assert f"{family.exit_code} {words}" in readme, f"README's exit codes disagree with {family.__name__}"


def test_one_wall_clock() -> None:
    """core/hlc.py's wall_ms is the one reader of the wall clock; everything else takes it as a parameter."""
    readers = ("time.time", "time.time_ns", "datetime.now", "datetime.utcnow")
    for path in sorted([*(ROOT / "server").rglob("*.py"), *(ROOT / "desktop").rglob("*.py")]):
        if path == ROOT / "server" / "core" / "hlc.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                name = f"{node.value.id}.{node.attr}"
                assert name not in readers, f"{path.relative_to(ROOT)}:{node.lineno} reads {name}: use core.hlc.wall_ms"


def test_every_file_the_architecture_page_names_exists() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(
        re.findall(r"(?<![\w/.])((?:server|desktop|tests|bench|packaging|assets|scripts|docs)/[\w./-]*[\w/])", text)
    )
    assert len(named) > 60, sorted(named)
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {missing}"


def test_every_module_appears_on_the_architecture_page() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    modules = [*(ROOT / "server").rglob("*.py"), *(ROOT / "desktop").rglob("*.py")]
    unmapped = sorted(
        str(path.relative_to(ROOT))
        for path in modules
        if not path.name.startswith("__") and str(path.relative_to(ROOT)) not in text
    )
    assert not unmapped, f"modules missing from docs/ARCHITECTURE.md's code map: {unmapped}"


# The layers, lowest first (ARCHITECTURE.md, "Code map"). A runtime import may only point to its own layer or a lower
# one; an import under `if TYPE_CHECKING:` may name a higher layer's type (sync's transports take the web app's
# Services) because it never runs.
LAYERS = ["core", "storage", "use-cases", "sync", "mcp", "web", "cli", "desktop"]


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[1] == "desktop":
        return "desktop"
    sub = parts[2] if len(parts) > 2 else ""
    return sub if sub in LAYERS else "use-cases"  # server/*.py and server/meaning/


def runtime_imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import that runs (not under `if TYPE_CHECKING:`)."""
    found: list[tuple[int, str]] = []
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = ".".join(package[: len(package) - child.level + 1]) if child.level else ""
                name = ".".join(part for part in (base, child.module or "") if part)
                found.append((child.lineno, name))
                found.extend((child.lineno, f"{name}.{alias.name}") for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_runtime_imports_point_down_the_layers() -> None:
    upward = []
    for folder, package in [("server", "hivenote.server"), ("desktop", "hivenote.desktop")]:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [*path.relative_to(ROOT / folder).with_suffix("").parts]
            module = ".".join([package, *[p for p in parts if p != "__init__"]])
            mine = LAYERS.index(layer_of(module))
            for line, target in runtime_imports(path, module):
                if not target.startswith("hivenote.") or target in ("hivenote.server", "hivenote.desktop"):
                    continue
                if (
                    target.startswith("hivenote.server.")
                    and len(target.split(".")) == 3
                    and target.endswith("__version__")
                ):
                    continue
                theirs = LAYERS.index(layer_of(target))
                if theirs > mine:
                    upward.append(f"{path.relative_to(ROOT)}:{line} ({layer_of(module)}) imports {target}")
    assert not upward, "imports pointing up a layer:\n" + "\n".join(upward)


def test_every_package_folder_is_in_the_distribution() -> None:
    """A new subpackage must be listed in pyproject's packages and package-dir, or wheels and the frozen build
    leave it out while the editable install (and so most tests) still finds it."""
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {"server": "hivenote.server", "desktop": "hivenote.desktop"}
    for folder, package in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            name = ".".join([package, *rel.parts[1:]])
            assert name in setup["packages"], f"{rel}/ is not in pyproject's packages: add {name!r}"
            assert setup["package-dir"].get(name) == rel.as_posix(), f"{name} needs package-dir = {rel.as_posix()!r}"


def test_no_test_module_imports_another_every_shared_helper_is_in_tests_support() -> None:
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "tools" in path.relative_to(ROOT / "tests").parts[:1] or path.parts[-2] == "support":
            continue
        module = "tests." + ".".join(path.relative_to(ROOT / "tests").with_suffix("").parts)
        for line, target in runtime_imports(path, module):
            parts = target.split(".")
            if (
                parts[0] == "tests"
                and len(parts) > 1
                and parts[1] != "support"
                and any(p.startswith("test_") or p == "conftest" for p in parts[1:])
            ):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not found, "test modules importing other test modules (move the helper to tests/support):\n" + "\n".join(
        found
    )
