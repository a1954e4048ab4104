"""Large namespaces get an HNSW index of their own (memory.maintain), and searches
use it: which index served a search is read from the statistics of the searching
transaction (pg_stat_get_xact_numscans), the plan from EXPLAIN. No timings here:
bench/search.py measures the speed.

One table of 13,000 facts: a large user of 6,000 (46%), 10 medium users of 600 and
200 tiny users of 5, with exact_search_max_rows 100 (the medium ones go through the
shared index) and namespace_index_min_rows 3,000. The large user also has 4,000
messages, a medium user 600.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

from tests.conftest import _install_memory
from tests.support import Failure, user_claims

DIMS = 32
CENTERS = 16
ORG = uuid.UUID("00000000-0000-4000-8000-0000000000bb")
OTHER_ORG = uuid.UUID("00000000-0000-4000-8000-0000000000bc")
LARGE = uuid.UUID(int=50_000)
MEDIUM = [uuid.UUID(int=51_000 + i) for i in range(10)]
TINY = [uuid.UUID(int=52_000 + i) for i in range(200)]
ADMIN = uuid.UUID(int=53_000)  # memory.manage in ORG
STRANGER = uuid.UUID(int=54_000)  # a user of OTHER_ORG
MIN_ROWS = 3_000


def _vectors(rng: np.random.Generator, centers: np.ndarray, n: int) -> np.ndarray:
    return centers[rng.integers(0, CENTERS, size=n)] + 0.6 * rng.standard_normal((n, DIMS))


@pytest.fixture(scope="module")
def big(pg_server) -> Iterator[dict[str, Any]]:
    name = "memnsidx"
    admin = psycopg.connect(pg_server.server.dsn(), autocommit=True)
    admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.execute(f"CREATE DATABASE {name}")
    dsn = pg_server.server.dsn(name)
    conn = psycopg.connect(dsn, autocommit=True)
    _install_memory(conn)  # as the test databases get it (tests/install_modes.py)
    conn.execute("SELECT memory.configure_embeddings(%s)", (DIMS,))
    conn.execute("SELECT memory.configure('exact_search_max_rows', '100')")
    conn.execute("SELECT memory.configure('namespace_index_min_rows', %s)", (str(MIN_ROWS),))
    register_vector(conn)
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((CENTERS, DIMS)).astype(np.float32)
    layout = [(LARGE, 6_000)] + [(u, 600) for u in MEDIUM] + [(u, 5) for u in TINY]
    for user in [u for u, _ in layout] + [ADMIN]:
        conn.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, user))
    conn.execute("SELECT memory.grant(%s, %s, 'memory.manage')", (ORG, ADMIN))
    conn.execute("SELECT memory.grant(%s, %s, 'memory.read')", (OTHER_ORG, STRANGER))
    conn.execute(
        "INSERT INTO memory.namespaces (organization_id, id, scope, owner_id) "
        "SELECT o, memory._namespace_id(o, 'user', u, NULL), 'user', u "
        "FROM unnest(%s::uuid[], %s::uuid[]) x(o, u) ON CONFLICT DO NOTHING",
        (
            [ORG] * (len(layout) + 1) + [OTHER_ORG],
            [u for u, _ in layout] + [ADMIN, STRANGER],
        ),
    )
    shared_indexes = [
        r[0]
        for r in conn.execute(
            "SELECT pg_get_indexdef(i) FROM unnest(ARRAY['memory.facts_embedding_idx',"
            " 'memory.messages_embedding_idx']::regclass[]) i"
        ).fetchall()
    ]
    conn.execute("DROP INDEX memory.facts_embedding_idx, memory.messages_embedding_idx")
    conn.execute(f"CREATE TEMP TABLE staged (owner uuid, content text, embedding vector({DIMS}))")
    with conn.cursor().copy("COPY staged FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["uuid", "text", "vector"])
        for index, (user, count) in enumerate(layout):
            for n, v in enumerate(_vectors(rng, centers, count).astype(np.float32)):
                copy.write_row((user, f"fact {n} of user {index}", v))
        for n, v in enumerate(_vectors(rng, centers, 2).astype(np.float32)):
            copy.write_row((ADMIN, f"fact {n} of the admin", v))
            copy.write_row((STRANGER, f"fact {n} of the stranger", v))
    conn.execute(
        "INSERT INTO memory.facts (organization_id, namespace_id, content, embedding) "
        "SELECT CASE WHEN owner = %(s)s THEN %(o2)s ELSE %(o)s END,"
        " memory._namespace_id(CASE WHEN owner = %(s)s THEN %(o2)s ELSE %(o)s END, 'user', owner, NULL),"
        " content, embedding FROM staged ORDER BY random()",
        {"o": ORG, "o2": OTHER_ORG, "s": STRANGER},
    )
    messages = [(LARGE, 4_000), (MEDIUM[0], 600)]
    conn.execute("TRUNCATE staged")
    with conn.cursor().copy("COPY staged FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["uuid", "text", "vector"])
        for user, count in messages:
            for n, v in enumerate(_vectors(rng, centers, count).astype(np.float32)):
                copy.write_row((user, f"message {n}", v))
    conn.execute(
        "INSERT INTO memory.messages (organization_id, namespace_id, chat_id, message_id, role, content,"
        " embedding) SELECT %(o)s, memory._namespace_id(%(o)s, 'user', owner, NULL),"
        " 'chat-' || (row_number() OVER () %% 40), 'm' || row_number() OVER (), 'user', content, embedding"
        " FROM staged ORDER BY random()",
        {"o": ORG},
    )
    conn.execute("SET maintenance_work_mem = '256MB'")
    for definition in shared_indexes:
        conn.execute(definition)
    conn.execute("ANALYZE memory.facts")
    conn.execute("ANALYZE memory.messages")
    created = conn.execute(
        "SELECT action, kind, live_rows FROM memory.maintain() ORDER BY 2, 1, 3"
    ).fetchall()
    yield {"dsn": dsn, "conn": conn, "centers": centers, "created": created}
    conn.close()
    admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    admin.close()


def _index(conn: psycopg.Connection, kind: str, user: uuid.UUID, org: uuid.UUID = ORG) -> str:
    return conn.execute(
        "SELECT memory._namespace_index(%s, %s, memory._namespace_id(%s, 'user', %s, NULL))",
        (kind, org, org, user),
    ).fetchone()[0]


def _pair(conn: psycopg.Connection, kind: str, user: uuid.UUID, org: uuid.UUID = ORG) -> list[str]:
    """A namespace's own HNSW index and the text index beside it."""
    own = _index(conn, kind, user, org)
    return [own, f"{own}_text"]


def _measured(conn: psycopg.Connection, user: uuid.UUID) -> tuple[uuid.UUID, dict[str, Any]]:
    """A user's fact namespace and what maintain() measured of its own index."""
    return conn.execute(
        "SELECT n.id, memory._own_index_about('fact', %s, n.id)"
        " FROM (SELECT memory._namespace_id(%s, 'user', %s, NULL) AS id) n",
        (ORG, ORG, user),
    ).fetchone()


def _own_indexes(conn: psycopg.Connection) -> list[tuple[str, int]]:
    """(index name, its oid) of every namespace's own index (HNSW and text)."""
    return conn.execute(
        "SELECT c.relname, c.oid::int FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
        "WHERE i.indrelid IN ('memory.facts'::regclass, 'memory.messages'::regclass) "
        "AND c.relname ~ '^(facts|messages)_ns_' ORDER BY 1"
    ).fetchall()


def _as_user(dsn: str, user: uuid.UUID, sql: str, params: tuple):
    """A user's call, and the index scans its transaction made, by index name."""
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        conn.execute(
            "SELECT set_config('request.jwt.claims', %s, true)", (json.dumps(user_claims(user)),)
        )
        rows = conn.execute(sql, params).fetchall()
        scans = dict(
            conn.execute(
                "SELECT c.relname::text, pg_stat_get_xact_numscans(c.oid) FROM pg_class c "
                "JOIN pg_index i ON i.indexrelid = c.oid "
                "WHERE i.indrelid IN ('memory.facts'::regclass, 'memory.messages'::regclass) "
                "AND pg_stat_get_xact_numscans(c.oid) > 0"
            ).fetchall()
        )
    return rows, scans


FACTS = "SELECT id FROM memory.search_facts(%s, '', %s::real[], '{}', %s)"
FACTS_DEEP = (
    "SELECT id FROM memory.search_facts(%s, '', %s::real[], '{}', %s, '{\"ef_search\": 1000}')"
)
MESSAGES = "SELECT id, chat_id FROM memory.search_messages(%s, '', %s::real[], %s, %s)"


def _exact_facts(conn, user: uuid.UUID, query: np.ndarray, k: int, org: uuid.UUID = ORG) -> list:
    return [
        r[0]
        for r in conn.execute(
            "SELECT f.id FROM memory.facts f WHERE f.organization_id = %s AND f.forgotten_at IS NULL"
            " AND f.namespace_id IN (memory._namespace_id(%s, 'user', %s, NULL),"
            "                        memory._namespace_id(%s, 'organization', NULL, NULL))"
            " ORDER BY (f.embedding <=> %s::real[]::vector) + 0, f.id LIMIT %s",
            (org, org, user, org, query.tolist(), k),
        ).fetchall()
    ]


def test_maintain_built_the_large_namespace_its_own_indexes(big):
    # The medium and large users' facts also joined the shared index (past exact_search_max_rows).
    assert big["created"] == [
        ("created", "fact", 6_000),
        *[("joined", "fact", 600)] * 10,
        ("joined", "fact", 6_000),
        ("created", "message", 4_000),
    ]
    conn = big["conn"]
    names = [name for name, _ in _own_indexes(conn)]
    assert names == sorted(_pair(conn, "fact", LARGE) + _pair(conn, "message", LARGE))
    definition = conn.execute(
        "SELECT pg_get_indexdef(%s::regclass)", (f"memory.{_index(conn, 'fact', LARGE)}",)
    ).fetchone()[0]
    # maintain measured it: its size and the ef_search it needs, in its comment.
    large_ns, about = _measured(conn, LARGE)
    assert about["rows"] == 6_000 and about["namespace_id"] == str(large_ns)
    assert about["ef_search"] in (
        40,
        60,
        80,
        100,
        120,
        150,
        200,
        250,
        300,
        400,
        500,
        600,
        700,
        800,
        1000,
    )
    # ... and how far its probes' 10th nearest rows lay: the largest such distance.
    tenths = [
        conn.execute(
            "SELECT (embedding <=> %s::vector)::float8 FROM memory.facts WHERE organization_id = %s"
            " AND namespace_id = %s AND forgotten_at IS NULL AND id <> %s"
            " ORDER BY (embedding <=> %s::vector) + 0, id OFFSET 9 LIMIT 1",
            (vector, ORG, large_ns, probe, vector),
        ).fetchone()[0]
        for probe, vector in zip(
            *conn.execute(
                "SELECT ids, vectors::text[] FROM memory._probes('fact', %s, %s, 100)",
                (ORG, large_ns),
            ).fetchone(),
            strict=True,
        )
    ]
    assert len(tenths) == 100 and about["far_distance"] == pytest.approx(max(tenths), rel=1e-9)
    assert definition.endswith(
        f"USING hnsw (COALESCE(embedding, embedding) vector_cosine_ops) WHERE ((organization_id = '{ORG}'::uuid)"
        f" AND (namespace_id = '{large_ns}'::uuid) AND (forgotten_at IS NULL))"
    )
    # Beside it, a text index under the same predicate.
    text_definitions = [
        conn.execute("SELECT pg_get_indexdef(%s::regclass)", (f"memory.{name}",)).fetchone()[0]
        for name in (_pair(conn, "fact", LARGE)[1], _pair(conn, "message", LARGE)[1])
    ]
    assert text_definitions == [
        f"CREATE INDEX {_pair(conn, 'fact', LARGE)[1]} ON memory.facts USING gin (search_text)"
        f" WHERE ((organization_id = '{ORG}'::uuid) AND (namespace_id = '{large_ns}'::uuid)"
        " AND (forgotten_at IS NULL))",
        f"CREATE INDEX {_pair(conn, 'message', LARGE)[1]} ON memory.messages USING gin (search_text)"
        f" WHERE ((organization_id = '{ORG}'::uuid) AND (namespace_id = '{large_ns}'::uuid))",
    ]


@pytest.mark.parametrize(
    ("kind", "user", "probes"),
    [("fact", LARGE, 20), ("message", LARGE, 20), ("fact", MEDIUM[0], 20), ("fact", TINY[0], 20)],
    ids=["large-facts", "large-messages", "medium-without-own-index", "tiny-fewer-than-10"],
)
def test_calibration_finds_the_exact_neighbours_in_one_pass(big, kind, user, probes):
    # maintain's calibration takes each probe's 10 exact neighbours from one pass
    # bounded by what the own index finds; they equal one exact scan per probe.
    conn = big["conn"]
    ns = conn.execute("SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, user)).fetchone()[
        0
    ]
    table, live = ("facts", " AND forgotten_at IS NULL") if kind == "fact" else ("messages", "")
    ids, vectors = conn.execute(
        "SELECT ids, vectors::text[] FROM memory._probes(%s, %s, %s, %s)", (kind, ORG, ns, probes)
    ).fetchone()
    assert ids == [
        r[0]
        for r in conn.execute(
            f"SELECT id FROM memory.{table} WHERE organization_id = %s AND namespace_id = %s{live}"
            " ORDER BY md5(id::text) LIMIT %s",
            (ORG, ns, probes),
        )
    ]
    truth = conn.execute(
        "SELECT memory._exact_neighbours(%s, %s, %s, %s::uuid[], %s::vector[])",
        (kind, ORG, ns, ids, vectors),
    ).fetchone()[0]
    expected = []
    for probe, vector in zip(ids, vectors, strict=True):
        near = [
            r[0]
            for r in conn.execute(
                f"SELECT id FROM memory.{table} WHERE organization_id = %s AND namespace_id = %s{live}"
                " AND id <> %s ORDER BY (embedding <=> %s::vector) + 0, id LIMIT 10",
                (ORG, ns, probe, vector),
            )
        ]
        expected += near + [None] * (10 - len(near))
    assert len(ids) == (5 if user in TINY else probes)
    assert truth == expected
    assert expected.count(None) == (5 * 6 if user in TINY else 0)


def test_a_large_namespace_is_searched_through_its_own_index(big):
    conn, dsn = big["conn"], big["dsn"]
    query = _vectors(np.random.default_rng(1), big["centers"], 1)[0].astype(np.float32)
    own = _index(conn, "fact", LARGE)

    # The planner picks it for the query a search of that namespace makes (which
    # orders by COALESCE(embedding, embedding), the index's expression), and only for it:
    # the shared index's query shape cannot use it.
    def plan(order_by: str) -> str:
        return "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT f.id FROM memory.facts f WHERE f.organization_id = %s"
                " AND f.namespace_id = memory._namespace_id(%s, 'user', %s, NULL)"
                f" AND f.forgotten_at IS NULL ORDER BY {order_by} <=> %s LIMIT 40",
                (ORG, ORG, LARGE, query),
            ).fetchall()
        )

    assert f"Index Scan using {own} on facts f" in plan("COALESCE(f.embedding, f.embedding)")
    assert own not in plan("f.embedding")
    # And search_facts uses it: one scan of the own index, none of the shared one.
    rows, scans = _as_user(dsn, LARGE, FACTS, (ORG, query.tolist(), 10))
    assert len(rows) == 10
    assert scans.get(own) == 1 and "facts_embedding_idx" not in scans, scans
    # A medium namespace is not (the planner may walk the shared index or sort its
    # btree range: 600 rows); a tiny one is ranked exactly.
    _, scans = _as_user(dsn, MEDIUM[0], FACTS, (ORG, query.tolist(), 10))
    assert not any(name.startswith("facts_ns_") for name in scans), scans
    _, scans = _as_user(dsn, TINY[0], FACTS, (ORG, query.tolist(), 10))
    assert not any(name.startswith(("facts_embedding", "facts_ns_")) for name in scans), scans
    # Messages too.
    own_messages = _index(conn, "message", LARGE)
    rows, scans = _as_user(dsn, LARGE, MESSAGES, (ORG, query.tolist(), "chat-1", 10))
    assert len(rows) == 10 and all(chat != "chat-1" for _, chat in rows)
    assert scans.get(own_messages) == 1 and "messages_embedding_idx" not in scans, scans
    _, scans = _as_user(dsn, MEDIUM[0], MESSAGES, (ORG, query.tolist(), None, 10))
    assert not any(name.startswith("messages_ns_") for name in scans), scans


def test_a_large_namespace_finds_its_text_candidates_through_its_own_text_index(big):
    conn, dsn = big["conn"], big["dsn"]
    large_ns = conn.execute(
        "SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, LARGE)
    ).fetchone()[0]
    text_index = _pair(conn, "fact", LARGE)[1]
    # The planner picks it for the query memory._text_candidates_own makes.
    plan = "\n".join(
        r[0]
        for r in conn.execute(
            "EXPLAIN SELECT f.id FROM memory.facts f WHERE f.organization_id = %s"
            " AND f.namespace_id = %s AND f.forgotten_at IS NULL"
            " AND f.search_text @@ memory._any_lexeme('17 170')",
            (ORG, large_ns),
        ).fetchall()
    )
    assert f"Bitmap Index Scan on {text_index}" in plan, plan
    # The candidates are the namespace's live rows holding a lexeme, as through the shared index.
    candidates = (
        "SELECT array_agg(c.id ORDER BY c.id) FROM memory.{0}('fact', %s, {1}, NULL,"
        " memory._any_lexeme('17 170'), NULL) c"
    )
    own = conn.execute(candidates.format("_text_candidates_own", "%s"), (ORG, large_ns))
    shared = conn.execute(
        candidates.format("_text_candidates_many", "ARRAY[%s]::uuid[]"), (ORG, large_ns)
    )
    own_ids, shared_ids = own.fetchone()[0], shared.fetchone()[0]
    assert own_ids == shared_ids and len(own_ids) > 0
    # A hybrid search of the namespace scans it, and not the shared text index.
    query = _vectors(np.random.default_rng(5), big["centers"], 1)[0].astype(np.float32)
    hybrid = "SELECT id FROM memory.search_facts(%s, 'fact 17', %s::real[], '{}', %s)"
    rows, scans = _as_user(dsn, LARGE, hybrid, (ORG, query.tolist(), 10))
    assert len(rows) == 10
    assert scans.get(text_index) == 1 and "facts_search_idx" not in scans, scans
    # A medium namespace has none: no own index is read for it, and its candidates
    # come through the shared text index (a plan made once per session).
    rows, scans = _as_user(dsn, MEDIUM[0], hybrid, (ORG, query.tolist(), 10))
    assert len(rows) == 10 and not any(name.startswith("facts_ns_") for name in scans), scans
    assert scans.get("facts_search_idx") == 1, scans
    messages = "SELECT id FROM memory.search_messages(%s, 'fact 17', %s::real[], NULL, %s)"
    rows, scans = _as_user(dsn, MEDIUM[0], messages, (ORG, query.tolist(), 10))
    assert len(rows) == 10 and not any(name.startswith("messages_ns_") for name in scans), scans
    assert scans.get("messages_search_idx") == 1, scans


def test_maintain_builds_a_missing_text_index_beside_a_kept_own_index(big):
    # One built before text indexes were, or whose text index was dropped.
    conn = big["conn"]
    own, text_index = _pair(conn, "fact", LARGE)
    large_ns = conn.execute(
        "SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, LARGE)
    ).fetchone()[0]
    before = _own_indexes(conn)
    conn.execute(f"DROP INDEX memory.{text_index}")
    assert conn.execute(
        "SELECT action, kind, organization_id, namespace_id, live_rows, index_name"
        " FROM memory.maintain()"
    ).fetchall() == [("created", "fact", ORG, large_ns, 6_000, text_index)]
    after = _own_indexes(conn)
    assert [name for name, _ in after] == [name for name, _ in before]
    assert dict(after)[own] == dict(before)[own]  # the HNSW index untouched
    assert conn.execute("SELECT * FROM memory.maintain()").fetchall() == []


def test_a_lone_vector_list_is_read_k_deep(big):
    # Fused alone, the vector list's order is the answer's: a vector-only search reads
    # k rows of the own index, where a hybrid search ranks its vector list 40 deep.
    conn, dsn = big["conn"], big["dsn"]
    query = _vectors(np.random.default_rng(3), big["centers"], 1)[0].astype(np.float32)
    own = _index(conn, "fact", LARGE)
    # Each row updated since the index was built has a dead version beside it in the
    # index (one graph element, two heap tuples), counted as read too: vacuumed first.
    conn.execute("VACUUM memory.facts")
    hybrid = "SELECT id, score FROM memory.search_facts(%s, 'note', %s::real[], '{}', %s)"
    vector_only = "SELECT id, score FROM memory.search_facts(%s, '', %s::real[], '{}', %s)"
    read = {}
    for name, sql_text in (("vector-only", vector_only), ("hybrid", hybrid)):
        with psycopg.connect(dsn) as user_conn:
            user_conn.execute(
                "SELECT set_config('request.jwt.claims', %s, true)",
                (json.dumps(user_claims(LARGE)),),
            )
            rows = user_conn.execute(sql_text, (ORG, query.tolist(), 10)).fetchall()
            read[name] = user_conn.execute(
                "SELECT pg_stat_get_xact_tuples_returned(%s::regclass)", (f"memory.{own}",)
            ).fetchone()[0]
        if name == "vector-only":
            exact = _exact_facts(conn, LARGE, query, 10)
            assert [r[0] for r in rows] == exact
            assert [r[1] for r in rows] == pytest.approx([1 / (60 + rank) for rank in range(1, 11)])
    assert read == {"vector-only": 10, "hybrid": 40}


def test_a_walk_ending_farther_than_the_calibration_saw_walks_again_deeper(big):
    # maintain() keeps how far its probes' 10th nearest rows lay (far_distance). A
    # query whose walk ends past that (its 10th row farther) is one the calibrated
    # depth may strand among the wrong rows: the own index is walked again, 4 times
    # as deep. A query among the namespace's rows is walked once.
    conn, dsn = big["conn"], big["dsn"]
    own = _index(conn, "fact", LARGE)
    # Dead versions left by the tests before would cut a walk short of k rows (then
    # a relaxed scan follows, a scan of its own): vacuumed first.
    conn.execute("VACUUM memory.facts")
    near_query = conn.execute(
        "SELECT embedding::real[] FROM memory.facts WHERE organization_id = %s"
        " AND namespace_id = memory._namespace_id(%s, 'user', %s, NULL) ORDER BY id LIMIT 1",
        (ORG, ORG, LARGE),
    ).fetchone()[0]
    far_query = (-big["centers"].mean(axis=0)).tolist()  # away from every cluster
    _, scans = _as_user(dsn, LARGE, FACTS, (ORG, near_query, 10))
    assert scans.get(own) == 1, scans
    rows, scans = _as_user(dsn, LARGE, FACTS, (ORG, far_query, 10))
    assert scans.get(own) == 2 and len(rows) == 10, scans
    # A caller's own ef_search is its choice: walked once, at that depth.
    with_ef = "SELECT id FROM memory.search_facts(%s, '', %s::real[], '{}', %s, %s)"
    _, scans = _as_user(dsn, LARGE, with_ef, (ORG, far_query, 10, Jsonb({"ef_search": 40})))
    assert scans.get(own) == 1, scans


def test_the_deeper_walk_is_the_one_a_caller_would_ask_for(big):
    # With the index's calibrated depth set to 10 and far_distance to 0, every search
    # walks twice and answers what a walk at 40 (the option ef_search) answers; with
    # far_distance 2 (no cosine distance is larger), once, as at 10. The shallow
    # walk misses rows the deeper one finds, so the second walk is what lifts recall.
    conn, dsn = big["conn"], big["dsn"]
    own = _index(conn, "fact", LARGE)
    _, about = _measured(conn, LARGE)
    conn.execute("VACUUM memory.facts")  # as above: no walk cut short by dead versions
    with_ef = "SELECT id FROM memory.search_facts(%s, '', %s::real[], '{}', %s, %s)"
    rng = np.random.default_rng(23)
    queries = [v.astype(np.float32).tolist() for v in _vectors(rng, big["centers"], 30)]
    answers: dict[str, list[list]] = {}
    try:
        for far, ef, expected_scans in (
            (0.0, None, 2),
            (2.0, None, 1),
            (None, 40, 1),
            (None, 10, 1),
        ):
            conn.execute(
                sql.SQL("COMMENT ON INDEX {} IS {}").format(
                    sql.Identifier("memory", own),
                    sql.Literal(json.dumps({**about, "ef_search": 10, "far_distance": far})),
                )
            )
            label = f"far {far}" if ef is None else f"ef {ef}"
            answers[label] = []
            for q in queries:
                options = Jsonb({} if ef is None else {"ef_search": ef})
                rows, scans = _as_user(dsn, LARGE, with_ef, (ORG, q, 10, options))
                assert scans.get(own) == expected_scans, (label, scans)
                answers[label].append([r[0] for r in rows])
    finally:
        conn.execute(
            sql.SQL("COMMENT ON INDEX {} IS {}").format(
                sql.Identifier("memory", own), sql.Literal(json.dumps(about))
            )
        )
    assert answers["far 0.0"] == answers["ef 40"]
    assert answers["far 2.0"] == answers["ef 10"]
    exact = [_exact_facts(conn, LARGE, np.array(q), 10) for q in queries]

    def found(label: str) -> int:
        return sum(len(set(a) & set(e)) for a, e in zip(answers[label], exact, strict=True))

    assert found("far 0.0") > found("far 2.0"), (found("far 0.0"), found("far 2.0"))


def test_an_own_index_scan_short_of_k_live_rows_scans_again_relaxed(big):
    # The own index's first scan runs with the iterative scan off (one scan: the test
    # above). Where forgotten facts fill its nearest candidates it comes back short of
    # k, and a second scan with the relaxed iterative scan walks on until k are found.
    conn = big["conn"]
    query = big["centers"][3]
    own = _index(conn, "fact", LARGE)
    with conn.transaction(force_rollback=True):
        forgotten = {
            r[0]
            for r in conn.execute(
                "UPDATE memory.facts SET forgotten_at = now() WHERE id IN ("
                " SELECT f.id FROM memory.facts f WHERE f.organization_id = %s"
                " AND f.namespace_id = memory._namespace_id(%s, 'user', %s, NULL)"
                " ORDER BY (f.embedding <=> %s::real[]::vector) + 0 LIMIT 1500) RETURNING id",
                (ORG, ORG, LARGE, query.tolist()),
            ).fetchall()
        }
        conn.execute(
            "SELECT set_config('request.jwt.claims', %s, true)", (json.dumps(user_claims(LARGE)),)
        )
        before = conn.execute("SELECT pg_stat_get_xact_numscans(%s::regclass)", (f"memory.{own}",))
        before = before.fetchone()[0]
        rows = conn.execute(FACTS, (ORG, query.tolist(), 10)).fetchall()
        after = conn.execute("SELECT pg_stat_get_xact_numscans(%s::regclass)", (f"memory.{own}",))
        assert after.fetchone()[0] - before == 2
        exact = _exact_facts(conn, LARGE, query, 10)
        conn.execute("SELECT set_config('request.jwt.claims', '', true)")
    assert len(forgotten) == 1500 and len(rows) == 10
    assert not forgotten & {r[0] for r in rows}
    assert len({r[0] for r in rows} & set(exact)) >= 9, (rows, exact)


@pytest.mark.parametrize(
    ("users", "k"),
    [(TINY[:20], 5), (TINY[:20], 10), (MEDIUM, 10), ([LARGE], 10), ([LARGE], 50)],
    ids=["tiny-5", "tiny-10", "medium", "large", "large-k50"],
)
def test_recall_and_exactly_k_rows_in_every_namespace_size(big, users, k):
    conn, dsn = big["conn"], big["dsn"]
    rng = np.random.default_rng(17)
    recalls = []
    for n in range(100):  # one query's miss moves the mean by 0.01, not 0.03
        user = users[n % len(users)]
        query = _vectors(rng, big["centers"], 1)[0].astype(np.float32)
        rows, _ = _as_user(dsn, user, FACTS, (ORG, query.tolist(), k))
        exact = _exact_facts(conn, user, query, k)
        assert len(rows) == len(exact) == min(k, 5 if user in TINY else 10_000)
        recalls.append(len({r[0] for r in rows} & set(exact)) / len(exact))
    assert np.mean(recalls) >= (1.0 if users[0] in TINY else 0.97), recalls


def test_searches_through_an_own_index_stay_the_callers(big):
    # The own index is a path to the large user's rows only; everyone else's search
    # answers from their own namespaces, whatever index serves it.
    conn, dsn = big["conn"], big["dsn"]
    query = _vectors(np.random.default_rng(5), big["centers"], 1)[0].astype(np.float32)
    large = set(_exact_facts(conn, LARGE, query, 10_000))
    for user, org in ((MEDIUM[1], ORG), (ADMIN, ORG), (STRANGER, OTHER_ORG)):
        rows, _ = _as_user(dsn, user, FACTS, (org, query.tolist(), 10))
        assert rows and not large & {r[0] for r in rows}, user
        assert [r[0] for r in rows] == _exact_facts(conn, user, query, 10, org)[: len(rows)]
    rows, _ = _as_user(dsn, ADMIN, MESSAGES, (ORG, query.tolist(), None, 10))
    assert rows == []


def test_maintain_is_idempotent(big):
    conn = big["conn"]
    before = _own_indexes(conn)
    assert conn.execute("SELECT * FROM memory.maintain()").fetchall() == []
    assert _own_indexes(conn) == before


def test_maintain_is_the_services_alone(big):
    conn, dsn = big["conn"], big["dsn"]
    before = _own_indexes(conn)
    conn.execute("SELECT memory.configure('namespace_index_min_rows', '0')")
    try:
        for user in (LARGE, ADMIN, STRANGER):  # a user, an org admin, another org's user
            with pytest.raises(psycopg.Error) as err:
                _as_user(dsn, user, "SELECT * FROM memory.maintain()", ())
            assert Failure.of(err.value) == Failure(
                "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may do this"
            ), user
        assert _own_indexes(conn) == before
    finally:
        conn.execute("SELECT memory.configure('namespace_index_min_rows', %s)", (str(MIN_ROWS),))


def test_maintain_drops_an_index_a_namespace_shrank_out_of_and_builds_it_again(big):
    conn = big["conn"]
    large_ns = conn.execute(
        "SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, LARGE)
    ).fetchone()[0]
    try:
        conn.execute("SELECT memory.configure('namespace_index_min_rows', '0')")
        dropped = conn.execute(
            "SELECT action, kind, organization_id, namespace_id, live_rows, index_name"
            " FROM memory.maintain() ORDER BY kind"
        ).fetchall()
        assert dropped == [
            ("dropped", "fact", ORG, large_ns, 6_000, _index(conn, "fact", LARGE)),
            ("dropped", "message", ORG, large_ns, 4_000, _index(conn, "message", LARGE)),
        ]
        assert _own_indexes(conn) == []
        # Between half the line and the line: none is built (and one would be kept).
        conn.execute("SELECT memory.configure('namespace_index_min_rows', '7000')")
        assert conn.execute("SELECT * FROM memory.maintain()").fetchall() == []
    finally:
        conn.execute("SELECT memory.configure('namespace_index_min_rows', %s)", (str(MIN_ROWS),))
        created = conn.execute("SELECT action, kind, live_rows FROM memory.maintain() ORDER BY 2")
        assert created.fetchall() == [("created", "fact", 6_000), ("created", "message", 4_000)]
    # At 10,000 the facts (6,000) are over half the line and keep theirs; the
    # messages (4,000) are not.
    conn.execute("SELECT memory.configure('namespace_index_min_rows', '10000')")
    try:
        assert conn.execute("SELECT action, kind, live_rows FROM memory.maintain()").fetchall() == [
            ("dropped", "message", 4_000)
        ]
        assert [name for name, _ in _own_indexes(conn)] == _pair(conn, "fact", LARGE)
    finally:
        conn.execute("SELECT memory.configure('namespace_index_min_rows', %s)", (str(MIN_ROWS),))
        assert conn.execute("SELECT action, kind FROM memory.maintain()").fetchall() == [
            ("created", "message")
        ]


def test_maintain_is_safe_under_concurrent_writes(big):
    # A writer saves facts into the large namespace while maintain rebuilds its
    # index: both finish, and every fact saved is found through the new index.
    conn, dsn = big["conn"], big["dsn"]
    conn.execute("SELECT memory.configure('namespace_index_min_rows', '0')")
    conn.execute("SELECT * FROM memory.maintain()")
    conn.execute("SELECT memory.configure('namespace_index_min_rows', %s)", (str(MIN_ROWS),))
    rng = np.random.default_rng(23)
    vectors = [v.astype(np.float32) for v in _vectors(rng, big["centers"], 40)]
    saved: list[tuple[uuid.UUID, np.ndarray]] = []
    errors: list[BaseException] = []
    started = threading.Event()

    def write() -> None:
        try:
            for n, v in enumerate(vectors):
                rows, _ = _as_user(
                    dsn,
                    LARGE,
                    "SELECT memory.save_fact(%s, %s, %s::real[])",
                    (ORG, f"written during maintain {n}", v.tolist()),
                )
                saved.append((rows[0][0], v))
                started.set()
        except BaseException as err:  # reported below
            errors.append(err)
            started.set()

    writer = threading.Thread(target=write)
    writer.start()
    started.wait(30)
    with psycopg.connect(dsn, autocommit=True) as maintainer:
        created = maintainer.execute("SELECT action, kind FROM memory.maintain() ORDER BY 2")
        assert created.fetchall() == [("created", "fact"), ("created", "message")]
    writer.join(60)
    assert errors == [] and len(saved) == 40
    own = _index(conn, "fact", LARGE)
    # Searched deep: at the depth maintain calibrates (98% of the 10 nearest) one
    # row in 300 to 1,000 misses itself, which failed this test one run in ten;
    # at 400 every fact of the namespace found itself. Asked here: does the new
    # index hold every fact written during its build?
    for fact_id, v in saved:
        rows, scans = _as_user(dsn, LARGE, FACTS_DEEP, (ORG, v.tolist(), 10))
        assert scans.get(own) == 1 and "facts_embedding_idx" not in scans, scans
        assert (fact_id,) in rows


def test_configure_embeddings_drops_own_indexes_and_maintain_builds_them_again(
    service, member, org
):
    service.value("SELECT memory.configure_embeddings(4)")
    service.value("SELECT memory.configure('namespace_index_min_rows', '30')")
    _, user = member()
    facts = [{"content": f"fact {n}", "embedding": [1.0, n, 0.5, -n]} for n in range(40)]
    user.rows("SELECT count(*) FROM memory.save_facts(%s, %s, '{}', 1.0)", org, facts)
    assert [r[0] for r in service.rows("SELECT action FROM memory.maintain()")] == ["created"]
    service.value("SELECT memory.configure_embeddings(8, 'halfvec')")
    names = "SELECT relname FROM pg_class WHERE relname LIKE 'facts\\_ns\\_%%' ORDER BY 1"
    assert service.rows(names) == []
    assert service.rows("SELECT action, kind, live_rows FROM memory.maintain()") == [
        ("created", "fact", 40)
    ]
    definitions = service.rows(
        f"SELECT pg_get_indexdef(oid) FROM pg_class WHERE relname IN ({names}) ORDER BY relname"
    )
    assert "USING hnsw (COALESCE(embedding, embedding) halfvec_cosine_ops)" in definitions[0][0]
    assert "USING gin (search_text)" in definitions[1][0] and len(definitions) == 2
    found = user.rows("SELECT content FROM memory.search_facts(%s, 'fact', NULL, '{}', 3)", org)
    assert len(found) == 3


def test_maintain_drops_the_own_index_of_an_erased_user(service, member, org):
    # erase_user takes no lock on the whole table: the index it leaves empty goes
    # with the next maintain(), and the lexeme counts go with the namespace.
    service.value("SELECT memory.configure_embeddings(4)")
    service.value("SELECT memory.configure('namespace_index_min_rows', '30')")
    user_id, user = member()
    facts = [{"content": f"fact {n}", "embedding": [1.0, n, 0.5, -n]} for n in range(40)]
    user.rows("SELECT count(*) FROM memory.save_facts(%s, %s, '{}', 1.0)", org, facts)
    for n in range(40):
        message = {"id": f"m{n}", "chat_id": "chat", "owner_id": str(user_id), "role": "user"}
        message["content"] = f"message {n}"
        assert service.value(
            "SELECT memory.index_message(%s, %s, %s::real[])",
            org,
            message,
            [1.0, float(n), 0.5, -float(n)],
        )
    built = service.rows(
        "SELECT action, kind, live_rows, index_name FROM memory.maintain() ORDER BY 2"
    )
    assert [r[:3] for r in built] == [("created", "fact", 40), ("created", "message", 40)]
    lexemes = "SELECT kind, count(*) FROM memory.namespace_lexemes GROUP BY 1 ORDER BY 1"
    assert service.rows(lexemes) == [("fact", 1), ("message", 1)]  # "fact", "messag"
    erased = json.loads(service.value("SELECT memory.erase_user(%s, %s)::text", org, user_id))
    assert (erased["facts"], erased["messages"]) == (40, 40)
    assert service.rows(lexemes) == []
    assert service.rows(
        "SELECT action, kind, live_rows, index_name FROM memory.maintain() ORDER BY 2"
    ) == [("dropped", kind, 0, name) for _, kind, _, name in built]
    names = [name for *_, name in built]
    names += [f"{name}_text" for name in names]
    assert service.rows("SELECT relname FROM pg_class WHERE relname = ANY (%s)", names) == []
    assert service.rows("SELECT * FROM memory.maintain()") == []


def test_maintain_counts_the_lexemes_of_large_namespaces(big):
    conn = big["conn"]
    counts = conn.execute(
        "SELECT kind, lexeme, rows, total FROM memory.namespace_lexemes"
        " WHERE lexeme IN ('fact', 'messag', '0', '17') ORDER BY 1, 2"
    ).fetchall()
    # "fact N of user 0": all 6,000 facts hold "fact" and "0"; "17" only one (not
    # counted). The count is as of the index's build: a test here writes facts
    # "written during maintain N" (with a "0" in 4 of them) while it rebuilds.
    (_, _, zeros, total), *rest = counts
    assert 6_000 <= total <= 6_040 and 6_000 <= zeros <= 6_004
    assert rest == [("fact", "fact", 6_000, total), ("message", "messag", 4_000, 4_000)]


TEXT = "SELECT content FROM memory.search_facts(%s, %s, NULL, '{}', 10)"


def test_text_list_of_a_large_namespace_holds_the_rows_of_its_rarer_lexemes(big):
    # "fact" is in all 6,000 facts of the large namespace: there only the rows
    # holding "17" are ranked. A medium namespace ranks every row sharing a word.
    dsn = big["dsn"]
    rows, _ = _as_user(dsn, LARGE, TEXT, (ORG, "fact 17"))
    assert rows[0] == ("fact 17 of user 0",)  # then the fact written as 17th while maintain ran
    assert set(rows[1:]) <= {("written during maintain 17",)}
    rows, _ = _as_user(dsn, MEDIUM[0], TEXT, (ORG, "fact 17"))
    assert len(rows) == 10 and rows[0] == ("fact 17 of user 1",)
    # Only common lexemes: the rarest of them is ranked alone, still k rows.
    rows, _ = _as_user(dsn, LARGE, TEXT, (ORG, "fact user"))
    assert len(rows) == 10 and all(content.startswith("fact ") for (content,) in rows)
    # Hybrid: the vector list fills in what the text list leaves out.
    query = _vectors(np.random.default_rng(9), big["centers"], 1)[0].astype(np.float32)
    rows, _ = _as_user(
        dsn,
        LARGE,
        "SELECT content FROM memory.search_facts(%s, 'fact 17', %s::real[], '{}', 10)",
        (ORG, query.tolist()),
    )
    assert len(rows) == 10 and ("fact 17 of user 0",) in rows


def test_idf_ranking_of_a_large_namespace_weighs_by_maintains_counts(big):
    # The filter keeps the rows holding "17"; "fact"'s weight comes from the
    # 6,000 rows maintain counted, not from those few candidates.
    conn, dsn = big["conn"], big["dsn"]
    large_ns = conn.execute(
        "SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, LARGE)
    ).fetchone()[0]
    counts = conn.execute(
        "SELECT memory._lexeme_counts('fact', %s, %s, memory._lexemes('fact 17 user'))",
        (ORG, large_ns),
    ).fetchone()[0]
    total = counts.pop("")
    assert 6_000 <= total <= 6_040 and counts == {"fact": 6_000, "user": 6_000}
    idf_text = "SELECT content FROM memory.search_facts(%s, %s, NULL, '{}', 10, %s)"
    rows, _ = _as_user(dsn, LARGE, idf_text, (ORG, "fact 17", Jsonb({"text_ranking": "idf"})))
    assert rows[0] == ("fact 17 of user 0",)
    assert set(rows[1:]) <= {("written during maintain 17",)}
    # Another user's search never reads the large namespace's counts or rows.
    rows, _ = _as_user(dsn, MEDIUM[0], idf_text, (ORG, "fact 17", Jsonb({"text_ranking": "idf"})))
    assert len(rows) == 10 and rows[0] == ("fact 17 of user 1",)


def test_save_facts_walks_an_own_index_deep_enough_for_its_dedupe_check(service, org):
    """The dedupe check walks an own index at save_facts' depth (400), not at the one
    memory.maintain() calibrated for searches: with that set to 1 here, a walk of the
    index misses some near-duplicates (cosine about 0.96) of random vectors, which
    save_facts must refuse all the same."""
    dims, rows = 128, 3_000
    service.value("SELECT memory.configure_embeddings(%s)", dims)
    service.value("SELECT memory.configure('exact_search_max_rows', '100')")
    service.value("SELECT memory.configure('namespace_index_min_rows', '2000')")
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((rows, dims))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ns = {"owner_id": str(uuid.uuid4())}
    ids = []
    for start in range(0, rows, 1_000):
        batch = [
            {"content": f"fact {n}", "embedding": vectors[n].round(6).tolist()}
            for n in range(start, start + 1_000)
        ]
        ids += [
            r[0]
            for r in service.rows(
                "SELECT id FROM memory.save_facts(%s, %s, %s) ORDER BY ord", org, batch, ns
            )
        ]
    assert None not in ids
    assert [r[0] for r in service.rows("SELECT kind FROM memory.maintain()")] == ["fact"]
    nsid = service.value("SELECT (memory._resolve(%s, %s, 'read')).id", org, ns)
    index = service.value("SELECT memory._namespace_index('fact', %s, %s)", org, nsid)
    about = json.loads(service.value("SELECT obj_description(%s::regclass)", f"memory.{index}"))
    service.rows(
        sql.SQL("COMMENT ON INDEX {} IS {}").format(
            sql.Identifier("memory", index), json.dumps({**about, "ef_search": 1})
        )
    )
    near = vectors[:200] + 0.3 * rng.standard_normal((200, dims)) / np.sqrt(dims)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    assert (np.sum(near * vectors[:200], axis=1) > 0.93).all()
    hits = service.value(
        "SELECT count(*) FILTER (WHERE n.id = x.id) FROM unnest(%s::uuid[], %s::vector[]) x(id, v),"
        " LATERAL memory._nearest('fact', %s, ARRAY[%s]::uuid[], NULL, x.v, 1, false) n",
        ids[:200],
        [str(v.round(6).tolist()) for v in near],
        org,
        nsid,
    )
    assert hits < 200  # the calibrated walk misses some: the check below can fail
    got = service.rows(
        "SELECT id, duplicate_of FROM memory.save_facts(%s, %s, %s) ORDER BY ord",
        org,
        [{"content": f"near {n}", "embedding": v.round(6).tolist()} for n, v in enumerate(near)],
        ns,
    )
    assert got == [(None, ids[n]) for n in range(200)]
