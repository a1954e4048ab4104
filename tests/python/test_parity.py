"""The sync side is generated from the async side, and is what it generates today.

For every pair of classes (`AsyncMemory` and `Memory`, `AsyncArchival` and
`Archival`, …, `AsyncSource` and `Source`, `AsyncMemoryTool` and `MemoryTool`)
the members are the same, and so are their signatures (parameter names, kinds,
defaults, annotations) and docstrings once the async names are mapped as
tools/async_to_sync.py maps them. And the generated modules on disk are what
the generator makes of their async sources: a stale one fails here as in `make lint`.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import pgmemory
import pgmemory.anthropic
import pgmemory.client
import pgmemory.connection
import pgmemory.tools

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "async_to_sync.py"


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()
PUBLIC = [pgmemory, pgmemory.client, pgmemory.connection, pgmemory.anthropic, pgmemory.tools]
# Bookkeeping of the class object, not its API.
SKIP = {
    "__dict__",
    "__weakref__",
    "__module__",
    "__qualname__",
    "__doc__",
    "__annotations__",
    "__orig_bases__",
    "__parameters__",
    "__abstractmethods__",
    "__firstlineno__",
    "__static_attributes__",
    "_abc_impl",
}


def sync_name(name: str) -> str:
    return tool.NAMES.get(name, name)


def generated_pairs() -> list[tuple[type, type]]:
    """(async class, sync class) for every class of every module of pgmemory/_async/."""
    pairs = []
    for source in tool.sources():
        name = source.stem
        async_module = importlib.import_module(f"pgmemory._async.{name}")
        sync_module = importlib.import_module(f"pgmemory._sync.{name}")
        for cls in vars(async_module).values():
            if inspect.isclass(cls) and cls.__module__ == async_module.__name__:
                pairs.append((cls, getattr(sync_module, sync_name(cls.__name__))))
    return pairs


PAIRS = generated_pairs()


def members(cls: type) -> dict[str, Any]:
    """What the classes of pgmemory in `cls`'s MRO define (not the SDK's, not object's)."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("pgmemory"):
            found.update((k, v) for k, v in vars(klass).items() if k not in SKIP)
    return found


def describe(value: Any, mapped: bool) -> Any:
    """A member as comparable data; `mapped`: its async names as the sync side says them."""
    text = tool.rewrite_text if mapped else (lambda s: s)

    def annotation(a: Any) -> Any:
        return text(a) if isinstance(a, str) else a

    if isinstance(value, property):
        return ("property", *(describe(f, mapped) for f in (value.fget, value.fset)))
    if isinstance(value, (staticmethod, classmethod)):
        return (type(value).__name__, describe(value.__func__, mapped))
    if inspect.isfunction(value):
        sig = inspect.signature(value)
        params = [
            (
                p.name,
                p.kind,
                text(repr(p.default)),
                annotation(p.annotation),
            )
            for p in sig.parameters.values()
        ]
        return ("function", params, annotation(sig.return_annotation), text(value.__doc__ or ""))
    if value is None:
        return None
    return ("value", text(repr(value)))


def test_every_public_async_class_has_its_generated_sync_twin() -> None:
    seen = set()
    for module in PUBLIC:
        for name, cls in vars(module).items():
            if not (inspect.isclass(cls) and name.startswith("Async")):
                continue
            if not cls.__module__.startswith("pgmemory."):
                continue
            sync = getattr(module, sync_name(name))
            assert cls.__module__.startswith("pgmemory._async."), cls
            assert sync.__module__ == cls.__module__.replace("._async.", "._sync."), sync
            assert (cls, sync) in PAIRS
            seen.add(name)
    assert {
        "AsyncMemory",
        "AsyncArchival",
        "AsyncRecall",
        "AsyncDocuments",
        "AsyncSource",
        "AsyncMemoryTool",
        "AsyncMemoryTools",
        "AsyncMemoryFunctionTool",
    } <= seen


@pytest.mark.parametrize("async_, sync", PAIRS, ids=[s.__name__ for _, s in PAIRS])
def test_the_sync_class_mirrors_the_async_one(async_: type, sync: type) -> None:
    assert sync.__name__ == sync_name(async_.__name__)
    doc = async_.__doc__
    assert sync.__doc__ == (None if doc is None else tool.rewrite_text(doc))
    assert {k: describe(v, True) for k, v in inspect.get_annotations(async_).items()} == {
        k: describe(v, False) for k, v in inspect.get_annotations(sync).items()
    }
    async_members, sync_members = members(async_), members(sync)
    assert sorted(sync_name(n) for n in async_members) == sorted(sync_members)
    for name, value in async_members.items():
        other = sync_members[sync_name(name)]
        where = f"{sync.__name__}.{sync_name(name)}"
        assert describe(other, False) == describe(value, True), where
        assert not inspect.iscoroutinefunction(other), where
        if inspect.iscoroutinefunction(value):
            assert inspect.isfunction(other), where
    # The base classes differ by side only as mapped (the SDK's sync and async tools).
    bases = [sync_name(b.__name__) for b in async_.__bases__]
    assert bases == [b.__name__ for b in sync.__bases__]


def test_the_public_clients_are_coroutines_on_the_async_side() -> None:
    for async_, sync in PAIRS:
        if async_.__name__.startswith("_"):
            continue
        for name in ("execute", "run", "save", "index", "read", "purge", "close"):
            if hasattr(async_, name):
                assert inspect.iscoroutinefunction(getattr(async_, name)), (async_, name)
                assert not inspect.iscoroutinefunction(getattr(sync, name)), (sync, name)


# ------------------------------------------------------------------ the generator


def test_the_generated_modules_are_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr


def test_a_changed_generated_module_is_stale() -> None:
    for source in tool.sources():
        target = tool.target_of(source)
        current = target.read_text()
        assert tool.check_text(source, current) is None
        edited = current.replace("return ", "return  ", 1).replace('"""', '"""Edited. ', 1)
        problem = tool.check_text(source, edited)
        assert problem is not None
        shown = target.relative_to(ROOT).as_posix()
        assert problem.startswith(f"{shown} is stale")
        assert "make generate" in problem
        assert "+" in problem and "Edited." in problem  # a diff of what differs
        missing = tool.check_text(source, None)
        assert missing is not None and missing.startswith(f"{shown} is missing")


def test_check_exits_non_zero_naming_the_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "_sync"
    shutil.copytree(tool.SYNC_DIR, copy)
    monkeypatch.setattr(tool, "SYNC_DIR", copy)
    assert tool.main(["--check"]) == 0
    client = copy / "client.py"
    client.write_text(client.read_text().replace("def close(", "def closed(", 1))
    (copy / "leftover.py").write_text("")
    assert tool.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert f"{client} is stale" in err
    assert "make generate" in err
    assert f"{copy / 'leftover.py'} has no async source" in err
    (copy / "leftover.py").unlink()
    assert tool.main([]) == 0  # regenerates the stale one (in the copy)
    assert tool.main(["--check"]) == 0
    assert client.read_text() == (tool.SYNC_DIR / "client.py").read_text()
    assert (ROOT / "python/pgmemory/_sync/client.py").read_text() == client.read_text()


def test_the_rewrite() -> None:
    code = tool.rewrite(
        "import asyncio\n"
        "class AsyncSource:\n"
        '    """On an AsyncConnection of an `AsyncMemory`."""\n'
        "    lock = asyncio.Lock()\n"
        "    async def __aenter__(self) -> AsyncSource:\n"
        "        async with self.lock, x() as y:\n"
        "            async for z in y:\n"
        "                await z.aembed([t async for t in z])\n"
        "        return self\n"
    )
    tree = ast.parse(code)
    assert not [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Await, ast.AsyncWith, ast.AsyncFor, ast.AsyncFunctionDef))
    ]
    assert "import threading" in code and "asyncio" not in code
    assert "class Source:" in code and "def __enter__(self) -> Source:" in code
    assert "On a Connection of a `Memory`." in code
    assert "with self.lock, x() as y:" in code and "for z in y:" in code
    assert "z.embed([t for t in z])" in code
    with pytest.raises(SystemExit, match="no sync name for AsyncThing"):
        tool.rewrite("class AsyncThing: pass\n")
    with pytest.raises(SystemExit, match="no sync name for asyncio"):
        tool.rewrite("import asyncio\nasyncio.gather()\n")
