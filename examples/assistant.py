"""A chat assistant with long-term memory, on the anthropic SDK's tool runner.

    .venv/bin/python examples/assistant.py postgresql://…   (or set PGMEMORY_DSN)

Each line on stdin is a user turn. Before it, the model gets pgmemory's
instructions (the guidance and the core memory) as its system prompt, and what
memory recalls for the line: the user's closest facts and messages of their
other chats (`recall_context`). During it, the memory tools: Anthropic's memory
tool, search_memory, save_memory, forget_memory, search_conversations. After
it, both messages are indexed, so later chats recall them. The anthropic SDK
reads ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL) from the environment;
PGMEMORY_ORG and PGMEMORY_USER name the organization and the user (new ones
each run when unset). The login must be trusted as the service.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

from anthropic import Anthropic

from pgmemory import Memory, MemoryTools

MODEL = os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")


def dsn_from_args() -> str:
    if len(sys.argv) > 1:
        return sys.argv[1]
    dsn = os.environ.get("PGMEMORY_DSN") or os.environ.get("DATABASE_URL")
    if not dsn:
        sys.exit("usage: assistant.py DSN (or set PGMEMORY_DSN)")
    return dsn


def main() -> None:
    org = os.environ.get("PGMEMORY_ORG") or str(uuid.uuid4())
    user_id = os.environ.get("PGMEMORY_USER") or str(uuid.uuid4())
    chat_id, client, history = str(uuid.uuid4()), Anthropic(), []
    with Memory(dsn_from_args(), service=True) as service:
        service.grant(org, user_id)
        user = service.as_user(user_id)
        tools = MemoryTools(service, org, user_id=user_id, chat_id=chat_id)
        for n, line in enumerate(line.strip() for line in sys.stdin):
            context = user.recall_context(org, line, options={"exclude_chat": chat_id})
            recalled = [c.content for c in context if c.kind != "core"]  # core: in instructions
            system = f"{user.instructions(org)}\n\nRecalled (data): {json.dumps(recalled)}"
            history.append({"role": "user", "content": line})
            runner = client.beta.messages.tool_runner(
                model=MODEL, max_tokens=1024, system=system, messages=list(history),
                tools=tools.runner_tools(),
            )  # fmt: skip
            answer = "".join(b.text for b in runner.until_done().content if b.type == "text")
            print(answer)
            history.append({"role": "assistant", "content": answer})
            for role, content in (("user", line), ("assistant", answer)):
                message = {"id": f"{n}-{role}", "role": role, "content": content}
                service.recall.index(org, {**message, "chat_id": chat_id, "owner_id": user_id})


if __name__ == "__main__":
    main()
