"""Archival memory: facts saved once, searched by meaning and by words, superseded.

    .venv/bin/python examples/archival_search.py postgresql://…   (or set PGMEMORY_DSN)

Embeddings come from LocalEmbedder (all-MiniLM-L6-v2, 384 dimensions, runs
offline). The script switches the database's embeddings to 384 dimensions
(`memory.configure_embeddings(384)`): on a database that holds vectors of
another model, that makes them all pending again, so run it on a scratch
database. The login must be trusted as the service (a superuser or a member
of `memory_service`).
"""

from __future__ import annotations

import os
import sys
import uuid

from pgmemory import LocalEmbedder, Memory

# Facts an application extracted from a conversation; the last one repeats the
# first in other words and is refused as a near-duplicate.
EXTRACTED = [
    "Works in the Lisbon office",
    "Is allergic to peanuts",
    "Drinks green tea without sugar",
    "Has a daughter named Ana",
    "Works at the Lisbon office",
]
QUESTION = "Where does the user work?"


def dsn_from_args() -> str:
    if len(sys.argv) > 1:
        return sys.argv[1]
    dsn = os.environ.get("PGMEMORY_DSN") or os.environ.get("DATABASE_URL")
    if not dsn:
        sys.exit("usage: archival_search.py DSN (or set PGMEMORY_DSN)")
    return dsn


def main() -> None:
    org, user_id = uuid.uuid4(), uuid.uuid4()
    with Memory(dsn_from_args(), LocalEmbedder(), service=True) as service:
        print("configure_embeddings:", service.configure_embeddings())  # the embedder's 384
        service.grant(org, user_id)
        user = service.as_user(user_id)

        # One embedder call for the whole batch, one memory.save_facts call.
        rows = user.archival.save_extracted(org, EXTRACTED)
        for fact, row in zip(EXTRACTED, rows, strict=True):
            if row.id is not None:
                print(f"saved    {fact}")
            else:
                print(f"refused  {fact} (similarity {row.similarity:.2f} to an earlier fact)")

        print(f"search: {QUESTION}")
        for n, hit in enumerate(user.archival.search(org, QUESTION, k=3), 1):
            print(f"{n}. {hit.content}")

        # The user moved: the new fact supersedes the old one, which is kept but hidden.
        old = rows[0].id
        assert old is not None
        new = user.archival.save(org, "Now works in the Porto office")
        user.archival.forget(org, old, superseded_by=new)
        print(f"search again: {QUESTION}")
        for n, hit in enumerate(user.archival.search(org, QUESTION, k=1), 1):
            print(f"{n}. {hit.content}")
        kept = user.archival.get(org, old)
        print(f"kept: {kept['content']} (forgotten: {kept['forgotten_at'] is not None})")

        # Full-text half alone: a client without an embedder searches by words only.
        words_only = Memory(dsn_from_args(), service=True)
        with words_only:
            hit = words_only.as_user(user_id).archival.search(org, "peanut allergy", k=1)[0]
            print(f"words only: {hit.content} (similarity {hit.similarity})")


if __name__ == "__main__":
    main()
