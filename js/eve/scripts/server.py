"""The embedded PostgreSQL server for the JS tests (scripts/test.mjs runs it).

    server.py up <data-dir> <database>...   start, install, print the connection as JSON
    server.py down <data-dir>               stop and remove the data directory

`up` starts pgmemory's embedded server (PostgreSQL 18 + pgvector) in a fresh
data directory, installs the extension's files, creates the logins the tests
use and a template database with `CREATE EXTENSION memory CASCADE`, then one
database per name from that template (one per test file, so test files run
in parallel without sharing settings). Logins:

- `postgres`: superuser, for the tests' own checks;
- `eve_service`: a member of `memory_service`, so trusted as the service;
- `eve_app`: an ordinary login, never the service; users' calls set claims on it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import psycopg

from pgmemory import install as installer
from pgmemory import server

TEMPLATE = "eve_template"
ROLES = (
    "CREATE ROLE memory_service NOLOGIN",
    "CREATE ROLE eve_service LOGIN IN ROLE memory_service",
    "CREATE ROLE eve_app LOGIN",
)


def up(data_dir: Path, databases: list[str]) -> None:
    server.sweep_stale_runs("eve")  # servers left by killed runs (`eve-<pid>`, that pid gone)
    srv = server.start(data_dir, fresh=True)
    installer.install(server.pg_bin_dir() / "pg_config")
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        for stmt in ROLES:
            conn.execute(stmt)
        conn.execute(f"CREATE DATABASE {TEMPLATE}")
    with psycopg.connect(srv.dsn(TEMPLATE), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION memory CASCADE")
        conn.execute("GRANT USAGE ON SCHEMA memory TO eve_service, eve_app")
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        for name in databases:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE {TEMPLATE}')
    print(json.dumps({"host": srv.socket_dir, "port": srv.port, "data_dir": str(data_dir)}))


def down(data_dir: Path) -> None:
    server.kill_stale(data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "up":
        up(Path(argv[1]), argv[2:])
        return 0
    if len(argv) == 2 and argv[0] == "down":
        down(Path(argv[1]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
