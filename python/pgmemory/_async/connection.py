"""`AsyncSource`: the connections of an `AsyncMemory`, and how one call is executed.

See pgmemory.connection.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool

from .._common import SET_CLAIMS, closed_error
from ..calls import Call, RealRows, RealRowsDumper, Rows, T
from ..errors import SetupError, translate

IDLE = psycopg.pq.TransactionStatus.IDLE
PIPELINE = psycopg.capabilities.has_pipeline()  # libpq 14 or later
COMMIT = "COMMIT"

# Connections whose adapters have been set up (once per connection).
_prepared: weakref.WeakSet[Any] = weakref.WeakSet()


async def _prepare(conn: psycopg.AsyncConnection[Any]) -> None:
    if conn in _prepared:
        return
    conn.adapters.register_dumper(RealRows, RealRowsDumper)  # save_facts' embeddings
    # Raises ProgrammingError when no `vector` type is on this connection's search_path;
    # the calls then still work with plain float arrays.
    with suppress(psycopg.ProgrammingError):
        await register_vector_async(conn)
    _prepared.add(conn)


class AsyncSource:
    """The connections of an `AsyncMemory`: a pool's, or one connection guarded by a lock."""

    def __init__(
        self,
        target: str | psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        replica: str | psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any] | None = None,
    ) -> None:
        if not isinstance(target, (str, psycopg.AsyncConnection, AsyncConnectionPool)):
            raise TypeError(
                "AsyncMemory needs a DSN, a psycopg.AsyncConnection or a"
                f" psycopg_pool.AsyncConnectionPool, got {type(target).__name__}"
            )
        # Where the calls that never write go: a hot standby (or any read replica).
        self._replica = AsyncSource(replica) if replica is not None else None
        self._dsn = target if isinstance(target, str) else None
        self._pool = target if isinstance(target, AsyncConnectionPool) else None
        self._conn = target if isinstance(target, psycopg.AsyncConnection) else None
        self._closed = False
        # One transaction at a time on a single connection. An asyncio.Lock binds to
        # the running loop on first contention only.
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection for one call: the pool's, or the single one (opened from the DSN
        on first use, and again after it was lost), held under the lock."""
        if self._pool is not None:
            async with self._pool.connection() as conn:
                yield conn
            return
        async with self._lock:
            if self._closed:
                raise closed_error()
            if self._dsn is not None and (self._conn is None or self._conn.closed):
                # Autocommit: between calls the connection sits idle, not in a transaction.
                self._conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            assert self._conn is not None
            yield self._conn

    async def close(self) -> None:
        """Close the connections we opened from a DSN; borrowed ones stay open."""
        if self._replica is not None:
            await self._replica.close()
        async with self._lock:
            self._closed = self._dsn is not None
            if self._dsn is not None and self._conn is not None:
                await self._conn.close()
                self._conn = None

    async def run_alone(self, statements: list[str]) -> None:
        """Each statement on its own, outside any transaction block (what CREATE INDEX
        CONCURRENTLY needs), as the connection's login; a psycopg error is raised
        translated."""
        login = None
        try:
            async with self.connection() as conn:
                login = conn.info.user
                autocommit = conn.autocommit
                if not autocommit:
                    await conn.set_autocommit(True)
                try:
                    for statement in statements:
                        await conn.execute(statement.encode())  # built by the extension
                finally:
                    if not autocommit and not conn.closed:
                        with suppress(psycopg.Error):
                            await conn.set_autocommit(False)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise SetupError(
                f"{exc}: CREATE and DROP INDEX CONCURRENTLY need the owner of memory.facts and"
                " memory.messages; connect as that role, or maintain without concurrently",
                sqlstate=exc.sqlstate,
            ) from exc
        except psycopg.Error as exc:
            err = translate(exc, login)
            if err is exc:
                raise
            raise err from exc

    async def execute(self, claims: str | None, call: Call[T]) -> T:
        """Run `call` in one transaction as `claims`; a psycopg error is raised translated.
        A call that never writes goes to the replica when there is one."""
        if call.read_only and self._replica is not None:
            return await self._replica.execute(claims, call)
        login = None
        try:
            async with self.connection() as conn:
                login = conn.info.user
                await _prepare(conn)
                if PIPELINE and conn.info.transaction_status == IDLE:
                    rows = await _pipelined(conn, claims, call)
                else:
                    rows = await _in_transaction(conn, claims, call)
        except psycopg.Error as exc:
            err = translate(exc, login)
            if err is exc:
                raise
            raise err from exc
        return call.shape(rows)


async def _pipelined(conn: psycopg.AsyncConnection[Any], claims: str | None, call: Call[T]) -> Rows:
    """BEGIN, the claims, the call and COMMIT in one round trip: in psycopg's pipeline
    mode they all go out, then one Sync, and only then does the client wait.
    (`conn.transaction()` syncs the pipeline at its start and its end, and so does the
    BEGIN psycopg sends itself outside autocommit: we send ours, in autocommit.)"""
    autocommit = conn.autocommit
    if not autocommit:
        await conn.set_autocommit(True)  # on an idle connection: no I/O
    try:
        async with conn.cursor() as cur:
            # The server's error may come back while the statements are still being sent:
            # kept, and raised once the pipeline has ended, not raised inside it (psycopg
            # would then log the aborted rest as an error it ignored).
            early: psycopg.Error | None = None
            try:
                async with conn.pipeline():
                    try:
                        await conn.execute(_begin(conn))
                        if claims is not None:
                            await conn.execute(SET_CLAIMS, (claims,))
                        await cur.execute(call.sql, call.params)
                        await conn.execute(COMMIT)
                    except psycopg.Error as exc:
                        early = exc
            except psycopg.errors.PipelineAborted:
                if early is None:
                    raise
            if early is not None:
                raise early
            # The pipeline has ended (synced): the call's rows are in.
            return await cur.fetchall()
    except BaseException:
        # A failed statement aborts the rest up to the Sync and leaves the transaction
        # (and its claims) open: end it before anyone else uses the connection.
        if not conn.closed and conn.info.transaction_status != IDLE:
            with suppress(psycopg.Error):
                await conn.rollback()
        raise
    finally:
        if not autocommit:
            with suppress(psycopg.Error):  # fails only on a lost connection
                await conn.set_autocommit(False)


def _begin(conn: psycopg.AsyncConnection[Any]) -> bytes:
    """The BEGIN `conn.transaction()` would send: with the connection's settings."""
    parts = [b"BEGIN"]
    if conn.isolation_level is not None:
        parts += [b"ISOLATION LEVEL", conn.isolation_level.name.replace("_", " ").encode()]
    if conn.read_only is not None:
        parts.append(b"READ ONLY" if conn.read_only else b"READ WRITE")
    if conn.deferrable is not None:
        parts.append(b"DEFERRABLE" if conn.deferrable else b"NOT DEFERRABLE")
    return b" ".join(parts)


async def _in_transaction(
    conn: psycopg.AsyncConnection[Any], claims: str | None, call: Call[T]
) -> Rows:
    """The call in `conn.transaction()`, a statement at a time: a savepoint inside the
    caller's open transaction (or, with a libpq older than 14, its own transaction)."""
    async with conn.transaction(), conn.cursor() as cur:
        if claims is not None:
            await cur.execute(SET_CLAIMS, (claims,))
        await cur.execute(call.sql, call.params)
        return await cur.fetchall()
