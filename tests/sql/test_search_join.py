"""A search fetches its k ranked rows by id, whatever the size of the table.

The ranked ids come from a set-returning function (memory._rank); at PostgreSQL's
default estimate of 1,000 rows for it, the planner joined them to a small table by
hashing the whole table: a sequential scan of every tenant's rows, vectors included,
8 of the 10 ms a search took in a table of 2,000 facts. A namespace of few rows is
searched by plans made once per session, whatever the namespace (memory._nearest_exact):
they must take the btree even where one tenant holds most of the table, and a plan
made for the rows of an average namespace would scan that table whole. Which scans a
search made is read from the statistics of its own transaction. No timings here:
bench/ measures the speed.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from tests.support import user_claims

USERS = 200
PER_USER = 10
DIMS = 16
ORG = uuid.UUID("00000000-0000-4000-8000-0000000000e1")
SEARCHES = {  # vector-only (no query text), and hybrid
    "search_facts": "SELECT id FROM memory.search_facts(%s, '', %s::real[], '{}', 10)",
    "search_messages": "SELECT id FROM memory.search_messages(%s, '', %s::real[], NULL, 10)",
    "recall_context": "SELECT id FROM memory.recall_context(%s, '', %s::real[], '{}',"
    ' \'{"facts": 5, "messages": 5}\')',
    "search_facts hybrid": "SELECT id FROM memory.search_facts(%s, 'word3 alpha', %s::real[],"
    " '{}', 10)",
    "search_messages hybrid": "SELECT id FROM memory.search_messages(%s, 'word3 alpha',"
    " %s::real[], NULL, 10)",
    "recall_context hybrid": "SELECT id FROM memory.recall_context(%s, 'word3 alpha',"
    " %s::real[], '{}', '{\"facts\": 5, \"messages\": 5}')",
}
HEAVY = 3_000  # above exact_search_max_rows (2,000): the heavy user's own search walks the index


def _user(n: int) -> uuid.UUID:
    return uuid.UUID(int=70_000 + n)


def _fill(dsn: str, users: int, heavy: int = 0) -> str:
    """`users` users of 10 facts and 10 messages each; with `heavy`, user 0 holds that
    many of each besides."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT memory.configure_embeddings(%s)", (DIMS,))
        rng = np.random.default_rng(5)
        if heavy:
            _fill_heavy(conn, _user(0), heavy, rng)
        for n in range(users):
            user = _user(n)
            conn.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, user))
            vectors = rng.standard_normal((PER_USER, DIMS)).astype(np.float32)
            conn.execute(
                "SELECT memory.save_facts(%s, jsonb_build_array(VARIADIC"
                " ARRAY(SELECT jsonb_build_object('content', 'word' || g || ' alpha beta')"
                " FROM generate_series(1, %s) g)), %s::jsonb, embeddings => %s::real[])",
                (
                    ORG,
                    PER_USER,
                    json.dumps({"scope": "user", "owner_id": str(user)}),
                    vectors.tolist(),
                ),
            )
            for g, v in enumerate(vectors, start=1):
                message = {
                    "owner_id": str(user),
                    "chat_id": "chat-1",
                    "id": f"m{g}",
                    "role": "user",
                    "content": f"word{g} alpha beta",
                }
                conn.execute(
                    "SELECT memory.index_message(%s, %s::jsonb, %s::real[])",
                    (ORG, json.dumps(message), v.tolist()),
                )
        conn.execute("ANALYZE memory.facts")
        conn.execute("ANALYZE memory.messages")
        conn.execute("ANALYZE memory.namespaces")
    return dsn


def _fill_heavy(
    conn: psycopg.Connection, user: uuid.UUID, rows: int, rng: np.random.Generator
) -> None:
    ns = json.dumps({"scope": "user", "owner_id": str(user)})
    for start in range(0, rows, 1_000):
        vectors = rng.standard_normal((1_000, DIMS)).astype(np.float32)
        conn.execute(
            "SELECT memory.save_facts(%s, jsonb_build_array(VARIADIC ARRAY(SELECT"
            " jsonb_build_object('content', 'heavy ' || g || ' alpha') FROM generate_series(%s::int, %s::int) g)),"
            " %s::jsonb, embeddings => %s::real[])",
            (ORG, start, start + 999, ns, vectors.tolist()),
        )
    conn.execute(
        "SELECT memory.index_message(%s, jsonb_build_object('owner_id', %s::text, 'chat_id', 'heavy',"
        " 'id', 'h' || g, 'role', 'user', 'content', 'heavy ' || g || ' alpha'), v::real[])"
        " FROM unnest(%s::vector[]) WITH ORDINALITY u(v, g)",
        (ORG, str(user), list(rng.standard_normal((rows, DIMS)).astype(np.float32))),
    )


@pytest.fixture
def small_table(dsn: str) -> str:
    """2,000 facts and 2,000 messages of 200 users, 10 each."""
    return _fill(dsn, USERS)


@pytest.fixture
def skewed_table(dsn: str) -> str:
    """One user's 3,000 facts and messages beside 5 users' 10 each."""
    return _fill(dsn, 5, heavy=HEAVY)


def _scans_of_one_search(dsn: str, sql: str) -> dict[str, int]:
    """One search by a user (its rows checked), and the sequential scans its transaction
    made of the facts and messages tables."""
    query = np.random.default_rng(9).standard_normal(DIMS).astype(np.float32).tolist()
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "SELECT set_config('request.jwt.claims', %s, true)",
            (json.dumps(user_claims(_user(3))),),
        )
        ids = [r[0] for r in conn.execute(sql, (ORG, query)).fetchall()]
        assert len(ids) == len(set(ids)) >= 10
        return dict(
            conn.execute(
                "SELECT relname::text, seq_scan FROM pg_stat_xact_user_tables"
                " WHERE schemaname = 'memory' AND relname IN ('facts', 'messages')"
            ).fetchall()
        )


@pytest.mark.parametrize("search", list(SEARCHES))
def test_a_search_reads_no_table_whole(small_table, search):
    assert _scans_of_one_search(small_table, SEARCHES[search]) == {"facts": 0, "messages": 0}


@pytest.mark.parametrize("search", list(SEARCHES))
def test_a_small_namespace_beside_a_heavy_one_reads_no_table_whole(skewed_table, search):
    assert _scans_of_one_search(skewed_table, SEARCHES[search]) == {"facts": 0, "messages": 0}


@pytest.mark.parametrize("kind", ["fact", "message"])
def test_both_ways_to_the_text_candidates_find_the_same_rows(small_table, kind):
    # Read through the btree (few rows) or through the text index: the same rows.
    with psycopg.connect(small_table) as conn:
        found = {}
        for few in (True, False):
            found[few] = [
                conn.execute(
                    "SELECT array_agg(c.id ORDER BY c.id) FROM memory._text_candidates("
                    "%s, %s, ARRAY(SELECT id FROM memory.namespaces WHERE organization_id = %s"
                    " AND owner_id = ANY(%s::uuid[])), NULL, memory._any_lexeme(%s), NULL, %s) c",
                    (kind, ORG, ORG, [_user(n) for n in users], text, few),
                ).fetchone()[0]
                for users in ([3], [4, 5], list(range(USERS)))
                for text in ("word3 alpha", "beta", "word1 word7 nothing", "nothing")
            ]
    assert found[True] == found[False]
    sizes = [len(ids or []) for ids in found[True]]
    assert sizes == [10, 10, 2, 0, 20, 20, 4, 0, 2000, 2000, 400, 0]
