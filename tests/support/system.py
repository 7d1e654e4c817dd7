"""The `system` marker: the tests that need what a newcomer's laptop lacks (root, a private X display and D-Bus
session, Chromium, Syncthing, the npm tools in tests/tools, PyInstaller, libfaketime, tools from distribution
packages) or run Hivenote as a whole system: a real server on a socket, Hivenote processes, clusters of them for
minutes (sync, crashes, floods, load), fuzzing against a server. `pytest -m "not system"` (the README's fast lane)
leaves them out; CI runs everything.

Tests are hardly ever marked by hand (only a module whose every test runs Hivenote processes says so with
`pytestmark`). A support helper that needs such a thing says so with `@needs("...")`; at collection,
tests/conftest.py marks every test that reaches a registered helper, through its own code, the fixtures it uses,
and the functions and classes of tests/ they call (followed by name, as the code refers to them). A desktop test
that calls `start_desktop` is `system` without anyone remembering it. As a safety net, a registered plain function
called while a test runs that is not marked fails that test, saying what to do.
"""

from __future__ import annotations

import dis
import functools
import importlib
import inspect
import shutil
import types
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])

MARK = "system"
HELP = f"{MARK}: needs what a newcomer's laptop lacks (root, a desktop session, Chromium, Syncthing, npm tools, ...)"
SERVER = "a running Hivenote: a real server on a socket, or Hivenote processes (seconds each)"
SERVE = "real `hivenote serve` processes working for minutes (a sync cluster, crashes, floods, load)"
FOLDERS = {"fuzz": "long randomized runs against a real server (schemathesis, Hypothesis)"}  # tests/<folder>/: all
REGISTERED: dict[object, str] = {}  # helper -> what it needs
running: pytest.Item | None = None  # the test being run (set by tests/conftest.py)


def needs(what: str) -> Callable[[F], F]:
    """Register a helper (function, context manager, fixture or class) as needing `what`."""

    def register(helper: F) -> F:
        if isinstance(helper, type) or inspect.isgeneratorfunction(helper) or inspect.iscoroutinefunction(helper):
            REGISTERED[helper] = what  # a fixture or a class: found by name at collection only
            return helper

        @functools.wraps(helper)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if running is not None and running.get_closest_marker(MARK) is None:
                pytest.fail(
                    f"{running.nodeid} calls {helper.__qualname__}, which needs {what}, but is not marked `{MARK}`: "
                    f"register what leads there with tests.support.system.needs (or mark the test)",
                    pytrace=False,
                )
            return helper(*args, **kwargs)

        REGISTERED[guarded] = what
        return guarded  # type: ignore[return-value]

    return register


@needs("a program from outside Python (its message says which package)")
def program(name: str, install: str) -> str:
    """The path of an external program; fails, saying how to install it, when it is missing."""
    found = shutil.which(name)
    assert found, f"{name} is missing: {install}"
    return found


def _referenced(code: types.CodeType, namespace: dict[str, Any]) -> Iterable[object]:
    """The objects a function's code names as globals (and attributes of modules it names) or imports from tests/,
    nested code included."""
    previous: object = None
    imported = ""
    for instruction in dis.get_instructions(code):
        if instruction.opname == "IMPORT_NAME":  # an import inside the function: `from tests.support.x import y`
            imported = str(instruction.argval)
        elif instruction.opname == "IMPORT_FROM" and imported.startswith("tests."):
            yield getattr(importlib.import_module(imported), str(instruction.argval), None)
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            previous = namespace.get(str(instruction.argval))
            yield previous
            continue
        if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(previous, types.ModuleType):
            yield getattr(previous, str(instruction.argval), None)
        previous = None
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _referenced(constant, namespace)


def _ours(thing: object) -> bool:
    return str(getattr(thing, "__module__", "") or "").startswith("tests.")


def reason(thing: object, seen: set[int] | None = None) -> str | None:
    """What `thing` (a test, fixture, helper or class of tests/) needs through the registered helpers it reaches."""
    seen = set() if seen is None else seen
    if id(thing) in seen:
        return None
    seen.add(id(thing))
    try:
        if thing in REGISTERED:
            return REGISTERED[thing]
    except TypeError:  # unhashable
        return None
    if isinstance(thing, functools.partial):
        return reason(thing.func, seen)
    if isinstance(thing, (staticmethod, classmethod)):
        return reason(thing.__func__, seen)
    if isinstance(thing, property):
        return next((r for f in (thing.fget, thing.fset) if f and (r := reason(f, seen))), None)
    if isinstance(thing, type):
        if not _ours(thing):
            return None
        for klass in thing.__mro__:
            if klass in REGISTERED:
                return REGISTERED[klass]
            if _ours(klass):
                for member in vars(klass).values():
                    if found := reason(member, seen):
                        return found
        return None
    if isinstance(thing, types.FunctionType):
        function = inspect.unwrap(thing)
        if function in REGISTERED:
            return REGISTERED[function]
        if not _ours(function):
            return None
        for target in _referenced(function.__code__, function.__globals__):
            if target is not None and (found := reason(target, seen)):
                return found
    return None


def item_reason(item: pytest.Item) -> str | None:
    """What a collected test needs, through its function or any fixture it uses (None: the fast lane runs it)."""
    folders = item.path.relative_to(item.config.rootpath).parts[1:-1]  # under tests/
    if folders and folders[0] in FOLDERS:
        return FOLDERS[folders[0]]
    seen: set[int] = set()
    if isinstance(item, pytest.Function) and (found := reason(item.obj, seen)):
        return found
    info = getattr(item, "_fixtureinfo", None)
    for definitions in info.name2fixturedefs.values() if info else ():
        for definition in definitions:
            if found := reason(definition.func, seen):
                return found
    return None
