# This file is generated from python/pgmemory/_async/connection.py by tools/async_to_sync.py; do not edit.
# Change the async source and run `make generate`.
"""`Source`: the connections of a `Memory`, and how one call is executed.

See pgmemory.connection.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from .._common import SET_CLAIMS, closed_error
from ..calls import Call, RealRows, RealRowsDumper, Rows, T
from ..errors import SetupError, translate

IDLE = psycopg.pq.TransactionStatus.IDLE
PIPELINE = psycopg.capabilities.has_pipeline()
COMMIT = "COMMIT"
_prepared: weakref.WeakSet[Any] = weakref.WeakSet()


def _prepare(conn: psycopg.Connection[Any]) -> None:
    if conn in _prepared:
        return
    conn.adapters.register_dumper(RealRows, RealRowsDumper)
    with suppress(psycopg.ProgrammingError):
        register_vector(conn)
    _prepared.add(conn)


class Source:
    """The connections of a `Memory`: a pool's, or one connection guarded by a lock."""

    def __init__(
        self,
        target: str | psycopg.Connection[Any] | ConnectionPool[Any],
        replica: str | psycopg.Connection[Any] | ConnectionPool[Any] | None = None,
    ) -> None:
        if not isinstance(target, (str, psycopg.Connection, ConnectionPool)):
            raise TypeError(
                f"Memory needs a DSN, a psycopg.Connection or a psycopg_pool.ConnectionPool, got {type(target).__name__}"
            )
        self._replica = Source(replica) if replica is not None else None
        self._dsn = target if isinstance(target, str) else None
        self._pool = target if isinstance(target, ConnectionPool) else None
        self._conn = target if isinstance(target, psycopg.Connection) else None
        self._closed = False
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one call: the pool's, or the single one (opened from the DSN
        on first use, and again after it was lost), held under the lock."""
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield conn
            return
        with self._lock:
            if self._closed:
                raise closed_error()
            if self._dsn is not None and (self._conn is None or self._conn.closed):
                self._conn = psycopg.Connection.connect(self._dsn, autocommit=True)
            assert self._conn is not None
            yield self._conn

    def close(self) -> None:
        """Close the connections we opened from a DSN; borrowed ones stay open."""
        if self._replica is not None:
            self._replica.close()
        with self._lock:
            self._closed = self._dsn is not None
            if self._dsn is not None and self._conn is not None:
                self._conn.close()
                self._conn = None

    def run_alone(self, statements: list[str]) -> None:
        """Each statement on its own, outside any transaction block (what CREATE INDEX
        CONCURRENTLY needs), as the connection's login; a psycopg error is raised
        translated."""
        login = None
        try:
            with self.connection() as conn:
                login = conn.info.user
                autocommit = conn.autocommit
                if not autocommit:
                    conn.set_autocommit(True)
                try:
                    for statement in statements:
                        conn.execute(statement.encode())
                finally:
                    if not autocommit and (not conn.closed):
                        with suppress(psycopg.Error):
                            conn.set_autocommit(False)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise SetupError(
                f"{exc}: CREATE and DROP INDEX CONCURRENTLY need the owner of memory.facts and memory.messages; connect as that role, or maintain without concurrently",
                sqlstate=exc.sqlstate,
            ) from exc
        except psycopg.Error as exc:
            err = translate(exc, login)
            if err is exc:
                raise
            raise err from exc

    def execute(self, claims: str | None, call: Call[T]) -> T:
        """Run `call` in one transaction as `claims`; a psycopg error is raised translated.
        A call that never writes goes to the replica when there is one."""
        if call.read_only and self._replica is not None:
            return self._replica.execute(claims, call)
        login = None
        try:
            with self.connection() as conn:
                login = conn.info.user
                _prepare(conn)
                if PIPELINE and conn.info.transaction_status == IDLE:
                    rows = _pipelined(conn, claims, call)
                else:
                    rows = _in_transaction(conn, claims, call)
        except psycopg.Error as exc:
            err = translate(exc, login)
            if err is exc:
                raise
            raise err from exc
        return call.shape(rows)


def _pipelined(conn: psycopg.Connection[Any], claims: str | None, call: Call[T]) -> Rows:
    """BEGIN, the claims, the call and COMMIT in one round trip: in psycopg's pipeline
    mode they all go out, then one Sync, and only then does the client wait.
    (`conn.transaction()` syncs the pipeline at its start and its end, and so does the
    BEGIN psycopg sends itself outside autocommit: we send ours, in autocommit.)"""
    autocommit = conn.autocommit
    if not autocommit:
        conn.set_autocommit(True)
    try:
        with conn.cursor() as cur:
            early: psycopg.Error | None = None
            try:
                with conn.pipeline():
                    try:
                        conn.execute(_begin(conn))
                        if claims is not None:
                            conn.execute(SET_CLAIMS, (claims,))
                        cur.execute(call.sql, call.params)
                        conn.execute(COMMIT)
                    except psycopg.Error as exc:
                        early = exc
            except psycopg.errors.PipelineAborted:
                if early is None:
                    raise
            if early is not None:
                raise early
            return cur.fetchall()
    except BaseException:
        if not conn.closed and conn.info.transaction_status != IDLE:
            with suppress(psycopg.Error):
                conn.rollback()
        raise
    finally:
        if not autocommit:
            with suppress(psycopg.Error):
                conn.set_autocommit(False)


def _begin(conn: psycopg.Connection[Any]) -> bytes:
    """The BEGIN `conn.transaction()` would send: with the connection's settings."""
    parts = [b"BEGIN"]
    if conn.isolation_level is not None:
        parts += [b"ISOLATION LEVEL", conn.isolation_level.name.replace("_", " ").encode()]
    if conn.read_only is not None:
        parts.append(b"READ ONLY" if conn.read_only else b"READ WRITE")
    if conn.deferrable is not None:
        parts.append(b"DEFERRABLE" if conn.deferrable else b"NOT DEFERRABLE")
    return b" ".join(parts)


def _in_transaction(conn: psycopg.Connection[Any], claims: str | None, call: Call[T]) -> Rows:
    """The call in `conn.transaction()`, a statement at a time: a savepoint inside the
    caller's open transaction (or, with a libpq older than 14, its own transaction)."""
    with conn.transaction(), conn.cursor() as cur:
        if claims is not None:
            cur.execute(SET_CLAIMS, (claims,))
        cur.execute(call.sql, call.params)
        return cur.fetchall()
