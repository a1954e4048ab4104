"""Upgrades: every upgrade path gives the catalog of a fresh install, data intact.

Released versions are frozen. `extension/released/memory--<version>.sql` is
the full script of a release exactly as it shipped (copied from
`extension/build/` when the release is cut, never edited afterwards; `make
install` installs every frozen script beside the current build). An upgrade
step `extension/upgrades/A--B.sql` holds the state that changes from A to B;
the build makes it the upgrade script `memory--A--B.sql` (the step, then every
code part) that takes a database from A to B.

For every upgrade script A→B, and for every released version to the current
one (`ALTER EXTENSION memory UPDATE` finds the path through the scripts):
install A from its frozen script, fill it with every kind of memory (through
A's API), upgrade, and compare with a fresh install of B:

- the catalog: `pg_dump --schema-only --binary-upgrade` of both databases.
  Binary-upgrade mode is needed because a plain dump prints only `CREATE
  EXTENSION` and none of the extension's objects; it prints each member with
  its `ALTER EXTENSION ... ADD`, its privileges and its initial privileges.
  The dump is cut into pg_dump's entries (by their `-- Name: ...; Type: ...`
  headers), OIDs, relfrozenxids and dropped-column placeholders are removed,
  and the entries are compared as sorted lists; the extension's version and
  its config tables (pg_extension_config_dump) are compared from pg_extension;
- the data: every row of every table of A, by A's columns, is the same after
  the upgrade, and the API answers the same (listings, reads, render, facts,
  searches, documents, settings).

Embeddings are compared in two configurations: the default (1536-dimension
`vector`) and one set by `memory.configure_embeddings` (8-dimension `halfvec`),
applied to the fresh install as well.

While only one version exists the parametrized tests have nothing to run;
the harness itself is checked below: a fresh install equals itself (filled or
not), deliberate changes of every kind are detected, a dropped column alone
is not, and a whole upgrade (a throwaway copy of the extension under another
name, installed into the server's extension directory for the test) passes
when the upgrade script is right and fails when it forgets something.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgmemory.server import pg_bin_dir
from tests.support import SERVICE, Principal, released_versions, user_claims, version_key

EXTENSION_DIR = Path(__file__).resolve().parents[2] / "extension"
RELEASED_DIR = EXTENSION_DIR / "released"
NAME = "memory"
EMBEDDINGS = {"default": None, "halfvec8": (8, "halfvec")}


# ---------------------------------------------------------------- versions and scripts


def default_version() -> str:
    control = (EXTENSION_DIR / f"{NAME}.control").read_text()
    found = re.search(r"^default_version\s*=\s*'([^']+)'", control, re.M)
    assert found, "memory.control has no default_version"
    return found.group(1)


def upgrade_scripts() -> list[tuple[str, str]]:
    """(A, B) for every upgrade step extension/upgrades/A--B.sql."""
    out = []
    for path in (EXTENSION_DIR / "upgrades").glob("*--*.sql"):
        parts = path.name[:-4].split("--")
        if len(parts) == 2:
            out.append((parts[0], parts[1]))
    return sorted(out, key=lambda ab: (version_key(ab[0]), version_key(ab[1])))


def share_extension_dir() -> Path:
    out = subprocess.run(
        [str(pg_bin_dir() / "pg_config"), "--sharedir"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip()) / "extension"


# ---------------------------------------------------------------- databases


@contextmanager
def database(pg_server) -> Iterator[str]:
    """A new empty database (no extension yet); its superuser DSN."""
    name = f"upgrade_{uuid.uuid4().hex[:12]}"
    admin = pg_server.server.dsn("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield pg_server.server.dsn(name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def execute(dsn: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql, params or None)
        return cur.fetchall() if cur.description else []


def install(
    dsn: str, version: str | None, embeddings: tuple[int, str] | None, name: str = NAME
) -> None:
    """CREATE EXTENSION at `version` (None: the default one), then configure embeddings."""
    execute(
        dsn, f"CREATE EXTENSION {name}" + (f" VERSION '{version}'" if version else "") + " CASCADE"
    )
    if embeddings:
        execute(dsn, "SELECT memory.configure_embeddings(%s, %s)", *embeddings)


# ---------------------------------------------------------------- the schema, normalized

HEADER = re.compile(r"^--\n-- (Name: [^\n]*)\n--\n", re.M)
DROPPED = "........pg.dropped."


def _statements_to_drop(body: str) -> str:
    """Removes what depends on OIDs, xids or physical layout, not on the schema."""
    lines = body.split("\n")
    kept: list[str] = []
    skipping = False
    for line in lines:
        if skipping:
            skipping = not line.rstrip().endswith(";")
            continue
        if line.startswith(("UPDATE pg_catalog.pg_class", "UPDATE pg_catalog.pg_attribute")):
            skipping = not line.rstrip().endswith(";")
            continue
        if (
            line.startswith("SELECT pg_catalog.binary_upgrade_")
            or line.startswith(("\\restrict", "\\unrestrict", "SET ", "-- For binary upgrade"))
            or line.startswith("SELECT pg_catalog.set_config('search_path'")
            or DROPPED in line
            or line in ("--", "")
        ):
            continue
        kept.append(line)
    return "\n".join(kept)


def normalized_schema(dsn: str) -> list[tuple[str, str]]:
    """pg_dump --schema-only --binary-upgrade as sorted (entry header, body) pairs."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    done = subprocess.run(
        [
            str(pg_bin_dir() / "pg_dump"),
            "--schema-only",
            "--binary-upgrade",
            "-h",
            str(info["host"]),
            "-p",
            str(info.get("port", 5432)),
            "-U",
            "postgres",
            "-d",
            str(info["dbname"]),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pieces = HEADER.split(done.stdout)
    entries = []
    for header, body in zip(pieces[1::2], pieces[2::2], strict=True):
        text = _statements_to_drop(body).strip()
        if "; Type: TABLE;" in header:
            # A dropped column's placeholder is gone; the comma before it may remain.
            text = "\n".join(line.rstrip(",") for line in text.split("\n"))
        entries.append((header, text))
    return sorted(entries)


def extension_facts(dsn: str, name: str = NAME) -> dict[str, Any]:
    """Version, requirements and config tables (pg_extension_config_dump) of the extension."""
    rows = execute(
        dsn,
        "SELECT e.extversion, e.extrelocatable, n.nspname,"
        " coalesce((SELECT array_agg(format('%%s %%s', c::regclass, cond) ORDER BY c::regclass::text)"
        "  FROM unnest(e.extconfig, e.extcondition) AS x(c, cond)), '{}')"
        " FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = %s",
        name,
    )
    assert len(rows) == 1, f"extension {name} is not installed"
    version, relocatable, schema, config = rows[0]
    return {"version": version, "relocatable": relocatable, "schema": schema, "config": config}


def schema_differences(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> list[str]:
    """Human-readable differences between two normalized schemas; [] when equal."""
    by_a: dict[str, list[str]] = {}
    by_b: dict[str, list[str]] = {}
    for header, body in a:
        by_a.setdefault(header, []).append(body)
    for header, body in b:
        by_b.setdefault(header, []).append(body)
    out = []
    for header in sorted(set(by_a) | set(by_b)):
        left, right = by_a.get(header, []), by_b.get(header, [])
        if left == right:
            continue
        if not left or not right:
            side = "only after the upgrade" if left else "only in the fresh install"
            out.append(f"{header}: {side}\n" + "\n".join(left or right))
            continue
        diff = difflib.unified_diff(
            "\n".join(left).split("\n"),
            "\n".join(right).split("\n"),
            "upgraded",
            "fresh",
            lineterm="",
        )
        out.append(f"{header}: differs\n" + "\n".join(diff))
    return out


Catalog = tuple[list[tuple[str, str]], dict[str, Any]]


def catalog(dsn: str, name: str = NAME) -> Catalog:
    return normalized_schema(dsn), extension_facts(dsn, name)


def compare_catalogs(upgraded: Catalog, fresh: Catalog) -> list[str]:
    out = schema_differences(upgraded[0], fresh[0])
    if upgraded[1] != fresh[1]:
        out.append(f"extension: upgraded {upgraded[1]}, fresh {fresh[1]}")
    return out


def catalog_differences(upgraded: str, fresh: str, name: str = NAME) -> list[str]:
    return compare_catalogs(catalog(upgraded, name), catalog(fresh, name))


# ---------------------------------------------------------------- data


def table_columns(dsn: str) -> dict[str, list[str]]:
    """Every table of schema memory with its columns, in order."""
    rows = execute(
        dsn,
        "SELECT c.relname, array_agg(a.attname::text ORDER BY a.attnum)"
        " FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
        " WHERE c.relnamespace = 'memory'::regnamespace AND c.relkind = 'r'"
        " AND a.attnum > 0 AND NOT a.attisdropped GROUP BY c.relname ORDER BY 1",
    )
    return dict(rows)


def table_rows(dsn: str, columns: dict[str, list[str]]) -> dict[str, list[str]]:
    """Every row of each table, by the given columns, as sorted JSON texts."""
    out = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table, names in columns.items():
            listed = ", ".join(f'"{n}"' for n in names)
            try:
                rows = conn.execute(
                    f"SELECT row_to_json(x)::text FROM (SELECT {listed} FROM memory.{table}) x"
                    " ORDER BY 1"
                ).fetchall()
            except psycopg.Error as err:
                out[table] = [f"cannot read {table}({listed}): {err.diag.message_primary}"]
                continue
            out[table] = [r[0] for r in rows]
    return out


def data_differences(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    out = []
    for table in sorted(set(before) | set(after)):
        a, b = before.get(table), after.get(table)
        if a != b:
            diff = difflib.unified_diff(a or [], b or [], "before", "after", lineterm="", n=0)
            out.append(f"memory.{table}:\n" + "\n".join(list(diff)[:40]))
    return out


ORG = uuid.UUID("00000000-0000-4000-8000-00000000a001")
OTHER_ORG = uuid.UUID("00000000-0000-4000-8000-00000000a002")
USER = uuid.UUID("00000000-0000-4000-8000-00000000b001")
READER = uuid.UUID("00000000-0000-4000-8000-00000000b002")
AGENT = {"scope": "agent", "agent_id": "planner ✓"}
CHAT = {"scope": "chat", "chat_id": "chat-7", "owner_id": str(USER)}


def _vector(dims: int, i: int) -> list[float]:
    """Sparse: cosine 0.4 between neighbours, 0 otherwise (never duplicates)."""
    return [1.0 if d == i % dims else 0.5 if d == (i + 1) % dims else 0.0 for d in range(dims)]


def fill(dsn: str, dims: int) -> None:
    """Every kind of memory, through the API of the oldest released version (0.1.0).

    When a later version changes a signature used here, branch on the version
    installed (`extension_facts(dsn)["version"]`): this must keep filling A.
    """
    with Principal(dsn, SERVICE) as service, Principal(dsn, user_claims(USER)) as me:
        for org, user, permission in (
            (ORG, USER, "memory.read"),
            (ORG, USER, "memory.manage"),
            (ORG, READER, "memory.read"),
            (OTHER_ORG, READER, "memory.manage"),
        ):
            service.rows("SELECT memory.grant(%s, %s, %s)", org, user, permission)
        service.rows("SELECT memory.revoke(%s, %s, 'memory.manage')", OTHER_ORG, READER)
        for command, ns in (
            (
                {"command": "create", "path": "/memories/notes/todo.md", "file_text": "- a\n- b\n"},
                {},
            ),
            (
                {
                    "command": "str_replace",
                    "path": "/memories/notes/todo.md",
                    "old_str": "- a",
                    "new_str": "- ä",
                },
                {},
            ),
            (
                {
                    "command": "insert",
                    "path": "/memories/notes/todo.md",
                    "insert_line": 0,
                    "insert_text": "# todo",
                },
                {},
            ),
            ({"command": "create", "path": "/memories/old.md", "file_text": "moved\n"}, {}),
            (
                {
                    "command": "rename",
                    "old_path": "/memories/old.md",
                    "new_path": "/memories/a/b.md",
                },
                {},
            ),
            (
                {"command": "create", "path": "/memories/policy.md", "file_text": "Be brief.\n"},
                {"scope": "organization"},
            ),
            ({"command": "create", "path": "/memories/style.md", "file_text": "terse\n"}, AGENT),
        ):
            me.run(ORG, command, ns)
        service.run(
            ORG, {"command": "create", "path": "/memories/s.md", "file_text": "<chat>\n"}, CHAT
        )
        me.rows("SELECT memory.write(%s, '/memories/w.md', 'v1', 0)", ORG)
        me.rows("SELECT memory.write(%s, '/memories/w.md', 'v2', 1)", ORG)

        facts = [
            {"content": "Works in the Lisbon office", "embedding": _vector(dims, 0)},
            {"content": "Likes green tea", "embedding": _vector(dims, 1), "source": {"chat": "7"}},
            {"content": "Waits for an embedding"},
            {"content": "Moved to Porto", "embedding": _vector(dims, 2)},
        ]
        saved = me.rows("SELECT ord, id FROM memory.save_facts(%s, %s) ORDER BY ord", ORG, facts)
        ids = [row[1] for row in saved]
        me.rows("SELECT memory.forget(%s, %s, %s)", ORG, ids[0], ids[3])
        me.rows("SELECT memory.edit_fact(%s, %s, 'Likes green and black tea')", ORG, ids[1])
        me.rows("SELECT memory.save_fact(%s, 'An agent fact', NULL, %s)", ORG, AGENT)
        pending = service.rows("SELECT id, content_hash FROM memory.pending_embeddings(10)")
        service.rows(
            "SELECT memory.set_memory_embeddings(%s, %s, %s, 'test-model')",
            [r[0] for r in pending[:1]],
            [r[1] for r in pending[:1]],
            [_vector(dims, 5)],
        )

        for i, (role, content, vector) in enumerate(
            (
                ("user", "Where is the Lisbon office?", _vector(dims, 0)),
                ("assistant", "On the river, near the bridge.", None),
                ("user", "Book a table for tea", _vector(dims, 1)),
            )
        ):
            message = {
                "id": f"m{i}",
                "chat_id": f"chat-{i % 2}",
                "owner_id": str(USER),
                "role": role,
                "content": content,
                "created_at": f"2025-01-0{i + 1}T10:00:00Z",
            }
            service.rows("SELECT memory.index_message(%s, %s, %s::real[])", ORG, message, vector)
        service.rows(
            "SELECT memory.index_message(%s, %s)",
            ORG,
            {
                "id": "t",
                "chat_id": "tmp",
                "owner_id": str(USER),
                "role": "user",
                "content": "x",
                "temporary": True,
            },
        )

        service.rows("SELECT memory.document_write('agent/run-1', 'plan.md', 'step 1', NULL)")
        service.rows("SELECT memory.document_write('agent/run-1', 'plan.md', 'step 2', 1)")
        service.rows(
            "SELECT memory.document_write('agent/run-1', 'tmp.md', 'soon gone', NULL, 86400)"
        )
        service.rows("SELECT memory.configure('max_render', '5000'::jsonb)")
        service.rows("SELECT memory.configure('dedupe_threshold', '0.9'::jsonb)")


def answers(dsn: str, dims: int) -> dict[str, Any]:
    """What the API answers about the filled data (the current API: see fill)."""
    with Principal(dsn, SERVICE) as service, Principal(dsn, user_claims(USER)) as me:
        facts = service.rows("SELECT id FROM memory.facts ORDER BY content")
        return {
            "view": me.rows(
                "SELECT memory.run(%s, %s)", ORG, {"command": "view", "path": "/memories"}
            ),
            "list": me.rows("SELECT path, bytes, version FROM memory.list_files(%s)", ORG),
            "read": me.rows(
                "SELECT memory.read(%s, '/memories/notes/todo.md') - 'updated_at'", ORG
            ),
            "render": me.rows("SELECT memory.render(%s)", ORG),
            "agent": me.rows("SELECT memory.render(%s, %s)", ORG, AGENT),
            "chat": service.rows("SELECT memory.render(%s, %s)", ORG, CHAT),
            "facts": [service.rows("SELECT memory.get_fact(%s, %s)", ORG, f[0]) for f in facts],
            "search": me.rows(
                "SELECT id, content, score FROM memory.search_facts(%s, 'where is the office', %s::real[])",
                ORG,
                _vector(dims, 0),
            ),
            "recall": me.rows(
                "SELECT id, chat_id, content, score FROM memory.search_messages(%s, 'lisbon office', %s::real[])",
                ORG,
                _vector(dims, 0),
            ),
            "documents": service.rows(
                "SELECT path, version FROM memory.document_list('agent/run-1')"
            ),
            "document": service.rows(
                "SELECT memory.document_read('agent/run-1', 'plan.md') -> 'content'"
            ),
            "settings": service.rows(
                "SELECT k, memory.setting(k) FROM unnest(ARRAY['max_render', 'dedupe_threshold']) k"
            ),
        }


# ---------------------------------------------------------------- the harness


def check_upgrade(
    pg_server, start: str, target: str | None, embeddings: tuple[int, str] | None, name: str = NAME
) -> list[str]:
    """Install `start`, fill, upgrade to `target` (None: the default version), compare
    with a fresh install of it; the differences, [] when none."""
    dims = embeddings[0] if embeddings else 1536
    with database(pg_server) as upgraded, database(pg_server) as fresh:
        install(upgraded, start, embeddings, name)
        fill(upgraded, dims)
        columns = table_columns(upgraded)
        rows_before = table_rows(upgraded, columns)
        answers_before = answers(upgraded, dims)
        execute(upgraded, f"ALTER EXTENSION {name} UPDATE" + (f" TO '{target}'" if target else ""))
        install(fresh, target, embeddings, name)
        problems = catalog_differences(upgraded, fresh, name)
        problems += data_differences(rows_before, table_rows(upgraded, columns))
        after = answers(upgraded, dims)
        problems += [
            f"the API answers differently after the upgrade: {key}\n"
            f"before: {answers_before[key]}\nafter:  {after[key]}"
            for key in answers_before
            if after.get(key) != answers_before[key]
        ]
        return problems


@pytest.mark.parametrize("version", released_versions())
def test_released_script_is_installed_unchanged(version: str) -> None:
    """make install puts every frozen release beside the current build, byte for byte."""
    installed = share_extension_dir() / f"{NAME}--{version}.sql"
    frozen = RELEASED_DIR / f"{NAME}--{version}.sql"
    assert installed.exists(), (
        f"{installed} is missing: the extension Makefile must install extension/released/*.sql"
        " (run make install)"
    )
    assert installed.read_bytes() == frozen.read_bytes(), f"{installed} differs from {frozen}"


def test_current_version_matches_its_frozen_release() -> None:
    """Once a version is released its script never changes: bump default_version first."""
    version = default_version()
    frozen = RELEASED_DIR / f"{NAME}--{version}.sql"
    if not frozen.exists():
        pytest.skip(
            f"{version} is not released yet (no {frozen.relative_to(EXTENSION_DIR.parent)})"
        )
    built = EXTENSION_DIR / "build" / f"{NAME}--{version}.sql"
    assert built.read_bytes() == frozen.read_bytes(), (
        f"extension/ changed after {version} was released: bump default_version in"
        f" memory.control and write extension/upgrades/{version}--<next>.sql"
    )


@pytest.mark.parametrize("version", [v for v in released_versions() if v != default_version()])
def test_every_release_has_an_upgrade_path(version: str, dsn: str) -> None:
    paths = execute(
        dsn,
        "SELECT path FROM pg_extension_update_paths(%s) WHERE source = %s AND target = %s",
        NAME,
        version,
        default_version(),
    )
    assert paths and paths[0][0], f"no upgrade path from {version} to {default_version()}"


@pytest.mark.parametrize("embeddings", list(EMBEDDINGS.values()), ids=list(EMBEDDINGS))
@pytest.mark.parametrize("version", [v for v in released_versions() if v != default_version()])
def test_release_upgrades_to_current(pg_server, version: str, embeddings) -> None:
    problems = check_upgrade(pg_server, version, None, embeddings)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("embeddings", list(EMBEDDINGS.values()), ids=list(EMBEDDINGS))
@pytest.mark.parametrize(("start", "target"), upgrade_scripts(), ids=lambda v: v)
def test_upgrade_script(pg_server, start: str, target: str, embeddings) -> None:
    assert (RELEASED_DIR / f"{NAME}--{start}.sql").exists(), (
        f"memory--{start}--{target}.sql starts from {start}, which has no frozen script in"
        " extension/released/"
    )
    problems = check_upgrade(pg_server, start, target, embeddings)
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("embeddings", list(EMBEDDINGS.values()), ids=list(EMBEDDINGS))
def test_the_upgrade_keeps_every_fact_in_the_shared_index(pg_server, embeddings) -> None:
    """0.1.0 put every fact into the shared HNSW index: after the update all are still
    in it and the namespaces past exact_search_max_rows have joined it, so their new
    facts go in too, while a small namespace's new facts stay out."""
    dims = embeddings[0] if embeddings else 1536
    big, small = {"owner_id": str(USER)}, {"owner_id": str(READER)}
    with database(pg_server) as dsn:
        install(dsn, "0.1.0", embeddings)
        execute(dsn, "SELECT memory.configure('exact_search_max_rows', '3')")
        for ns, n in ((big, 5), (small, 2)):
            for i in range(n):
                execute(
                    dsn,
                    "SELECT memory.save_fact(%s, %s, %s::real[], %s)",
                    ORG,
                    f"fact {i} of {ns['owner_id']}",
                    _vector(dims, 10 * n + i),
                    json.dumps(ns),
                )
        definition = execute(dsn, "SELECT pg_get_indexdef('memory.facts_embedding_idx'::regclass)")
        execute(dsn, f"ALTER EXTENSION {NAME} UPDATE")
        assert execute(dsn, "SELECT in_shared_index, count(*) FROM memory.facts GROUP BY 1") == [
            (True, 7)
        ]
        big_id = execute(dsn, "SELECT memory._namespace_id(%s, 'user', %s, NULL)", ORG, USER)[0][0]
        assert execute(
            dsn, "SELECT organization_id, namespace_id FROM memory.shared_index_namespaces"
        ) == [(ORG, big_id)]
        assert execute(dsn, "SELECT pg_get_indexdef('memory.facts_embedding_idx'::regclass)") == [
            (
                definition[0][0].replace(
                    "WHERE (forgotten_at IS NULL)",
                    "WHERE ((forgotten_at IS NULL) AND in_shared_index)",
                ),
            )
        ]
        for ns, i in ((big, 95), (small, 91)):  # not a duplicate of theirs, at 8 dimensions too
            execute(
                dsn,
                "SELECT memory.save_fact(%s, %s, %s::real[], %s)",
                ORG,
                f"new fact of {ns['owner_id']}",
                _vector(dims, i),
                json.dumps(ns),
            )
        assert execute(
            dsn,
            "SELECT content, in_shared_index FROM memory.facts WHERE content LIKE 'new fact%%'"
            " ORDER BY 1",
        ) == [(f"new fact of {USER}", True), (f"new fact of {READER}", False)]


# ---------------------------------------------------------------- the harness checks itself


def test_fresh_install_equals_itself_filled_or_not(pg_server) -> None:
    with database(pg_server) as a, database(pg_server) as b:
        install(a, default_version(), (8, "halfvec"))
        install(b, default_version(), (8, "halfvec"))
        fill(a, 8)
        schema = normalized_schema(a)
        # Not vacuous: every member is in the dump, bodies included.
        functions = execute(
            a, "SELECT count(*) FROM pg_proc WHERE pronamespace = 'memory'::regnamespace"
        )[0][0]
        assert sum("; Type: FUNCTION; Schema: memory;" in h for h, _ in schema) == functions
        assert sum(f"ALTER EXTENSION {NAME} ADD FUNCTION memory." in b for _, b in schema) == (
            functions
        )
        tables = {h for h, _ in schema if "; Type: TABLE; Schema: memory;" in h}
        assert tables == {
            f"Name: {t}; Type: TABLE; Schema: memory; Owner: postgres" for t in table_columns(a)
        }
        run = next(body for h, body in schema if h.startswith("Name: run(uuid, jsonb, jsonb)"))
        assert "memory._cmd_rename(target, command)" in run
        assert catalog_differences(a, b) == []
        rows = table_rows(a, table_columns(a))
        assert len(rows["files"]) == 6 and len(rows["facts"]) == 5 and len(rows["messages"]) == 3
        assert data_differences(rows, table_rows(a, table_columns(a))) == []


# change → (SQL applied to one of two fresh installs, what the difference must show)
SABOTAGE = {
    "added column": ("ALTER TABLE memory.files ADD COLUMN extra int", "-    extra integer"),
    "column order": (
        "ALTER TABLE memory.documents DROP COLUMN content;"
        " ALTER TABLE memory.documents ADD COLUMN content text NOT NULL",
        "Name: documents; Type: TABLE; Schema: memory; Owner: postgres: differs",
    ),
    "column default": (
        "ALTER TABLE memory.files ALTER COLUMN version SET DEFAULT 2",
        "-    version bigint DEFAULT 2 NOT NULL",
    ),
    "function body": (
        "CREATE OR REPLACE FUNCTION memory._root() RETURNS text LANGUAGE sql IMMUTABLE"
        " PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$ SELECT '/memory'::text $$",
        "-    AS $$ SELECT '/memory'::text $$;",
    ),
    "search_path pin": (
        "ALTER FUNCTION memory.setting(text) RESET search_path",
        "+    SET search_path TO 'pg_catalog', 'pg_temp'",
    ),
    "privilege": (
        "GRANT EXECUTE ON FUNCTION memory._root() TO PUBLIC",
        "-GRANT ALL ON FUNCTION memory._root() TO PUBLIC;",
    ),
    "dropped index": (
        "DROP INDEX memory.documents_expiry_idx",
        "Name: documents_expiry_idx; Type: INDEX; Schema: memory; Owner: postgres:"
        " only in the fresh install",
    ),
    "extra function": (
        "CREATE FUNCTION memory.extra() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;"
        " ALTER EXTENSION memory ADD FUNCTION memory.extra()",
        "Name: extra(); Type: FUNCTION; Schema: memory; Owner: postgres: only after the upgrade",
    ),
    "not a member": (
        "ALTER EXTENSION memory DROP FUNCTION memory._root()",
        "+ALTER EXTENSION memory ADD FUNCTION memory._root();",
    ),
    "row security": (
        "ALTER TABLE memory.settings DISABLE ROW LEVEL SECURITY",
        "Name: settings; Type: ROW SECURITY; Schema: memory; Owner: postgres:"
        " only in the fresh install",
    ),
    # A table no longer registered with pg_extension_config_dump (its rows would not be dumped).
    "config table": (
        "UPDATE pg_extension SET extconfig = extconfig[2:], extcondition = extcondition[2:]"
        " WHERE extname = 'memory'",
        "'memory.namespaces ', 'memory.permissions ', 'memory.recall_replays ', 'memory.settings ',"
        " 'memory.shared_index_namespaces ']}",
    ),
    "check constraint": (
        "ALTER TABLE memory.files DROP CONSTRAINT files_version_check",
        "+    CONSTRAINT files_version_check CHECK ((version > 0))",
    ),
}


def test_comparison_detects_every_kind_of_change(pg_server) -> None:
    with database(pg_server) as fresh:
        install(fresh, default_version(), None)
        reference = catalog(fresh)
        for change, (sql, shown) in SABOTAGE.items():
            with database(pg_server) as changed:
                install(changed, default_version(), None)
                execute(changed, sql)
                problems = compare_catalogs(catalog(changed), reference)
                assert len(problems) == 1, (change, problems)
                assert shown in problems[0], (change, problems[0])


def test_comparison_ignores_physical_layout(pg_server) -> None:
    """A column added and dropped again leaves a placeholder: not a schema difference."""
    with database(pg_server) as a, database(pg_server) as b:
        install(a, default_version(), None)
        install(b, default_version(), None)
        execute(a, "ALTER TABLE memory.settings ADD COLUMN scratch int")
        execute(a, "ALTER TABLE memory.settings DROP COLUMN scratch")
        execute(a, "REINDEX SCHEMA memory")  # new relfilenodes
        assert catalog_differences(a, b) == []


def test_data_comparison_detects_changes(pg_server) -> None:
    with database(pg_server) as a:
        install(a, default_version(), (8, "vector"))
        fill(a, 8)
        columns = table_columns(a)
        before = table_rows(a, columns)
        execute(a, "UPDATE memory.files SET content = content || ' ' WHERE path = '/memories/w.md'")
        execute(a, "DELETE FROM memory.documents WHERE path = 'tmp.md'")
        execute(a, "ALTER TABLE memory.settings DROP COLUMN updated_at")
        problems = data_differences(before, table_rows(a, columns))
        assert [p.split(":", 1)[0] for p in problems] == [
            "memory.documents",
            "memory.files",
            "memory.settings",
        ]
        assert "cannot read settings" in problems[2]


# ---- a whole upgrade, on a throwaway copy of the extension


@pytest.fixture
def scratch_extension() -> Iterator[Callable[[str, str], None]]:
    """Writes files of a throwaway extension (a copy of memory under another name) into
    the server's extension directory; removes them afterwards."""
    target = share_extension_dir()
    if not os.access(target, os.W_OK):
        pytest.skip(f"cannot write to {target}")
    name = f"memory_harness_{os.getpid()}"
    written: list[Path] = []
    control = (EXTENSION_DIR / f"{NAME}.control").read_text()
    control = re.sub(r"^default_version\s*=.*$", "default_version = '1.0'", control, flags=re.M)

    def write(file_name: str, text: str) -> None:
        path = target / file_name.replace("NAME", name)
        path.write_text(text)
        written.append(path)

    write("NAME.control", control)
    write.name = name  # type: ignore[attr-defined]
    try:
        yield write
    finally:
        for path in written:
            path.unlink(missing_ok=True)


def test_harness_passes_a_right_upgrade_and_fails_a_wrong_one(pg_server, scratch_extension):
    name = scratch_extension.name  # type: ignore[attr-defined]
    base = (share_extension_dir() / f"{NAME}--{default_version()}.sql").read_text()
    change = (
        "\nALTER TABLE memory.settings ADD COLUMN note text;\n"
        "CREATE INDEX settings_note_idx ON memory.settings (note);\n"
        "CREATE FUNCTION memory._harness() RETURNS int LANGUAGE sql"
        " SET search_path = pg_catalog, pg_temp AS $$ SELECT 1 $$;\n"
        "REVOKE ALL ON FUNCTION memory._harness() FROM PUBLIC;\n"
    )
    scratch_extension("NAME--1.0.sql", base)
    scratch_extension("NAME--1.1.sql", base + change)
    scratch_extension("NAME--1.0--1.1.sql", change)
    # 1.2 has the same change, but its upgrade script forgets the REVOKE.
    scratch_extension("NAME--1.2.sql", base + change)
    scratch_extension("NAME--1.0--1.2.sql", change.replace("REVOKE", "-- REVOKE"))

    assert check_upgrade(pg_server, "1.0", "1.1", None, name) == []
    assert check_upgrade(pg_server, "1.0", "1.1", (8, "halfvec"), name) == []
    problems = check_upgrade(pg_server, "1.0", "1.2", None, name)
    assert len(problems) == 1 and "_harness()" in problems[0], problems
