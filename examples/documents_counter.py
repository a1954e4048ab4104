"""Documents: versioned state for agent runtimes, with optimistic concurrency.

    .venv/bin/python examples/documents_counter.py postgresql://…   (or set PGMEMORY_DSN)

Five asyncio workers share one counter document through an AsyncMemory on a
connection pool. Each increment reads the document, writes it back at the
version it read, and starts over when another worker got there first
(`DocumentConflict`): no increment is lost. Documents are for the service
only, so the login must be trusted as the service.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from psycopg_pool import AsyncConnectionPool

from pgmemory import AsyncMemory, DocumentConflict

WORKERS = 5
INCREMENTS = 4


def dsn_from_args() -> str:
    if len(sys.argv) > 1:
        return sys.argv[1]
    dsn = os.environ.get("PGMEMORY_DSN") or os.environ.get("DATABASE_URL")
    if not dsn:
        sys.exit("usage: documents_counter.py DSN (or set PGMEMORY_DSN)")
    return dsn


async def increment(mem: AsyncMemory, scope: str, path: str) -> int:
    """Add one to the counter; returns how many conflicts it retried."""
    conflicts = 0
    while True:
        doc = await mem.documents.read(scope, path)
        value, version = (0, None) if doc is None else (int(doc.content), doc.version)
        try:
            # expected_version None: the document must not exist yet.
            await mem.documents.write(scope, path, str(value + 1), expected_version=version)
            return conflicts
        except DocumentConflict:
            conflicts += 1


async def worker(mem: AsyncMemory, scope: str, path: str) -> int:
    conflicts = 0
    for _ in range(INCREMENTS):
        conflicts += await increment(mem, scope, path)
        await asyncio.sleep(0)  # let the other workers interleave
    return conflicts


async def main() -> None:
    scope = f"agent-run:{uuid.uuid4()}"  # an opaque key: a run, a session, a workflow
    async with AsyncConnectionPool(
        dsn_from_args(), min_size=2, max_size=WORKERS, open=False
    ) as pool:
        mem = AsyncMemory(pool, service=True)
        conflicts = await asyncio.gather(
            *(worker(mem, scope, "state/counter") for _ in range(WORKERS))
        )
        doc = await mem.documents.read(scope, "state/counter")
        assert doc is not None
        print(f"counter = {doc.content} after {WORKERS} workers x {INCREMENTS} increments")
        print(f"version {doc.version}; conflicts retried: {sum(conflicts)}")

        # A document with a lifetime: read as absent once expired, removed by purge.
        await mem.documents.write(
            scope, "state/lock", "worker-1", expected_version=None, expires_in=60
        )
        for info in await mem.documents.list(scope, prefix="state/"):
            print(f"{info.path}: version {info.version}, expires: {info.expires_at is not None}")
        print(f"deleted: {await mem.documents.delete(scope, 'state/lock')}")


if __name__ == "__main__":
    asyncio.run(main())
