"""Read replicas: a real hot standby made with pg_basebackup -R beside an embedded
primary. Calls that never write go to the standby, every other call to the primary
(docs/scale-out.md). Replay is paused to tell the two servers apart: a read that
does not see the latest write was served by the standby."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest

from pgmemory import AsyncMemory, Memory, NotFound
from pgmemory import server as embedded

ORG = uuid.UUID("00000000-0000-4000-8000-00000000000a")
USER = uuid.UUID("00000000-0000-4000-8000-000000000001")


@dataclass
class Pair:
    primary: str
    standby: str


def _replayed(primary: psycopg.Connection, standby: psycopg.Connection) -> float:
    """Waits until the standby has replayed everything the primary wrote; returns seconds."""
    target = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    start = time.monotonic()
    while time.monotonic() - start < 30:
        done = standby.execute(
            "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)
        ).fetchone()[0]
        if done:
            return time.monotonic() - start
        time.sleep(0.01)
    raise AssertionError("the standby did not replay within 30 s")


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    root = embedded.scratch_root()
    primary = embedded.start(root / f"rp-{os.getpid()}", fresh=True)
    standby_dir = root / f"rs-{os.getpid()}"
    shutil.rmtree(standby_dir, ignore_errors=True)
    standby = None
    try:
        with psycopg.connect(primary.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE app")
        with psycopg.connect(primary.dsn("app"), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION memory CASCADE")
        subprocess.run(
            [str(embedded.pg_bin_dir() / "pg_basebackup"), "-D", str(standby_dir), "-R",
             "-X", "stream", "-c", "fast", "-h", primary.socket_dir, "-p", str(primary.port), "-U", "postgres"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        # The primary's socket lives in its data directory: the copy of its lock file and
        # of the embedded server's own bookkeeping would stop the standby from starting.
        for name in (".s.PGSQL.5432.lock", ".handle_pids.json", "log"):
            (standby_dir / name).unlink(missing_ok=True)
        # The backup is the primary's files: give them to the primary's owner (pgserver as root).
        owner = primary.data_dir.stat()
        for path in [standby_dir, *standby_dir.rglob("*")]:
            os.chown(path, owner.st_uid, owner.st_gid)
        standby = embedded.start(standby_dir)
        with psycopg.connect(standby.dsn("app"), autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
        yield Pair(primary.dsn("app"), standby.dsn("app"))
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()
        shutil.rmtree(standby_dir, ignore_errors=True)
        shutil.rmtree(primary.data_dir, ignore_errors=True)


@pytest.fixture
def servers(pair: Pair) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with (
        psycopg.connect(pair.primary, autocommit=True) as primary,
        psycopg.connect(pair.standby, autocommit=True) as standby,
    ):
        standby.execute("SELECT pg_wal_replay_resume()")
        _replayed(primary, standby)
        yield primary, standby
        standby.execute("SELECT pg_wal_replay_resume()")


def _reads(client: Memory, fact_id: uuid.UUID) -> dict[str, object]:
    """Every call that never writes, as the user sees it."""
    user = client.as_user(USER)
    try:
        got: object = user.archival.get(ORG, fact_id)["content"]
    except NotFound:
        got = "not found"
    return {
        "search": [h.content for h in user.archival.search(ORG, "Porto office", k=5)],
        "render": user.render(ORG),
        "read": (user.read(ORG, "/memories/notes.md") or {}).get("content"),
        "list_files": [f.path for f in user.list_files(ORG)],
        "get": got,
        "list": [f.content for f in user.archival.list(ORG)],
        "stats": user.stats(ORG),
        "recall": [h.content for h in user.recall.search(ORG, "Porto office")],
        "recall_context": [c.content for c in user.recall_context(ORG, "Porto office")],
        "export": sorted(f["content"] for f in user.export(ORG)["facts"]),
    }


def test_reads_go_to_the_standby_writes_to_the_primary(pair, servers):
    primary, standby = servers
    with (
        Memory(pair.primary, service=True, replica=pair.standby) as routed,
        Memory(pair.primary, service=True) as direct,
    ):
        routed.grant(ORG, USER, "memory.read")
        user = routed.as_user(USER)
        user.run(ORG, {"command": "create", "path": "/memories/notes.md", "file_text": "v1\n"})
        first = user.archival.save(ORG, "Works in the Lisbon office")
        lag = _replayed(primary, standby)
        before = _reads(routed, first)
        assert before == _reads(direct, first)

        standby.execute("SELECT pg_wal_replay_pause()")
        # Every kind of write goes through the routed client while the standby is frozen:
        # one sent there would fail (a standby refuses writes), and each shows on the primary.
        second = user.archival.save(ORG, "Now works in the Porto office")
        user.archival.forget(ORG, first, superseded_by=second)
        user.write(ORG, "/memories/notes.md", "v2\n")
        routed.recall.index(
            ORG,
            {"id": "m1", "chat_id": "c1", "owner_id": str(USER), "role": "user",
             "content": "I moved to the Porto office"},
        )  # fmt: skip
        routed.documents.write("run-1", "plan.md", "step 1", expected_version=None)
        # Under an operation id recall_context stores its answer: a write, so the primary's.
        replayed = user.recall_context(ORG, "Porto office", options={"operation_id": "turn-1"})
        assert [c.content for c in replayed][-1] == "I moved to the Porto office"

        after_on_primary = _reads(direct, second)
        assert after_on_primary["read"] == "v2\n"
        assert after_on_primary["search"] == ["Now works in the Porto office"]
        assert after_on_primary["recall"] == ["I moved to the Porto office"]
        # The routed client reads the frozen standby: none of the new writes yet, in any call.
        stale = _reads(routed, second)
        assert stale == {**before, "get": "not found"}
        for key, value in stale.items():
            if key != "get":
                assert value != after_on_primary[key] or key == "list_files", key

        standby.execute("SELECT pg_wal_replay_resume()")
        _replayed(primary, standby)
        assert _reads(routed, second) == after_on_primary
        print(f"standby replay lag after the first writes: {lag * 1000:.1f} ms")


def test_the_standby_refuses_a_write_sent_to_it(pair, servers):
    """What misrouting would look like: the same write, sent to the standby directly."""
    with (
        Memory(pair.standby, service=True) as on_standby,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        on_standby.grant(ORG, USER, "memory.write")


def test_async_client_routes_the_same_way(pair, servers):
    primary, standby = servers

    async def main() -> tuple[list[str], list[str]]:
        async with AsyncMemory(pair.primary, service=True, replica=pair.standby) as routed:
            user = routed.as_user(USER)
            await routed.grant(ORG, USER, "memory.read")
            await user.archival.save(ORG, "Has a cat named Miso")
            await asyncio.to_thread(_replayed, primary, standby)
            seen = [h.content for h in await user.archival.search(ORG, "cat Miso")]
            standby.execute("SELECT pg_wal_replay_pause()")
            await user.archival.save(ORG, "Has a second cat named Tofu")
            stale = [h.content for h in await user.archival.search(ORG, "cat Tofu")]
            return seen, stale

    seen, stale = asyncio.run(main())
    assert seen == ["Has a cat named Miso"]
    assert "Has a second cat named Tofu" not in stale
