"""Installing memory where `CREATE EXTENSION` cannot read our files (`pgmemory install --plain`).

Managed PostgreSQL (hosted Supabase, RDS, Cloud SQL, Neon, Azure) lets nobody
copy files into the server's extension directory. A plain install runs the
same assembled scripts directly instead: schema `memory` is created by us,
pgvector's schema is put where the scripts say `@extschema:vector@`, and the
two things only the extension machinery does are left out (the psql guard
line and `pg_extension_config_dump`, whose job — keeping the rows in a
`pg_dump` — a plain schema does anyway). The installed version is recorded
as the schema's comment; `upgrade` applies the upgrade scripts from there, in
order, each in one transaction. See docs/operations.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from .install import EXTENSION, InstallError, extension_files

SCHEMA = "memory"
MARK = "pgmemory plain install, version "
_GUARD = re.compile(r"^\\echo .*\\quit$", re.MULTILINE)
_CONFIG_DUMP = re.compile(r"^SELECT pg_catalog\.pg_extension_config_dump\(.*\);$", re.MULTILINE)
_UPGRADE = re.compile(rf"^{EXTENSION}--(.+)--(.+)\.sql$")


@dataclass(frozen=True)
class Done:
    """What an install or upgrade did: the version before (None: nothing) and after."""

    before: str | None
    after: str
    scripts: list[str]


def script_body(script: bytes, vector_schema: str) -> str:
    """An assembled script as plain SQL: no guard, no config dump, pgvector's schema named.

    `vector_schema` is quoted as an identifier already (as CREATE EXTENSION quotes it)."""
    text = _GUARD.sub("", script.decode())
    text = _CONFIG_DUMP.sub("", text)
    return text.replace("@extschema:vector@", vector_schema)


def _vector_schema(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(
        "SELECT quote_ident(n.nspname) FROM pg_extension e"
        " JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = 'vector'"
    ).fetchone()
    if row is None:
        raise InstallError(
            "pgvector is not installed in this database: CREATE EXTENSION vector first"
            " (memory needs pgvector >= 0.8)"
        )
    return str(row[0])


def installed_version(conn: psycopg.Connection[Any]) -> str | None:
    """The version of a plain install of memory in this database, or None when there is none.

    Raises InstallError when memory is there as an extension or as a schema of unknown origin."""
    row = conn.execute(
        "SELECT extversion FROM pg_extension WHERE extname = %s", (EXTENSION,)
    ).fetchone()
    if row is not None:
        raise InstallError(
            f"memory {row[0]} is installed as an extension in this database:"
            " ALTER EXTENSION memory UPDATE upgrades it"
        )
    row = conn.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
        (SCHEMA,),
    ).fetchone()
    if row is None:
        return None
    comment = row[0] or ""
    if not comment.startswith(MARK):
        raise InstallError(
            f"schema {SCHEMA} exists but is not a plain install of pgmemory"
            f" (its comment is {comment!r}); drop or rename it first"
        )
    return comment[len(MARK) :]


def _record(conn: psycopg.Connection[Any], version: str) -> None:
    conn.execute(
        sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
            sql.Identifier(SCHEMA), sql.Literal(MARK + version)
        )
    )


def install(conn: psycopg.Connection[Any], version: str | None = None) -> Done:
    """Create schema memory at `version` (default: the current one), in one transaction."""
    current, files = extension_files()
    version = version or current
    name = f"{EXTENSION}--{version}.sql"
    if name not in files:
        raise InstallError(f"no script for memory {version} (known: {', '.join(_versions(files))})")
    with conn.transaction():
        before = installed_version(conn)
        if before is not None:
            raise InstallError(
                f"memory {before} is already installed here: pgmemory upgrade updates it"
            )
        body = script_body(files[name], _vector_schema(conn))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)))
        conn.execute(body.encode())
        _record(conn, version)
    return Done(None, version, [name])


def _versions(files: dict[str, bytes]) -> list[str]:
    prefix = f"{EXTENSION}--"
    return sorted(f[len(prefix) : -4] for f in files if f.endswith(".sql") and f.count("--") == 1)


def upgrade_path(files: dict[str, bytes], start: str, target: str) -> list[str]:
    """The upgrade scripts from `start` to `target`, shortest first (as ALTER EXTENSION picks)."""
    steps: dict[str, list[tuple[str, str]]] = {}
    for name in files:
        found = _UPGRADE.match(name)
        if found:
            steps.setdefault(found.group(1), []).append((found.group(2), name))
    paths: list[tuple[str, list[str]]] = [(start, [])]
    seen = {start}
    while paths:
        version, taken = paths.pop(0)
        if version == target:
            return taken
        for after, name in sorted(steps.get(version, [])):
            if after not in seen:
                seen.add(after)
                paths.append((after, [*taken, name]))
    raise InstallError(f"no upgrade path from memory {start} to {target}")


def upgrade(conn: psycopg.Connection[Any]) -> Done:
    """Bring a plain install to the current version, one transaction for the whole path."""
    current, files = extension_files()
    with conn.transaction():
        before = installed_version(conn)
        if before is None:
            raise InstallError("memory is not installed here: pgmemory install --plain first")
        scripts = upgrade_path(files, before, current)
        vector_schema = _vector_schema(conn)
        for name in scripts:
            conn.execute(script_body(files[name], vector_schema).encode())
        _record(conn, current)
    return Done(before, current, scripts)
