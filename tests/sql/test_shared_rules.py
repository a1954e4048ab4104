"""The shared rules every writer and job calls, pinned once (docs/sql-reference.md)."""

from __future__ import annotations

import pytest

from tests.support import Failure


@pytest.mark.parametrize(
    ("value", "low", "high", "expected"),
    [
        ("3", None, None, True),
        ("3.0", None, None, True),  # JSON has one number type: 3.0 is the integer 3
        ("3.5", None, None, False),
        ('"3"', None, None, False),
        ("null", None, None, False),
        ("[3]", None, None, False),
        ("100", 100, 200, True),
        ("99", 100, 200, False),
        ("201", 100, 200, False),
        ("-1000000000", -1000000000, 1000000000, True),
        ("1e400", None, None, True),
        ("1e400", 1, 9007199254740991, False),
    ],
)
def test_is_integer(service, value, low, high, expected):
    got = service.value("SELECT memory._is_integer(%s::jsonb, %s, %s)", value, low, high)
    assert got is expected


def test_scope_id_key(service):
    rows = service.rows(
        "SELECT s, memory._scope_id_key(s) FROM unnest(ARRAY['user', 'agent', 'chat', "
        "'project', 'organization']) s"
    )
    assert rows == [
        ("user", None),
        ("agent", "agent_id"),
        ("chat", "chat_id"),
        ("project", "project_id"),
        ("organization", None),
    ]


def test_every_table_with_embeddings_is_one_of_the_memory_tables(service):
    """The embedding jobs loop over memory._memory_tables(): a new table with an
    embedding column that is not listed there would never be embedded."""
    with_embeddings = service.rows(
        "SELECT c.relname::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "WHERE c.relnamespace = 'memory'::regnamespace AND c.relkind = 'r' "
        "AND a.attname = 'embedding' AND NOT a.attisdropped ORDER BY 1"
    )
    listed = service.rows("SELECT table_name::text FROM memory._memory_tables() ORDER BY 1")
    assert listed == with_embeddings == [("facts",), ("messages",)]


def test_a_fact_over_the_size_limit_says_so_like_a_file(service, org):
    service.value("SELECT memory.configure('max_content', '100')")
    failure = service.fails(
        "SELECT memory.save_fact(%s, %s, NULL, %s)", org, "x" * 101, {"owner_id": str(org)}
    )
    assert failure == Failure(
        "54000",
        "MEMORY_TOO_LARGE",
        "Fact content is 101 characters long, over the limit of 100 characters",
    )


def test_configure_embeddings_rebuilds_both_indexes_as_a_fresh_install_has_them(service):
    def indexes():
        return service.rows(
            "SELECT indexname::text, regexp_replace(indexdef, 'vector_cosine_ops|halfvec_cosine_ops', 'OPS') "
            "FROM pg_indexes WHERE schemaname = 'memory' AND indexname LIKE '%%embedding_idx' ORDER BY 1"
        )

    fresh = indexes()
    service.value("SELECT memory.configure_embeddings(8, 'halfvec')")
    assert indexes() == fresh
    assert [row[0] for row in fresh] == ["facts_embedding_idx", "messages_embedding_idx"]
    assert "WHERE ((forgotten_at IS NULL) AND in_shared_index)" in fresh[0][1]
    assert "WHERE" not in fresh[1][1]
