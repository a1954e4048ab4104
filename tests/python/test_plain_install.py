"""`pgmemory install --plain` and `pgmemory upgrade`: memory without the extension machinery,
as on managed PostgreSQL (docs/operations.md). The SQL suite's subset on a plain install
runs from tests/install_modes.py; these tests pin the commands and that a plain install
holds exactly what the extension does."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from pgmemory import Memory, plain
from pgmemory.install import extension_files
from tests.python.test_cli import base_env, run_cli
from tests.support import released_versions

CURRENT = extension_files()[0]
OLDEST = released_versions()[0]
ORG = uuid.UUID("00000000-0000-4000-8000-00000000000a")

# Every object of schema memory, by what defines it (OIDs and the extension aside).
OBJECTS = """
SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid))
       || coalesce(' ' || array_to_string(p.proacl::text[], ','), '')
FROM pg_proc p WHERE p.pronamespace = to_regnamespace('memory')
  AND p.proname <> '_permission_check_call'
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') || ' ' || a.attnotnull
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = to_regnamespace('memory') AND a.attnum > 0 AND NOT a.attisdropped
  AND c.relkind IN ('r', 'c')
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'memory'
UNION ALL
SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = to_regnamespace('memory')
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = to_regnamespace('memory') AND NOT t.tgisinternal
UNION ALL
SELECT 'table ' || relname || ' rls ' || relrowsecurity || coalesce(' ' || array_to_string(relacl::text[], ','), '')
FROM pg_class WHERE relnamespace = to_regnamespace('memory') AND relkind = 'r'
ORDER BY 1
"""


@pytest.fixture
def new_database(dsn: str) -> Iterator[Callable[[], str]]:
    """Empty databases (pgvector only) on the test server, dropped afterwards."""
    made: list[str] = []

    def make() -> str:
        name = f"plain_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE template0")
        made.append(name)
        target = dsn.replace(f"/{psycopg.conninfo.conninfo_to_dict(dsn)['dbname']}?", f"/{name}?")
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        return target

    yield make
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _objects(target: str) -> list[str]:
    with psycopg.connect(target) as conn:
        return [row[0] for row in conn.execute(OBJECTS).fetchall()]


def test_install_plain_then_memory_works_without_an_extension(new_database, tmp_path: Path):
    target = new_database()
    done = run_cli("install", "--plain", target, env=base_env(tmp_path))
    assert (done.code, done.out, done.err) == (
        0,
        f"installed memory {CURRENT} as schema memory (plain install)\n",
        "",
    )
    with psycopg.connect(target) as conn:
        assert conn.execute("SELECT extname FROM pg_extension ORDER BY 1").fetchall() == [
            ("plpgsql",),
            ("vector",),
        ]
        assert plain.installed_version(conn) == CURRENT
    user_id = uuid.uuid4()
    with Memory(target, service=True) as mem:
        mem.grant(ORG, user_id)
        user = mem.as_user(user_id)
        assert user.run(
            ORG, {"command": "create", "path": "/memories/a.md", "file_text": "x\n"}
        ) == ("File created successfully at: /memories/a.md")
        assert [h.content for h in user.archival.search(ORG, "x")] == []


def test_a_plain_install_holds_what_the_extension_holds(new_database, dsn: str):
    target = new_database()
    with psycopg.connect(target) as conn:
        plain.install(conn)
    extension_side = new_database()
    with psycopg.connect(extension_side) as conn:
        conn.execute("CREATE EXTENSION memory")
    plain_objects = _objects(target)
    assert len(plain_objects) > 150
    assert plain_objects == _objects(extension_side)


def test_upgrade_a_plain_install_from_the_oldest_release(new_database, tmp_path: Path):
    old, fresh = new_database(), new_database()
    with psycopg.connect(old) as conn:
        plain.install(conn, OLDEST)
        assert plain.installed_version(conn) == OLDEST
    with Memory(old, service=True) as mem:
        mem.run(ORG, {"command": "create", "path": "/memories/kept.md", "file_text": "kept\n"},
                {"owner_id": str(ORG)})  # fmt: skip
    done = run_cli("--json", "upgrade", old, env=base_env(tmp_path))
    assert done.code == 0, done.err
    assert done.json() == {
        "before": OLDEST,
        "after": CURRENT,
        "scripts": plain.upgrade_path(extension_files()[1], OLDEST, CURRENT),
    }
    again = run_cli("upgrade", old, env=base_env(tmp_path))
    assert (again.code, again.out) == (0, f"memory is at {CURRENT} already\n")
    with psycopg.connect(fresh) as conn:
        plain.install(conn)
    assert _objects(old) == _objects(fresh)
    with Memory(old, service=True) as mem:
        assert mem.read(ORG, "/memories/kept.md", {"owner_id": str(ORG)})["content"] == "kept\n"


def test_upgrade_an_extension_uses_alter_extension(new_database, tmp_path: Path):
    target = new_database()
    with psycopg.connect(target) as conn:
        conn.execute(f"CREATE EXTENSION memory VERSION '{OLDEST}'")
    done = run_cli("upgrade", target, env=base_env(tmp_path))
    assert (done.code, done.out) == (0, f"upgraded memory from {OLDEST} to {CURRENT}\n")


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (
            "DROP EXTENSION vector",
            "pgmemory: pgvector is not installed in this database: CREATE EXTENSION vector first"
            " (memory needs pgvector >= 0.8)\n",
        ),
        (
            "CREATE EXTENSION memory",
            f"pgmemory: memory {CURRENT} is installed as an extension in this database:"
            " ALTER EXTENSION memory UPDATE upgrades it\n",
        ),
        (
            "CREATE SCHEMA memory",
            "pgmemory: schema memory exists but is not a plain install of pgmemory (its comment"
            " is ''); drop or rename it first\n",
        ),
    ],
    ids=["no pgvector", "extension", "foreign schema"],
)
def test_install_plain_refuses_and_changes_nothing(new_database, tmp_path, prepare, message):
    target = new_database()
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(prepare)
        before = conn.execute(OBJECTS).fetchall() if prepare != "CREATE SCHEMA memory" else []
    done = run_cli("install", "--plain", target, env=base_env(tmp_path))
    assert (done.code, done.out, done.err) == (1, "", message)
    if before:
        assert _objects(target) == [row[0] for row in before]


def test_install_plain_twice_points_to_upgrade(new_database, tmp_path: Path):
    target = new_database()
    assert run_cli("install", "--plain", target, env=base_env(tmp_path)).code == 0
    done = run_cli("install", "--plain", target, env=base_env(tmp_path))
    assert (done.code, done.err) == (
        1,
        f"pgmemory: memory {CURRENT} is already installed here: pgmemory upgrade updates it\n",
    )


def test_upgrade_without_memory_says_to_install(new_database, tmp_path: Path):
    done = run_cli("upgrade", new_database(), env=base_env(tmp_path))
    assert (done.code, done.err) == (
        1,
        "pgmemory: memory is not installed here: pgmemory install --plain first\n",
    )


def test_pgvector_in_a_schema_whose_name_needs_quotes(new_database):
    target = new_database()
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("DROP EXTENSION vector")
        conn.execute('CREATE SCHEMA "Vec""tors; DROP TABLE x"')
        conn.execute('CREATE EXTENSION vector SCHEMA "Vec""tors; DROP TABLE x"')
        plain.install(conn)
        conn.execute("SELECT memory.configure_embeddings(3)")
        owner = {"owner_id": str(ORG)}
        conn.execute(
            "SELECT memory.save_fact(%s, 'Lives in Porto', ARRAY[1, 0, 0]::real[], %s)",
            (ORG, psycopg.types.json.Jsonb(owner)),
        )
        hits = conn.execute(
            "SELECT content, similarity FROM memory.search_facts(%s, 'Porto',"
            " ARRAY[1, 0, 0]::real[], %s)",
            (ORG, psycopg.types.json.Jsonb(owner)),
        ).fetchall()
    assert hits == [("Lives in Porto", 1.0)]


def test_install_pg_tle_without_pg_tle_says_what_to_do(new_database, tmp_path: Path):
    done = run_cli("install", "--pg-tle", new_database(), env=base_env(tmp_path))
    assert done.code == 1
    assert done.err.startswith(
        "pgmemory: pg_tle is not available on this server: run CREATE EXTENSION pg_tle in this"
        " database first"
    ), done.err
    assert done.err.endswith("pgmemory install --plain installs memory as a plain schema\n")
