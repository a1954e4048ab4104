"""Fixtures shared by the Python client suites (test_client, test_archival, test_recall, …).

The `connect` fixture is parametrized over Memory (DSN, Connection, pool) and
AsyncMemory (DSN, AsyncConnection, AsyncConnectionPool); an async client is
wrapped so each method call runs to completion on the test's event loop, so the
same assertions cover both. `FakeEmbedder` looks vectors up in a table and
records every embedder call.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from pgmemory import (
    AsyncArchival,
    AsyncDocuments,
    AsyncMemory,
    AsyncRecall,
    Embedder,
    Memory,
)
from tests.conftest import SERVICE_LOGIN

KINDS = ["sync-dsn", "sync-conn", "sync-pool", "async-dsn", "async-conn", "async-pool"]
AsyncView = AsyncArchival | AsyncRecall | AsyncDocuments


class Blocking:
    """An AsyncMemory (or its `.archival`, `.recall`, `.documents`) with sync methods:
    each call runs on `loop`."""

    def __init__(self, mem: AsyncMemory | AsyncView, loop: asyncio.AbstractEventLoop) -> None:
        self._mem = mem
        self._loop = loop

    def as_user(self, user_id: uuid.UUID | str) -> Blocking:
        assert isinstance(self._mem, AsyncMemory)
        return Blocking(self._mem.as_user(user_id), self._loop)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._mem, name)
        if isinstance(value, (AsyncArchival, AsyncRecall, AsyncDocuments)):
            return Blocking(value, self._loop)
        if not inspect.iscoroutinefunction(value):
            return value  # a plain attribute, e.g. the embedder
        return lambda *args, **kwargs: self._loop.run_until_complete(value(*args, **kwargs))


DIMS = 8


def e(i: int, scale: float = 1.0) -> list[float]:
    """`scale` times the i-th unit vector of DIMS dimensions."""
    return [scale if j == i else 0.0 for j in range(DIMS)]


def plus(*vectors: list[float]) -> list[float]:
    return [sum(xs) for xs in zip(*vectors, strict=True)]


class FakeEmbedder:
    """Vectors from a table; `calls` records (method, texts) of every call."""

    def __init__(self, table: dict[str, Any], dimensions: int = DIMS) -> None:
        self.table = table
        self.dimensions = dimensions
        self.model = f"fake-{dimensions}"
        self.calls: list[tuple[str, list[str]]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("embed", list(texts)))
        return [self.table[t] for t in texts]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("aembed", list(texts)))
        return [self.table[t] for t in texts]


class QuestionSideEmbedder(FakeEmbedder):
    """A fake with a question side, as e5 has: `embed_query` looks texts up in `questions`."""

    def __init__(self, table: dict[str, Any], questions: dict[str, list[float]]) -> None:
        super().__init__(table)
        self.questions = questions

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("embed_query", list(texts)))
        return [self.questions[t] for t in texts]

    async def aembed_query(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("aembed_query", list(texts)))
        return [self.questions[t] for t in texts]


def method(client: Memory | Blocking) -> str:
    """The embedder method a client must use: `aembed` for AsyncMemory."""
    return "aembed" if isinstance(client, Blocking) else "embed"


# (login=SERVICE_LOGIN, *, service=True, embedder=None) -> Memory | Blocking
Connect = Callable[..., Any]


@pytest.fixture(params=KINDS)
def connect(request: pytest.FixtureRequest, login_dsn: Callable[[str], str]) -> Iterator[Connect]:
    """Builds clients of this test's kind for a login role; closes everything at teardown."""
    kind: str = request.param
    with contextlib.ExitStack() as stack:
        loop = asyncio.new_event_loop()
        stack.callback(loop.close)
        wait = loop.run_until_complete

        def make(
            login: str = SERVICE_LOGIN, *, service: bool = True, embedder: Embedder | None = None
        ) -> Memory | Blocking:
            dsn = login_dsn(login)
            if kind == "sync-dsn":
                mem = Memory(dsn, embedder, service=service)
                stack.callback(mem.close)
                return mem
            if kind == "sync-conn":
                return Memory(stack.enter_context(psycopg.connect(dsn)), embedder, service=service)
            if kind == "sync-pool":
                pool = ConnectionPool(dsn, min_size=1, max_size=2, open=True)
                stack.enter_context(pool)
                return Memory(pool, embedder, service=service)
            if kind == "async-dsn":
                amem = AsyncMemory(dsn, embedder, service=service)
                stack.callback(lambda: wait(amem.close()))
            elif kind == "async-conn":
                aconn = wait(psycopg.AsyncConnection.connect(dsn))
                stack.callback(lambda: wait(aconn.close()))
                amem = AsyncMemory(aconn, embedder, service=service)
            else:
                apool = AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False)
                wait(apool.open(wait=True))
                stack.callback(lambda: wait(apool.close()))
                amem = AsyncMemory(apool, embedder, service=service)
            return Blocking(amem, loop)

        yield make


@pytest.fixture
def org() -> uuid.UUID:
    return uuid.uuid4()


@pytest.fixture
def grant(db: psycopg.Connection, org: uuid.UUID) -> Callable[..., uuid.UUID]:
    """Grants a (new) user a permission in `org`, as the superuser (the service)."""

    def give(user: uuid.UUID | None = None, permission: str = "memory.read") -> uuid.UUID:
        user = user or uuid.uuid4()
        db.execute("SELECT memory.grant(%s, %s, %s)", (org, user, permission))
        db.commit()
        return user

    return give
