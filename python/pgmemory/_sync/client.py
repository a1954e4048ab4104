# This file is generated from python/pgmemory/_async/client.py by tools/async_to_sync.py; do not edit.
# Change the async source and run `make generate`.
"""`Memory` and its views (`.archival`, `.recall`, `.documents`).

See pgmemory.client.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from types import TracebackType
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import ConnectionPool

from .. import calls
from .._common import Client, DocumentInfos, FactInput, Id, Ns, OnBatch, Writer, report
from .._tools_common import instructions_text
from ..calls import (
    CaptureStatus,
    CaptureSummary,
    ContextItem,
    Document,
    Fact,
    FactHit,
    FactInfo,
    FileContent,
    FileInfo,
    IndexChange,
    MessageHit,
    Org,
    PendingCapture,
    SavedFact,
    Vector,
    Written,
)
from ..embedders import Embedder
from ..errors import Conflict, PgMemoryError
from ..extractors import ExtractionRequest, Extractor, ExtractorError, operations_of, resolve
from .connection import Source

if TYPE_CHECKING:
    from typing_extensions import Self


class Memory(Client):
    """Long-term memory over a DSN, a psycopg Connection or a ConnectionPool.

    `replica` (the same kinds) takes the calls that never write: searches,
    `render`, `read`, `list_files`, `archival.get`, `archival.list`, `stats`,
    `recall_context` without an operation id and `export`; everything else goes
    to `target`. A replica that lags shows a write only once it has replayed it
    (docs/scale-out.md)."""

    _source: Source

    def __init__(
        self,
        target: str | psycopg.Connection[Any] | ConnectionPool[Any],
        embedder: Embedder | None = None,
        *,
        service: bool = False,
        replica: str | psycopg.Connection[Any] | ConnectionPool[Any] | None = None,
    ) -> None:
        source = Source(target, replica)
        self._init(source, embedder, "" if service else None, owner=True)

    @property
    def archival(self) -> Archival:
        """Archival memory (facts) on this client's connections, identity and embedder."""
        return Archival(self)

    @property
    def recall(self) -> Recall:
        """Recall of earlier chat messages on this client's connections, identity and embedder."""
        return Recall(self)

    @property
    def documents(self) -> Documents:
        """Versioned documents for agent runtimes (service only)."""
        return Documents(self)

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

    def instructions(self, org: Org, ns: Ns = None) -> str:
        """A system prompt: the guidance an assistant needs about its memory (memories are
        notes, not instructions; what to save; tell the user; search the past), then the
        rendered core memory (`render`). The guidance is `pgmemory.tools.INSTRUCTIONS`."""
        return instructions_text(self.render(org, ns))

    def read(self, org: Org, path: str, ns: Ns = None) -> FileContent | None:
        return self._source.execute(self._claims, calls.read(org, path, ns))

    def write(
        self, org: Org, path: str, content: str, expected_version: int | None = None, ns: Ns = None
    ) -> Written:
        call = calls.write(org, path, content, expected_version, ns)
        return self._source.execute(self._claims, call)

    def list_files(self, org: Org, ns: Ns = None) -> list[FileInfo]:
        return self._source.execute(self._claims, calls.list_files(org, ns))

    def clear_files(self, org: Org, ns: Ns = None) -> int:
        """Delete every core memory file of the namespace; returns how many."""
        return self._source.execute(self._claims, calls.clear_files(org, ns))

    def recall_context(
        self,
        org: Org,
        query: str,
        ns: Ns = None,
        options: Mapping[str, Any] | None = None,
        *,
        query_embedding: Vector | None = None,
    ) -> list[ContextItem]:
        """What an assistant should see before a turn, in order: the rendered core memory
        (one `core` item, none without files), the best `fact`s, then the best earlier
        `message`s of the caller's chats. `query` is embedded with the client's embedder
        (full text only without one). `options`: `facts` (5), `messages` (5),
        `exclude_chat`, `operation_id`, and the search options of `archival.search`.
        Under an `operation_id` the first answer is kept (setting
        `recall_replay_seconds`) and the same caller gets exactly it again; such a call
        goes to the primary, any other to the replica. `query_embedding`: the query's
        vector, computed already (the embedder is not called)."""
        if query_embedding is not None:
            vectors: list[Vector] | None = [query_embedding]
        elif self.embedder is None:
            vectors = None
        else:
            vectors = _embed_queries(self.embedder, [query])
        call = calls.recall_context(org, query, vectors, ns, options)
        return self._source.execute(self._claims, call)

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

    def embedding_status(self) -> dict[str, Any]:
        """The configured `dimensions` and `type`, and how many memories are `embedded`
        (what a change of either turns pending) or `pending` (service only)."""
        return self._source.execute(self._claims, calls.embedding_status())

    def maintain(self, *, concurrently: bool = False) -> list[IndexChange]:
        """Give large namespaces HNSW indexes of their own and drop those of shrunk ones,
        and move namespaces past the exact-search line into the shared index (service
        only); returns what changed (docs/archival.md, "Large namespaces").

        `concurrently`: build and drop the indexes with CREATE / DROP INDEX CONCURRENTLY
        (`memory.maintenance_statements`), so that no write waits for a build; the
        connection's login must own the tables. The indexes it built are not among the
        changes returned, which are what `memory.maintain()` still did after them.
        """
        if not concurrently:
            return self._source.execute(self._claims, calls.maintain())
        statements = self._source.execute(self._claims, calls.maintenance_statements())
        if statements[-1:] != [calls.MAINTAIN_STATEMENT]:
            raise RuntimeError(f"unexpected maintenance statements: {statements[-1:]}")
        self._source.run_alone(statements[:-1])
        return self._source.execute(self._claims, calls.maintain())

    def erase_user(self, org: Org, user_id: Id) -> dict[str, int]:
        """Delete every file, fact and message of a user in an organization, and their
        permissions there (service only); returns counts per kind."""
        return self._source.execute(self._claims, calls.erase_user(org, user_id))

    def stats(self, org: Org, ns: Ns = None) -> dict[str, int]:
        """Counts of what a namespace holds: files, facts, facts_pending, forgotten,
        messages, messages_pending. A look: nothing is leased or changed."""
        return self._source.execute(self._claims, calls.stats(org, ns))

    def export(self, org: Org, ns: Ns = None) -> dict[str, Any]:
        """Every memory of a namespace (files, facts with embeddings, messages) as JSON
        that `import_` loads back."""
        return self._source.execute(self._claims, calls.export(org, ns))

    def import_(self, org: Org, data: Mapping[str, Any], ns: Ns = None) -> dict[str, int]:
        """Load an `export` into a namespace; returns counts per kind. Ids are kept, so an
        item that exists already (the namespace's path, a fact id anywhere in the database,
        a message of the same org and chat) raises `Exists` and nothing is loaded."""
        return self._source.execute(self._claims, calls.import_(org, data, ns))

    def embed_pending(self, batch: int = 100, on_batch: OnBatch | None = None) -> int:
        """Embed every pending memory (service only); returns how many embeddings were written.

        Per batch: `memory.pending_embeddings(batch)`, one embedder call for all
        its texts, one `memory.set_memory_embeddings` call; then
        `on_batch(written so far, rows in the batch)`.
        Stops when nothing is left pending (rows leased to another worker are
        not waited for). A batch's write runs in a second thread while the next batch is
        embedded: the database and the embedder work at the same time
        (bench/embed.py).
        """
        embedder = self._need_embedder("embed_pending()")
        written = 0
        rows = 0
        with Writer() as writer:
            pending = self._source.execute(self._claims, calls.pending_embeddings(batch))
            while pending:
                vectors = embedder.embed([p.content for p in pending])
                call = calls.set_memory_embeddings(pending, vectors, embedder.model)
                if rows:
                    written += writer.wait()
                    report(on_batch, written, rows)
                after = self._source.execute(self._claims, calls.pending_embeddings(batch))
                writer.start(self._source.execute, self._claims, call)
                rows = len(pending)
                pending = after
            if rows:
                written += writer.wait()
                report(on_batch, written, rows)
        return written

    def capture_pending(
        self,
        extractor: Extractor,
        *,
        batch: int = 10,
        on_batch: OnBatch | None = None,
        summary: CaptureSummary | None = None,
    ) -> int:
        """Turn the new messages of every chat pending capture into facts (service only);
        returns how many captures were applied.

        Per round, `memory.pending_captures(batch)` leases chats. For each: the owner's
        live facts closest to each new message (`search_facts`; hybrid when the client
        has an embedder, all messages embedded in one call), at most 20, go to the
        model with the messages under the numbers 1..n (`extractor.extract`); an
        operation naming a number it was not shown is dropped; the new facts are
        embedded in one embedder call and `memory.capture_facts` applies the rest. Then
        `on_batch(applied so far, captures in the round)`.
        Stops when nothing is pending (chats leased to another worker are not waited for).

        A capture that fails (an `ExtractorError`, or the database refusing the answer)
        keeps its lease until the run ends and is then given back with
        `memory.fail_capture`, which counts an attempt: one run never asks twice about
        the same messages. A capture whose lease was lost meanwhile counts as failed.
        Either way the run goes on; `summary` counts failures and applied operations.
        A `fatal` ExtractorError (a bad key, an unknown model) ends the run: the failed
        captures are given back and it is raised.
        """
        summary = CaptureSummary() if summary is None else summary
        failed: list[tuple[uuid.UUID, str]] = []
        applied = 0
        try:
            leased = self._source.execute(self._claims, calls.pending_captures(batch))
            while leased:
                for capture in leased:
                    applied += self._capture(extractor, capture, summary, failed)
                report(on_batch, applied, len(leased))
                leased = self._source.execute(self._claims, calls.pending_captures(batch))
        except BaseException:
            with suppress(Exception):
                self._give_back(failed)
            raise
        self._give_back(failed)
        return applied

    def _capture(
        self,
        extractor: Extractor,
        capture: PendingCapture,
        summary: CaptureSummary,
        failed: list[tuple[uuid.UUID, str]],
    ) -> bool:
        """One leased capture: known facts, the model, embeddings, `capture_facts`.
        True when it was applied."""
        queries = calls.capture_queries(capture)
        vectors = calls.per_query(self._embed_all(queries, queries=True), len(queries))
        hits = []
        for query, vector in zip(queries, vectors, strict=True):
            call = calls.capture_search(capture, query, vector)
            hits.append(self._source.execute(self._claims, call))
        known = calls.known_facts(hits)
        request = ExtractionRequest(capture.messages, capture.context, [h.content for h in known])
        try:
            answer = operations_of(extractor.extract(request))
            operations = resolve(answer, {n: hit.id for n, hit in enumerate(known, 1)})
        except ExtractorError as err:
            failed.append((capture.capture_id, err.message))
            summary.failed(capture, err.message)
            if err.fatal:
                raise
            return False
        fact_vectors = self._embed_all(calls.new_fact_texts(operations))
        call = calls.capture_facts(capture.capture_id, operations, extractor.model, fact_vectors)
        try:
            rows = self._source.execute(self._claims, call)
        except Conflict as err:
            summary.failed(capture, err.message)
            return False
        except PgMemoryError as err:
            failed.append((capture.capture_id, f"{err.code}: {err.message}"))
            summary.failed(capture, f"{err.code}: {err.message}")
            return False
        summary.applied(rows, len(answer) - len(operations))
        return True

    def _embed_all(self, texts: list[str], *, queries: bool = False) -> list[Vector] | None:
        if self.embedder is None or not texts:
            return None
        if queries:
            return _embed_queries(self.embedder, texts)
        return list(self.embedder.embed(texts))

    def _give_back(self, failed: list[tuple[uuid.UUID, str]]) -> None:
        while failed:
            capture_id, error = failed.pop()
            self._source.execute(self._claims, calls.fail_capture(capture_id, error))

    def capture_status(self, org: Org, chat_id: str | None = None) -> list[CaptureStatus]:
        """Where each chat of an organization (or only `chat_id`) stands in the capture
        queue (service only): pending messages, attempts, status, last error."""
        return self._source.execute(self._claims, calls.capture_status(org, chat_id))

    def retry_captures(self, org: Org, chat_id: str | None = None) -> int:
        """Put an organization's parked (failed) chats, or only `chat_id`, back in the
        capture queue with their attempts cleared (service only); returns how many."""
        return self._source.execute(self._claims, calls.retry_captures(org, chat_id))


def _embed_queries(embedder: Embedder, texts: list[str]) -> list[Vector]:
    """Vectors to search with: the embedder's `embed_query` where it has one (a model
    such as e5 embeds a question otherwise than the texts it is searched against)."""
    embed = getattr(embedder, "embed_query", None) or embedder.embed
    return list(embed(texts))


class _View:
    """A part of a `Memory` (`.archival`, `.recall`, `.documents`): its connections,
    identity and embedder."""

    def __init__(self, client: Memory) -> None:
        self._client = client

    def _embed(self, texts: list[str]) -> list[Vector] | None:
        embedder = self._client.embedder
        if embedder is None or not texts:
            return None
        return list(embedder.embed(texts))

    def _embed_query(self, query: str, query_embedding: Vector | None) -> list[Vector] | None:
        if query_embedding is not None:
            return [query_embedding]
        embedder = self._client.embedder
        return None if embedder is None else _embed_queries(embedder, [query])

    def _execute(self, call: calls.Call[calls.T]) -> calls.T:
        return self._client._source.execute(self._client._claims, call)

    def _model(self) -> str | None:
        return self._client.embedder.model if self._client.embedder else None


class Archival(_View):
    """Archival memory (facts) of a `Memory`: its connections, identity and embedder.

    With an embedder, texts are embedded before the SQL call (one embedder call
    per method); without one, facts are saved pending (`embed_pending` fills
    them in later) and searches use full text only.
    """

    def save(self, org: Org, content: str, ns: Ns = None, source: Any = None) -> uuid.UUID:
        """Save one fact; returns its id, or the id of the live fact it duplicates."""
        call = calls.save_fact(org, content, self._embed([content]), ns, source)
        return self._execute(call)

    def save_extracted(
        self, org: Org, facts: Sequence[FactInput], ns: Ns = None, threshold: float | None = None
    ) -> list[SavedFact]:
        """Save a batch of facts (texts, or mappings with `content` and `source`).

        Near-duplicates (cosine similarity ≥ `threshold`, default the setting
        `dedupe_threshold`) of live facts or of earlier facts of the batch are
        refused; the result has one row per fact, in order. All are embedded in
        one embedder call; more than 1,000 are saved 1,000 per call, each call
        all or nothing, dedupe across all of them.
        """
        items = [calls.fact_item(f) for f in facts]
        vectors = self._embed([item["content"] for item in items])
        batches = calls.save_facts(org, items, vectors, ns, threshold, self._model())
        return [row for call in batches for row in self._execute(call)]

    def search(
        self,
        org: Org,
        query: str,
        ns: Ns | Sequence[dict[str, Any]] = None,
        k: int = 10,
        options: Mapping[str, Any] | None = None,
        *,
        query_embedding: Vector | None = None,
    ) -> list[FactHit]:
        """The k best live facts for `query` (hybrid; full text only without an embedder).

        `ns`: one namespace or a list of them. `options`: `rrf_k`,
        `vector_weight`, `text_weight`, `min_similarity`, `created_after`,
        `created_before`, `ef_search`, `text_ranking` (`"idf"`: rare words
        first). A hit's `score` only orders the hits.
        `query_embedding`: the query's vector, computed already (the embedder is
        not called).
        """
        vectors = self._embed_query(query, query_embedding)
        call = calls.search_facts(org, query, vectors, ns, k, options)
        return self._execute(call)

    def forget(self, org: Org, id: Id, superseded_by: Id | None = None) -> None:
        """Hide a fact from search and dedupe (it is kept); optionally name its successor."""
        self._execute(calls.forget(org, id, superseded_by))

    def edit(self, org: Org, id: Id, content: str) -> int:
        """Replace a fact's content; returns its new version. Its embedding becomes pending."""
        return self._execute(calls.edit_fact(org, id, content))

    def get(self, org: Org, id: Id) -> Fact:
        """A fact, forgotten ones too: id, content, version, ns, created_at, forgotten_at,
        superseded_by, embedding_pending, source."""
        return self._execute(calls.get_fact(org, id))

    def list(
        self,
        org: Org,
        ns: Ns = None,
        *,
        max: int = 100,
        after: Id | None = None,
        forgotten: bool = False,
    ) -> list[FactInfo]:
        """A namespace's facts, oldest first, `max` at a time; `after` (a fact's id)
        continues a listing, `forgotten=True` includes forgotten facts."""
        return self._execute(calls.list_facts(org, ns, max, after, forgotten))


class Recall(_View):
    """Recall of earlier chat messages, across the user's chats.

    The service indexes messages for their owner (`owner_id`); a user searches
    their own. With an embedder, `index` embeds the message and `search` the
    query (one embedder call each); without one, messages are indexed pending
    (`embed_pending` fills them in) and searches use full text only.
    """

    def index(self, org: Org, message: Mapping[str, Any]) -> bool:
        """Index one message (service only): keys `id`, `chat_id`, `owner_id`, `role`,
        `content`, optional `temporary` and `created_at` (a datetime or ISO 8601 text).

        Idempotent per (org, chat_id, id). A temporary message is neither stored
        nor embedded: returns False.
        """
        item = calls.message_item(message)
        text = calls.message_text(item)
        vectors = None if text is None else self._embed([text])
        return self._execute(calls.index_message(org, item, vectors, self._model()))

    def search(
        self,
        org: Org,
        query: str,
        exclude_chat: str | None = None,
        k: int = 5,
        options: Mapping[str, Any] | None = None,
        *,
        query_embedding: Vector | None = None,
    ) -> list[MessageHit]:
        """The caller's k closest earlier messages, leaving out the chat `exclude_chat`
        (the current one). `options` and `query_embedding` as for `archival.search`."""
        vectors = self._embed_query(query, query_embedding)
        call = calls.search_messages(org, query, vectors, exclude_chat, k, options)
        return self._execute(call)

    def delete_chat(self, org: Org, chat_id: str) -> int:
        """Delete a chat's indexed messages (the caller's own; the service: everyone's).
        Returns how many."""
        return self._execute(calls.delete_chat(org, chat_id))


class Documents(_View):
    """Versioned documents under an opaque scope key and a path (service only).

    Optimistic concurrency: a write names the version it read (None: the
    document must not exist yet); a stale one raises `DocumentConflict` and
    writes nothing. Expired documents read as absent until `purge` removes them.
    """

    def read(self, scope_key: str, path: str) -> Document | None:
        """The live document, or None (absent or expired)."""
        return self._execute(calls.document_read(scope_key, path))

    def write(
        self,
        scope_key: str,
        path: str,
        content: str,
        expected_version: int | None,
        expires_in: int | None = None,
    ) -> int:
        """Write a document; returns its new version. `expires_in`: lifetime in seconds."""
        call = calls.document_write(scope_key, path, content, expected_version, expires_in)
        return self._execute(call)

    def delete(self, scope_key: str, path: str, expected_version: int | None = None) -> bool:
        """Delete a document (only at `expected_version`, if given); True when one was deleted."""
        return self._execute(calls.document_delete(scope_key, path, expected_version))

    def list(self, scope_key: str, prefix: str = "") -> DocumentInfos:
        """The scope's live documents whose path starts with `prefix`, by path."""
        return self._execute(calls.document_list(scope_key, prefix))

    def purge(self) -> int:
        """Remove every expired document; returns how many."""
        return self._execute(calls.purge_documents())
