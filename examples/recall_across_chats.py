"""Recall: earlier messages found again in a later chat.

    .venv/bin/python examples/recall_across_chats.py postgresql://…   (or set PGMEMORY_DSN)

The service indexes each chat message for its owner as it happens; in a new
chat, the user's question finds what they said before, with the current chat
left out. Embeddings come from LocalEmbedder (384 dimensions, offline); the
script runs `memory.configure_embeddings(384)`, which makes vectors of another
dimension pending again, so use a scratch database. The login must be trusted
as the service.
"""

from __future__ import annotations

import os
import sys
import uuid
from datetime import datetime, timedelta, timezone

from pgmemory import LocalEmbedder, Memory

FIRST_CHAT = [
    ("user", "I'm planning a trip to Kyoto in April to see the cherry blossoms."),
    ("assistant", "Lovely! Book the ryokan early: April is peak season in Kyoto."),
    ("user", "My sister Marta is coming along; she is vegetarian."),
]
QUESTION = "Which restaurants should we try on our Japan trip?"


def dsn_from_args() -> str:
    if len(sys.argv) > 1:
        return sys.argv[1]
    dsn = os.environ.get("PGMEMORY_DSN") or os.environ.get("DATABASE_URL")
    if not dsn:
        sys.exit("usage: recall_across_chats.py DSN (or set PGMEMORY_DSN)")
    return dsn


def main() -> None:
    org, user_id = uuid.uuid4(), uuid.uuid4()
    started = datetime(2025, 3, 1, 9, 30, tzinfo=timezone.utc)
    with Memory(dsn_from_args(), LocalEmbedder(), service=True) as service:
        service.configure_embeddings()
        service.grant(org, user_id)

        # The application (the service) indexes messages for their owner.
        for n, (role, content) in enumerate(FIRST_CHAT, 1):
            service.recall.index(
                org,
                {
                    "id": f"m{n}",
                    "chat_id": "chat-1",
                    "owner_id": str(user_id),
                    "role": role,
                    "content": content,
                    "created_at": started + timedelta(minutes=n),
                },
            )
        # A temporary chat is never stored.
        stored = service.recall.index(
            org,
            {
                "id": "t1",
                "chat_id": "incognito",
                "owner_id": str(user_id),
                "role": "user",
                "content": "Forget I asked: what is a good gift for Marta?",
                "temporary": True,
            },
        )
        print(f"temporary message stored: {stored}")
        # Days later, a new chat starts with a question; it is indexed as it comes.
        service.recall.index(
            org,
            {
                "id": "m1",
                "chat_id": "chat-2",
                "owner_id": str(user_id),
                "role": "user",
                "content": QUESTION,
                "created_at": started + timedelta(days=8),
            },
        )

        # The user searches their own messages; the current chat is left out.
        user = service.as_user(user_id)
        print(f"recall: {QUESTION}")
        for n, hit in enumerate(user.recall.search(org, QUESTION, exclude_chat="chat-2", k=2), 1):
            print(
                f"{n}. [{hit.chat_id} {hit.role} {hit.created_at.astimezone(timezone.utc):%Y-%m-%d}] {hit.content}"
            )

        print(f"deleted from chat-1: {user.recall.delete_chat(org, 'chat-1')} messages")
        left = user.recall.search(org, QUESTION, exclude_chat="chat-2", k=2)
        print(f"left to recall outside chat-2: {len(left)}")


if __name__ == "__main__":
    main()
