"""The anthropic SDK's memory tool, kept in Postgres: `pgmemory.anthropic.MemoryTool`.

    .venv/bin/python examples/anthropic_memory_tool.py postgresql://…   (or set PGMEMORY_DSN)

With a model, the tool goes to the SDK's tool runner, which calls it for each
`tool_use` block and sends back what it returns (or, on a `ToolError`, the
error text with `is_error: true`)::

    from anthropic import Anthropic

    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        messages=[{"role": "user", "content": "Remember that I prefer metric units."}],
        tools=[MemoryTool(memory, org, user_id=user_id)],
    )
    final = runner.until_done()

This script needs no API key and no network: it makes the same calls the
runner makes (`tool.call(input)` with the model's input), so you see exactly
what the model would get. The login must be trusted as the service.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

from anthropic.lib.tools import ToolError

from pgmemory import Memory
from pgmemory.anthropic import MemoryTool

# Inputs of tool_use blocks, as a model sends them.
MODEL_CALLS = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/user.md", "file_text": "Prefers metric units.\n"},
    {"command": "str_replace", "path": "/memories/user.md", "old_str": "metric", "new_str": "SI"},
    {"command": "rename", "old_path": "/memories/user.md", "new_path": "/memories/profile/user.md"},
    {"command": "view", "path": "/memories/profile/user.md"},
    {"command": "delete", "path": "/memories/notes.md"},
]


def dsn_from_args() -> str:
    if len(sys.argv) > 1:
        return sys.argv[1]
    dsn = os.environ.get("PGMEMORY_DSN") or os.environ.get("DATABASE_URL")
    if not dsn:
        sys.exit("usage: anthropic_memory_tool.py DSN (or set PGMEMORY_DSN)")
    return dsn


def main() -> None:
    org, user_id = uuid.uuid4(), uuid.uuid4()
    with Memory(dsn_from_args(), service=True) as memory:
        memory.grant(org, user_id)
        tool = MemoryTool(memory, org, user_id=user_id)
        print("tool definition sent to the API:", json.dumps(tool.to_dict()))
        for call in MODEL_CALLS:
            print(f"\nmodel -> memory {json.dumps(call)}")
            try:
                print(tool.call(call))
            except ToolError as err:  # the runner sends err.content with is_error: true
                print(f"is_error: {err.content}")
        # The application (not the model) can wipe the namespace, e.g. on "forget me".
        print(f"\n{tool.clear_all_memory()}")
        print(f"files left: {len(memory.as_user(user_id).list_files(org))}")


if __name__ == "__main__":
    main()
