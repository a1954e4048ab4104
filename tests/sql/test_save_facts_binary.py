"""memory.save_facts with its vectors as `embeddings` (a 2-D real[], one row per fact):
the same rows as the JSON path, its own errors, the JSON path's errors, and access."""

from __future__ import annotations

import math
import uuid

import pytest
from psycopg.types.json import Jsonb

from tests.support import Failure

OWNER = {"owner_id": "22222222-2222-2222-2222-222222222222"}
BINARY = "SELECT * FROM memory.save_facts(%s, %s, %s, NULL, %s::real[])"


def _unit(*xs: float) -> list[float]:
    norm = math.sqrt(sum(x * x for x in xs))
    return [x / norm for x in xs]


def _turn(degrees: float) -> list[float]:
    """The unit vector `degrees` away from [1, 0, 0, 0], towards [0, 0, 0, 1]."""
    return [math.cos(math.radians(degrees)), 0.0, 0.0, math.sin(math.radians(degrees))]


def _literal(rows: list[list[float]]) -> str:
    """A real[] literal: '{{1.0,0.0},{…}}' (repr: the JSON path reads the same digits)."""
    return "{" + ",".join("{" + ",".join(map(repr, row)) + "}" for row in rows) + "}"


# (content, vector) in order; the comments say what each must be, at threshold 0.92.
PORTO = ("Lives in Porto", [0.0, 1.0, 0.0, 0.0])  # saved before the batch
BATCH = [
    ("Works in Lisbon", [1.0, 0.0, 0.0, 0.0]),  # 1 saved
    ("Lisbon office", _unit(0.999, math.sqrt(1 - 0.999**2), 0, 0)),  # 2 ~ 1 (0.999)
    ("  works   in LISBON ", [0.0, 0.0, 1.0, 0.0]),  # 3 = 1 by text
    ("Porto home", _unit(0, 0.95, math.sqrt(1 - 0.95**2), 0)),  # 4 ~ PORTO (0.95)
    ("LIVES IN PORTO", [0.0, 0.0, 0.0, 1.0]),  # 5 = PORTO by text
    ("Drinks tea", [0.0, 0.0, 0.6, 0.8]),  # 6 saved (0.6 and 0.8 only with refused 3, 5)
    ("Tea drinker", _unit(0, 0.05, 0.6, 0.8)),  # 7 ~ 6
    ("Near a refused one", _unit(0, 0.0447, 0.999, 0)),  # 8 saved: 0.999 only with refused 3
    ("Sunny balcony", _turn(30)),  # 9 saved (0.866 with 1)
    ("Balcony in the sun", _turn(18)),  # 10 ~ 9 (0.978), not 1 (0.951): the most similar wins
]
EXPECTED = [
    (1, True, None, None),
    (2, False, "Works in Lisbon", 0.999),
    (3, False, "Works in Lisbon", 1.0),
    (4, False, "Lives in Porto", 0.95),
    (5, False, "Lives in Porto", 1.0),
    (6, True, None, None),
    (7, False, "Drinks tea", 0.9988),
    (8, True, None, None),
    (9, True, None, None),
    (10, False, "Sunny balcony", 0.9781),
]


def _shown(service, rows) -> list[tuple]:
    """(ord, saved, the content duplicated, similarity) of save_facts' rows."""
    content = dict(service.rows("SELECT id, content FROM memory.facts"))
    return [(o, i is not None, content.get(d), s) for o, i, d, s in rows]


def _stored(service, org, ns) -> list[tuple]:
    return service.rows(
        "SELECT f.content, f.embedding::text, f.embedding_model, f.source::text FROM memory.facts f"
        " WHERE f.namespace_id = (memory._resolve(%s, %s, 'read')).id ORDER BY f.content",
        org,
        ns,
    )


@pytest.mark.parametrize("exact_rows", ["2000", "0"], ids=["exact", "index"])
def test_binary_batch_saves_what_the_json_batch_saves(dims4, org, exact_rows):
    # exact_search_max_rows 0: every check before the batch goes through the HNSW index.
    dims4.value("SELECT memory.configure('exact_search_max_rows', %s)", exact_rows)
    ns_json, ns_binary = OWNER, {"owner_id": "33333333-3333-3333-3333-333333333333"}
    for ns in (ns_json, ns_binary):
        dims4.value("SELECT memory.save_fact(%s, %s, %s::real[], %s)", org, PORTO[0], PORTO[1], ns)
    items = [{"content": c, "embedding_model": "m"} for c, _ in BATCH]
    items[0]["source"] = {"chat": "c1"}
    as_json = dims4.rows(
        "SELECT * FROM memory.save_facts(%s, %s, %s)",
        org,
        [{**item, "embedding": v} for item, (_, v) in zip(items, BATCH, strict=True)],
        ns_json,
    )
    as_binary = dims4.rows(BINARY, org, items, ns_binary, _literal([v for _, v in BATCH]))
    assert _shown(dims4, as_binary) == _shown(dims4, as_json)  # the same floats, exactly
    assert [
        (o, saved, dup, s if s is None else round(s, 4))
        for o, saved, dup, s in _shown(dims4, as_binary)
    ] == EXPECTED
    assert _stored(dims4, org, ns_binary) == _stored(dims4, org, ns_json)
    assert ("Works in Lisbon", "[1,0,0,0]", "m", '{"chat": "c1"}') in _stored(dims4, org, ns_json)
    # Against the facts saved before, the same batch again is duplicates only.
    again = dims4.rows(BINARY, org, items, ns_binary, _literal([v for _, v in BATCH]))
    assert [i for _, i, _, _ in again] == [None] * len(BATCH)
    assert dims4.value("SELECT count(*) FROM memory.facts") == 2 * (1 + 4)


def _fails(service, org, facts, embeddings, threshold=None) -> Failure:
    before = service.value("SELECT count(*) FROM memory.facts")
    failure = service.fails(
        "SELECT * FROM memory.save_facts(%s, %s, %s, %s, %s::real[])",
        org,
        facts,
        OWNER,
        threshold,
        embeddings,
    )
    assert service.value("SELECT count(*) FROM memory.facts") == before
    return failure


def test_binary_batch_refuses_bad_input(dims4, org):
    one, two = [{"content": "a"}], [{"content": "a"}, {"content": "b"}]
    row = [1.0, 0.0, 0.0, 0.0]
    invalid = {
        "embeddings must be a two-dimensional array, one row per fact": [
            (one, "{1,0,0,0}"),
            (one, "{{{1,0,0,0}}}"),
        ],
        "embeddings must have one row per fact: 1 rows for 2 facts": [(two, _literal([row]))],
        "embeddings must have one row per fact: 0 rows for 1 facts": [(one, "{}")],
        "embeddings must have one row per fact: 1 rows for 0 facts": [([], _literal([row]))],
        "embedding has 3 dimensions, expected 4": [(one, "{{1,0,0}}")],
        "embedding elements must be finite float4 numbers": [
            (two, "{{1,0,0,0},{1,0,0,NaN}}"),
            (two, "{{1,0,0,0},{Infinity,0,0,0}}"),
            (two, "{{1,0,0,0},{-Infinity,0,0,0}}"),
            (two, "{{1,0,0,0},{1,NULL,0,0}}"),
        ],
    }
    for message, cases in invalid.items():
        for facts, embeddings in cases:
            assert _fails(dims4, org, facts, embeddings) == Failure(
                "22023", "EMBEDDING_INVALID", message
            ), (facts, embeddings)
    carrying = 'a fact must not carry an "embedding" when embeddings are given'
    for embedding in ([1, 0, 0, 0], None):
        facts = [{"content": "a"}, {"content": "b", "embedding": embedding}]
        assert _fails(dims4, org, facts, _literal([row, row])) == Failure(
            "22023", "MEMORY_INVALID", carrying
        )
    # The JSON path's own refusals hold here too.
    many = [{"content": f"fact {i}"} for i in range(1001)]
    for facts, embeddings, threshold, message in [
        (many, _literal([row] * 1001), None, "facts must be a JSON array of at most 1000 facts"),
        (
            [{"text": "a"}],
            _literal([row]),
            None,
            'each fact must be an object with a "content" string',
        ),
        ([{"content": " "}], _literal([row]), None, "a fact needs non-empty content"),
        (one, _literal([row]), 1.5, "threshold must be in (0, 1]"),
    ]:
        assert _fails(dims4, org, facts, embeddings, threshold) == Failure(
            "22023", "MEMORY_INVALID", message
        )
    big = [{"content": "a", "source": {"blob": "x" * 16384}}]
    assert _fails(dims4, org, big, _literal([row])).hint == "MEMORY_TOO_LARGE"
    # Nothing at all is a batch of nothing.
    assert dims4.rows(BINARY, org, [], OWNER, "{}") == []


def test_binary_path_writes_and_dedupes_only_the_callers_namespace(dims4, member, org):
    alice_id, alice = member()
    _, bob = member()
    _, admin = member("memory.read", "memory.manage")
    other_org = uuid.uuid4()
    _, stranger = member(organization=other_org)
    fact, vector = [{"content": "Works in Lisbon"}], _literal([[1.0, 0.0, 0.0, 0.0]])

    def save(who, org, ns=None):
        return who.attempt(BINARY, org, fact, ns or {}, vector)

    first = save(alice, org)
    assert [(o, d) for o, _, d, _ in first] == [(1, None)]
    # Everyone else saves the same fact into a namespace of their own, never a duplicate
    # of alice's; nobody but the service writes into (or dedupes against) hers.
    for who, where, ns in [
        (bob, org, None),
        (admin, org, None),
        (admin, org, {"scope": "organization"}),
        (stranger, other_org, None),
    ]:
        rows = save(who, where, ns)
        assert [(o, i is not None, d) for o, i, d, _ in rows] == [(1, True, None)]
    owner_id = Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may pass owner_id"
    )
    for who in (bob, admin, stranger):
        assert save(who, org, {"owner_id": str(alice_id)}) == owner_id
    assert save(stranger, org) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
    )
    assert save(bob, org, {"scope": "organization"}) == Failure(
        "42501",
        "MEMORY_FORBIDDEN",
        "not permitted: changing organization memory needs the manage permission",
    )
    # The service, acting for alice, finds her fact.
    assert [d for _, _, d, _ in save(dims4, org, {"owner_id": str(alice_id)})] == [first[0][1]]
    assert dims4.rows(
        "SELECT content FROM memory.facts WHERE namespace_id = (memory._resolve(%s, %s, 'read')).id",
        org,
        {"owner_id": str(alice_id)},
    ) == [("Works in Lisbon",)]


# Five stored facts, pairwise below the threshold (cosine 0 or 0.5).
STORED = [
    [1.0, 0.0, 0.0, 0.0],
    [0.0, 1.0, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0],
    [0.0, 0.0, 0.0, 1.0],
    [0.5] * 4,
]


def _near(i: int) -> list[float]:
    """A vector at cosine > 0.99 to STORED[i % 5], below 0.6 to the other four."""
    v = list(STORED[i % 5])
    v[(i + 1) % 4] += 0.05 + 0.001 * i
    return _unit(*v)


def _save_counting_index_scans(service, org, n: int) -> tuple[list, int]:
    """save_facts of n facts, each near one stored fact, as the rows (ord, duplicate_of's
    content) and the scans of the table's HNSW index in its transaction."""
    items = [{"content": f"near {i}"} for i in range(n)]
    # The counts are the backend's own since its last report, which is never mid-transaction.
    scans = "SELECT pg_stat_get_xact_numscans('memory.facts_embedding_idx'::regclass)"
    with service.conn.transaction(), service.conn.cursor() as cur:
        cur.execute("SELECT set_config('request.jwt.claims', %s, true)", (service.claims,))
        before = cur.execute(scans).fetchone()[0]
        cur.execute(
            "SELECT s.ord, f.content FROM memory.save_facts(%s, %s, %s, NULL, %s::real[]) s"
            " LEFT JOIN memory.facts f ON f.id = s.duplicate_of ORDER BY s.ord",
            (org, Jsonb(items), Jsonb(OWNER), _literal([_near(i) for i in range(n)])),
        )
        rows = cur.fetchall()
        return rows, cur.execute(scans).fetchone()[0] - before


@pytest.mark.parametrize("n, exact", [(1, False), (2, False), (3, True), (12, True)])
def test_a_batch_ranks_exactly_up_to_ten_times_the_setting(dims4, org, n, exact):
    # A batch reads its namespace once, so it ranks exactly while the namespace holds at
    # most min(n, 10) x exact_search_max_rows live facts: here 2, 4, 6 and 20 against 5.
    dims4.value("SELECT memory.configure('exact_search_max_rows', '2')")
    for i, v in enumerate(STORED):
        dims4.value("SELECT memory.save_fact(%s, %s, %s::real[], %s)", org, f"stored {i}", v, OWNER)
    rows, index_scans = _save_counting_index_scans(dims4, org, n)
    # Either way the same answer: each is a duplicate of the fact it is near.
    assert rows == [(i + 1, f"stored {i % 5}") for i in range(n)]
    assert (index_scans == 0) is exact, index_scans
