"""Registering memory with pg_tle (`pgmemory install --pg-tle DSN`).

pg_tle (Trusted Language Extensions: RDS, Aurora, hosted Supabase) keeps an
extension's control data and scripts in the database, as functions in schema
`pgtle`, and serves them to `CREATE EXTENSION` / `ALTER EXTENSION ... UPDATE`
through a ProcessUtility hook that runs its own copy of PostgreSQL's extension
code. This module registers the same assembled scripts that `make install`
installs as files (install.extension_files()):

- every full script, oldest version first and the current one last, with
  `pgtle.install_extension` (a second call for another version adds that
  version's script and replaces the control data; a released version stays
  installable with `CREATE EXTENSION memory VERSION '0.1.0'`);
- every upgrade script with `pgtle.install_update_path`, so a database at an
  older version reaches the current one with `ALTER EXTENSION memory UPDATE`;
- `pgtle.set_default_version` to the current version, so `CREATE EXTENSION
  memory` installs it directly.

What differs from the files, from pg_tle's source (src/tleextension.c):

- pg_tle substitutes `@extschema@`, `@extowner@` and MODULE_PATHNAME but not
  PostgreSQL 16's `@extschema:vector@` (https://github.com/aws/pg_tle/issues/193,
  open), so pgvector's schema is written into the scripts here, when they are
  registered: pgvector must be installed first, and registering again after
  moving it is refused (the registered scripts name the old schema).
- A script may not contain pg_tle's own quoting delimiters `$_pgtle_o_$` and
  `$_pgtle_i_$`; the psql guard line is dropped (pg_tle would blank it anyway).
- The control data pg_tle writes has no `schema` (the 5-argument
  `install_extension` of pg_tle before 1.5 has no such parameter), so create the
  schema and name it: `CREATE SCHEMA IF NOT EXISTS memory; CREATE EXTENSION
  memory SCHEMA memory;`.

Registering again is safe: a version or update path that is already registered
with the same script is left alone, a missing one is added, and one registered
with a different script is refused with what to do (replacing a script under a
database that was created from it would leave that database's objects and its
version out of step).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql

from .install import CONTROL, EXTENSION, InstallError, control_version, extension_files

REQUIRES = ("vector",)
FORBIDDEN = ("$_pgtle_o_$", "$_pgtle_i_$")  # PG_TLE_OUTER_STR, PG_TLE_INNER_STR
TAG = "pgmemory_"
NEXT_STEP = (
    f"CREATE SCHEMA IF NOT EXISTS {EXTENSION}; CREATE EXTENSION {EXTENSION} SCHEMA {EXTENSION};"
)
_GUARD = re.compile(r"^\\echo .*\\quit\n", re.MULTILINE)
_UPGRADE = re.compile(rf"^{EXTENSION}--(.+)--(.+)\.sql$")  # checked before _FULL
_FULL = re.compile(rf"^{EXTENSION}--(.+)\.sql$")


def description(control: str) -> str:
    """The `comment` of a control file (pg_tle shows it in available_extensions())."""
    found = re.search(r"^comment = '((?:[^']|'')*)'", control, re.MULTILINE)
    if found is None:
        raise InstallError(f"{CONTROL} has no comment")
    return found.group(1).replace("''", "'")


def script_body(name: str, script: bytes, vector_schema: str) -> str:
    """An assembled script as pg_tle stores it: no guard line, pgvector's schema named."""
    text = _GUARD.sub("", script.decode(), count=1)
    text = text.replace("@extschema:vector@", sql.Identifier(vector_schema).as_string(None))
    for delimiter in FORBIDDEN:
        if delimiter in text:
            raise InstallError(f"{name} contains {delimiter}, which pg_tle forbids in a script")
    return text


def quote(body: str) -> str:
    """`body` dollar-quoted with the first tag `$pgmemory_<n>$` that cannot end it early."""
    n = 1
    while True:
        tag = f"${TAG}{n}$"
        if (body + tag).find(tag) == len(body):  # also when the body ends in "$pgmemory_1"
            return f"{tag}{body}{tag}"
        n += 1


def literal(value: str) -> str:
    """A standard SQL string literal (standard_conforming_strings is on by default)."""
    if "\\" in value:
        raise InstallError(f"a backslash in {value!r}")
    return "'" + value.replace("'", "''") + "'"


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.\-]", version))


def statements(
    files: Mapping[str, bytes] | None = None,
    version: str | None = None,
    *,
    vector_schema: str,
    registered: Mapping[str, str] | None = None,
) -> list[str]:
    """The SQL that registers memory with pg_tle, in order.

    `files` and `version` default to install.extension_files(); `vector_schema` is
    where pgvector is installed in the target database; `registered` maps each
    script pg_tle already holds for memory (`memory--0.1.0.sql`, …) to its text.
    """
    if files is None:
        current, files = extension_files()
        version = version or current
    control = files[CONTROL].decode()
    version = version or control_version(control)
    comment = literal(description(control))
    requires = "ARRAY[" + ", ".join(literal(r) for r in REQUIRES) + "]"
    registered = registered or {}
    full: list[tuple[str, str]] = []
    upgrades: list[tuple[str, str, str]] = []
    for name in files:
        step = _UPGRADE.match(name)
        if step:
            upgrades.append((step.group(1), step.group(2), name))
        elif found := _FULL.match(name):
            full.append((found.group(1), name))
    if version not in {v for v, _ in full}:
        raise InstallError(f"no script {EXTENSION}--{version}.sql among {sorted(files)}")
    full.sort(key=lambda item: (item[0] == version, _version_key(item[0])))
    upgrades.sort(key=lambda item: (_version_key(item[0]), _version_key(item[1])))

    out: list[str] = []
    ext = literal(EXTENSION)

    def wanted(name: str, body: str) -> bool:
        if name not in registered:
            return True
        if registered[name] == body:
            return False
        raise InstallError(
            f"pg_tle already holds {name} with a different script (another pgmemory"
            " version registered it, or pgvector was in another schema then). If no database"
            f" uses that version, remove it and register again: SELECT"
            f" {_uninstall_sql(name)}; then pgmemory install --pg-tle"
        )

    for v, name in full:
        body = script_body(name, files[name], vector_schema)
        if wanted(name, body):
            out.append(
                f"SELECT pgtle.install_extension({ext}, {literal(v)}, {comment}, {quote(body)},"
                f" {requires})"
            )
    for start, target, name in upgrades:
        body = script_body(name, files[name], vector_schema)
        if wanted(name, body):
            out.append(
                f"SELECT pgtle.install_update_path({ext}, {literal(start)}, {literal(target)},"
                f" {quote(body)})"
            )
    out.append(f"SELECT pgtle.set_default_version({ext}, {literal(version)})")
    return out


def _uninstall_sql(name: str) -> str:
    step = _UPGRADE.match(name)
    if step:
        args = ", ".join(literal(a) for a in (EXTENSION, step.group(1), step.group(2)))
        return f"pgtle.uninstall_update_path({args})"
    found = _FULL.match(name)
    assert found is not None
    return f"pgtle.uninstall_extension({literal(EXTENSION)}, {literal(found.group(1))})"


def pg_tle_version(conn: psycopg.Connection[Any]) -> str | None:
    """The version of the pg_tle extension in this database, or None."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_tle'").fetchone()
    return None if row is None else str(row[0])


def vector_schema(conn: psycopg.Connection[Any]) -> str:
    """The schema pgvector is installed in, in this database."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = 'vector'"
    ).fetchone()
    if row is None:
        raise InstallError(
            "pgvector is not installed in this database: create it first"
            " (on Supabase: CREATE EXTENSION vector WITH SCHEMA extensions), because its"
            " schema is written into the scripts pg_tle stores (memory needs pgvector >= 0.8)"
        )
    return str(row[0])


def registered(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """The scripts pg_tle holds for memory: {`memory--0.1.0.sql`: text, …}.

    pg_tle stores each as a function `pgtle."memory--<version>.sql"()` returning
    the text, and finds them by name in pg_proc, as done here."""
    names = conn.execute(
        "SELECT proname FROM pg_proc WHERE pronamespace = 'pgtle'::regnamespace"
        " AND pronargs = 0 AND proname LIKE %s ORDER BY proname",
        (f"{EXTENSION}--%.sql",),
    ).fetchall()
    out = {}
    for (name,) in names:
        if _FULL.match(name) or _UPGRADE.match(name):
            query = sql.SQL("SELECT pgtle.{}()").format(sql.Identifier(name))
            row = conn.execute(query).fetchone()
            out[name] = "" if row is None or row[0] is None else str(row[0])
    return out


def _missing_pg_tle(conn: psycopg.Connection[Any]) -> InstallError:
    available = conn.execute("SELECT FROM pg_available_extensions WHERE name = 'pg_tle'").fetchone()
    where = (
        "pg_tle is available on this server but not created in this database"
        if available
        else "pg_tle is not available on this server"
    )
    return InstallError(
        f"{where}: run CREATE EXTENSION pg_tle in this database first (an administrator's"
        " login may have to; registering then needs a member of pgtle_admin); on RDS and Aurora"
        " pg_tle must also be in shared_preload_libraries (the DB parameter group, then a"
        " reboot). Without pg_tle, pgmemory install --plain installs memory as a plain schema"
    )


def install(conn: psycopg.Connection[Any]) -> str:
    """Register memory's scripts with pg_tle in this database, in one transaction.

    Returns the default version, which NEXT_STEP (`CREATE SCHEMA IF NOT EXISTS
    memory; CREATE EXTENSION memory SCHEMA memory;`) now installs, and which
    `ALTER EXTENSION memory UPDATE` reaches where memory is already created.
    Raises InstallError when pg_tle or pgvector is missing, the login may not
    register, or pg_tle holds one of the scripts with a different text."""
    current, files = extension_files()
    try:
        with conn.transaction():
            if pg_tle_version(conn) is None:
                raise _missing_pg_tle(conn)
            todo = statements(
                files, current, vector_schema=vector_schema(conn), registered=registered(conn)
            )
            for stmt in todo:
                conn.execute(stmt.encode())
    except psycopg.errors.InsufficientPrivilege as err:
        raise InstallError(
            f"{err.diag.message_primary}: registering with pg_tle needs a member of"
            " pgtle_admin (GRANT pgtle_admin TO <this login>)"
        ) from err
    return current
