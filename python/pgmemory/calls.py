"""Every SQL call the client makes, defined once for `Memory` and `AsyncMemory`.

A function here returns a `Call`: the SQL text, its parameters and how to shape
the fetched rows into the method's result. The clients only execute calls, so
sync and async cannot drift apart. Arguments are cast explicitly in the SQL so
a `str` org or a `None` argument resolves to the one function signature.
"""

from __future__ import annotations

import json
import math
import struct
import sys
import uuid
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar

import psycopg
from psycopg import pq
from psycopg.adapt import Dumper
from psycopg.types.json import Jsonb

from .embedders import EmbedderError
from .errors import Invalid

if TYPE_CHECKING:
    from typing_extensions import LiteralString

T = TypeVar("T")
Org = uuid.UUID | str
Rows = Sequence[tuple[Any, ...]]
Namespace = dict[str, Any]
# A vector as an embedder returns it: a list of floats, or anything iterable over
# numbers (a numpy array, a pgvector Vector's to_list()).
Vector = Iterable[float]


@dataclass(frozen=True)
class Call(Generic[T]):
    sql: LiteralString
    params: tuple[Any, ...]
    shape: Callable[[Rows], T]
    # Never writes: a client with a replica sends it there (docs/scale-out.md).
    read_only: bool = False


class FileContent(TypedDict):
    """A core memory file as `read` returns it (the SQL's jsonb; timestamps as ISO strings)."""

    path: str
    content: str
    version: int
    updated_at: str


class Written(TypedDict):
    """What `write` returns: the normalized path and the file's new version."""

    path: str
    version: int


class Fact(TypedDict):
    """A fact as `archival.get` returns it, forgotten ones too (timestamps as ISO strings)."""

    id: str
    content: str
    version: int
    ns: dict[str, Any]
    created_at: str
    forgotten_at: str | None
    superseded_by: str | None
    embedding_pending: bool
    source: Any


@dataclass(frozen=True)
class FileInfo:
    """One core memory file, as listed by `list_files`."""

    path: str
    bytes: int
    version: int
    updated_at: datetime


@dataclass(frozen=True)
class SavedFact:
    """One fact of a `save_extracted` batch, in the order given (`ord` counts from 1).

    A saved fact has its new `id`; a refused near-duplicate has `id` None,
    `duplicate_of` the fact it duplicates and `similarity` their cosine similarity.
    """

    ord: int
    id: uuid.UUID | None
    duplicate_of: uuid.UUID | None
    similarity: float | None


@dataclass(frozen=True)
class FactHit:
    """One search result: the fused `score`, and each half's own measure.

    `similarity` is the cosine similarity to the query's embedding (None when
    the search had no embedding or the fact's is pending); `text_rank` is the
    full-text rank (0 when no query word matched).
    """

    id: uuid.UUID
    content: str
    score: float
    similarity: float | None
    text_rank: float
    ns: Namespace
    created_at: datetime


@dataclass(frozen=True)
class PendingText:
    """A memory waiting for its embedding, leased to the caller for a while."""

    id: uuid.UUID
    kind: str
    content: str
    content_hash: str


def _json_default(value: Any) -> str:
    # uuid.UUID objects go where the SQL expects uuid strings (`owner_id` in ns).
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, default=_json_default)


def _json(obj: Any) -> Jsonb:
    return Jsonb(obj, dumps=_dumps)


def _uuid(value: uuid.UUID | str, name: str = "org") -> uuid.UUID:
    """An id as a uuid, or a clear Invalid before anything reaches the database."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Invalid(f"{name} must be a uuid, got {value!r}") from None


def _ns(ns: Namespace | None) -> Jsonb:
    # None means the caller's own user namespace, which the SQL spells '{}'.
    return _json({} if ns is None else ns)


def _ns_many(ns: Namespace | Sequence[Namespace] | None) -> Jsonb:
    # One namespace (an object) or several (an array of objects).
    if ns is None or isinstance(ns, Mapping):
        return _ns(ns)
    return _json(list(ns))


FLOAT4_MAX = 3.4028234663852886e38


def _real_array(vector: Vector | None) -> list[float] | None:
    # A plain list of floats, bound as `%b::real[]`: the same with or without
    # pgvector's adapters on the connection, whatever the embedder returned;
    # binary, because psycopg's text dump of 384 floats costs ~0.5 ms. A
    # number beyond float4 range goes as ±Infinity, so the database refuses it as
    # EMBEDDING_INVALID instead of failing the cast to real.
    if vector is None:
        return None
    return [x if abs(x) <= FLOAT4_MAX else math.copysign(math.inf, x) for x in map(float, vector)]


class RealRows:
    """Vectors of one length as a 2-D `real[]`, one row per vector (`RealRowsDumper`)."""

    __slots__ = ("dimensions", "rows", "values")

    def __init__(self, values: array[float], rows: int, dimensions: int) -> None:
        self.values = values  # typecode "f": float4, row after row
        self.rows = rows
        self.dimensions = dimensions

    @classmethod
    def of(cls, vectors: Sequence[Vector]) -> RealRows | None:
        """The vectors as float4, or None when their lengths differ (the JSON path then
        lets the database say which one is wrong)."""
        values: array[float] = array("f")
        dimensions = -1
        for vector in vectors:
            before = len(values)
            _extend(values, vector)
            if dimensions not in (-1, len(values) - before):
                return None
            dimensions = len(values) - before
        if dimensions == 0:
            return None
        rows = cls(values, len(vectors), dimensions)
        # float4 turns a number beyond its range into ±Infinity and one too small for it
        # into 0: the database refuses both (NaN here), as it does in JSON. Three zero
        # bytes in a row are rare but for a zero, so the slow look is seldom needed.
        if b"\0\0\0" in values.tobytes():
            for i, vector in enumerate(vectors):
                for j, x in enumerate(map(float, vector)):
                    if x != 0 and values[i * dimensions + j] == 0:
                        values[i * dimensions + j] = math.nan
        return rows


def _extend(values: array[float], vector: Vector) -> None:
    # In C from a list of floats or a buffer of them (a numpy array); else one by one.
    if isinstance(vector, list):
        with suppress(TypeError):  # fromlist adds all or nothing
            values.fromlist(vector)
            return
    else:
        with suppress(TypeError):
            view = memoryview(vector)  # type: ignore[arg-type]
            if view.ndim == 1 and view.format in ("f", "d"):
                values.fromlist(view.tolist())
                return
    values.extend(map(float, vector))


class RealRowsDumper(Dumper):
    """`RealRows` in PostgreSQL's binary array format, built in C: psycopg dumps a list
    of floats element by element, as float8 that the server casts again (~1 us each)."""

    format = pq.Format.BINARY
    oid = 1021  # real[]

    def dump(self, obj: RealRows) -> bytes:
        values = obj.values
        if sys.byteorder == "little":
            values = array("f", values)
            values.byteswap()
        data = values.tobytes()
        if not data:
            return struct.pack("!iii", 0, 0, 700)  # '{}'
        head = struct.pack("!iiiiiii", 2, 0, 700, obj.rows, 1, obj.dimensions, 1)
        # Every element is its length (4) and its 4 bytes, big-endian.
        out = bytearray(2 * len(data))
        out[3::8] = b"\x04" * len(values)
        for k in range(4):
            out[4 + k :: 8] = data[k::4]
        return head + bytes(out)


# For every connection made from now on (a Call runs on any psycopg connection);
# a client's connections get it too, made before or not (connection.py).
psycopg.adapters.register_dumper(RealRows, RealRowsDumper)


def _json_vector(vector: Vector) -> list[float | str]:
    # JSON has no NaN or Infinity: those go as strings, which the database
    # refuses as EMBEDDING_INVALID like any other element that is not a number.
    return [x if math.isfinite(x) else str(x) for x in map(float, vector)]


def _value(rows: Rows) -> Any:
    return rows[0][0]


def run(org: Org, command: dict[str, Any], ns: dict[str, Any] | None) -> Call[str]:
    return Call(
        "SELECT memory.run(%s::uuid, %s::jsonb, %s::jsonb)",
        (_uuid(org), _json(command), _ns(ns)),
        _value,
    )


def render(org: Org, ns: dict[str, Any] | None, max_chars: int | None) -> Call[str]:
    return Call(
        "SELECT memory.render(%s::uuid, %s::jsonb, %s::int)",
        (_uuid(org), _ns(ns), max_chars),
        _value,
        read_only=True,
    )


def read(org: Org, path: str, ns: dict[str, Any] | None) -> Call[FileContent | None]:
    return Call(
        "SELECT memory.read(%s::uuid, %s::text, %s::jsonb)",
        (_uuid(org), path, _ns(ns)),
        _value,
        read_only=True,
    )


def write(
    org: Org, path: str, content: str, expected_version: int | None, ns: dict[str, Any] | None
) -> Call[Written]:
    return Call(
        "SELECT memory.write(%s::uuid, %s::text, %s::text, %s::bigint, %s::jsonb)",
        (_uuid(org), path, content, expected_version, _ns(ns)),
        _value,
    )


def list_files(org: Org, ns: dict[str, Any] | None) -> Call[list[FileInfo]]:
    return Call(
        "SELECT path, bytes, version, updated_at FROM memory.list_files(%s::uuid, %s::jsonb)",
        (_uuid(org), _ns(ns)),
        lambda rows: [FileInfo(*row) for row in rows],
        read_only=True,
    )


def clear_files(org: Org, ns: dict[str, Any] | None) -> Call[int]:
    return Call("SELECT memory.clear_files(%s::uuid, %s::jsonb)", (_uuid(org), _ns(ns)), _value)


def grant(org: Org, user_id: uuid.UUID | str, permission: str) -> Call[None]:
    return Call(
        "SELECT memory.grant(%s::uuid, %s::uuid, %s::text)",
        (_uuid(org), _uuid(user_id, "user_id"), permission),
        lambda rows: None,
    )


def revoke(org: Org, user_id: uuid.UUID | str, permission: str) -> Call[None]:
    return Call(
        "SELECT memory.revoke(%s::uuid, %s::uuid, %s::text)",
        (_uuid(org), _uuid(user_id, "user_id"), permission),
        lambda rows: None,
    )


# ------------------------------------------------------------------ archival memory (facts)


def _one(embeddings: Sequence[Vector] | None) -> Vector | None:
    # The one vector of a one-text embedder call (None: no embedder).
    if embeddings is None:
        return None
    _check_count(embeddings, 1)
    return embeddings[0]


def _check_count(embeddings: Sequence[Vector], texts: int) -> None:
    # Else some texts would silently be saved without their embedding.
    if len(embeddings) != texts:
        raise EmbedderError(f"the embedder returned {len(embeddings)} vectors for {texts} texts")


def save_fact(
    org: Org,
    content: str,
    embeddings: Sequence[Vector] | None,
    ns: Namespace | None,
    source: Any,
) -> Call[uuid.UUID]:
    """`embeddings`: the embedder's answer for `[content]`, or None (saved pending)."""
    return Call(
        "SELECT memory.save_fact(%s::uuid, %s::text, %b::real[], %s::jsonb, %s::jsonb)",
        (
            _uuid(org),
            content,
            _real_array(_one(embeddings)),
            _ns(ns),
            None if source is None else _json(source),
        ),
        _value,
    )


def fact_item(fact: str | Mapping[str, Any]) -> dict[str, Any]:
    """One element of `save_facts`' array: a bare text, or an object with `content`, `source`."""
    item = {"content": fact} if isinstance(fact, str) else dict(fact)
    if not isinstance(item.get("content"), str):
        raise TypeError("each fact is a str or a mapping with a 'content' str")
    return item


SAVE_FACTS_MAX = 1000  # facts per memory.save_facts call, the SQL's own limit


def save_facts(
    org: Org,
    items: Sequence[dict[str, Any]],
    embeddings: Sequence[Vector] | None,
    ns: Namespace | None,
    threshold: float | None,
    model: str | None = None,
) -> list[Call[list[SavedFact]]]:
    """One call per `SAVE_FACTS_MAX` facts, their `ord`s counting on across calls.

    `embeddings`: the embedder's answer for the items' contents, or None (saved
    pending); `model` is recorded with them. The vectors go as `embeddings`, a
    binary `real[]` with one row per fact (the server parses no JSON numbers);
    vectors of different lengths go inside the JSON, where the database says
    which one is wrong. Each call sees the namespace as the ones before left it,
    so dedupe spans them; each is all or nothing.
    """
    matrix = None
    if embeddings is not None:
        _check_count(embeddings, len(items))
        matrix = RealRows.of(embeddings)
        if matrix is not None:
            items = [{**item, "embedding_model": model} for item in items]
        else:
            items = [
                {**item, "embedding": _json_vector(v), "embedding_model": model}
                for item, v in zip(items, embeddings, strict=True)
            ]
    starts = range(0, max(len(items), 1), SAVE_FACTS_MAX)
    return [
        _save_facts(org, items[s : s + SAVE_FACTS_MAX], ns, threshold, s, matrix) for s in starts
    ]


def _save_facts(
    org: Org,
    items: Sequence[dict[str, Any]],
    ns: Namespace | None,
    threshold: float | None,
    offset: int,
    matrix: RealRows | None,
) -> Call[list[SavedFact]]:
    rows = None
    if matrix is not None:
        d = matrix.dimensions
        rows = RealRows(matrix.values[offset * d : (offset + len(items)) * d], len(items), d)
    return Call(
        "SELECT ord, id, duplicate_of, similarity"
        " FROM memory.save_facts(%s::uuid, %s::jsonb, %s::jsonb, %s::float8, %b::real[])",
        (_uuid(org), _json(list(items)), _ns(ns), threshold, rows),
        lambda rows: [SavedFact(ord + offset, *rest) for ord, *rest in rows],
    )


def search_facts(
    org: Org,
    query: str,
    embeddings: Sequence[Vector] | None,
    ns: Namespace | Sequence[Namespace] | None,
    k: int,
    options: Mapping[str, Any] | None,
) -> Call[list[FactHit]]:
    """`embeddings`: the embedder's answer for `[query]`, or None (full text only)."""
    return Call(
        "SELECT id, content, score, similarity, text_rank, ns, created_at"
        " FROM memory.search_facts(%s::uuid, %s::text, %b::real[], %s::jsonb, %s::int, %s::jsonb)",
        (
            _uuid(org),
            query,
            _real_array(_one(embeddings)),
            _ns_many(ns),
            k,
            _json(dict(options or {})),
        ),
        lambda rows: [FactHit(*row) for row in rows],
        read_only=True,
    )


def forget(org: Org, fact_id: uuid.UUID | str, superseded_by: uuid.UUID | str | None) -> Call[None]:
    return Call(
        "SELECT memory.forget(%s::uuid, %s::uuid, %s::uuid)",
        (_uuid(org), fact_id, superseded_by),
        lambda rows: None,
    )


def edit_fact(org: Org, fact_id: uuid.UUID | str, content: str) -> Call[int]:
    return Call(
        "SELECT memory.edit_fact(%s::uuid, %s::uuid, %s::text)",
        (_uuid(org), fact_id, content),
        _value,
    )


def get_fact(org: Org, fact_id: uuid.UUID | str) -> Call[Fact]:
    return Call(
        "SELECT memory.get_fact(%s::uuid, %s::uuid)", (_uuid(org), fact_id), _value, read_only=True
    )


@dataclass(frozen=True)
class FactInfo:
    """One fact of a namespace, as listed by `archival.list` (oldest first)."""

    id: uuid.UUID
    content: str
    version: int
    created_at: datetime
    forgotten_at: datetime | None
    superseded_by: uuid.UUID | None
    embedding_pending: bool


def list_facts(
    org: Org, ns: Namespace | None, max: int, after: uuid.UUID | str | None, forgotten: bool
) -> Call[list[FactInfo]]:
    return Call(
        "SELECT id, content, version, created_at, forgotten_at, superseded_by, embedding_pending"
        " FROM memory.list_facts(%s::uuid, %s::jsonb, %s::int, %s::uuid, %s::boolean)",
        (_uuid(org), _ns(ns), max, after, forgotten),
        lambda rows: [FactInfo(*row) for row in rows],
        read_only=True,
    )


def stats(org: Org, ns: Namespace | None) -> Call[dict[str, int]]:
    return Call(
        "SELECT memory.stats(%s::uuid, %s::jsonb)", (_uuid(org), _ns(ns)), _value, read_only=True
    )


# ------------------------------------------------------------------ embeddings (service)


def embedding_status() -> Call[dict[str, Any]]:
    return Call("SELECT memory.embedding_status()", (), _value)


def configure_embeddings(dimensions: int, kind: str) -> Call[dict[str, Any]]:
    return Call("SELECT memory.configure_embeddings(%s::int, %s::text)", (dimensions, kind), _value)


def pending_embeddings(batch: int) -> Call[list[PendingText]]:
    return Call(
        "SELECT id, kind, content, content_hash FROM memory.pending_embeddings(%s::int)",
        (batch,),
        lambda rows: [PendingText(*row) for row in rows],
    )


def set_memory_embeddings(
    pending: Sequence[PendingText], vectors: Sequence[Vector], model: str | None
) -> Call[int]:
    """The vectors as `embeddings`, a binary `real[]` with one row per text (as
    `save_facts` sends them); vectors of different lengths go as JSON, where the
    database says which one is wrong. A count mismatch is left to the database too
    (EMBEDDING_INVALID, nothing written)."""
    matrix = RealRows.of(vectors) if vectors else None
    as_json = None if matrix is not None else _json([_json_vector(v) for v in vectors])
    return Call(
        "SELECT memory.set_memory_embeddings(%s::uuid[], %s::text[], %s::jsonb, %s::text, %b::real[])",
        ([p.id for p in pending], [p.content_hash for p in pending], as_json, model, matrix),
        _value,
    )


# ------------------------------------------------------------------ recall (earlier messages)


@dataclass(frozen=True)
class MessageHit:
    """One earlier message found by `recall.search`, ranked like facts.

    `id` is the message's own id as indexed; `similarity` is None when the
    search had no embedding or the message's is pending.
    """

    id: str
    chat_id: str
    role: str
    content: str
    score: float
    similarity: float | None
    created_at: datetime


def message_item(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message as JSON: a datetime `created_at` goes as ISO 8601 (naive = server time zone)."""
    item = dict(message)
    if isinstance(item.get("created_at"), datetime):
        item["created_at"] = item["created_at"].isoformat()
    return item


def message_text(item: Mapping[str, Any]) -> str | None:
    """The text to embed for a message: None for a temporary one, which is not stored (and
    so never sent to an embedding service), or when there is no string content (the SQL refuses it)."""
    content = item.get("content")
    return content if item.get("temporary") is not True and isinstance(content, str) else None


def index_message(
    org: Org, item: Mapping[str, Any], embeddings: Sequence[Vector] | None, model: str | None = None
) -> Call[bool]:
    """`embeddings`: the embedder's answer for `[content]`, or None (indexed pending);
    `model` is recorded with it."""
    if embeddings is not None and model is not None:
        item = {**item, "embedding_model": model}
    return Call(
        "SELECT memory.index_message(%s::uuid, %s::jsonb, %b::real[])",
        (_uuid(org), _json(dict(item)), _real_array(_one(embeddings))),
        _value,
    )


def search_messages(
    org: Org,
    query: str,
    embeddings: Sequence[Vector] | None,
    exclude_chat: str | None,
    k: int,
    options: Mapping[str, Any] | None,
) -> Call[list[MessageHit]]:
    """`embeddings`: the embedder's answer for `[query]`, or None (full text only)."""
    return Call(
        "SELECT id, chat_id, role, content, score, similarity, created_at"
        " FROM memory.search_messages(%s::uuid, %s::text, %b::real[], %s::text, %s::int, %s::jsonb)",
        (
            _uuid(org),
            query,
            _real_array(_one(embeddings)),
            exclude_chat,
            k,
            _json(dict(options or {})),
        ),
        lambda rows: [MessageHit(*row) for row in rows],
        read_only=True,
    )


def delete_chat(org: Org, chat_id: str) -> Call[int]:
    return Call("SELECT memory.delete_chat(%s::uuid, %s::text)", (_uuid(org), chat_id), _value)


# ------------------------------------------------------------------ recall before a turn


@dataclass(frozen=True)
class ContextItem:
    """One row of `recall_context`, in the order an assistant should read them.

    `kind` is `core` (the rendered core memory, `id` "core"), `fact` (`id`
    "fact:<uuid>") or `message` (`id` "message:<uuid>", the indexed row's uuid).
    """

    id: str
    kind: str
    content: str


def recall_context(
    org: Org,
    query: str,
    embeddings: Sequence[Vector] | None,
    ns: Namespace | None,
    options: Mapping[str, Any] | None,
) -> Call[list[ContextItem]]:
    """`embeddings`: the embedder's answer for `[query]`, or None (full text only)."""
    options = dict(options or {})
    return Call(
        "SELECT id, kind, content"
        " FROM memory.recall_context(%s::uuid, %s::text, %b::real[], %s::jsonb, %s::jsonb)",
        (_uuid(org), query, _real_array(_one(embeddings)), _ns(ns), _json(options)),
        lambda rows: [ContextItem(*row) for row in rows],
        # Under an operation id the answer is stored for its replays: a write.
        read_only=options.get("operation_id") is None,
    )


# ------------------------------------------------------------------ documents (service)


@dataclass(frozen=True)
class Document:
    """A live document: `expires_at` None means it never expires."""

    content: str
    version: int
    expires_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True)
class DocumentInfo:
    """One live document of a scope, as listed by `documents.list`."""

    path: str
    version: int
    expires_at: datetime | None
    updated_at: datetime


def document_read(scope_key: str, path: str) -> Call[Document | None]:
    # The JSON's timestamps are cast back to timestamptz in SQL; null (absent or
    # expired) gives no row.
    return Call(
        "SELECT d ->> 'content', (d ->> 'version')::bigint,"
        " (d ->> 'expires_at')::timestamptz, (d ->> 'updated_at')::timestamptz"
        " FROM memory.document_read(%s::text, %s::text) AS d WHERE d IS NOT NULL",
        (scope_key, path),
        lambda rows: Document(*rows[0]) if rows else None,
    )


def document_write(
    scope_key: str, path: str, content: str, expected_version: int | None, expires_in: int | None
) -> Call[int]:
    return Call(
        "SELECT memory.document_write(%s::text, %s::text, %s::text, %s::bigint, %s::int)",
        (scope_key, path, content, expected_version, expires_in),
        _value,
    )


def document_delete(scope_key: str, path: str, expected_version: int | None) -> Call[bool]:
    return Call(
        "SELECT memory.document_delete(%s::text, %s::text, %s::bigint)",
        (scope_key, path, expected_version),
        _value,
    )


def document_list(scope_key: str, prefix: str) -> Call[list[DocumentInfo]]:
    return Call(
        "SELECT path, version, expires_at, updated_at FROM memory.document_list(%s::text, %s::text)",
        (scope_key, prefix),
        lambda rows: [DocumentInfo(*row) for row in rows],
    )


def purge_documents() -> Call[int]:
    return Call("SELECT memory.purge_documents()", (), _value)


# ------------------------------------------------------------------ erasure and portability


def maintain() -> Call[list[IndexChange]]:
    return Call(
        "SELECT action, kind, organization_id, namespace_id, live_rows, index_name"
        " FROM memory.maintain()",
        (),
        lambda rows: [IndexChange(*row) for row in rows],
    )


# The last statement memory.maintenance_statements() hands out: maintain() itself.
MAINTAIN_STATEMENT = "SELECT * FROM memory.maintain()"


def maintenance_statements() -> Call[list[str]]:
    return Call(
        "SELECT s FROM memory.maintenance_statements() s", (), lambda rows: [r[0] for r in rows]
    )


def erase_user(org: Org, user_id: uuid.UUID | str) -> Call[dict[str, int]]:
    return Call(
        "SELECT memory.erase_user(%s::uuid, %s::uuid)",
        (_uuid(org), _uuid(user_id, "user_id")),
        _value,
    )


def export(org: Org, ns: Namespace | None) -> Call[dict[str, Any]]:
    return Call(
        "SELECT memory.export(%s::uuid, %s::jsonb)", (_uuid(org), _ns(ns)), _value, read_only=True
    )


def import_(org: Org, data: Mapping[str, Any], ns: Namespace | None) -> Call[dict[str, int]]:
    return Call(
        "SELECT memory.import(%s::uuid, %s::jsonb, %s::jsonb)",
        (_uuid(org), _json(dict(data)), _ns(ns)),
        _value,
    )


# ------------------------------------------------------------------ capture (service)


@dataclass(frozen=True)
class PendingCapture:
    """A chat leased by `memory.pending_captures`: its new messages and the ones before.

    `messages` and `context` are `[{"id", "role", "content", "created_at"}]`, oldest first.
    """

    capture_id: uuid.UUID
    org: uuid.UUID
    owner_id: uuid.UUID
    chat_id: str
    messages: list[dict[str, Any]]
    context: list[dict[str, Any]]


@dataclass(frozen=True)
class CapturedFact:
    """One applied operation of `memory.capture_facts`, in the order given (`ord` from 1).

    `status`: saved, duplicate, superseded, forgotten, unknown_fact or secret; `id`
    the new fact, `fact_id` the fact duplicated, superseded or forgotten."""

    ord: int
    op: str
    id: uuid.UUID | None
    fact_id: uuid.UUID | None
    status: str


@dataclass(frozen=True)
class IndexChange:
    """One change `maintain` made: `action` `created` or `dropped` (a namespace's own
    index on the `kind` table, `fact` or `message`) or `joined` (a namespace's facts
    moved into the shared index, `facts_embedding_idx`)."""

    action: str
    kind: str
    organization_id: uuid.UUID
    namespace_id: uuid.UUID
    live_rows: int
    index_name: str


@dataclass(frozen=True)
class CaptureStatus:
    """Where a chat stands in the capture queue (`capture_status`).

    `status`: failed (parked until `retry_captures`), leased, pending or captured."""

    chat_id: str
    owner_id: uuid.UUID
    pending_messages: int
    attempts: int
    status: str
    last_error: str | None
    captured_at: datetime | None


CAPTURE_STATUSES = ("saved", "duplicate", "superseded", "forgotten", "secret", "unknown_fact")


@dataclass
class CaptureSummary:
    """What `capture_pending` did, counted as it goes: pass one as `summary=`.

    `captures`: captures applied; `failures`: captures given back (or whose lease
    was lost), with `errors` saying why, one line each; then the operations
    applied, by status; `dropped`: operations left out before the database saw
    them (a fact number the model was not shown, or an operation malformed)."""

    captures: int = 0
    failures: int = 0
    saved: int = 0
    duplicate: int = 0
    superseded: int = 0
    forgotten: int = 0
    secret: int = 0
    unknown_fact: int = 0
    dropped: int = 0
    errors: list[str] = field(default_factory=list)

    def applied(self, rows: Sequence[CapturedFact], dropped: int) -> None:
        self.captures += 1
        self.dropped += dropped
        for row in rows:
            if row.status in CAPTURE_STATUSES:
                setattr(self, row.status, getattr(self, row.status) + 1)

    def failed(self, capture: PendingCapture, error: str) -> None:
        self.failures += 1
        self.errors.append(f"chat {capture.chat_id!r} of {capture.owner_id}: {error}")


def pending_captures(batch: int) -> Call[list[PendingCapture]]:
    return Call(
        "SELECT capture_id, org, owner_id, chat_id, messages, context"
        " FROM memory.pending_captures(%s::int)",
        (batch,),
        lambda rows: [PendingCapture(*row) for row in rows],
    )


def capture_facts(
    capture_id: uuid.UUID,
    operations: Sequence[Mapping[str, Any]],
    model: str | None,
    embeddings: Sequence[Vector] | None = None,
) -> Call[list[CapturedFact]]:
    """`embeddings`: the embedder's vectors for `new_fact_texts(operations)`, or None
    (the new facts wait for `embed_pending`). They go as `embeddings`, one binary
    `real[]` row per new fact, as `save_facts` takes them; vectors of different
    lengths go inside the JSON, where the database says which one is wrong."""
    matrix = None
    if embeddings is not None:
        _check_count(embeddings, len(new_fact_texts(operations)))
        matrix = RealRows.of(embeddings)
        if matrix is None:
            operations = with_embeddings(operations, embeddings)
    return Call(
        "SELECT ord, op, id, fact_id, status"
        " FROM memory.capture_facts(%s::uuid, %s::jsonb, %s::text, %b::real[])",
        (capture_id, _json([dict(op) for op in operations]), model, matrix),
        lambda rows: [CapturedFact(*row) for row in rows],
    )


def fail_capture(capture_id: uuid.UUID, error: str) -> Call[bool]:
    return Call("SELECT memory.fail_capture(%s::uuid, %s::text)", (capture_id, error), _value)


def retry_captures(org: Org, chat_id: str | None) -> Call[int]:
    return Call("SELECT memory.retry_captures(%s::uuid, %s::text)", (_uuid(org), chat_id), _value)


def capture_status(org: Org, chat_id: str | None) -> Call[list[CaptureStatus]]:
    return Call(
        "SELECT chat_id, owner_id, pending_messages, attempts, status, last_error, captured_at"
        " FROM memory.capture_status(%s::uuid, %s::text)",
        (_uuid(org), chat_id),
        lambda rows: [CaptureStatus(*row) for row in rows],
    )


KNOWN_FACTS = 20  # known facts shown to the model per capture
SEARCH_QUERY_MAX = 10_000  # characters of a search query, the SQL's own limit


def capture_queries(capture: PendingCapture) -> list[str]:
    """One search for known facts per new message with text (cut to what a query may hold)."""
    texts = (m.get("content") for m in capture.messages)
    return [t[:SEARCH_QUERY_MAX] for t in texts if isinstance(t, str) and t.strip()]


def per_query(embeddings: Sequence[Vector] | None, queries: int) -> list[list[Vector] | None]:
    """The embedder's answer for all queries as each search takes it: `[vector]`, or None."""
    if embeddings is None:
        return [None] * queries
    _check_count(embeddings, queries)
    return [[v] for v in embeddings]


def capture_search(
    capture: PendingCapture, query: str, embeddings: Sequence[Vector] | None
) -> Call[list[FactHit]]:
    """The owner's live facts closest to one new message. On the primary, not a replica:
    the facts an earlier capture of the same run just saved must be seen."""
    call = search_facts(
        capture.org, query, embeddings, {"owner_id": capture.owner_id}, KNOWN_FACTS, None
    )
    return replace(call, read_only=False)


def known_facts(hit_lists: Sequence[Sequence[FactHit]], limit: int = KNOWN_FACTS) -> list[FactHit]:
    """The best hits of every message's search in turn (each one's first, then each
    one's second, …), each fact once, at most `limit`: no message's facts crowd out
    another's."""
    seen: set[uuid.UUID] = set()
    out: list[FactHit] = []
    for rank in range(max((len(h) for h in hit_lists), default=0)):
        for hits in hit_lists:
            if rank < len(hits) and hits[rank].id not in seen:
                seen.add(hits[rank].id)
                out.append(hits[rank])
                if len(out) == limit:
                    return out
    return out


def new_fact_texts(operations: Sequence[Mapping[str, Any]]) -> list[str]:
    """The contents to embed: every operation that makes a new fact."""
    return [op["content"] for op in operations if op["op"] in ("add", "supersede")]


def with_embeddings(
    operations: Sequence[Mapping[str, Any]], embeddings: Sequence[Vector] | None
) -> list[dict[str, Any]]:
    """The operations with the embedder's vectors for `new_fact_texts(operations)`."""
    if embeddings is None:
        return [dict(op) for op in operations]
    _check_count(embeddings, len(new_fact_texts(operations)))
    vectors = iter(embeddings)
    return [
        {**op, "embedding": _json_vector(next(vectors))}
        if op["op"] in ("add", "supersede")
        else dict(op)
        for op in operations
    ]
