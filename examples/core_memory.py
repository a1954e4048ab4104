"""Core memory: the memory tool's six commands on files under /memories.

    .venv/bin/python examples/core_memory.py postgresql://…   (or set PGMEMORY_DSN)

The database must have the extension (`CREATE EXTENSION memory CASCADE`) and
the login must be trusted as the service: a superuser or a member of the role
named by setting `service_role` (default `memory_service`). The script makes up
a new organization and user each run, so it can be run again and again.
"""

from __future__ import annotations

import os
import sys
import uuid

from pgmemory import Conflict, Forbidden, InvalidPath, Memory, NoMatch


def dsn_from_args() -> str:
    if len(sys.argv) > 1:
        return sys.argv[1]
    dsn = os.environ.get("PGMEMORY_DSN") or os.environ.get("DATABASE_URL")
    if not dsn:
        sys.exit("usage: core_memory.py DSN (or set PGMEMORY_DSN)")
    return dsn


def main() -> None:
    org, user_id = uuid.uuid4(), uuid.uuid4()
    with Memory(dsn_from_args(), service=True) as service:
        # The application (the service) lets the user use memory in the organization.
        service.grant(org, user_id, "memory.read")
        user = service.as_user(user_id)

        # What a model sends through the memory tool, and the text it gets back.
        print(
            user.run(
                org,
                {
                    "command": "create",
                    "path": "/memories/preferences.md",
                    "file_text": "# Preferences\n- Prefers metric units.\n",
                },
            )
        )
        print(
            user.run(
                org,
                {
                    "command": "insert",
                    "path": "/memories/preferences.md",
                    "insert_line": 2,
                    "insert_text": "- Likes green tea.\n",
                },
            )
        )
        print(
            user.run(
                org,
                {
                    "command": "str_replace",
                    "path": "/memories/preferences.md",
                    "old_str": "green tea",
                    "new_str": "green tea, no sugar",
                },
            )
        )
        print(user.run(org, {"command": "view", "path": "/memories"}))

        # Mistakes come back as errors whose message is the text the model should see.
        for command in (
            {"command": "view", "path": "/memories/../etc/passwd"},
            {
                "command": "str_replace",
                "path": "/memories/preferences.md",
                "old_str": "coffee",
                "new_str": "tea",
            },
        ):
            try:
                user.run(org, command)
            except (InvalidPath, NoMatch) as err:
                print(f"[{err.code}] {err.message}")

        # Applications edit files with optimistic concurrency: read, then write at that version.
        current = user.read(org, "/memories/preferences.md")
        assert current is not None
        written = user.write(
            org,
            current["path"],
            current["content"] + "- Vegetarian.\n",
            expected_version=current["version"],
        )
        print(f"write at version {current['version']} -> version {written['version']}")
        try:
            user.write(org, current["path"], "stale\n", expected_version=current["version"])
        except Conflict as err:
            print(f"[{err.code}] {err.message}")

        # Organization memory: everyone in the org reads it; changing it needs memory.manage.
        try:
            user.run(
                org,
                {"command": "create", "path": "/memories/company.md", "file_text": "x\n"},
                ns={"scope": "organization"},
            )
        except Forbidden as err:
            print(f"[{err.code}] {err.message}")
        service.run(
            org,
            {
                "command": "create",
                "path": "/memories/company.md",
                "file_text": "Fiscal year starts in April.\n",
            },
            ns={"scope": "organization"},
        )

        for info in user.list_files(org):
            print(f"{info.path}: version {info.version}, {info.bytes} bytes")
        print("--- render(): the organization's files, then the user's, for a system prompt ---")
        print(user.render(org))


if __name__ == "__main__":
    main()
