"""Every fenced code block of README.md and docs/*.md is run or checked here.

`test_block[<file>:<line>]` exists for each block (the line of its opening fence):

- SQL statements run through the real `psql` against a database of this test
  (`-v ON_ERROR_STOP=1`; `:'org'` and `:'user'` are the quickstart's uuids). A block
  that uses `:'org'` runs as the user, as the quickstart says ("the calls run in a
  transaction with the user's claims set"): BEGIN, set_config('request.jwt.claims',
  …, true), the statements, COMMIT; a comment naming the service or the user picks
  the caller (tests/docblocks.py has the rules). Shown outputs are compared, and a
  statement documented as failing (`-- MEMORY_DOCUMENT_CONFLICT`) runs on its own
  and must fail with exactly that HINT.
- A block that creates the extension, creates roles or grants runs in a sandbox: a
  database of its own (without the extension when the block creates it), in one
  transaction that is rolled back; roles the block creates are renamed away first,
  roles it only names (`web_user`) are created — a fresh server, as the docs presume.
- The SQL blocks of one file run in order in one fresh database; then the file's
  Python blocks run, in order, as one script (`sys.executable`) against the same
  database, with PGMEMORY_DSN naming it (login memory_app, a member of
  memory_service) and the preamble of PREAMBLES. So a SQL example and a Python
  example of the same page must not collide. A `print(…)` with a comment on its
  line, or comment lines right below it, must print that (… matches any text).
- Signature blocks are compared with the catalog (docs/sql-reference.md) and with
  `inspect.signature` (Python); plain blocks with what they show.
- Shell blocks run where SHELL_RUNNERS has a runner; every other block says on the
  line before its fence why it is not run (`<!-- not run: … -->`): those tests are
  skipped with that reason, so they are listed in every run (`-rs`).
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import os
import re
import subprocess
import sys
import tokenize
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgmemory
import pgmemory.anthropic
from pgmemory.server import pg_bin_dir
from tests.conftest import SERVICE_LOGIN, ServerInfo
from tests.docblocks import ROOT, Block, all_blocks, matches, split_sql

BLOCKS = all_blocks()
BY_ID = {block.id: block for block in BLOCKS}
PSQL = pg_bin_dir() / "psql"

# The quickstart's organization and user (its psql variables :'org' and :'user').
ORG = "00000000-0000-4000-8000-00000000000a"
USER = "00000000-0000-4000-8000-000000000001"
USER_CLAIMS = json.dumps({"sub": USER, "role": "authenticated"})

# Files written by a program that this test cannot annotate: their blocks are not run.
GENERATED = {
    "docs/benchmarks.md": (
        "written by bench/report.py; `make bench` runs the benchmarks (minutes to an hour)"
    ),
}

# What a page's Python examples presume, as its prose says.
PREAMBLES = {
    "docs/python-reference.md": (
        "import os, uuid\n"
        "dsn = os.environ['PGMEMORY_DSN']\n"
        "org, user_id = uuid.uuid4(), uuid.uuid4()\n"
    ),
    "docs/embedders.md": "import os\ndsn = os.environ['PGMEMORY_DSN']\n",
}
# Placeholders for examples that only read them (nothing is sent anywhere).
PYTHON_ENV = {"AZURE_OPENAI_API_KEY": "placeholder-key-never-sent"}

# Claims made in comments, checked after the block that contains the snippet.
CHECKS = {
    ("docs/quickstart.md", "rows = user.archival.save_extracted("): (
        "assert rows[0].id and rows[1].id and rows[2].id is None\n"
        "assert rows[2].duplicate_of == rows[0].id and round(rows[2].similarity, 2) == 0.99\n"
        "fact = user.archival.get(ORG, rows[0].id)\n"
        "assert fact['forgotten_at'] and fact['superseded_by'] == str(new)\n"
    ),
    ("docs/quickstart.md", "version = service.documents.write("): (
        "assert version == 1 and service.documents.read('run-43', 'plan.md').version == 2\n"
    ),
    ("docs/python-reference.md", "current = user.read("): (
        "assert user.read(org, '/memories/notes.md')['content'] == '…more\\n'\n"
    ),
    ("docs/embedders.md", "class Embedder(Protocol):"): (
        "import pgmemory\n"
        "members = lambda cls: {name for name in vars(cls) if not name.startswith('_')}\n"
        "assert members(Embedder) == members(pgmemory.Embedder) == "
        "{'dimensions', 'model', 'embed', 'aembed'}\n"
    ),
    ("docs/embedders.md", "class E5Embedder:"): (
        "class Inner:\n"
        "    model, dimensions = 'e5', 1\n"
        "    def embed(self, texts): return [[float(len(t))] for t in texts]\n"
        "e5 = E5Embedder(Inner())\n"
        "assert (e5.model, e5.dimensions) == ('e5', 1)\n"
        "assert e5.embed(['ab']) == [[11.0]] and e5.embed_query(['ab']) == [[9.0]]\n"
    ),
    ("docs/embedders.md", "mem.embed_pending()"): (
        "assert mem.embedding_status()['dimensions'] == 384\n"
    ),
}


# --------------------------------------------------------------------------- databases


@dataclass
class Outcome:
    problems: list[str] = field(default_factory=list)
    output: str = ""  # Python: what the block printed


@dataclass
class Docs:
    """Databases of this module (dropped at its end) and each file's run, once."""

    server: ServerInfo
    template: str
    tmp: Path  # scripts written for the Python blocks
    databases: list[str] = field(default_factory=list)
    runs: dict[str, dict[str, Outcome]] = field(default_factory=dict)

    def dsn(self, dbname: str, login: str = "postgres") -> str:
        return f"postgresql://{login}@/{dbname}?host={self.server.host}&port={self.server.port}"

    def new_db(self, *, bare: bool = False) -> str:
        """A fresh database: a copy of the test template (the extension created), or bare."""
        name = f"docs_{os.getpid()}_{len(self.databases)}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(
                f'CREATE DATABASE {name} TEMPLATE "{"template0" if bare else self.template}"'
            )
        self.databases.append(name)
        return name

    def drop(self, name: str) -> None:
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def run_file(self, path: str) -> dict[str, Outcome]:
        if path not in self.runs:
            self.runs[path] = run_file(self, path)
        return self.runs[path]


@pytest.fixture(scope="module")
def docs(
    pg_server: ServerInfo, memory_template: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Docs]:
    env = Docs(pg_server, memory_template.template_dbname, tmp_path_factory.mktemp("docs"))
    yield env
    for name in env.databases:
        env.drop(name)


@pytest.fixture(scope="module")
def catalog(docs: Docs) -> Iterator[psycopg.Connection]:
    with psycopg.connect(docs.dsn(docs.new_db()), autocommit=True) as conn:
        yield conn


# --------------------------------------------------------------------------- kinds


def not_run_reason(block: Block) -> str | None:
    return block.not_run or GENERATED.get(block.path)


def python_signatures(text: str) -> list[ast.FunctionDef] | None:
    """`Memory(target, embedder=None, *, service=False)` lines as defs; None for code."""
    try:
        ast.parse(text)
        return None
    except SyntaxError:
        pass
    lines, depth = [], 0
    for line in text.splitlines():
        if depth == 0 and re.match(r"\w+\(", line):
            line = "def " + line
        depth += line.count("(") - line.count(")")
        if depth == 0 and line.strip():
            line += ": ..."
        lines.append(line)
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None  # broken code: running it says where
    return [node for node in tree.body if isinstance(node, ast.FunctionDef)]


def is_sandbox(block: Block) -> bool:
    return re.search(r"^\s*(CREATE EXTENSION|CREATE ROLE|GRANT)\b", block.text, re.M) is not None


def kind(block: Block) -> str:
    if not_run_reason(block):
        return "not run"
    if block.lang == "sql":
        if block.path == "docs/sql-reference.md" and block.text.startswith("memory."):
            return "sql signature" if "→" in block.text else "sql types"
        return "sql sandbox" if is_sandbox(block) else "sql"
    if block.lang == "python":
        return "python signature" if python_signatures(block.text) else "python"
    if block.lang == "sh" and shell_runner(block):
        return "sh"
    if block.lang == "" and block.path in TEXT_CHECKS:
        return "text"
    return "unaccounted"


def default_caller(block: Block) -> str:
    return "user" if ":'org'" in block.text else "service"


# --------------------------------------------------------------------------- SQL


def psql(dsn: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PSQL), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", "-",
         "-v", f"org={ORG}", "-v", f"user={USER}", "-v", f"claims={USER_CLAIMS}"],
        input=script, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


MARK = "@@DOCS-STATEMENT"
SET_USER = "SELECT set_config('request.jwt.claims', :'claims', true) \\g /dev/null\n"
SET_SERVICE = "SELECT set_config('request.jwt.claims', '', true) \\g /dev/null\n"


def where(block: Block, line: int) -> str:
    return f"{block.path}:{block.first_line + line}"


def run_statements(
    dsn: str, block: Block, statements: list[Any], prefix: str = "", suffix: str = ""
) -> tuple[subprocess.CompletedProcess[str], dict[int, str]]:
    """One psql run; the output of each statement, by its index in `statements`."""
    script = prefix
    for i, stmt in enumerate(statements):
        script += f"\\echo {MARK} {i}\n{stmt.text}\n"
    done = psql(dsn, script + suffix)
    outputs: dict[int, list[str]] = {}
    current = None
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            current = int(line.split()[1])
            outputs[current] = []
        elif current is not None:
            outputs[current].append(line)
    return done, {i: "\n".join(lines).rstrip("\n") for i, lines in outputs.items()}


def check_outputs(block: Block, statements: list[Any], outputs: dict[int, str]) -> list[str]:
    problems = []
    for i, stmt in enumerate(statements):
        expected = stmt.expected_output
        if expected is not None and not matches(expected, outputs.get(i, "")):
            problems.append(
                f"{where(block, stmt.start_line)}: shows\n{expected}\nbut psql printed\n"
                f"{outputs.get(i, '')}"
            )
    return problems


def failed_at(block: Block, statements: list[Any], outputs: dict[int, str], stderr: str) -> str:
    stmt = statements[max(outputs, default=0)]
    return f"{where(block, stmt.start_line)}: {stmt.text.splitlines()[0]}\n{stderr}"


def run_sql_block(dsn: str, block: Block) -> list[str]:
    """Run one SQL block in `dsn`'s database; the problems found."""
    statements = split_sql(block.text, default_caller(block))
    explicit = re.search(
        r"^\s*BEGIN\b|set_config\(\s*'request\.jwt\.claims'", block.text, re.M | re.I
    )
    segments: list[list[Any]] = []
    for stmt in statements:
        if explicit:
            stmt.caller = "service"  # the block sets its claims itself
        if (
            segments
            and not stmt.error
            and not segments[-1][-1].error
            and (segments[-1][-1].caller == stmt.caller)
        ):
            segments[-1].append(stmt)
        else:
            segments.append([stmt])
    problems: list[str] = []
    for segment in segments:
        user = segment[0].caller == "user"
        done, outputs = run_statements(
            dsn, block, segment, "BEGIN;\n" + SET_USER if user else "", "COMMIT;\n" if user else ""
        )
        error = segment[0].error
        if error:
            hint = re.search(r"^HINT:\s+(\S+)", done.stderr, re.M)
            if done.returncode == 0 or hint is None or hint.group(1) != error:
                problems.append(
                    f"{where(block, segment[0].start_line)}: documented to fail with {error},"
                    f" but psql exited {done.returncode}:\n{done.stderr}"
                )
            continue
        if done.returncode != 0:
            problems.append(failed_at(block, segment, outputs, done.stderr))
            break
        problems += check_outputs(block, segment, outputs)
    return problems


def granted_roles(text: str) -> set[str]:
    """Roles a block's GRANT statements name (grantees, and roles granted)."""
    roles: set[str] = set()
    for grant in re.finditer(r"^\s*GRANT\s+(.*?)\s+TO\s+(.*?);", text, re.M | re.S | re.I):
        roles |= {r.strip() for r in grant.group(2).split(",")}
        if not re.search(r"\bON\b", grant.group(1), re.I):
            roles |= {r.strip() for r in grant.group(1).split(",")}
    return {r for r in roles if r.upper() != "PUBLIC"}


def run_sandbox_block(docs: Docs, block: Block) -> list[str]:
    """A set-up block, on a fresh server as far as it can tell; everything rolled back."""
    statements = split_sql(block.text, default_caller(block))
    assert not any(stmt.error for stmt in statements), "no expected errors in a sandbox block"
    bare = re.search(r"^\s*CREATE EXTENSION\b", block.text, re.M | re.I) is not None
    name = docs.new_db(bare=bare)
    try:
        dsn = docs.dsn(name)
        with psycopg.connect(dsn) as conn:
            existing = {row[0] for row in conn.execute("SELECT rolname FROM pg_roles")}
        created = set(re.findall(r"^\s*CREATE ROLE\s+(\w+)", block.text, re.M | re.I))
        prefix = "BEGIN;\n"
        prefix += "".join(f"ALTER ROLE {r} RENAME TO docs_away_{r};\n" for r in created & existing)
        prefix += "".join(
            f"CREATE ROLE {r};\n" for r in sorted(granted_roles(block.text) - created - existing)
        )
        script_statements = []
        for stmt in statements:
            setter = SET_USER if stmt.caller == "user" else SET_SERVICE
            script_statements.append(type(stmt)(setter + stmt.text, stmt.start_line, stmt.end_line))
        done, outputs = run_statements(dsn, block, script_statements, prefix, "ROLLBACK;\n")
        if done.returncode != 0:
            return [failed_at(block, statements, outputs, done.stderr)]
        return check_outputs(block, statements, outputs)
    finally:
        docs.drop(name)


# --------------------------------------------------------------------------- Python


def printed_expectations(code: str) -> list[list[str]]:
    """What each commented print(…) of a block must print: the comment on its line, or
    the comment lines right below it at its indentation."""
    tree = ast.parse(code)
    lines = code.splitlines()
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    comments = {tok.start[0]: tok.string for tok in tokens if tok.type == tokenize.COMMENT}
    found = []
    for node in ast.walk(tree):
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print"):
            continue
        end = node.end_lineno or node.lineno
        expected = []
        if end in comments and not lines[end - 1].lstrip().startswith("#"):
            expected.append(comments[end][1:].strip())
        else:
            k = end
            indent = " " * node.col_offset + "#"
            while k < len(lines) and lines[k].startswith(indent):
                expected.append(lines[k].strip()[1:].strip())
                k += 1
        if expected:
            found.append(expected)
    return found


def printed(expected: list[str], output: str) -> bool:
    out = output.splitlines()
    return any(
        all(matches(e, o) for e, o in zip(expected, out[i : i + len(expected)], strict=True))
        for i in range(len(out) - len(expected) + 1)
    )


def check_for(block: Block) -> str:
    return "".join(
        code
        for (path, snippet), code in CHECKS.items()
        if path == block.path and snippet in block.text
    )


RUNNER = """\
import sys, traceback
for _id, _path, _line, _code, _check in __blocks__:
    print("@@DOCS-BEGIN", _id, flush=True)
    try:
        exec(compile("\\n" * (_line - 1) + _code, _path, "exec"), globals())
        if _check:
            exec(compile(_check, "CHECKS of tests/python/test_docs.py", "exec"), globals())
    except BaseException:
        sys.stdout.flush()
        traceback.print_exc(file=sys.stdout)
        print("@@DOCS-FAILED", _id, flush=True)
        break
    print("@@DOCS-END", _id, flush=True)
"""


def run_python_blocks(dsn: str, blocks: list[Block], tmp: Path) -> dict[str, Outcome]:
    """The blocks in order, as one script; each block's output and problems."""
    listed = [(b.id, b.path, b.first_line, b.text, check_for(b)) for b in blocks]
    script = tmp / f"docs_{blocks[0].path.replace('/', '_')}.py"
    script.write_text(f"__blocks__ = {listed!r}\n" + PREAMBLES.get(blocks[0].path, "") + RUNNER)
    env = {k: v for k, v in os.environ.items() if k not in ("PGMEMORY_DSN", "DATABASE_URL")}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**env, **PYTHON_ENV, "PGMEMORY_DSN": dsn}, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    outcomes = {
        b.id: Outcome(
            [f"{b.id} not reached: an earlier block failed, or the script died:\n{done.stderr}"]
        )
        for b in blocks
    }
    current = None
    for line in done.stdout.splitlines(keepends=True):
        if line.startswith("@@DOCS-"):
            tag, block_id = line.split()
            current = block_id if tag == "@@DOCS-BEGIN" else None
            if tag == "@@DOCS-BEGIN":
                outcomes[block_id] = Outcome()
            elif tag == "@@DOCS-FAILED":
                outcomes[block_id].problems.append(
                    f"{block_id} raised:\n{outcomes[block_id].output}\n{done.stderr}"
                )
        elif current is not None:
            outcomes[current].output += line
    for block in blocks:
        outcome = outcomes[block.id]
        if outcome.problems:
            continue
        for expected in printed_expectations(block.text):
            if not printed(expected, outcome.output):
                outcome.problems.append(
                    f"{block.id}: shows\n"
                    + "\n".join(expected)
                    + f"\nbut printed\n{outcome.output}"
                )
    return outcomes


def run_file(docs: Docs, path: str) -> dict[str, Outcome]:
    """A page's SQL blocks in order in one fresh database, then its Python blocks there."""
    blocks = [b for b in BLOCKS if b.path == path]
    name = docs.new_db()
    outcomes: dict[str, Outcome] = {}
    for block in blocks:
        if kind(block) == "sql":
            outcomes[block.id] = Outcome(run_sql_block(docs.dsn(name), block))
    python = [b for b in blocks if kind(b) == "python"]
    if python:
        outcomes.update(run_python_blocks(docs.dsn(name, SERVICE_LOGIN), python, docs.tmp))
    return outcomes


# --------------------------------------------------------------------------- signatures


def split_top(text: str) -> list[str]:
    """Split at commas outside quotes and parentheses."""
    parts, depth, quote, current = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def canonical_type(conn: psycopg.Connection, name: str) -> str:
    row = conn.execute("SELECT format_type(to_regtype(%s), NULL)", (name,)).fetchone()
    assert row and row[0], f"not a type: {name}"
    return row[0]


def arguments(conn: psycopg.Connection, text: str) -> list[tuple[str, str, str | None]]:
    """(name, canonical type, default) of each `name type [DEFAULT expr]`."""
    out = []
    for part in split_top(text):
        found = re.fullmatch(r"(\w+)\s+(.+?)(?:\s+DEFAULT\s+(.+))?", part, re.S)
        assert found, f"not an argument: {part!r}"
        name, type_name, default = found.groups()
        type_name = canonical_type(conn, type_name)
        if default is not None:
            default = re.sub(rf"::{re.escape(type_name)}$", "", default.strip())
        out.append((name, type_name, default))
    return out


def result_of(conn: psycopg.Connection, text: str) -> tuple[str, Any]:
    text = " ".join(text.split())
    if text.upper().startswith("TABLE"):
        columns = re.fullmatch(r"TABLE\s*\((.*)\)", text, re.I)
        assert columns, text
        return ("table", arguments(conn, columns.group(1)))
    if text.upper().startswith("SETOF "):
        return ("setof", canonical_type(conn, text[6:]))
    return ("scalar", canonical_type(conn, text))


def documented_signature(block: Block) -> tuple[str, str, str]:
    """(name, arguments, result) of a `memory.f(args) → result` block."""
    text = " ".join(block.text.split())
    head, result = (part.strip() for part in text.split("→", 1))
    found = re.fullmatch(r"memory\.(\w+)\s*\((.*)\)", head)
    assert found, f"{block.id}: not a signature: {head}"
    return found.group(1), found.group(2), result


def public_functions(conn: psycopg.Connection) -> dict[str, tuple[str, str]]:
    rows = conn.execute(
        "SELECT proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid)"
        " FROM pg_proc p WHERE pronamespace = 'memory'::regnamespace AND proname NOT LIKE '\\_%'"
    ).fetchall()
    names = Counter(row[0] for row in rows)
    assert max(names.values()) == 1, f"overloaded: {names}"
    return {name: (args, result) for name, args, result in rows}


def check_sql_signature(block: Block, conn: psycopg.Connection) -> None:
    name, args, result = documented_signature(block)
    functions = public_functions(conn)
    assert name in functions, f"{block.id}: memory.{name} is not a public function"
    cat_args, cat_result = functions[name]
    assert arguments(conn, args) == arguments(conn, cat_args), (block.id, cat_args)
    assert result_of(conn, result) == result_of(conn, cat_result), (block.id, cat_result)
    heading = [
        line
        for line in (ROOT / block.path).read_text().splitlines()[: block.line]
        if line.startswith("### ")
    ][-1]
    assert heading == f"### memory.{name}", f"{block.id} is under {heading!r}"


def composite_types(conn: psycopg.Connection) -> dict[str, list[tuple[str, str]]]:
    """The attributes of each composite type that a public function returns or takes."""
    rows = conn.execute(
        "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)"
        " FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
        " WHERE c.relnamespace = 'memory'::regnamespace AND c.relkind = 'c'"
        " AND a.attnum > 0 AND NOT a.attisdropped"
        " AND EXISTS (SELECT FROM pg_proc p WHERE p.pronamespace = c.relnamespace"
        "   AND p.proname NOT LIKE '\\_%' AND (c.reltype = p.prorettype OR c.reltype = ANY (p.proargtypes::oid[])))"
        " ORDER BY c.relname, a.attnum"
    ).fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for relname, attname, type_name in rows:
        out.setdefault(relname, []).append((attname, type_name))
    return out


def documented_types(block: Block, conn: psycopg.Connection) -> dict[str, list[tuple[str, str]]]:
    text = " ".join(block.text.split())
    found = re.findall(r"memory\.(\w+)\s*\(([^)]*)\)", text)
    return {
        name: [(arg, type_name) for arg, type_name, _ in arguments(conn, body)]
        for name, body in found
    }


def check_sql_types(block: Block, conn: psycopg.Connection) -> None:
    assert documented_types(block, conn) == composite_types(conn), block.id


def check_python_signature(block: Block) -> None:
    for node in python_signatures(block.text) or []:
        target = getattr(pgmemory, node.name, None) or getattr(pgmemory.anthropic, node.name)
        actual = inspect.signature(target)
        kinds = {"posonlyargs": "POSITIONAL_ONLY", "args": "POSITIONAL_OR_KEYWORD",
                 "kwonlyargs": "KEYWORD_ONLY"}  # fmt: skip
        documented = []
        positional = node.args.posonlyargs + node.args.args
        defaults = [None] * (len(positional) - len(node.args.defaults)) + node.args.defaults
        by_name = dict(zip(positional, defaults, strict=True))
        by_name.update(zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True))
        for field_name, kind_name in kinds.items():
            for arg in getattr(node.args, field_name):
                default = by_name[arg]
                value = inspect.Parameter.empty if default is None else ast.literal_eval(default)
                documented.append((arg.arg, kind_name, value))
        real = [
            (p.name, p.kind.name, p.default)
            for p in actual.parameters.values()
            if p.kind.name not in ("VAR_POSITIONAL", "VAR_KEYWORD")
        ]
        assert documented == real, f"{block.id}: {node.name}{actual}"


# --------------------------------------------------------------------------- shell


def run_sh(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", "-e", "-u", "-o", "pipefail", "-c", block.text], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"{block.id} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done


def shell_env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PGMEMORY_", "PG"))}
    clean.pop("DATABASE_URL", None)
    bin_dirs = f"{Path(sys.executable).parent}{os.pathsep}{pg_bin_dir()}"
    return {**clean, "PATH": f"{bin_dirs}{os.pathsep}{clean.get('PATH', '')}", **extra}


def cli_block(block: Block, docs: Docs, tmp_path: Path) -> None:
    """pgmemory commands against a fresh database, with $ORG and $USER_ID uuids."""
    dsn = docs.dsn(docs.new_db(), SERVICE_LOGIN)
    env = shell_env(
        PGMEMORY_DSN=dsn,
        PGMEMORY_DATA=str(tmp_path / "no-server"),  # never the embedded server's default
        ORG=str(uuid.uuid4()),
        USER_ID=str(uuid.uuid4()),
    )
    done = run_sh(block, ROOT, env)
    assert "File created successfully at: /memories/a.md" in done.stdout.splitlines(), done.stdout


def restore_block(block: Block, docs: Docs, tmp_path: Path) -> None:
    """The sectioned restore: memory.dump of a database with 384-dimension embeddings,
    restored into an empty database newdb."""
    source = docs.new_db()
    with psycopg.connect(docs.dsn(source), autocommit=True) as conn:
        conn.execute("SELECT memory.configure_embeddings(384)")
        conn.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, USER))
        conn.execute(
            "SELECT memory.save_fact(%s, 'Works in the Lisbon office', %s::real[],"
            " jsonb_build_object('owner_id', %s::text))",
            (ORG, [1.0] + [0.0] * 383, USER),
        )
    env = shell_env(PGHOST=docs.server.host, PGPORT=str(docs.server.port), PGUSER="postgres")
    dump = subprocess.run(
        [str(pg_bin_dir() / "pg_dump"), "-Fc", "-f", "memory.dump", source],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert dump.returncode == 0, dump.stderr
    with psycopg.connect(docs.dsn("postgres"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE newdb")
    docs.databases.append("newdb")
    try:
        run_sh(block, tmp_path, env)
        with psycopg.connect(docs.dsn("newdb")) as conn:
            row = conn.execute(
                "SELECT content, vector_dims(embedding) FROM memory.facts"
            ).fetchone()
        assert row == ("Works in the Lisbon office", 384)
    finally:
        docs.drop("newdb")


def mcp_check_block(block: Block, docs: Docs, tmp_path: Path) -> None:
    """mcp.md's first step: grant, then `pgmemory mcp --check`, with the output it shows."""
    org, user = uuid.uuid4(), uuid.uuid4()
    env = shell_env(
        PGMEMORY_DSN=docs.dsn(docs.new_db(), SERVICE_LOGIN),
        PGMEMORY_DATA=str(tmp_path / "no-server"),
        ORG=str(org),
        USER_ID=str(user),
    )
    done = run_sh(block, ROOT, env)
    shown = BLOCKS[BLOCKS.index(block) + 1]
    expected = shown.text.replace("<user>", str(user)).replace("<org>", str(org))
    assert (done.stdout, done.stderr) == (expected, ""), block.id


SHELL_RUNNERS: dict[tuple[str, str], Callable[[Block, Docs, Path], None]] = {
    ("docs/python-reference.md", 'pgmemory grant "$ORG" "$USER_ID"'): cli_block,
    ("docs/mcp.md", 'pgmemory grant "$ORG" "$USER_ID"'): mcp_check_block,
    ("docs/operations.md", "pg_restore -d newdb --section=pre-data memory.dump"): restore_block,
}


def shell_runner(block: Block) -> Callable[[Block, Docs, Path], None] | None:
    return SHELL_RUNNERS.get((block.path, block.text.splitlines()[0]))


# --------------------------------------------------------------------------- plain blocks


def layout_block(block: Block, docs: Docs, tmp_path: Path) -> None:
    """README's layout: every path it lists exists."""
    for line in block.text.splitlines():
        listed = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        for path in listed.split(", "):
            assert (ROOT / path).exists(), f"{block.id}: {path} does not exist"


def render_block(block: Block, docs: Docs, tmp_path: Path) -> None:
    """core-memory.md's render example is what render returns for that file."""
    found = re.fullmatch(
        r'<memory_file path="(?P<path>[^"]+)" scope="user">\n(?P<content>.*)</memory_file>\n',
        block.text,
        re.S,
    )
    assert found, block.text
    with psycopg.connect(docs.dsn(docs.new_db()), autocommit=True) as conn:
        conn.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, USER))
        with conn.transaction():
            conn.execute("SELECT set_config('request.jwt.claims', %s, true)", (USER_CLAIMS,))
            command = {"command": "create", "path": found["path"], "file_text": found["content"]}
            conn.execute("SELECT memory.run(%s, %s)", (ORG, json.dumps(command)))
            rendered = conn.execute("SELECT memory.render(%s)", (ORG,)).fetchone()
    assert rendered and rendered[0] == block.text.rstrip("\n")


def error_codes() -> dict[str, str]:
    """HINT → SQLSTATE, from the errors table of docs/sql-reference.md."""
    text = (ROOT / "docs/sql-reference.md").read_text()
    return dict(re.findall(r"^\| `([A-Z_]+)` \| `(\w{5})` \|", text, re.M))


def exceptions_block(block: Block, docs: Docs, tmp_path: Path) -> None:
    """python-reference.md's exception tree: the classes, their codes, the SQLSTATEs."""
    lines = block.text.splitlines()
    assert lines[0].split()[0] == "PgMemoryError(Exception)"
    codes = error_codes()
    shown = {}
    for line in lines[1:]:
        found = re.match(r"[├└]── (\w+)\s+(\w+)\s+(.+)$", line)
        assert found, line
        name, code, sqlstate = found.groups()
        cls = getattr(pgmemory, name)
        assert issubclass(cls, pgmemory.PgMemoryError) and cls.code == code, line
        if code in codes or not sqlstate.startswith("("):
            assert codes.get(code) == sqlstate, f"{line}: sql-reference.md says {codes.get(code)}"
        shown[name] = cls
    assert set(shown.values()) == set(pgmemory.PgMemoryError.__subclasses__())


TEXT_CHECKS: dict[str, Callable[[Block, Docs, Path], None]] = {
    "README.md": layout_block,
    "docs/core-memory.md": render_block,
    "docs/python-reference.md": exceptions_block,
}


# --------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_block(block: Block, docs: Docs, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    what = kind(block)
    if what == "not run":
        pytest.skip(f"{block.id} not run: {not_run_reason(block)}")
    assert what != "unaccounted", (
        f"{block.id}: a {block.lang or 'plain'} block that is neither run nor checked: give it a"
        " runner in tests/python/test_docs.py or mark it <!-- not run: why --> before its fence"
    )
    if what in ("sql", "python"):
        outcome = docs.run_file(block.path)[block.id]
        assert not outcome.problems, "\n".join(outcome.problems)
    elif what == "sql sandbox":
        problems = run_sandbox_block(docs, block)
        assert not problems, "\n".join(problems)
    elif what == "sql signature":
        check_sql_signature(block, request.getfixturevalue("catalog"))
    elif what == "sql types":
        check_sql_types(block, request.getfixturevalue("catalog"))
    elif what == "python signature":
        check_python_signature(block)
    elif what == "sh":
        runner = shell_runner(block)
        assert runner
        runner(block, docs, tmp_path)
    else:
        TEXT_CHECKS[block.path](block, docs, tmp_path)


def test_every_block_is_accounted_for() -> None:
    kinds = Counter(kind(block) for block in BLOCKS)
    assert "unaccounted" not in kinds, [b.id for b in BLOCKS if kind(b) == "unaccounted"]
    assert sum(kinds.values()) == len(BLOCKS) > 80, kinds


def test_every_public_function_is_documented_once(catalog: psycopg.Connection) -> None:
    documented = Counter(documented_signature(b)[0] for b in BLOCKS if kind(b) == "sql signature")
    assert [name for name, n in documented.items() if n > 1] == []
    assert sorted(documented) == sorted(public_functions(catalog))


def test_the_sql_reference_counts_and_lists_every_function(catalog: psycopg.Connection) -> None:
    text = (ROOT / "docs/sql-reference.md").read_text()
    functions = public_functions(catalog)
    found = re.search(r"^(\d+) functions: (\d+) callable by any role", text, re.M)
    assert found, "the function count in docs/sql-reference.md"
    callable_by_public = {
        row[0]
        for row in catalog.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'memory'::regnamespace"
            " AND proname NOT LIKE '\\_%' AND (proacl IS NULL OR EXISTS (SELECT FROM"
            " aclexplode(proacl) WHERE grantee = 0 AND privilege_type = 'EXECUTE'))"
        )
    }
    assert set(functions) - callable_by_public == {"has_permission"}, sorted(functions)
    assert (int(found.group(1)), int(found.group(2))) == (len(functions), len(callable_by_public))
    contents = re.search(r"^Contents: (.*?)\n\n", text, re.M | re.S)
    assert contents
    listed = re.findall(r"`(\w+)`", contents.group(1))
    assert sorted(listed) == sorted(functions)


def test_checks_name_one_block_each() -> None:
    for path, snippet in CHECKS:
        holders = [b.id for b in BLOCKS if b.path == path and snippet in b.text]
        assert len(holders) == 1, (path, snippet, holders)
        assert kind(BY_ID[holders[0]]) == "python", holders


JS_BLOCKS = [b for b in BLOCKS if b.lang == "js"]


def rpc_calls(text: str) -> Iterator[tuple[str, list[str]]]:
    """(function, top-level argument names) of every `rpc('name', { … })`."""
    for call in re.finditer(r"\brpc\(\s*'(\w+)'\s*,\s*\{", text):
        depth, i = 1, call.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[call.end() : i - 1]
        while re.search(r"\{[^{}]*\}", body):  # nested objects: their keys are not arguments
            body = re.sub(r"\{[^{}]*\}", "", body)
        yield call.group(1), re.findall(r"(\w+)\s*:", body)


@pytest.mark.parametrize("block", JS_BLOCKS, ids=[block.id for block in JS_BLOCKS])
def test_js_calls_name_real_arguments(block: Block, catalog: psycopg.Connection) -> None:
    """The supabase-js examples cannot run here, but their argument names are checked."""
    functions = public_functions(catalog)
    calls = list(rpc_calls(block.text))
    assert calls
    for name, keys in calls:
        assert name in functions, f"{block.id}: no function memory.{name}"
        params = arguments(catalog, functions[name][0])
        required = {p for p, _, default in params if default is None}
        assert set(keys) <= {p for p, _, _ in params}, f"{block.id}: {name}({keys}) vs {params}"
        assert required <= set(keys), f"{block.id}: {name} needs {required}"
