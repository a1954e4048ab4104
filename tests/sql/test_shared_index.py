"""Which facts the shared HNSW index (memory.facts_embedding_idx) holds: only those of
namespaces that have held more than exact_search_max_rows live facts
(memory.shared_index_namespaces), since a smaller namespace is always ranked exactly.
A search finds every fact wherever it is; these tests pin where each fact is, that a
search through the index misses none outside it, and that no one else's are read.
exact_search_max_rows is 5 here.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from tests.support import Failure, user_claims

LINE = 5
OWNER = {"owner_id": "22222222-2222-2222-2222-222222222222"}
SEARCH = "SELECT id FROM memory.search_facts(%s, '', %s::real[], %s, %s)"


@pytest.fixture
def line5(service):
    service.value("SELECT memory.configure_embeddings(4)")
    service.value("SELECT memory.configure('exact_search_max_rows', %s)", str(LINE))
    return service


def _vectors(seed: int, n: int) -> list[list[float]]:
    v = np.random.default_rng(seed).standard_normal((n, 4))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).round(6).tolist()


def _save(service, org, vectors, ns=OWNER, label="fact") -> list[uuid.UUID]:
    facts = [{"content": f"{label} {v}", "embedding": v} for v in vectors]
    rows = service.rows(
        "SELECT id FROM memory.save_facts(%s, %s, %s, 0.9999) ORDER BY ord", org, facts, ns
    )
    assert all(r[0] is not None for r in rows), rows
    return [r[0] for r in rows]


def _placement(service, org, ns=OWNER) -> list[tuple[bool, int]]:
    """(in the shared index, how many) of the namespace's live facts."""
    return service.rows(
        "SELECT f.in_shared_index, count(*)::int FROM memory.facts f"
        " WHERE f.organization_id = %s AND f.namespace_id = (memory._resolve(%s, %s, 'read')).id"
        " AND f.forgotten_at IS NULL GROUP BY 1 ORDER BY 1",
        org,
        org,
        ns,
    )


def _joined(service) -> list[tuple[uuid.UUID, uuid.UUID]]:
    return service.rows(
        "SELECT organization_id, namespace_id FROM memory.shared_index_namespaces ORDER BY 1, 2"
    )


def _ns_id(service, org, ns=OWNER) -> uuid.UUID:
    return service.value("SELECT (memory._resolve(%s, %s, 'read')).id", org, ns)


def _nearest(service, org, query, k, namespaces) -> list[uuid.UUID]:
    """The exact k nearest live facts of those namespaces (the oracle)."""
    return [
        r[0]
        for r in service.rows(
            "SELECT f.id FROM memory.facts f WHERE f.organization_id = %s"
            " AND f.namespace_id = ANY (%s::uuid[]) AND f.forgotten_at IS NULL"
            " ORDER BY (f.embedding <=> %s::real[]::vector) + 0, f.id LIMIT %s",
            org,
            namespaces,
            query,
            k,
        )
    ]


def _scans(dsn: str, claims, sql: str, params: tuple) -> tuple[list, set[str]]:
    """A call's rows, and the indexes of memory.facts its transaction scanned."""
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        if claims is not None:
            conn.execute("SELECT set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
        rows = [r[0] for r in conn.execute(sql, params).fetchall()]
        scanned = {
            r[0]
            for r in conn.execute(
                "SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE i.indrelid = 'memory.facts'::regclass AND pg_stat_get_xact_numscans(c.oid) > 0"
            ).fetchall()
        }
    return rows, scanned


def test_the_shared_index_holds_only_facts_of_namespaces_that_joined_it(line5):
    assert (
        line5.value(
            "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i"
            " WHERE i.indexrelid = 'memory.facts_embedding_idx'::regclass"
        )
        == "((forgotten_at IS NULL) AND in_shared_index)"
    )
    assert line5.value("SELECT pg_get_indexdef('memory.facts_unshared_idx'::regclass)") == (
        "CREATE INDEX facts_unshared_idx ON memory.facts USING btree (organization_id, namespace_id)"
        " WHERE ((forgotten_at IS NULL) AND (NOT in_shared_index))"
    )


def test_save_facts_moves_a_namespace_in_when_it_passes_the_line(line5, org):
    vectors = _vectors(1, 8)
    _save(line5, org, vectors[:5])
    assert _placement(line5, org) == [(False, 5)]
    assert _joined(line5) == []
    _save(line5, org, vectors[5:6])  # the 6th: past the line
    assert _placement(line5, org) == [(True, 6)]
    assert _joined(line5) == [(org, _ns_id(line5, org))]
    _save(line5, org, vectors[6:7])  # after it, by the trigger
    line5.value("SELECT memory.save_fact(%s, 'one more', %s::real[], %s)", org, vectors[7], OWNER)
    assert _placement(line5, org) == [(True, 8)]
    # Another namespace of the organization stays out.
    other = {"owner_id": str(uuid.uuid4())}
    _save(line5, org, _vectors(2, 3), other)
    assert _placement(line5, org, other) == [(False, 3)]


def test_a_fact_arriving_flagged_keeps_its_flag(line5, org):
    """A restored dump's rows come in by COPY with their flag: it stays."""
    _save(line5, org, _vectors(6, 1))
    ns = _ns_id(line5, org)
    line5.rows(
        "INSERT INTO memory.facts (organization_id, namespace_id, content, in_shared_index)"
        " VALUES (%s, %s, 'restored', true), (%s, %s, 'restored too', false)",
        org,
        ns,
        org,
        ns,
    )
    assert _placement(line5, org) == [(False, 2), (True, 1)]


def test_a_search_through_the_index_finds_the_facts_outside_it(line5, org, dsn):
    vectors = _vectors(3, 9)
    ids = _save(line5, org, vectors)
    assert _placement(line5, org) == [(True, 9)]
    # What a writer leaves that saved as the namespace joined (its trigger saw no mark).
    straggler = ids[4]
    line5.rows("UPDATE memory.facts SET in_shared_index = false WHERE id = %s", straggler)
    ns = _ns_id(line5, org)
    rows, scanned = _scans(dsn, None, SEARCH, (org, vectors[4], json.dumps(OWNER), 3))
    assert rows == _nearest(line5, org, vectors[4], 3, [ns])
    assert rows[0] == straggler
    assert {"facts_embedding_idx", "facts_unshared_idx"} <= scanned
    # maintain() moves it in, silently (the namespace had joined), and then has nothing to do.
    assert line5.rows("SELECT * FROM memory.maintain()") == []
    assert _placement(line5, org) == [(True, 9)]
    assert line5.rows("SELECT * FROM memory.maintain()") == []
    rows, _ = _scans(dsn, None, SEARCH, (org, vectors[4], json.dumps(OWNER), 3))
    assert rows == _nearest(line5, org, vectors[4], 3, [ns])


def test_maintain_moves_in_a_namespace_past_the_line_once(service, org, dsn):
    service.value("SELECT memory.configure_embeddings(4)")
    vectors = _vectors(4, 7)
    _save(service, org, vectors)  # under the default line (2,000): out
    assert _placement(service, org) == [(False, 7)]
    service.value("SELECT memory.configure('exact_search_max_rows', '5')")
    ns = _ns_id(service, org)
    # Past the new line before maintain() ran: through the index, still every fact.
    for k in (1, 4, 7):
        rows, scanned = _scans(dsn, None, SEARCH, (org, vectors[2], json.dumps(OWNER), k))
        assert rows == _nearest(service, org, vectors[2], k, [ns])
        assert "facts_unshared_idx" in scanned
    assert service.rows("SELECT * FROM memory.maintain()") == [
        ("joined", "fact", org, ns, 7, "facts_embedding_idx")
    ]
    assert _placement(service, org) == [(True, 7)]
    assert service.rows("SELECT * FROM memory.maintain()") == []
    for k in (1, 4, 7):
        rows, _ = _scans(dsn, None, SEARCH, (org, vectors[2], json.dumps(OWNER), k))
        assert rows == _nearest(service, org, vectors[2], k, [ns])


def test_the_shared_path_reads_no_one_elses_facts(line5, org, member, as_, dsn):
    """The same vectors in every user's namespace: each search, through the shared index
    and beside it, returns exactly k of the caller's and the organization's own."""
    vectors = _vectors(5, 7)
    a_id, _ = member()
    b_id, _ = member()
    admin_id, _ = member("memory.read", "memory.manage")
    stranger_org = uuid.uuid4()
    stranger_id, _ = member(organization=stranger_org)
    mine = {
        a_id: _save(line5, org, vectors, {"owner_id": str(a_id)}),  # joins
        b_id: _save(line5, org, vectors[:3], {"owner_id": str(b_id)}),
        admin_id: _save(line5, org, vectors[:2], {"owner_id": str(admin_id)}),
    }
    organization = _save(line5, org, _vectors(7, 4), {"scope": "organization"}, "org fact")
    stranger = _save(line5, stranger_org, vectors, {"owner_id": str(stranger_id)})  # joins
    assert len(_joined(line5)) == 2
    org_ns = _ns_id(line5, org, {"scope": "organization"})
    both = json.dumps(
        [{}, {"scope": "organization"}]
    )  # the caller's namespace and the organization's
    for user, own in mine.items():
        user_ns = _ns_id(line5, org, {"owner_id": str(user)})
        for k in (1, 5):
            rows, _ = _scans(dsn, user_claims(user), SEARCH, (org, vectors[0], both, k))
            assert rows == _nearest(line5, org, vectors[0], k, [user_ns, org_ns])
            assert len(rows) == k and set(rows) <= set(own) | set(organization)
    rows, _ = _scans(dsn, user_claims(stranger_id), SEARCH, (stranger_org, vectors[0], both, 5))
    assert len(rows) == 5 and set(rows) <= set(stranger)
    # Naming another's namespace is refused as for any search.
    b = as_(user_claims(b_id))
    assert b.fails(SEARCH, org, vectors[0], {"owner_id": str(a_id)}, 5) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may pass owner_id"
    )
