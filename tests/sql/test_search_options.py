"""Search options that cut hits (min_similarity, created_after, created_before) and the
index's search depth (ef_search)."""

from __future__ import annotations

import uuid

import pytest
from psycopg.types.json import Jsonb

from tests.support import Failure, user_claims

OWNER_ID = str(uuid.UUID(int=5))
OWNER = {"owner_id": OWNER_ID}
FACTS = "SELECT content FROM memory.search_facts(%s, %s, %s::real[], %s, 10, %s)"
MESSAGES = "SELECT content FROM memory.search_messages(%s, %s, %s::real[], NULL, 10, %s)"


@pytest.fixture
def facts(service, org):
    """Four facts a day apart (1 to 4 May 2025), at known angles to the query [1,0,0,0]."""
    service.value("SELECT memory.configure_embeddings(4)")
    rows = [
        ("Lives in Lisbon", [1, 0, 0, 0], "2025-05-01"),  # similarity 1
        ("Works in Lisbon", [0.8, 0.6, 0.0, 0.0], "2025-05-02"),  # 0.8
        ("Lisbon is sunny", [0, 1, 0, 0], "2025-05-03"),  # 0
        ("Moved away from Lisbon", [-1, 0, 0, 0], "2025-05-04"),  # -1
    ]
    for content, vector, day in rows:
        fact = service.value(
            "SELECT memory.save_fact(%s, %s, %s::real[], %s)", org, content, vector, OWNER
        )
        service.rows(
            "UPDATE memory.facts SET created_at = %s::timestamptz WHERE id = %s", day, fact
        )
    return service


def test_min_similarity_cuts_unrelated_hits(facts, org):
    everything = facts.rows(FACTS, org, "Lisbon", [1, 0, 0, 0], OWNER, {})
    assert len(everything) == 4
    close = facts.rows(FACTS, org, "Lisbon", [1, 0, 0, 0], OWNER, {"min_similarity": 0.5})
    assert sorted(r[0] for r in close) == ["Lives in Lisbon", "Works in Lisbon"]
    # Without a query embedding there is no similarity to cut by.
    text_only = facts.rows(FACTS, org, "Lisbon", None, OWNER, {"min_similarity": 0.5})
    assert len(text_only) == 4


def test_a_fact_without_an_embedding_yet_is_not_cut(facts, org):
    facts.value("SELECT memory.save_fact(%s, 'Lisbon flat pending', NULL, %s)", org, OWNER)
    close = facts.rows(FACTS, org, "Lisbon", [1, 0, 0, 0], OWNER, {"min_similarity": 0.9})
    assert sorted(r[0] for r in close) == ["Lisbon flat pending", "Lives in Lisbon"]


def test_created_after_and_before_bound_both_lists(facts, org):
    window = {"created_after": "2025-05-02", "created_before": "2025-05-04T00:00:00Z"}
    for vector in ([1, 0, 0, 0], None):
        got = facts.rows(FACTS, org, "Lisbon", vector, OWNER, window)
        assert sorted(r[0] for r in got) == ["Lisbon is sunny", "Works in Lisbon"]
    after = facts.rows(FACTS, org, "Lisbon", [1, 0, 0, 0], OWNER, {"created_after": "2025-05-04"})
    assert [r[0] for r in after] == ["Moved away from Lisbon"]


def test_the_options_apply_to_messages_too(service, as_, org):
    service.value("SELECT memory.configure_embeddings(4)")
    for mid, content, vector, day in (
        ("m1", "We met in Porto", [1, 0, 0, 0], "2025-05-01T10:00:00Z"),
        ("m2", "Porto again", [0, 1, 0, 0], "2025-06-01T10:00:00Z"),
    ):
        message = {"id": mid, "chat_id": "c", "owner_id": OWNER_ID, "role": "user"}
        service.value(
            "SELECT memory.index_message(%s, %s, %s::real[])",
            org,
            {**message, "content": content, "created_at": day},
            vector,
        )
    service.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, OWNER_ID)
    me = as_(user_claims(OWNER_ID))
    close = me.rows(MESSAGES, org, "Porto", [1, 0, 0, 0], {"min_similarity": 0.5})
    assert [r[0] for r in close] == ["We met in Porto"]
    later = me.rows(MESSAGES, org, "Porto", None, {"created_after": "2025-05-15"})
    assert [r[0] for r in later] == ["Porto again"]
    assert me.fails(MESSAGES, org, "Porto", None, {"created_before": "soon"}) == Failure(
        "22023", "MEMORY_INVALID", "search option created_before must be a timestamp"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_similarity": 1.5}, "search option min_similarity must be a number from -1 to 1"),
        ({"min_similarity": "high"}, "search option min_similarity must be a number from -1 to 1"),
        ({"created_after": "yesterday"}, "search option created_after must be a timestamp"),
        ({"created_before": 20250501}, "search option created_before must be a timestamp"),
        (
            {"created_after": "2025-06-01", "created_before": "2025-05-01"},
            "search option created_after must not be later than created_before",
        ),
        ({"ef_search": 9}, "search option ef_search must be between 10 and 1000"),
        ({"ef_search": 1001}, "search option ef_search must be between 10 and 1000"),
        ({"ef_search": 40.5}, "search option ef_search must be between 10 and 1000"),
        ({"ef_search": "40"}, "search option ef_search must be between 10 and 1000"),
        ({"ef_search": None}, "search option ef_search must be between 10 and 1000"),
    ],
)
def test_bad_options_are_refused(facts, org, options, message):
    refused = Failure("22023", "MEMORY_INVALID", message)
    for vector in ([1, 0, 0, 0], None):
        assert facts.fails(FACTS, org, "Lisbon", vector, OWNER, options) == refused


def test_min_similarity_with_halfvec_embeddings(service, org):
    service.value("SELECT memory.configure_embeddings(4, 'halfvec')")
    for content, vector in (
        ("Lives in Lisbon", [1.0, 0.0, 0.0, 0.0]),
        ("Lisbon is far", [0.0, 1.0, 0.0, 0.0]),
    ):
        service.value(
            "SELECT memory.save_fact(%s, %s, %s::real[], %s)", org, content, vector, OWNER
        )
    close = service.rows(FACTS, org, "Lisbon", [1, 0, 0, 0], OWNER, {"min_similarity": 0.5})
    assert [r[0] for r in close] == ["Lives in Lisbon"]


def test_ef_search_lasts_for_the_call_only(facts, as_, org):
    """Through the index (exact_search_max_rows 0) at depths 10 and 1000: the default's rows;
    the caller's own hnsw.ef_search is back after each search, in the same transaction."""
    facts.value("SELECT memory.configure('exact_search_max_rows', '0')")
    facts.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, OWNER_ID)
    message = {"id": "m1", "chat_id": "c", "owner_id": OWNER_ID, "role": "user"}
    facts.value(
        "SELECT memory.index_message(%s, %s, %s::real[])",
        org,
        {**message, "content": "Lisbon by train"},
        [1, 0, 0, 0],
    )
    lisbon = ["Lives in Lisbon", "Lisbon is sunny", "Works in Lisbon", "Moved away from Lisbon"]
    searches = [
        (FACTS, [org, "Lisbon", [1, 0, 0, 0], Jsonb({})], lisbon),
        (MESSAGES, [org, "Lisbon", [1, 0, 0, 0]], ["Lisbon by train"]),
        (
            "SELECT content FROM memory.recall_context(%s, %s, %s::real[], '{}', %s)",
            [org, "Lisbon", [1, 0, 0, 0]],
            [*lisbon, "Lisbon by train"],
        ),
    ]
    me = as_(user_claims(OWNER_ID))
    with me.conn.transaction(), me.conn.cursor() as cur:
        cur.execute("SELECT set_config('request.jwt.claims', %s, true)", (me.claims,))
        cur.execute("SET LOCAL hnsw.ef_search = 123")
        for query, params, expected in searches:
            cur.execute(query, [*params, Jsonb({})])
            default = [r[0] for r in cur.fetchall()]  # equal text ranks: their order is by id
            assert sorted(default) == sorted(expected)
            for depth in (10, 1000):
                cur.execute(query, [*params, Jsonb({"ef_search": depth})])
                assert [r[0] for r in cur.fetchall()] == default, (query, depth)
                cur.execute("SELECT current_setting('hnsw.ef_search')")
                assert cur.fetchone() == ("123",)
    assert me.value("SELECT current_setting('hnsw.ef_search')") == "40"  # pgvector's default
    refused = Failure(
        "22023", "MEMORY_INVALID", "search option ef_search must be between 10 and 1000"
    )
    for query, params, _ in searches:
        assert me.fails(query, *params, {"ef_search": 0}) == refused


def test_whole_numbers_written_with_a_fraction_are_integers(facts, as_, org):
    """JSON writers send 100.0 for 100: ef_search, recall_context's counts and integer
    settings take it as the integer, as they take 100."""
    facts.value("SELECT memory.configure('exact_search_max_rows', '0.0')")
    assert facts.value("SELECT memory.setting('exact_search_max_rows')") == 0
    facts.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, OWNER_ID)
    me = as_(user_claims(OWNER_ID))
    by_integer = me.rows(FACTS, org, "Lisbon", [1, 0, 0, 0], {}, {"ef_search": 100})
    assert len(by_integer) == 4
    assert me.rows(FACTS, org, "Lisbon", [1, 0, 0, 0], {}, {"ef_search": 100.0}) == by_integer
    context = "SELECT kind, content FROM memory.recall_context(%s, %s, %s::real[], '{}', %s)"
    two_facts = me.rows(context, org, "Lisbon", [1, 0, 0, 0], {"facts": 2, "messages": 0})
    assert [kind for kind, _ in two_facts] == ["fact", "fact"]
    assert (
        me.rows(context, org, "Lisbon", [1, 0, 0, 0], {"facts": 2.0, "messages": 0.0}) == two_facts
    )
    assert me.fails(FACTS, org, "Lisbon", [1, 0, 0, 0], {}, {"ef_search": 100.5}) == Failure(
        "22023", "MEMORY_INVALID", "search option ef_search must be between 10 and 1000"
    )
