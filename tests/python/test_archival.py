"""Archival memory and the embedding pipeline from Python, sync and async, with one suite.

Most tests use `FakeEmbedder` (conftest.py): 8-dimensional vectors looked up in a table, built
so that chosen pairs have a known cosine similarity, and a record of every
embedder call (which method, which texts). One test runs the real LocalEmbedder.
The `connect` fixture (conftest.py) covers Memory and AsyncMemory over a DSN, a
connection and a pool; async clients must call `aembed`, sync ones `embed`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
import pytest

import pgmemory
from pgmemory import (
    AsyncMemory,
    EmbedderError,
    EmbeddingInvalid,
    FactHit,
    LocalEmbedder,
    Memory,
    SavedFact,
)
from pgmemory.calls import Call
from pgmemory.connection import AsyncSource, Source
from tests.conftest import SERVICE_LOGIN
from tests.python.conftest import (
    DIMS,
    Blocking,
    Connect,
    FakeEmbedder,
    QuestionSideEmbedder,
    e,
    method,
    plus,
)

OFFICE = "Works in the Lisbon office"
OFFICE_2 = "Their office is in Lisbon"  # cosine 0.96 with OFFICE: a near-duplicate
PORTO = "Moved to the Porto office"
PEANUTS = "Is allergic to peanuts"
PEANUTS_2 = "Has a peanut allergy"  # cosine 0.8 with PEANUTS: kept at 0.92
TEA = "Likes green tea"
TEA_EDITED = "Likes green tea, no sugar"
CAR = "Drives a blue car"
CAR_2 = "Owns a blue car"  # cosine 0.93 with CAR
Q_CAR = "Which car does the user drive?"  # full text: 'car' | 'user' | 'drive'

TABLE: dict[str, list[float]] = {
    OFFICE: e(0),
    OFFICE_2: plus(e(0, 0.96), e(1, 0.28)),
    PORTO: e(1),
    PEANUTS: e(2),
    PEANUTS_2: plus(e(2, 0.8), e(3, 0.6)),
    TEA: e(4),
    TEA_EDITED: plus(e(4, 0.6), e(7, 0.8)),
    CAR: e(5),
    CAR_2: plus(e(5, 0.93), e(6, math.sqrt(1 - 0.93**2))),
    "office": plus(e(0, 0.6), e(1, 0.8)),
    "green tea": plus(e(4, 0.8), e(3, 0.6)),
    # Unit; cosines: TEA 0.7, OFFICE 0.5, CAR 0.3, PEANUTS 0.1.
    Q_CAR: plus(e(0, 0.5), e(2, 0.1), e(4, 0.7), e(5, 0.3), e(7, 0.4)),
}


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder(TABLE)


@pytest.fixture
def service(connect: Connect, fake: FakeEmbedder) -> Memory | Blocking:
    """The service with the fake embedder, the database configured for its 8 dimensions."""
    svc = connect(embedder=fake)
    assert svc.configure_embeddings() == {"dimensions": DIMS, "type": "vector"}
    return svc


@pytest.fixture
def sql_log(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The memory.* function of every call the clients execute, in order."""
    log: list[str] = []
    sync_execute, async_execute = Source.execute, AsyncSource.execute

    def name(call: Call[Any]) -> str:
        found = re.search(r"memory\.(\w+)\(", call.sql)
        assert found is not None
        return found[1]

    def execute(self: Source, claims: str | None, call: Call[Any]) -> Any:
        log.append(name(call))
        return sync_execute(self, claims, call)

    async def aexecute(self: AsyncSource, claims: str | None, call: Call[Any]) -> Any:
        log.append(name(call))
        return await async_execute(self, claims, call)

    monkeypatch.setattr(Source, "execute", execute)
    monkeypatch.setattr(AsyncSource, "execute", aexecute)
    return log


GET_KEYS = {
    "id",
    "content",
    "version",
    "ns",
    "created_at",
    "forgotten_at",
    "superseded_by",
    "embedding_pending",
    "source",
}


# ------------------------------------------------------------------ save, get, pending


def test_save_with_and_without_embedder(
    connect: Connect,
    service: Any,
    fake: FakeEmbedder,
    db: psycopg.Connection,
    grant: Any,
    org: uuid.UUID,
) -> None:
    user_id = grant()
    user = service.as_user(user_id)  # shares the service's embedder
    plain = connect().as_user(user_id)  # no embedder

    pending_id = plain.archival.save(org, TEA)
    assert isinstance(pending_id, uuid.UUID)
    assert fake.calls == []
    got = plain.archival.get(org, pending_id)
    assert set(got) == GET_KEYS
    assert {k: got[k] for k in GET_KEYS - {"created_at"}} == {
        "id": str(pending_id),
        "content": TEA,
        "version": 1,
        "ns": {"scope": "user", "owner_id": str(user_id)},
        "forgotten_at": None,
        "superseded_by": None,
        "embedding_pending": True,
        "source": None,
    }
    stored = db.execute(
        "SELECT %s::timestamptz = created_at FROM memory.facts WHERE id = %s",
        (got["created_at"], pending_id),
    ).fetchone()
    db.rollback()
    assert stored == (True,)

    car_id = user.archival.save(org, CAR, source={"chat": "c1", "turn": 3})
    assert fake.calls == [(method(service), [CAR])]
    assert user.archival.get(org, car_id)["embedding_pending"] is False

    # Duplicates return the id of the fact they duplicate: by normalized text
    # without an embedding, by cosine (0.93 >= 0.92) with one.
    assert plain.archival.save(org, "  likes GREEN   tea ") == pending_id
    assert user.archival.save(org, CAR_2) == car_id
    assert fake.calls[1:] == [(method(service), [CAR_2])]

    # The service fills in the one pending embedding, in one embedder call.
    assert service.embed_pending() == 1
    assert fake.calls[2:] == [(method(service), [TEA])]
    assert plain.archival.get(org, pending_id)["embedding_pending"] is False
    assert service.embed_pending() == 0
    assert len(fake.calls) == 3


def test_save_into_another_namespace(service: Any, grant: Any, org: uuid.UUID) -> None:
    user = service.as_user(grant())
    agent = {"scope": "agent", "agent_id": "helper"}
    mine, agents = user.archival.save(org, TEA), user.archival.save(org, TEA, ns=agent)
    assert mine != agents  # no dedupe across namespaces
    assert user.archival.get(org, agents)["ns"]["scope"] == "agent"
    assert [h.content for h in user.archival.search(org, "green tea", ns=agent)] == [TEA]
    hits = user.archival.search(org, "green tea", ns=[{}, agent])
    assert sorted(h.id for h in hits) == sorted([mine, agents])
    assert {h.ns["scope"] for h in hits} == {"user", "agent"}


# ------------------------------------------------------------------ save_extracted


def test_save_extracted_embeds_once_and_refuses_near_duplicates(
    service: Any, fake: FakeEmbedder, grant: Any, org: uuid.UUID
) -> None:
    user = service.as_user(grant())
    car_id = user.archival.save(org, CAR)
    batch = [
        OFFICE,
        PEANUTS,
        {"content": OFFICE_2, "source": {"chat": "c9"}},
        PEANUTS_2,
        CAR_2,
        TEA,
    ]
    rows = user.archival.save_extracted(org, batch)
    # One embedder call for the whole batch, texts in order.
    assert fake.calls == [
        (method(service), [CAR]),
        (method(service), [OFFICE, PEANUTS, OFFICE_2, PEANUTS_2, CAR_2, TEA]),
    ]
    assert all(isinstance(r, SavedFact) for r in rows)
    assert [r.ord for r in rows] == [1, 2, 3, 4, 5, 6]
    saved = {1, 2, 4, 6}
    assert [r.id is not None for r in rows] == [r.ord in saved for r in rows]
    assert all(r.duplicate_of is None and r.similarity is None for r in rows if r.ord in saved)
    # OFFICE_2 duplicates OFFICE from earlier in the batch; CAR_2 the live CAR.
    assert (rows[2].id, rows[2].duplicate_of) == (None, rows[0].id)
    assert rows[2].similarity == pytest.approx(0.96, abs=1e-6)
    assert (rows[4].id, rows[4].duplicate_of) == (None, car_id)
    assert rows[4].similarity == pytest.approx(0.93, abs=1e-6)
    assert user.archival.get(org, rows[3].id)["content"] == PEANUTS_2  # 0.8 < 0.92: kept
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows[0].id = None  # type: ignore[misc]

    # A stricter per-call threshold keeps the 0.96 paraphrase.
    again = user.archival.save_extracted(org, [OFFICE_2], threshold=0.97)
    assert again[0].id is not None and again[0].duplicate_of is None
    # Nothing to save: no embedder call, no rows.
    assert user.archival.save_extracted(org, []) == []
    assert len(fake.calls) == 3


def test_save_extracted_without_embedder_is_pending(
    connect: Connect, grant: Any, org: uuid.UUID
) -> None:
    user = connect().as_user(grant())
    rows = user.archival.save_extracted(org, [TEA, {"content": "likes green TEA"}, CAR])
    assert [(r.ord, r.id is not None, r.duplicate_of, r.similarity) for r in rows] == [
        (1, True, None, None),
        (2, False, rows[0].id, 1.0),  # deduplicated by normalized text
        (3, True, None, None),
    ]
    assert user.archival.get(org, rows[2].id)["embedding_pending"] is True
    with pytest.raises(TypeError, match="'content' str"):
        user.archival.save_extracted(org, [{"text": TEA}])


# ------------------------------------------------------------------ search


def test_search_fuses_vector_and_full_text(
    connect: Connect,
    service: Any,
    fake: FakeEmbedder,
    db: psycopg.Connection,
    grant: Any,
    org: uuid.UUID,
) -> None:
    user_id = grant()
    user = service.as_user(user_id)
    facts = [OFFICE, PEANUTS, TEA, CAR]
    saved = user.archival.save_extracted(org, facts)
    ids = {text: row.id for text, row in zip(facts, saved, strict=True)}
    text_rank = db.execute(
        "SELECT ts_rank_cd(to_tsvector('english', %s), 'car | user | drive'::tsquery)", (CAR,)
    ).fetchone()[0]
    db.rollback()
    assert text_rank > 0

    hits = user.archival.search(org, Q_CAR)
    assert fake.calls[-1] == (method(service), [Q_CAR])
    assert all(isinstance(h, FactHit) for h in hits)
    # Vector ranks TEA 1, OFFICE 2, CAR 3, PEANUTS 4; full text finds CAR only.
    assert [(h.content, h.score, h.text_rank) for h in hits] == [
        (CAR, 1 / 63 + 1 / 61, text_rank),
        (TEA, 1 / 61, 0),
        (OFFICE, 1 / 62, 0),
        (PEANUTS, 1 / 64, 0),
    ]
    assert [h.similarity for h in hits] == pytest.approx([0.3, 0.7, 0.5, 0.1], abs=1e-6)
    assert [h.id for h in hits] == [ids[CAR], ids[TEA], ids[OFFICE], ids[PEANUTS]]
    assert all(h.ns == {"scope": "user", "owner_id": str(user_id)} for h in hits)
    assert all(isinstance(h.created_at, datetime) and h.created_at.tzinfo for h in hits)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hits[0].score = 1.0  # type: ignore[misc]

    assert [h.content for h in user.archival.search(org, Q_CAR, k=2)] == [CAR, TEA]
    # Options reach the SQL: text only (vector weight 0), then a different rrf_k.
    # A list with weight 0 is not computed: only the text list's hit comes back.
    text_only = user.archival.search(org, Q_CAR, options={"vector_weight": 0})
    assert [(h.content, h.score) for h in text_only] == [(CAR, 1 / 61)]
    assert user.archival.search(org, Q_CAR, options={"rrf_k": 0})[0].score == 1 / 3 + 1 / 1
    with pytest.raises(pgmemory.Invalid, match="unknown search option 'rrf'"):
        user.archival.search(org, Q_CAR, options={"rrf": 1})

    # Without an embedder: full text only, no similarity, no embedder call.
    calls_before = len(fake.calls)
    plain = connect().as_user(user_id)
    only_text = plain.archival.search(org, Q_CAR)
    assert [(h.content, h.score, h.similarity, h.text_rank) for h in only_text] == [
        (CAR, 1 / 61, None, text_rank)
    ]
    assert plain.archival.search(org, "How is the weather today?") == []
    assert len(fake.calls) == calls_before


def test_search_with_a_precomputed_query_embedding(
    connect: Connect, service: Any, fake: FakeEmbedder, grant: Any, org: uuid.UUID
) -> None:
    """`query_embedding` replaces the embedder's vector (the embedder is not called), with
    an embedder or without one; `ef_search` reaches the SQL and is checked there."""
    user_id = grant()
    user = service.as_user(user_id)
    user.archival.save_extracted(org, [OFFICE, PEANUTS, TEA, CAR])
    embedded = user.archival.search(org, Q_CAR)
    calls_before = len(fake.calls)
    given = user.archival.search(org, Q_CAR, query_embedding=TABLE[Q_CAR])
    assert given == embedded
    # The given vector ranks: CAR's own puts CAR first in both lists (similarity 1).
    car = user.archival.search(
        org, Q_CAR, query_embedding=np.array(TABLE[CAR], dtype=np.float32), k=1
    )
    assert [(h.content, h.score, h.similarity) for h in car] == [(CAR, 2 / 61, 1.0)]
    plain = connect().as_user(user_id)
    assert plain.archival.search(org, Q_CAR, query_embedding=TABLE[Q_CAR]) == embedded
    deep = user.archival.search(
        org, Q_CAR, query_embedding=TABLE[Q_CAR], options={"ef_search": 1000}
    )
    assert deep == embedded
    with pytest.raises(
        pgmemory.Invalid, match=r"^search option ef_search must be between 10 and 1000$"
    ):
        user.archival.search(org, Q_CAR, query_embedding=TABLE[Q_CAR], options={"ef_search": 5})
    assert len(fake.calls) == calls_before


def test_an_embedder_with_a_question_side_embeds_every_query_with_it(
    connect: Connect, grant: Any, org: uuid.UUID
) -> None:
    """archival.search, recall.search and recall_context embed their query through the
    embedder's `embed_query` (`aembed_query` for AsyncMemory) when it has one; what is
    saved or indexed still goes through `embed`. The question side's vector is what ranks:
    here it points Q_CAR at TEA, which the stored side's vector of Q_CAR would not."""
    embedder = QuestionSideEmbedder(TABLE, {Q_CAR: TABLE[TEA]})
    service = connect(embedder=embedder)
    service.configure_embeddings()
    user_id = grant()
    user = service.as_user(user_id)
    m = method(service)
    user.archival.save_extracted(org, [CAR, TEA])
    service.recall.index(
        org, {"id": "m1", "chat_id": "c1", "owner_id": str(user_id), "role": "user", "content": TEA}
    )
    assert embedder.calls == [(m, [CAR, TEA]), (m, [TEA])]
    vector_only = {"text_weight": 0}
    hits = user.archival.search(org, Q_CAR, k=1, options=vector_only)
    assert [(h.content, h.similarity) for h in hits] == [(TEA, 1.0)]
    messages = user.recall.search(org, Q_CAR, k=1, options=vector_only)
    assert [(h.id, h.similarity) for h in messages] == [("m1", 1.0)]
    context = user.recall_context(org, Q_CAR, options={"facts": 1, "messages": 0, **vector_only})
    assert [(i.kind, i.content) for i in context] == [("fact", TEA)]
    assert embedder.calls[2:] == [(f"{m}_query", [Q_CAR])] * 3


# ------------------------------------------------------------------ forget, edit, isolation


def test_forget_hides_and_supersedes(service: Any, grant: Any, org: uuid.UUID) -> None:
    user = service.as_user(grant())
    office = user.archival.save(org, OFFICE)
    tea = user.archival.save(org, TEA)
    assert [h.id for h in user.archival.search(org, "office")][:1] == [office]

    porto = user.archival.save(org, PORTO)
    assert user.archival.forget(org, office, superseded_by=porto) is None
    hits = user.archival.search(org, "office")
    assert office not in [h.id for h in hits]
    assert hits[0].id == porto
    got = user.archival.get(org, office)  # forgotten facts can still be read
    assert (got["content"], got["superseded_by"]) == (OFFICE, str(porto))
    assert got["forgotten_at"] is not None

    user.archival.forget(org, tea)
    assert tea not in [h.id for h in user.archival.search(org, "green tea")]
    assert user.archival.get(org, tea)["superseded_by"] is None
    # A forgotten fact no longer blocks its duplicate.
    assert user.archival.save(org, OFFICE_2) not in (office, porto)
    # The successor must be a live fact of the same namespace.
    with pytest.raises(pgmemory.Invalid) as caught:
        user.archival.forget(org, porto, superseded_by=tea)
    assert caught.value.message == (f"superseded_by {tea} is not a live fact of the same namespace")


def test_edit_bumps_version_and_makes_pending(
    service: Any, fake: FakeEmbedder, grant: Any, org: uuid.UUID
) -> None:
    user = service.as_user(grant())
    tea = user.archival.save(org, TEA)
    assert user.archival.get(org, tea)["embedding_pending"] is False
    assert user.archival.edit(org, tea, TEA_EDITED) == 2
    got = user.archival.get(org, tea)
    assert (got["content"], got["version"], got["embedding_pending"]) == (TEA_EDITED, 2, True)
    assert service.embed_pending() == 1
    assert fake.calls[-1] == (method(service), [TEA_EDITED])
    assert user.archival.get(org, tea)["embedding_pending"] is False
    assert user.archival.edit(org, str(tea), TEA) == 3  # ids may be strings


def test_users_cannot_reach_each_others_facts(service: Any, grant: Any, org: uuid.UUID) -> None:
    alice, bob = service.as_user(grant()), service.as_user(grant())
    fact = alice.archival.save(org, TEA)
    missing = f"fact {fact} does not exist"
    for attempt in (
        lambda: bob.archival.get(org, fact),
        lambda: bob.archival.edit(org, fact, "mine now"),
        lambda: bob.archival.forget(org, fact),
    ):
        with pytest.raises(pgmemory.NotFound) as caught:
            attempt()
        assert caught.value.message == missing
    assert bob.archival.search(org, "green tea") == []
    assert [h.id for h in alice.archival.search(org, "green tea")] == [fact]
    with pytest.raises(pgmemory.NotFound):
        alice.archival.get(org, uuid.uuid4())


# ------------------------------------------------------------------ embed_pending


def test_embed_pending_one_embedder_call_and_one_write_per_batch(
    connect: Connect,
    service: Any,
    fake: FakeEmbedder,
    sql_log: list[str],
    grant: Any,
    org: uuid.UUID,
) -> None:
    texts = [OFFICE, PEANUTS, TEA, CAR, PORTO, PEANUTS_2, TEA_EDITED]
    plain = connect().as_user(grant())
    rows = plain.archival.save_extracted(org, texts)
    assert all(r.id is not None for r in rows)
    sql_log.clear()

    progress: list[tuple[int, int]] = []
    written = service.embed_pending(
        batch=3, on_batch=lambda done, size: progress.append((done, size))
    )
    assert written == 7
    assert progress == [(3, 3), (6, 3), (7, 1)]
    assert [(m, len(batch)) for m, batch in fake.calls] == [(method(service), n) for n in (3, 3, 1)]
    assert sorted(t for _, batch in fake.calls for t in batch) == sorted(texts)
    # The next batch is claimed before a batch is written (its write overlaps the
    # next embedding); each write has ended before the claim after it.
    assert (
        sql_log
        == ["pending_embeddings"]
        + [
            "pending_embeddings",
            "set_memory_embeddings",
        ]
        * 3
    )
    assert all(plain.archival.get(org, r.id)["embedding_pending"] is False for r in rows)


def test_embed_pending_async_callback_is_awaited(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID
) -> None:
    user_id = grant()
    seen: list[tuple[int, int]] = []

    async def on_batch(done: int, size: int) -> None:
        await asyncio.sleep(0)
        seen.append((done, size))

    async def go() -> int:
        async with AsyncMemory(login_dsn(SERVICE_LOGIN), FakeEmbedder(TABLE), service=True) as mem:
            await mem.configure_embeddings()
            user = mem.as_user(user_id)
            user.embedder = None  # saved pending
            await user.archival.save_extracted(org, [OFFICE, TEA])
            return await mem.embed_pending(batch=1, on_batch=on_batch)

    assert asyncio.run(go()) == 2
    assert seen == [(1, 1), (2, 1)]


def test_embedder_is_needed(connect: Connect) -> None:
    service = connect()
    with pytest.raises(ValueError, match=r"embed_pending\(\) needs an embedder"):
        service.embed_pending()
    with pytest.raises(ValueError, match="needs an embedder"):
        service.configure_embeddings()
    assert service.configure_embeddings(16, "halfvec") == {"dimensions": 16, "type": "halfvec"}


def test_embedding_invalid(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    bad = FakeEmbedder(
        {
            "seven": [1.0] * 7,
            "not a number": [math.nan, *[0.0] * 7],
            "infinite": [math.inf, *[0.0] * 7],
            "beyond float4": [*[0.0] * 7, -1e39],
        }
    )
    service = connect(embedder=bad)
    service.configure_embeddings(DIMS)
    user = service.as_user(grant())

    def refused(action: Callable[..., Any], *args: Any) -> str:
        with pytest.raises(EmbeddingInvalid) as caught:
            action(*args)
        assert (caught.value.code, caught.value.sqlstate) == ("EMBEDDING_INVALID", "22023")
        return caught.value.message

    assert refused(user.archival.save, org, "seven") == "embedding has 7 dimensions, expected 8"
    assert refused(user.archival.save, org, "not a number") == (
        "embedding elements must be finite float4 numbers"
    )
    for text in ("infinite", "beyond float4"):
        assert refused(user.archival.save, org, text) == (
            "embedding elements must be finite float4 numbers"
        )
        assert refused(user.archival.save_extracted, org, [text]) == (
            "embedding elements must be finite float4 numbers"
        )
    assert refused(user.archival.save_extracted, org, ["seven"]) == (
        "embedding has 7 dimensions, expected 8"
    )
    assert refused(user.archival.search, org, "seven") == "embedding has 7 dimensions, expected 8"

    # A pending fact whose vector is refused stays pending: nothing is written.
    plain = connect().as_user(grant())
    fact = plain.archival.save(org, "not a number")
    assert refused(service.embed_pending) == "embedding elements must be finite float4 numbers"
    assert plain.archival.get(org, fact)["embedding_pending"] is True
    # An embedder answering with the wrong number of vectors is caught before SQL.
    with pytest.raises(EmbedderError, match="returned 0 vectors for 1 texts"):
        connect(embedder=Short(TABLE)).as_user(grant()).archival.save(org, TEA)


class Short(FakeEmbedder):
    """Answers every batch with no vectors at all."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return []

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return []


# ------------------------------------------------------------------ adapters


@pytest.mark.parametrize("search_path", ["public", "pg_catalog"])
def test_numpy_vectors_with_and_without_pgvector_adapters(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID, search_path: str
) -> None:
    # pg_catalog only: `vector` is not found, so pgvector's adapters are not registered.
    class Numpy(FakeEmbedder):
        def embed(self, texts: Sequence[str]) -> Any:
            return np.array([self.table[t] for t in texts], dtype=np.float32)

    user_id = grant()
    options = f"-c search_path={search_path}"
    with psycopg.connect(login_dsn(SERVICE_LOGIN), options=options) as conn:
        mem = Memory(conn, Numpy(TABLE), service=True)
        mem.configure_embeddings()
        user = mem.as_user(user_id)
        office = user.archival.save(org, OFFICE)
        rows = user.archival.save_extracted(org, [OFFICE_2, TEA])
        assert (rows[0].duplicate_of, rows[1].duplicate_of) == (office, None)
        assert rows[0].similarity == pytest.approx(0.96, abs=1e-6)
        hits = user.archival.search(org, Q_CAR)
        assert [h.content for h in hits] == [TEA, OFFICE]
        assert (conn.adapters.types.get("vector") is None) == (search_path == "pg_catalog")


# ------------------------------------------------------------------ the real model


PARAPHRASES = [
    "Works in the Lisbon office",
    "Their office is in Lisbon",  # ~0.865 with the first
    "Is allergic to peanuts",
    "Has a peanut allergy",  # ~0.760 with the third
    "Likes green tea",
    "Drives a blue car",  # every other pair is below 0.18
]


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEmbedder]:
    yield LocalEmbedder()


def test_local_embedder_paraphrases(
    connect: Connect, local: LocalEmbedder, grant: Any, org: uuid.UUID
) -> None:
    service = connect(embedder=local)
    assert service.configure_embeddings() == {"dimensions": 384, "type": "vector"}
    user = service.as_user(grant())
    vectors = np.array(local.embed([*PARAPHRASES, "Their office is in Lisbon."]), dtype=np.float64)
    cosine = vectors @ vectors.T

    # 0.7 separates the paraphrase pairs (0.86, 0.76) from everything else (< 0.18).
    rows = user.archival.save_extracted(org, PARAPHRASES, threshold=0.7)
    assert [(r.id is None, r.duplicate_of) for r in rows] == [
        (False, None),
        (True, rows[0].id),
        (False, None),
        (True, rows[2].id),
        (False, None),
        (False, None),
    ]
    assert rows[1].similarity == pytest.approx(cosine[0, 1], abs=1e-5)
    assert rows[3].similarity == pytest.approx(cosine[2, 3], abs=1e-5)

    # At the default 0.92, real paraphrases are distinct facts; only a rephrasing
    # that changes punctuation (cosine ~0.995) is refused.
    agent = {"scope": "agent", "agent_id": "strict"}
    strict = user.archival.save_extracted(
        org, [*PARAPHRASES, "Their office is in Lisbon."], ns=agent
    )
    assert [r.duplicate_of for r in strict] == [None] * 6 + [strict[1].id]
    assert all(r.id is not None for r in strict[:6])
    assert strict[6].similarity == pytest.approx(cosine[1, 6], abs=1e-5)
    assert strict[6].similarity >= 0.92

    hits = user.archival.search(org, "Where does the user work?", ns=agent, k=2)
    assert [h.content for h in hits] == ["Works in the Lisbon office", "Their office is in Lisbon"]
