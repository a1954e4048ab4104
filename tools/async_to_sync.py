#!/usr/bin/env python3
"""Generate pgmemory's sync side from its async side.

Every module of python/pgmemory/_async/ is written by hand; this script turns
each into python/pgmemory/_sync/ (same file name) by rewriting its syntax tree:

- `async def` becomes `def`, `async with` `with`, `async for` `for`, and
  `await x` just `x`;
- the names in NAMES become their sync names wherever they stand (names,
  attributes, imports, definitions: AsyncMemory -> Memory,
  `__aenter__` -> `__enter__`, `aembed` -> `embed`, ...), and the dotted names
  in DOTTED likewise (asyncio.Lock -> threading.Lock, with its import);
- in every string (docstrings and messages) the phrases in TEXT are replaced,
  "an AsyncX" becomes "a X", and the words of NAMES are renamed.

The tree is printed with `ast.unparse` (comments and blank lines inside
functions are not kept: read the async source), its imports are sorted and it
is formatted with ruff, so the output depends only on the source (and the
version of ruff: after an upgrade of ruff, regenerate). A name the
rewrite does not know (anything still spelled async, or asyncio) is an error:
give it a sync name in NAMES, or move the code that truly differs between the
sides into a pair of helpers in python/pgmemory/_common.py (as AsyncWriter and
Writer are), whose async name NAMES maps to the sync one.

    python tools/async_to_sync.py          # write every sync module
    python tools/async_to_sync.py --check  # exit 1 if one on disk is stale
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASYNC_DIR = ROOT / "python" / "pgmemory" / "_async"
SYNC_DIR = ROOT / "python" / "pgmemory" / "_sync"
FIX = "make generate (or: .venv/bin/python tools/async_to_sync.py)"
HEADER = (
    "# This file is generated from {source} by tools/async_to_sync.py; do not edit.\n"
    "# Change the async source and run `make generate`.\n"
)

# Async name -> sync name, in code and in the words of strings.
NAMES = {
    # pgmemory
    "AsyncMemory": "Memory",
    "AsyncArchival": "Archival",
    "AsyncRecall": "Recall",
    "AsyncDocuments": "Documents",
    "_AsyncView": "_View",
    "AsyncSource": "Source",
    "AsyncMemoryTool": "MemoryTool",
    "AsyncMemoryTools": "MemoryTools",
    "AsyncMemoryFunctionTool": "MemoryFunctionTool",
    "AsyncWriter": "Writer",
    "areport": "report",
    "aembed": "embed",
    "aembed_query": "embed_query",
    "_aembed_queries": "_embed_queries",
    "aextract": "extract",
    # psycopg, psycopg_pool, pgvector
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncCursor": "Cursor",
    "register_vector_async": "register_vector",
    # anthropic
    "AsyncAnthropic": "Anthropic",
    "BetaAsyncAbstractMemoryTool": "BetaAbstractMemoryTool",
    "BetaAsyncBuiltinFunctionTool": "BetaBuiltinFunctionTool",
    # the standard library
    "asynccontextmanager": "contextmanager",
    "AsyncIterator": "Iterator",
    "AsyncIterable": "Iterable",
    "AsyncGenerator": "Generator",
    "AsyncExitStack": "ExitStack",
    "StopAsyncIteration": "StopIteration",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
}

# module.name -> module.name: the sync module is imported in place of the async one.
DOTTED = {
    "asyncio.Lock": "threading.Lock",
    "asyncio.Event": "threading.Event",
    "asyncio.sleep": "time.sleep",
}

# What the async side's strings say of it alone -> what the sync side's say instead.
# Matched across line breaks; each phrase must still be found in some source.
TEXT = {
    " (`aembed`)": "",
    ", awaited when it returns an awaitable": "",
    "runs in a task while": "runs in a second thread while",
}

_WORDS = re.compile(
    r"(?<!\w)(" + "|".join(map(re.escape, sorted(NAMES, key=len)[::-1])) + r")(?!\w)"
)
_ARTICLE = re.compile(r"(?<!\w)([Aa])n(\s+`?)(?=(" + "|".join(map(re.escape, NAMES)) + r")(?!\w))")
_ASYNC_LEFT = re.compile(r"async|await", re.IGNORECASE)


def _phrase(text: str) -> re.Pattern[str]:
    # The words of `text` with any white space between them (and around, where it has some).
    words = r"\s+".join(map(re.escape, text.split()))
    before, after = (r"\s+" if edge.isspace() else "" for edge in (text[0], text[-1]))
    return re.compile(before + words + after)


_PHRASES = {phrase: _phrase(phrase) for phrase in TEXT}
_used_phrases: set[str] = set()


def rewrite_text(text: str) -> str:
    """A string of the async side as the sync side says it."""
    for phrase, pattern in _PHRASES.items():
        text, n = pattern.subn(TEXT[phrase], text)
        if n:
            _used_phrases.add(phrase)
    text = _ARTICLE.sub(lambda m: m[1] + m[2] if NAMES[m[3]][0] not in "AEIOU" else m[0], text)
    return _WORDS.sub(lambda m: NAMES[m[1]], text)


class AsyncToSync(ast.NodeTransformer):
    """The rewrite of one module's tree; `modules` collects what DOTTED needs imported."""

    def __init__(self) -> None:
        self.modules: set[str] = set()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.FunctionDef:
        fields = {f: getattr(node, f) for f in node._fields if hasattr(node, f)}
        new = ast.FunctionDef(**fields)
        return self.visit_FunctionDef(ast.copy_location(new, node))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.generic_visit(node)
        node.name = NAMES.get(node.name, node.name)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        self.generic_visit(node)
        node.name = NAMES.get(node.name, node.name)
        return node

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.With:
        self.generic_visit(node)
        return ast.copy_location(ast.With(node.items, node.body, node.type_comment), node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.For:
        self.generic_visit(node)
        new = ast.For(node.target, node.iter, node.body, node.orelse, node.type_comment)
        return ast.copy_location(new, node)

    def visit_Await(self, node: ast.Await) -> ast.expr:
        return self.visit(node.value)

    def visit_comprehension(self, node: ast.comprehension) -> ast.comprehension:
        self.generic_visit(node)
        node.is_async = 0
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = NAMES.get(node.id, node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.Attribute:
        if isinstance(node.value, ast.Name) and f"{node.value.id}.{node.attr}" in DOTTED:
            module, _, attr = DOTTED[f"{node.value.id}.{node.attr}"].partition(".")
            self.modules.add(module)
            new = ast.Attribute(ast.Name(module, ast.Load()), attr, node.ctx)
            return ast.copy_location(new, node)
        self.generic_visit(node)
        node.attr = NAMES.get(node.attr, node.attr)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        seen: set[tuple[str, str | None]] = set()
        names = []
        for alias in node.names:
            alias.name = NAMES.get(alias.name, alias.name)
            alias.asname = alias.asname and NAMES.get(alias.asname, alias.asname)
            if (alias.name, alias.asname) not in seen:
                seen.add((alias.name, alias.asname))
                names.append(alias)
        node.names = names
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        if isinstance(node.value, str):
            node.value = rewrite_text(node.value)
        return node


def _import_sync_modules(tree: ast.Module, modules: set[str]) -> None:
    """`import asyncio` becomes the imports of the modules DOTTED mapped its names to."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "asyncio" for a in node.names):
            kept = [a for a in node.names if a.name != "asyncio"]
            node.names = kept + [ast.alias(m) for m in sorted(modules)]
            modules = set()  # imported once
    tree.body = [n for n in tree.body if not (isinstance(n, ast.Import) and not n.names)]


def _names_left(tree: ast.AST) -> Iterable[str]:
    """The names of the rewritten tree still spelled async (or asyncio): not rewritten."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.alias)):
            name = node.name
        else:
            continue
        if _ASYNC_LEFT.search(name):
            yield name


def _ruff(args: list[str], text: str, target: Path) -> str:
    # The project's settings, wherever `target` is.
    config = ["--config", str(ROOT / "pyproject.toml")]
    cmd = [sys.executable, "-m", "ruff", *args, *config, "--stdin-filename", str(target), "-"]
    done = subprocess.run(cmd, input=text, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}{done.stdout}")
    return done.stdout


def target_of(source: Path) -> Path:
    """The sync module generated from an async one."""
    return SYNC_DIR / source.relative_to(ASYNC_DIR)


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:  # not in the repository (a test's copy)
        return str(path)


def rewrite(code: str, filename: str = "<async source>") -> str:
    """The sync code for async `code`, as `ast.unparse` prints it (not yet formatted)."""
    tree = ast.parse(code, filename=filename)
    rewriter = AsyncToSync()
    tree = ast.fix_missing_locations(rewriter.visit(tree))
    _import_sync_modules(tree, rewriter.modules)
    left = sorted(set(_names_left(tree)))
    if left:
        raise SystemExit(
            f"{filename}: no sync name for {', '.join(left)}: add it to NAMES (or DOTTED)"
            " in tools/async_to_sync.py, or move the code that differs into a pair of helpers"
            " in python/pgmemory/_common.py"
        )
    return ast.unparse(tree) + "\n"


def generate(source: Path) -> str:
    """The text of the sync module for the async module `source`."""
    text = HEADER.format(source=_shown(source)) + rewrite(source.read_text(), _shown(source))
    target = target_of(source)
    text = _ruff(["check", "--fix-only", "--exit-zero", "--select", "I"], text, target)
    return _ruff(["format"], text, target)


def check_text(source: Path, current: str | None, target: Path | None = None) -> str | None:
    """None when `current` (the text on disk of the sync module; None: missing) is what
    `source` generates; else what is wrong and how to fix it."""
    target = target or target_of(source)
    expected = generate(source)
    if current == expected:
        return None
    what = "is missing" if current is None else "is stale"
    diff = difflib.unified_diff(
        (current or "").splitlines(keepends=True),
        expected.splitlines(keepends=True),
        f"{_shown(target)} (on disk)",
        f"{_shown(target)} (generated)",
        n=1,
    )
    shown = "".join(list(diff)[:40])
    return (
        f"{_shown(target)} {what}: it is not what tools/async_to_sync.py generates from"
        f" {_shown(source)}.\nRegenerate it: {FIX}\n{shown}"
    )


def sources() -> list[Path]:
    return sorted(p for p in ASYNC_DIR.glob("*.py") if p.name != "__init__.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a sync module is stale"
    )
    args = parser.parse_args(argv)
    problems = []
    made = {target_of(source) for source in sources()}
    for source in sources():
        target = target_of(source)
        if args.check:
            current = target.read_text() if target.exists() else None
            problem = check_text(source, current, target)
            if problem:
                problems.append(problem)
        else:
            text = generate(source)
            if not target.exists() or target.read_text() != text:
                target.write_text(text)
                print(f"wrote {_shown(target)}")
    for orphan in sorted(set(SYNC_DIR.glob("*.py")) - made - {SYNC_DIR / "__init__.py"}):
        problems.append(f"{_shown(orphan)} has no async source in {_shown(ASYNC_DIR)}: delete it")
    unused = sorted(set(TEXT) - _used_phrases)
    if unused:
        problems.append(
            f"TEXT in tools/async_to_sync.py has phrases no async source says: {unused}"
        )
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
