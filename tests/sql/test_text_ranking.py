"""The text list ranked by the rarity of the query's words (search option text_ranking 'idf')."""

from __future__ import annotations

import math
import uuid

import pytest

from tests.support import Failure

# "weather" is in three of the four facts, "Caroline" in one.
FACTS = [
    "Weather report: the weather today, weather tomorrow, weather all week",
    "The weather was cold, the weather was wet, the weather was grey",
    "We talked about the weather and then the weather again",
    "Caroline adopted a dog",
]
QUERY = "Caroline weather"
SEARCH = "SELECT content FROM memory.search_facts(%s, %s, NULL, '{}', 10, %s)"


def _idf(rows: int, holding: int) -> float:
    return math.log(1 + (rows - holding + 0.5) / (holding + 0.5))


@pytest.fixture
def alice(member, org):
    _, user = member("memory.read", "memory.write")
    for content in FACTS:
        user.value("SELECT memory.save_fact(%s, %s)", org, content)
    return user


def test_ts_rank_cd_is_the_default_and_idf_puts_the_rare_word_first(alice, org):
    by_density = [FACTS[0], FACTS[1], FACTS[2], FACTS[3]]
    assert alice.rows(SEARCH, org, QUERY, {}) == [(c,) for c in by_density]
    assert alice.rows(SEARCH, org, QUERY, {"text_ranking": "ts_rank_cd"}) == [
        (c,) for c in by_density
    ]
    # The rare word outweighs the common one; equal sums keep ts_rank_cd's order.
    by_rarity = [FACTS[3], FACTS[0], FACTS[1], FACTS[2]]
    assert alice.rows(SEARCH, org, QUERY, {"text_ranking": "idf"}) == [(c,) for c in by_rarity]
    # The text_rank column stays ts_rank_cd whichever list order was asked for.
    ranks = "SELECT content, text_rank FROM memory.search_facts(%s, %s, NULL, '{}', 10, %s)"
    assert dict(alice.rows(ranks, org, QUERY, {})) == dict(
        alice.rows(ranks, org, QUERY, {"text_ranking": "idf"})
    )


def test_idf_scores_count_the_searched_namespaces_only(alice, member, org, service):
    # Bob's 40 facts naming Caroline leave "Caroline" rare in Alice's namespace.
    _, bob = member("memory.read", "memory.write")
    for n in range(40):
        bob.value("SELECT memory.save_fact(%s, %s)", org, f"Caroline called at {n} o'clock")
    alice_ns = service.value(
        "SELECT namespace_id FROM memory.facts WHERE organization_id = %s AND content = %s",
        org,
        FACTS[3],
    )
    scores = service.rows(
        "SELECT f.content, round(t.score::numeric, 4)::float8 "
        "FROM memory._text_ranked_in('fact', %s, ARRAY[%s::uuid], NULL, "
        "memory._any_lexeme(%s), memory._any_lexeme(%s), 10, NULL, memory._lexemes(%s), "
        "jsonb_build_object('', memory._live_rows('fact', %s, ARRAY[%s::uuid]))) t "
        "JOIN memory.facts f ON f.organization_id = %s AND f.id = t.id",
        org,
        alice_ns,
        QUERY,
        QUERY,
        QUERY,
        org,
        alice_ns,
        org,
    )
    weather, caroline = round(_idf(4, 3), 4), round(_idf(4, 1), 4)
    assert scores == [
        (FACTS[3], caroline),
        (FACTS[0], weather),
        (FACTS[1], weather),
        (FACTS[2], weather),
    ]
    order = [FACTS[3], FACTS[0], FACTS[1], FACTS[2]]
    assert alice.rows(SEARCH, org, QUERY, {"text_ranking": "idf"}) == [(c,) for c in order]
    # Bob finds his own facts only.
    bobs = bob.rows(SEARCH, org, QUERY, {"text_ranking": "idf"})
    assert len(bobs) == 10 and all(c.startswith("Caroline called") for (c,) in bobs)


def test_idf_ranking_is_isolated_like_every_search(alice, member, org):
    # An org admin and a user of another organization find none of Alice's facts.
    _, admin = member("memory.read", "memory.manage")
    assert admin.rows(SEARCH, org, QUERY, {"text_ranking": "idf"}) == []
    _, stranger = member("memory.read", "memory.write", organization=uuid.uuid4())
    assert stranger.fails(SEARCH, org, QUERY, {"text_ranking": "idf"}) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
    )


def test_idf_option_in_search_messages_and_recall_context(service, member, org):
    user_id, user = member("memory.read", "memory.write")
    for n, content in enumerate(FACTS):
        message = {
            "id": f"m{n}",
            "chat_id": "chat-1",
            "owner_id": str(user_id),
            "role": "user",
            "content": content,
        }
        service.value("SELECT memory.index_message(%s, %s)", org, message)
    hits = user.rows(
        "SELECT content FROM memory.search_messages(%s, %s, NULL, NULL, 10, %s)",
        org,
        QUERY,
        {"text_ranking": "idf"},
    )
    assert hits == [(FACTS[3],), (FACTS[0],), (FACTS[1],), (FACTS[2],)]
    recalled = user.rows(
        "SELECT kind, content FROM memory.recall_context(%s, %s, NULL, '{}', %s) "
        "WHERE kind = 'message'",
        org,
        QUERY,
        {"text_ranking": "idf", "facts": 0, "messages": 1},
    )
    assert recalled == [("message", FACTS[3])]


@pytest.mark.parametrize("value", ["bm25", "", "IDF", 1, None, ["idf"]], ids=lambda v: repr(v))
def test_text_ranking_refuses_other_values(alice, org, value):
    failed = alice.fails(SEARCH, org, QUERY, {"text_ranking": value})
    assert failed == Failure(
        "22023", "MEMORY_INVALID", 'search option text_ranking must be "ts_rank_cd" or "idf"'
    )


def test_a_query_counts_its_first_64_distinct_words(alice, org, service):
    """A query of thousands of words would make the text ranking cost seconds a row:
    the query's first 64 distinct lexemes count, in their order, the rest are ignored."""
    words = [f"w{i:03d}" for i in range(200)]
    query = " ".join(words[:10] + words[:70] + words[70:])  # repeats count once
    assert service.value("SELECT memory._lexemes(%s)", query) == words[:64]
    assert service.value("SELECT memory._lexemes(%s)", "") == []
    alice.value("SELECT memory.save_fact(%s, 'Saw w063 at the market')", org)
    alice.value("SELECT memory.save_fact(%s, 'Saw w064 at the market')", org)
    for ranking in ("ts_rank_cd", "idf"):
        found = alice.rows(SEARCH, org, query, {"text_ranking": ranking})
        assert found == [("Saw w063 at the market",)], ranking
