"""`Memory` and `AsyncMemory`: the same API, sync and async.

Each method builds its call (calls.py, shared by both) and executes it on the
client's connection source as the client's identity. The identity is
the value given to `request.jwt.claims`: None leaves the setting alone (the
application sets it itself), '' means no claims (the service, which the server
trusts only from a login that is a member of its service role), and a JSON
object names a user.

Methods that need vectors first ask the client's embedder (one call for all
their texts), then make their one SQL call; `embed_pending` repeats that per
batch. `.archival` is a view of the archival memory (facts) through the same
client: its connections, identity and embedder.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from . import calls
from .calls import FactHit, FileInfo, Org, SavedFact, Vector
from .connection import AsyncSource, Source
from .embedders import Embedder

if TYPE_CHECKING:
    from typing_extensions import Self

S = TypeVar("S", Source, AsyncSource)
Ns = dict[str, Any] | None
Id = uuid.UUID | str
Fact = str | Mapping[str, Any]
# Called after each batch of embed_pending with (written so far, rows in this batch).
OnBatch = Callable[[int, int], object]


def _user_claims(user_id: uuid.UUID | str) -> str:
    # PostgREST/Supabase-shaped claims; the server reads `sub` and checks `role`.
    return json.dumps({"sub": str(user_id), "role": "authenticated"})


class _Client(Generic[S]):
    _source: S
    _claims: str | None
    _owner: bool
    embedder: Embedder | None

    def _init(self, source: S, embedder: Embedder | None, claims: str | None, owner: bool) -> None:
        self._source = source
        self.embedder = embedder
        self._claims = claims
        self._owner = owner  # only the client built from the target closes it

    def as_user(self, user_id: uuid.UUID | str) -> Self:
        """A client on the same connections acting as the user `user_id`."""
        other = object.__new__(type(self))
        other._init(self._source, self.embedder, _user_claims(user_id), owner=False)
        return other

    def _need_embedder(self, what: str) -> Embedder:
        if self.embedder is None:
            raise ValueError(f"{what} needs an embedder: pass embedder= to the client")
        return self.embedder

    def _dimensions(self, dimensions: int | None) -> int:
        if dimensions is not None:
            return dimensions
        return self._need_embedder("configure_embeddings() without dimensions").dimensions


class Memory(_Client[Source]):
    """Long-term memory over a DSN, a psycopg Connection or a ConnectionPool."""

    def __init__(
        self,
        target: str | psycopg.Connection[Any] | ConnectionPool[Any],
        embedder: Embedder | None = None,
        *,
        service: bool = False,
    ) -> None:
        self._init(Source(target), embedder, "" if service else None, owner=True)

    @property
    def archival(self) -> Archival:
        """Archival memory (facts) on this client's connections, identity and embedder."""
        return Archival(self)

    def close(self) -> None:
        """Close the connection opened from a DSN; a given connection or pool stays open."""
        if self._owner:
            self._source.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def run(self, org: Org, command: dict[str, Any], ns: Ns = None) -> str:
        return self._source.execute(self._claims, calls.run(org, command, ns))

    def render(self, org: Org, ns: Ns = None, max_chars: int | None = None) -> str:
        return self._source.execute(self._claims, calls.render(org, ns, max_chars))

    def read(self, org: Org, path: str, ns: Ns = None) -> dict[str, Any] | None:
        return self._source.execute(self._claims, calls.read(org, path, ns))

    def write(
        self,
        org: Org,
        path: str,
        content: str,
        expected_version: int | None = None,
        ns: Ns = None,
    ) -> dict[str, Any]:
        call = calls.write(org, path, content, expected_version, ns)
        return self._source.execute(self._claims, call)

    def list_files(self, org: Org, ns: Ns = None) -> list[FileInfo]:
        return self._source.execute(self._claims, calls.list_files(org, ns))

    def grant(self, org: Org, user_id: uuid.UUID | str, permission: str = "memory.read") -> None:
        """Give a user a permission in an organization (service only)."""
        self._source.execute(self._claims, calls.grant(org, user_id, permission))

    def revoke(self, org: Org, user_id: uuid.UUID | str, permission: str = "memory.read") -> None:
        """Take a permission back (service only)."""
        self._source.execute(self._claims, calls.revoke(org, user_id, permission))

    def configure_embeddings(
        self, dimensions: int | None = None, type: str = "vector"
    ) -> dict[str, Any]:
        """Set the dimension and type (vector or halfvec) of every embedding (service only).

        `dimensions` defaults to the embedder's. A change rebuilds the vector
        indexes and turns every existing embedding pending.
        """
        call = calls.configure_embeddings(self._dimensions(dimensions), type)
        return self._source.execute(self._claims, call)

    def embed_pending(self, batch: int = 100, on_batch: OnBatch | None = None) -> int:
        """Embed every pending memory (service only); returns how many embeddings were written.

        Per batch: `memory.pending_embeddings(batch)`, one embedder call for all
        its texts, one `memory.set_memory_embeddings` call; then
        `on_batch(written so far, rows in the batch)`. Stops when nothing is
        left pending (rows leased to another worker are not waited for).
        """
        embedder = self._need_embedder("embed_pending()")
        written = 0
        while pending := self._source.execute(self._claims, calls.pending_embeddings(batch)):
            vectors = embedder.embed([p.content for p in pending])
            call = calls.set_memory_embeddings(pending, vectors, embedder.model)
            written += self._source.execute(self._claims, call)
            if on_batch is not None:
                on_batch(written, len(pending))
        return written


class AsyncMemory(_Client[AsyncSource]):
    """`Memory` for asyncio: a DSN, a psycopg AsyncConnection or an AsyncConnectionPool."""

    def __init__(
        self,
        target: str | psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        embedder: Embedder | None = None,
        *,
        service: bool = False,
    ) -> None:
        self._init(AsyncSource(target), embedder, "" if service else None, owner=True)

    @property
    def archival(self) -> AsyncArchival:
        """Archival memory (facts) on this client's connections, identity and embedder."""
        return AsyncArchival(self)

    async def close(self) -> None:
        """Close the connection opened from a DSN; a given connection or pool stays open."""
        if self._owner:
            await self._source.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def run(self, org: Org, command: dict[str, Any], ns: Ns = None) -> str:
        return await self._source.execute(self._claims, calls.run(org, command, ns))

    async def render(self, org: Org, ns: Ns = None, max_chars: int | None = None) -> str:
        return await self._source.execute(self._claims, calls.render(org, ns, max_chars))

    async def read(self, org: Org, path: str, ns: Ns = None) -> dict[str, Any] | None:
        return await self._source.execute(self._claims, calls.read(org, path, ns))

    async def write(
        self,
        org: Org,
        path: str,
        content: str,
        expected_version: int | None = None,
        ns: Ns = None,
    ) -> dict[str, Any]:
        call = calls.write(org, path, content, expected_version, ns)
        return await self._source.execute(self._claims, call)

    async def list_files(self, org: Org, ns: Ns = None) -> list[FileInfo]:
        return await self._source.execute(self._claims, calls.list_files(org, ns))

    async def grant(
        self, org: Org, user_id: uuid.UUID | str, permission: str = "memory.read"
    ) -> None:
        """Give a user a permission in an organization (service only)."""
        await self._source.execute(self._claims, calls.grant(org, user_id, permission))

    async def revoke(
        self, org: Org, user_id: uuid.UUID | str, permission: str = "memory.read"
    ) -> None:
        """Take a permission back (service only)."""
        await self._source.execute(self._claims, calls.revoke(org, user_id, permission))

    async def configure_embeddings(
        self, dimensions: int | None = None, type: str = "vector"
    ) -> dict[str, Any]:
        """Set the dimension and type (vector or halfvec) of every embedding (service only).

        `dimensions` defaults to the embedder's. A change rebuilds the vector
        indexes and turns every existing embedding pending.
        """
        call = calls.configure_embeddings(self._dimensions(dimensions), type)
        return await self._source.execute(self._claims, call)

    async def embed_pending(self, batch: int = 100, on_batch: OnBatch | None = None) -> int:
        """`Memory.embed_pending` with the embedder's `aembed`; `on_batch` may be async."""
        embedder = self._need_embedder("embed_pending()")
        written = 0
        while pending := await self._source.execute(self._claims, calls.pending_embeddings(batch)):
            vectors = await embedder.aembed([p.content for p in pending])
            call = calls.set_memory_embeddings(pending, vectors, embedder.model)
            written += await self._source.execute(self._claims, call)
            if on_batch is not None and inspect.isawaitable(res := on_batch(written, len(pending))):
                await res
        return written


class Archival:
    """Archival memory (facts) of a `Memory`: its connections, identity and embedder.

    With an embedder, texts are embedded before the SQL call (one embedder call
    per method); without one, facts are saved pending (`embed_pending` fills
    them in later) and searches use full text only.
    """

    def __init__(self, client: Memory) -> None:
        self._client = client

    def _embed(self, texts: list[str]) -> list[Vector] | None:
        embedder = self._client.embedder
        if embedder is None or not texts:
            return None
        return list(embedder.embed(texts))

    def _execute(self, call: calls.Call[calls.T]) -> calls.T:
        return self._client._source.execute(self._client._claims, call)

    def save(self, org: Org, content: str, ns: Ns = None, source: Any = None) -> uuid.UUID:
        """Save one fact; returns its id, or the id of the live fact it duplicates."""
        call = calls.save_fact(org, content, self._embed([content]), ns, source)
        return self._execute(call)

    def save_extracted(
        self,
        org: Org,
        facts: Sequence[Fact],
        ns: Ns = None,
        threshold: float | None = None,
    ) -> list[SavedFact]:
        """Save a batch of facts (texts, or mappings with `content` and `source`).

        Near-duplicates (cosine similarity ≥ `threshold`, default the setting
        `dedupe_threshold`) of live facts or of earlier facts of the batch are
        refused; the result has one row per fact, in order.
        """
        items = [calls.fact_item(f) for f in facts]
        vectors = self._embed([item["content"] for item in items])
        model = self._client.embedder.model if self._client.embedder else None
        return self._execute(calls.save_facts(org, items, vectors, ns, threshold, model))

    def search(
        self,
        org: Org,
        query: str,
        ns: Ns | Sequence[dict[str, Any]] = None,
        k: int = 10,
        options: Mapping[str, Any] | None = None,
    ) -> list[FactHit]:
        """The k best live facts for `query` (hybrid; full text only without an embedder).

        `ns`: one namespace or a list of them. `options`: `rrf_k`,
        `vector_weight`, `text_weight`.
        """
        call = calls.search_facts(org, query, self._embed([query]), ns, k, options)
        return self._execute(call)

    def forget(self, id: Id, superseded_by: Id | None = None) -> None:
        """Hide a fact from search and dedupe (it is kept); optionally name its successor."""
        self._execute(calls.forget(id, superseded_by))

    def edit(self, id: Id, content: str) -> int:
        """Replace a fact's content; returns its new version. Its embedding becomes pending."""
        return self._execute(calls.edit_fact(id, content))

    def get(self, id: Id) -> dict[str, Any]:
        """A fact, forgotten ones too: id, content, version, ns, created_at, forgotten_at,
        superseded_by, embedding_pending."""
        return self._execute(calls.get_fact(id))


class AsyncArchival:
    """`Archival` for an `AsyncMemory`; embeds with the embedder's `aembed`."""

    def __init__(self, client: AsyncMemory) -> None:
        self._client = client

    async def _embed(self, texts: list[str]) -> list[Vector] | None:
        embedder = self._client.embedder
        if embedder is None or not texts:
            return None
        return list(await embedder.aembed(texts))

    async def _execute(self, call: calls.Call[calls.T]) -> calls.T:
        return await self._client._source.execute(self._client._claims, call)

    async def save(self, org: Org, content: str, ns: Ns = None, source: Any = None) -> uuid.UUID:
        """Save one fact; returns its id, or the id of the live fact it duplicates."""
        call = calls.save_fact(org, content, await self._embed([content]), ns, source)
        return await self._execute(call)

    async def save_extracted(
        self,
        org: Org,
        facts: Sequence[Fact],
        ns: Ns = None,
        threshold: float | None = None,
    ) -> list[SavedFact]:
        """See `Archival.save_extracted`."""
        items = [calls.fact_item(f) for f in facts]
        vectors = await self._embed([item["content"] for item in items])
        model = self._client.embedder.model if self._client.embedder else None
        return await self._execute(calls.save_facts(org, items, vectors, ns, threshold, model))

    async def search(
        self,
        org: Org,
        query: str,
        ns: Ns | Sequence[dict[str, Any]] = None,
        k: int = 10,
        options: Mapping[str, Any] | None = None,
    ) -> list[FactHit]:
        """See `Archival.search`."""
        call = calls.search_facts(org, query, await self._embed([query]), ns, k, options)
        return await self._execute(call)

    async def forget(self, id: Id, superseded_by: Id | None = None) -> None:
        """See `Archival.forget`."""
        await self._execute(calls.forget(id, superseded_by))

    async def edit(self, id: Id, content: str) -> int:
        """See `Archival.edit`."""
        return await self._execute(calls.edit_fact(id, content))

    async def get(self, id: Id) -> dict[str, Any]:
        """See `Archival.get`."""
        return await self._execute(calls.get_fact(id))
