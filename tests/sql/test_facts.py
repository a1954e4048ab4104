"""Archival memory: facts, dedupe at the threshold, forget/edit/get, pending embeddings, search."""

from __future__ import annotations

import math
import random
import threading
import uuid

import pytest

from tests.support import Failure

OWNER = {"owner_id": "22222222-2222-2222-2222-222222222222"}


def _unit_with_cosine(c: float) -> list[float]:
    """A unit vector whose cosine with [1, 0, 0, 0] is exactly c (up to float4)."""
    return [c, math.sqrt(1 - c * c), 0.0, 0.0]


def _save(service, org, facts, ns=OWNER, threshold=None):
    return service.rows(
        "SELECT ord, id IS NOT NULL, duplicate_of, round(similarity::numeric, 4)::float8 "
        "FROM memory.save_facts(%s, %s, %s, %s) ORDER BY ord",
        org,
        facts,
        ns,
        threshold,
    )


def test_dedupe_threshold_is_inclusive(dims4, org):
    base = dims4.value(
        "SELECT memory.save_fact(%s, 'base fact', %s::real[], %s)", org, [1, 0, 0, 0], OWNER
    )
    below = _save(dims4, org, [{"content": "just below", "embedding": _unit_with_cosine(0.9199)}])
    assert below[0][:3] == (1, True, None)
    dims4.rows(
        "SELECT memory.forget(organization_id, id) FROM memory.facts WHERE content = 'just below'"
    )
    at = _save(dims4, org, [{"content": "at the threshold", "embedding": _unit_with_cosine(0.92)}])
    assert at == [(1, False, base, pytest.approx(0.92, abs=1e-4))]
    # The per-call threshold overrides the setting.
    assert _save(
        dims4, org, [{"content": "x", "embedding": _unit_with_cosine(0.95)}], threshold=0.99
    )[0][1]


def test_duplicates_within_one_batch_and_by_text(dims4, org):
    rows = _save(
        dims4,
        org,
        [
            {"content": "Works in Lisbon", "embedding": [0, 1, 0, 0]},
            {"content": "Lisbon office", "embedding": [0, 0.999, 0.01, 0]},
            {"content": "  works   in LISBON ", "embedding": [0, 0, 1, 0]},
            {"content": "Pending one"},
            {"content": "pending ONE"},
        ],
    )
    first_id = dims4.value(
        "SELECT id FROM memory.facts WHERE content = 'Works in Lisbon' AND forgotten_at IS NULL"
    )
    pending_id = dims4.value("SELECT id FROM memory.facts WHERE content = 'Pending one'")
    assert rows == [
        (1, True, None, None),
        (2, False, first_id, pytest.approx(0.9999, abs=1e-3)),
        (3, False, first_id, 1),
        (4, True, None, None),
        (5, False, pending_id, 1),
    ]


def test_concurrent_savers_store_each_fact_once(dims4, as_, org):
    facts = [
        {"content": f"fact number {i}", "embedding": [math.cos(i / 10), math.sin(i / 10), i % 2, 1]}
        for i in range(50)
    ]
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def save() -> None:
        worker = as_("")
        try:
            barrier.wait()
            worker.rows("SELECT * FROM memory.save_facts(%s, %s, %s, 0.999)", org, facts, OWNER)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=save) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = dims4.rows(
        "SELECT content, count(*) FROM memory.facts GROUP BY content ORDER BY content"
    )
    assert sorted(stored) == sorted((f["content"], 1) for f in facts)


def test_forget_edit_get(dims4, org, member):
    old = dims4.value(
        "SELECT memory.save_fact(%s, 'Lives in Porto', %s::real[], %s)", org, [1, 0, 0, 0], OWNER
    )
    new = dims4.value(
        "SELECT memory.save_fact(%s, 'Lives in Lisbon', %s::real[], %s)", org, [0, 1, 0, 0], OWNER
    )
    dims4.rows("SELECT memory.forget(%s, %s, %s)", org, old, new)
    got = dims4.value("SELECT memory.get_fact(%s, %s)", org, old)
    assert {
        k: got[k] for k in ("content", "version", "superseded_by", "embedding_pending", "ns")
    } == {
        "content": "Lives in Porto",
        "version": 1,
        "superseded_by": str(new),
        "embedding_pending": False,
        "ns": {"scope": "user", "owner_id": OWNER["owner_id"]},
    }
    assert got["forgotten_at"] is not None
    # A forgotten fact is never found and never a duplicate.
    assert _save(dims4, org, [{"content": "Porto again", "embedding": [1, 0, 0, 0]}])[0][1] is True
    assert dims4.fails("SELECT memory.forget(%s, %s, %s)", org, new, old) == Failure(
        "22023", "MEMORY_INVALID", f"superseded_by {old} is not a live fact of the same namespace"
    )
    assert dims4.value("SELECT memory.edit_fact(%s, %s, 'Lives in Lisbon, Alfama')", org, new) == 2
    edited = dims4.value("SELECT memory.get_fact(%s, %s)", org, new)
    assert (edited["content"], edited["version"], edited["embedding_pending"]) == (
        "Lives in Lisbon, Alfama",
        2,
        True,
    )
    missing = uuid.uuid4()
    assert dims4.fails("SELECT memory.get_fact(%s, %s)", org, missing) == Failure(
        "P0002", "MEMORY_NOT_FOUND", f"fact {missing} does not exist"
    )
    # Another user (an org admin too) is told the fact does not exist.
    _, admin = member("memory.read", "memory.manage")
    for query in (
        "SELECT memory.get_fact(%s, %s)",
        "SELECT memory.forget(%s, %s)",
        "SELECT memory.edit_fact(%s, %s, 'x')",
    ):
        assert admin.fails(query, org, new) == Failure(
            "P0002", "MEMORY_NOT_FOUND", f"fact {new} does not exist"
        )


def test_pending_pipeline(dims4, as_, org):
    ids = [
        dims4.value("SELECT memory.save_fact(%s, %s, NULL, %s)", org, f"pending {i}", OWNER)
        for i in range(6)
    ]
    first = as_("").rows("SELECT id, kind, content, content_hash FROM memory.pending_embeddings(4)")
    second = as_("").rows(
        "SELECT id, kind, content, content_hash FROM memory.pending_embeddings(4)"
    )
    assert len(first) == 4 and len(second) == 2
    assert {r[0] for r in first}.isdisjoint({r[0] for r in second})
    assert {r[0] for r in first} | {r[0] for r in second} == set(ids)
    assert {r[1] for r in first} == {"fact"}
    # A fact edited while its batch is embedded stays pending.
    edited = first[0][0]
    dims4.value("SELECT memory.edit_fact(%s, %s, 'changed meanwhile')", org, edited)
    vectors = [[1, 0, 0, 0]] * 4
    written = dims4.value(
        "SELECT memory.set_memory_embeddings(%s, %s, %s, 'test-model')",
        [r[0] for r in first],
        [r[3] for r in first],
        vectors,
    )
    assert written == 3
    assert (
        dims4.value(
            "SELECT (memory.get_fact(%s, %s) ->> 'embedding_pending')::boolean", org, edited
        )
        is True
    )
    # The edit cleared the lease: the new text is offered at once.
    again = dims4.rows("SELECT id, content FROM memory.pending_embeddings(10)")
    assert again == [(edited, "changed meanwhile")]


BAD_BATCHES = [
    (
        [[1, 0, 0, 0]],
        2,
        "expected one vector and one content hash per id: 2 ids, 2 hashes, 1 vectors",
    ),
    ([[1, 0, 0, 0], [1, 0, 0]], 2, "vectors of mixed lengths in one batch"),
    ([[1, 0, 0], [1, 0, 0]], 2, "embedding has 3 dimensions, expected 4"),
    ([[1, 0, 0, 0], [1, 0, 0, "NaN"]], 2, "embedding elements must be finite float4 numbers"),
    ([[1, 0, 0, 0], [1, 0, 0, "Infinity"]], 2, "embedding elements must be finite float4 numbers"),
    ([[1, 0, 0, 0], [1, 0, 0, 1e39]], 2, "embedding elements must be finite float4 numbers"),
    ([[1, 0, 0, 0], "oops"], 2, "an embedding must be a JSON array of numbers"),
    # A number written as a string is not a number, even one real[] input would read.
    ([[1, 0, 0, 0], [1, 0, 0, "0.5"]], 2, "embedding elements must be finite float4 numbers"),
    ([[1, 0, 0, 0], [1, 0, 0, [0.5]]], 2, "embedding elements must be finite float4 numbers"),
    ([[1, 0, 0, 0], [1, 0, 0, None]], 2, "embedding elements must be finite float4 numbers"),
    ([[1, 0, 0, 0], [1, 0, 0, 1e-50]], 2, "embedding elements must be finite float4 numbers"),
    ([[], []], 2, "embedding has 0 dimensions, expected 4"),
]


@pytest.mark.parametrize(("vectors", "count", "message"), BAD_BATCHES)
def test_set_memory_embeddings_refuses_bad_batches(dims4, org, vectors, count, message):
    ids = [
        dims4.value("SELECT memory.save_fact(%s, %s, NULL, %s)", org, f"p{i}", OWNER)
        for i in range(count)
    ]
    hashes = dims4.rows("SELECT content_hash FROM memory.pending_embeddings(10) ORDER BY content")
    assert dims4.fails(
        "SELECT memory.set_memory_embeddings(%s, %s, %s)", ids, [h[0] for h in hashes], vectors
    ) == Failure("22023", "EMBEDDING_INVALID", message)
    assert dims4.value("SELECT count(*) FROM memory.facts WHERE embedding IS NOT NULL") == 0


def test_search_hybrid_and_text_only(dims4, org, member):
    _save(
        dims4,
        org,
        [
            {"content": "Works in the Lisbon office", "embedding": [1, 0, 0, 0]},
            {"content": "Likes green tea", "embedding": [0, 1, 0, 0]},
            {"content": "Has a dog named Rex", "embedding": [0, 0, 1, 0]},
        ],
    )
    hits = dims4.rows(
        "SELECT content, round(similarity::numeric, 3)::float8 FROM memory.search_facts(%s, 'where do they work', %s::real[], %s, 2)",
        org,
        [0.9, 0.1, 0.0, 0.0],
        OWNER,
    )
    assert hits[0] == ("Works in the Lisbon office", pytest.approx(0.994, abs=1e-3))
    assert len(hits) == 2
    text_only = dims4.rows(
        "SELECT content, similarity FROM memory.search_facts(%s, 'what dog do they have', NULL, %s)",
        org,
        OWNER,
    )
    assert text_only == [("Has a dog named Rex", None)]
    # Another user of the organization finds nothing of it.
    _, other = member("memory.read", "memory.manage")
    assert other.rows("SELECT * FROM memory.search_facts(%s, 'dog', NULL)", org) == []


def test_search_restores_callers_hnsw_settings(dims4, org):
    conn = dims4.conn
    conn.execute("SET hnsw.iterative_scan = off")
    conn.execute("SET hnsw.ef_search = 77")
    conn.execute(
        "SELECT * FROM memory.search_facts(%s, 'x', '{1,0,0,0}'::real[], %s::jsonb)",
        (org, '{"owner_id": "22222222-2222-2222-2222-222222222222"}'),
    )
    assert conn.execute("SHOW hnsw.iterative_scan").fetchone() == ("off",)
    assert conn.execute("SHOW hnsw.ef_search").fetchone() == ("77",)
    failed = dims4.fails(
        "SELECT * FROM memory.search_facts(%s, 'x', '{1,0}'::real[], %s)", org, OWNER
    )
    assert failed == Failure("22023", "EMBEDDING_INVALID", "embedding has 2 dimensions, expected 4")
    assert conn.execute("SHOW hnsw.iterative_scan").fetchone() == ("off",)
    assert conn.execute("SHOW hnsw.ef_search").fetchone() == ("77",)


def test_search_over_several_namespaces_and_never_forgotten(dims4, org):
    agent = {"scope": "agent", "agent_id": "planner", **OWNER}
    mine = dims4.value(
        "SELECT memory.save_fact(%s, 'User likes hiking', '{1,0,0,0}'::real[], %s)", org, OWNER
    )
    theirs = dims4.value(
        "SELECT memory.save_fact(%s, 'Agent plans hiking trips', '{0.9,0.1,0,0}'::real[], %s)",
        org,
        agent,
    )
    both = dims4.rows(
        "SELECT id, ns FROM memory.search_facts(%s, 'hiking', '{1,0,0,0}'::real[], %s) ORDER BY content",
        org,
        [OWNER, agent],
    )
    assert both == [
        (theirs, {"scope": "agent", "agent_id": "planner", "owner_id": OWNER["owner_id"]}),
        (mine, {"scope": "user", "owner_id": OWNER["owner_id"]}),
    ]
    dims4.rows("SELECT memory.forget(%s, %s)", org, mine)
    assert dims4.rows(
        "SELECT id FROM memory.search_facts(%s, 'hiking', '{1,0,0,0}'::real[], %s)",
        org,
        [OWNER, agent],
    ) == [(theirs,)]
    assert (
        dims4.rows("SELECT id FROM memory.search_facts(%s, 'likes hiking', NULL, %s)", org, OWNER)
        == []
    )


def test_text_search_config_change_rederives(dims4, org):
    dims4.value("SELECT memory.save_fact(%s, 'The cats were running', NULL, %s)", org, OWNER)
    # english stems "running" to "run"; simple keeps the word as written.
    assert dims4.rows(
        "SELECT content FROM memory.search_facts(%s, 'run', NULL, %s)", org, OWNER
    ) == [("The cats were running",)]
    dims4.value("""SELECT memory.configure('text_search_config', '"simple"')""")
    assert (
        dims4.rows("SELECT content FROM memory.search_facts(%s, 'run', NULL, %s)", org, OWNER) == []
    )
    assert dims4.rows(
        "SELECT content FROM memory.search_facts(%s, 'running', NULL, %s)", org, OWNER
    ) == [("The cats were running",)]


@pytest.mark.parametrize(
    ("query", "args", "failure"),
    [
        (
            "SELECT memory.configure_embeddings(%s, %s)",
            (0, "vector"),
            "embedding dimensions must be between 1 and 2000 for vector",
        ),
        (
            "SELECT memory.configure_embeddings(%s, %s)",
            (2001, "vector"),
            "embedding dimensions must be between 1 and 2000 for vector",
        ),
        (
            "SELECT memory.configure_embeddings(%s, %s)",
            (4001, "halfvec"),
            "embedding dimensions must be between 1 and 4000 for halfvec",
        ),
        (
            "SELECT memory.configure_embeddings(%s, %s)",
            (8, "sparsevec"),
            "embedding type must be vector or halfvec",
        ),
        (
            "SELECT * FROM memory.save_facts(%s, %s, %s)",
            ("ORG", {"content": "x"}, OWNER),
            "facts must be a JSON array of at most 1000 facts",
        ),
        (
            "SELECT * FROM memory.save_facts(%s, %s, %s)",
            ("ORG", [{"text": "x"}], OWNER),
            'each fact must be an object with a "content" string',
        ),
        (
            "SELECT * FROM memory.save_facts(%s, %s, %s)",
            ("ORG", [{"content": "  "}], OWNER),
            "a fact needs non-empty content",
        ),
        (
            "SELECT * FROM memory.save_facts(%s, %s, %s, 1.5)",
            ("ORG", [{"content": "x"}], OWNER),
            "threshold must be in (0, 1]",
        ),
        (
            "SELECT * FROM memory.search_facts(%s, 'x', NULL, %s, 0)",
            ("ORG", OWNER),
            "k must be between 1 and 1000",
        ),
        (
            "SELECT * FROM memory.search_facts(%s, 'x', NULL, %s, 5, %s)",
            ("ORG", OWNER, {"rrf": 1}),
            "unknown search option 'rrf'",
        ),
        (
            "SELECT * FROM memory.search_facts(%s, 'x', NULL, %s, 5, %s)",
            ("ORG", OWNER, {"rrf_k": -1}),
            "search option rrf_k must be 0 or a number between 0.000001 and 1000000",
        ),
        (
            "SELECT * FROM memory.search_facts(%s, 'x', NULL, %s)",
            ("ORG", []),
            "ns must name between 1 and 32 namespaces",
        ),
    ],
)
def test_archival_refuses_malformed_input(dims4, org, query, args, failure):
    before = dims4.rows("SELECT count(*) FROM memory.facts")
    args = tuple(org if a == "ORG" else a for a in args)
    assert dims4.fails(query, *args) == Failure("22023", "MEMORY_INVALID", failure)
    assert dims4.rows("SELECT count(*) FROM memory.facts") == before


def test_a_bad_fact_in_a_batch_saves_nothing(dims4, org):
    batch = [
        {"content": "fine", "embedding": [1, 0, 0, 0]},
        {"content": "bad", "embedding": [1, 0]},
    ]
    assert dims4.fails("SELECT * FROM memory.save_facts(%s, %s, %s)", org, batch, OWNER) == Failure(
        "22023", "EMBEDDING_INVALID", "embedding has 2 dimensions, expected 4"
    )
    assert dims4.rows("SELECT count(*) FROM memory.facts") == [(0,)]


def test_source_and_model_are_kept_as_given(dims4, org):
    source = {"chat": "c1", "turn": None, "tags": [None, "x"]}
    fact = dims4.value(
        "SELECT memory.save_fact(%s, 'kept source', '{1,0,0,0}'::real[], %s, %s)",
        org,
        OWNER,
        source,
    )
    assert dims4.rows("SELECT source, embedding_model FROM memory.facts WHERE id = %s", fact) == [
        (source, None)
    ]
    batch = [{"content": "with model", "embedding": [0, 1, 0, 0], "embedding_model": "mini"}]
    dims4.rows("SELECT * FROM memory.save_facts(%s, %s, %s)", org, batch, OWNER)
    assert dims4.rows("SELECT embedding_model FROM memory.facts WHERE content = 'with model'") == [
        ("mini",)
    ]


LONG = " ".join(f"the river floods the market square in spring, year {i}" for i in range(12))


@pytest.mark.parametrize(("dimensions", "kind"), [(None, None), (384, "vector"), (768, "halfvec")])
def test_an_embedding_stays_in_its_row_past_the_toast_threshold(service, org, dimensions, kind):
    """With the type's default storage (EXTERNAL) a row past ~2 KB moves its vector
    to the TOAST table, and every exact pass and distance then fetches it from there."""
    if dimensions:
        service.value("SELECT memory.configure_embeddings(%s, %s)", dimensions, kind)
    width = dimensions or 1536
    assert service.rows(
        "SELECT attrelid::regclass::text, attstorage FROM pg_attribute"
        " WHERE attrelid IN ('memory.facts'::regclass, 'memory.messages'::regclass)"
        " AND attname = 'embedding' ORDER BY 1"
    ) == [("memory.facts", "m"), ("memory.messages", "m")]
    rng = random.Random(7)  # a real embedding's floats: nothing for compression to find
    vector = [rng.gauss(0, 1) for _ in range(width)]
    service.value("SELECT memory.save_fact(%s, %s, %s::real[], %s)", org, LONG, vector, OWNER)
    service.value(
        "SELECT memory.index_message(%s, %s, %s::real[])",
        org,
        {"id": "m1", "chat_id": "c1", "role": "user", "content": LONG, **OWNER},
        vector,
    )
    assert len(LONG) > 600
    inline = "pg_column_toast_chunk_id(embedding) IS NULL, pg_column_size(embedding)"
    stored = service.rows(
        f"SELECT {inline} FROM memory.facts UNION ALL SELECT {inline} FROM memory.messages"
    )
    assert stored == [(True, 8 + (2 if kind == "halfvec" else 4) * width)] * 2


def test_configure_embeddings_retypes_where_set_storage_is_refused(service, db):
    """Citus refuses ALTER COLUMN SET STORAGE on a distributed table (feature_not_supported)
    and propagates the retype. Here an event trigger refuses the same way every ALTER TABLE
    but the one right after a DROP INDEX: each table's retype, not its SET STORAGE."""
    db.execute(
        """
        CREATE FUNCTION public.refuse_set_storage() RETURNS event_trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF tg_tag = 'DROP INDEX' THEN
                PERFORM set_config('test.retype_next', 'yes', false);
            ELSIF current_setting('test.retype_next', true) = 'yes' THEN
                PERFORM set_config('test.retype_next', 'no', false);
            ELSE
                RAISE EXCEPTION 'alter table command is currently unsupported'
                    USING ERRCODE = 'feature_not_supported';
            END IF;
        END $$;
        CREATE EVENT TRIGGER refuse_set_storage ON ddl_command_start
            WHEN TAG IN ('ALTER TABLE', 'DROP INDEX') EXECUTE FUNCTION public.refuse_set_storage();
        """
    )
    db.commit()
    assert service.value("SELECT memory.configure_embeddings(8)") == {
        "dimensions": 8,
        "type": "vector",
    }
    assert service.rows(
        "SELECT attrelid::regclass::text, format_type(atttypid, atttypmod), attstorage"
        " FROM pg_attribute WHERE attname = 'embedding'"
        " AND attrelid IN ('memory.facts'::regclass, 'memory.messages'::regclass) ORDER BY 1"
    ) == [("memory.facts", "vector(8)", "e"), ("memory.messages", "vector(8)", "e")]
    assert service.rows(
        "SELECT indexrelid::regclass::text FROM pg_index"
        " WHERE right(indexrelid::regclass::text, 14) = '_embedding_idx' ORDER BY 1"
    ) == [("memory.facts_embedding_idx",), ("memory.messages_embedding_idx",)]
