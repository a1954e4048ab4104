"""The schema stays distributable (docs/scale-out.md), read from the catalog.

Every table is classified: distributed by a column, or a reference table. Every
primary key and unique index of a distributed table contains its distribution
column, no foreign key leaves it, and every public function that touches one
organization's rows takes that organization first, as `org`. A new table or
function must be classified here, so it cannot break a rule silently.
"""

from __future__ import annotations

import psycopg

# table -> distribution column (None: a small reference table, copied to every node)
DISTRIBUTION = {
    "namespaces": "organization_id",
    "files": "organization_id",
    "permissions": "organization_id",
    "facts": "organization_id",
    "messages": "organization_id",
    "captures": "organization_id",
    "recall_replays": "organization_id",
    "namespace_lexemes": "organization_id",
    "shared_index_namespaces": "organization_id",
    "documents": "scope_hash",  # the digest of scope_key
    "settings": None,
}

# Public functions that are not about one organization: settings, the embedding
# and capture pipelines (a background worker's batches span organizations) and documents
# (keyed by scope_key).
CROSS_ORGANIZATION = {
    "configure",
    "setting",
    "configure_embeddings",
    "embedding_status",
    "pending_embeddings",
    "set_memory_embeddings",
    "maintain",
    "maintenance_statements",
    "pending_captures",
    "fail_capture",
    "capture_facts",
    "document_read",
    "document_write",
    "document_delete",
    "document_list",
    "purge_documents",
}


def _tables(db: psycopg.Connection) -> list[str]:
    return [
        r[0]
        for r in db.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'memory'::regnamespace"
            " AND relkind IN ('r', 'p') ORDER BY 1"
        ).fetchall()
    ]


def test_every_table_is_classified(db):
    assert _tables(db) == sorted(DISTRIBUTION)
    for table, column in DISTRIBUTION.items():
        if column is not None:
            found = db.execute(
                "SELECT attnotnull FROM pg_attribute WHERE attrelid = %s::regclass"
                " AND attname = %s AND NOT attisdropped",
                (f"memory.{table}", column),
            ).fetchone()
            assert found == (True,), (table, column)


def test_every_primary_key_and_unique_index_contains_the_distribution_column(db):
    rows = db.execute(
        "SELECT c.relname, i.indexrelid::regclass::text, i.indisprimary,"
        "       ARRAY(SELECT a.attname::text FROM unnest(i.indkey) k"
        "             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)"
        " FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
        " WHERE c.relnamespace = 'memory'::regnamespace AND i.indisunique ORDER BY 1, 2"
    ).fetchall()
    tables_with_a_key = set()
    for table, index, primary, columns in rows:
        column = DISTRIBUTION[table]
        if column is None:
            continue
        if primary:
            tables_with_a_key.add(table)
        assert column in columns, f"{index} on {table}{columns} lacks {column}"
        assert columns != ["id"], f"{index}: a unique index on id alone"
    assert tables_with_a_key == {t for t, c in DISTRIBUTION.items() if c is not None}


def test_no_foreign_key_leaves_its_organization(db):
    rows = db.execute(
        "SELECT con.conname, src.relname, dst.relname,"
        "       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, o)"
        "             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n"
        "             ORDER BY k.o),"
        "       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, o)"
        "             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n"
        "             ORDER BY k.o)"
        " FROM pg_constraint con JOIN pg_class src ON src.oid = con.conrelid"
        " JOIN pg_class dst ON dst.oid = con.confrelid"
        " WHERE con.contype = 'f' AND src.relnamespace = 'memory'::regnamespace ORDER BY 1"
    ).fetchall()
    assert rows, "the namespace foreign keys are expected"
    for name, source, target, columns, referenced in rows:
        column, target_column = DISTRIBUTION[source], DISTRIBUTION[target]
        if target_column is None:
            continue  # a reference table is on every node
        assert column is not None, name
        # The distribution columns pair up: both rows sit on the same shard.
        assert (column, target_column) in zip(columns, referenced, strict=True), name


def test_every_organization_function_takes_org_first(db):
    rows = db.execute(
        "SELECT p.proname, p.oid::regprocedure::text, p.proargnames, p.proargtypes::oid[]"
        " FROM pg_proc p WHERE p.pronamespace = 'memory'::regnamespace"
        " AND p.proname NOT LIKE '\\_%' ORDER BY 2"
    ).fetchall()
    assert len(rows) > 30
    names = {r[0] for r in rows}
    assert names >= CROSS_ORGANIZATION, CROSS_ORGANIZATION - names
    for name, signature, argnames, argtypes in rows:
        if name in CROSS_ORGANIZATION:
            continue
        assert argnames and argnames[0] == "org", signature
        assert argtypes[0] == 2950, signature  # uuid


def test_by_id_functions_take_the_organization(db):
    signatures = {
        r[0]
        for r in db.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p"
            " WHERE p.pronamespace = 'memory'::regnamespace"
            " AND p.proname IN ('forget', 'edit_fact', 'get_fact')"
        ).fetchall()
    }
    assert signatures == {
        "memory.forget(uuid,uuid,uuid)",
        "memory.edit_fact(uuid,uuid,text)",
        "memory.get_fact(uuid,uuid)",
    }


def test_every_public_function_says_what_it_does(db):
    """COMMENT ON FUNCTION, which psql's \\df+ and IDEs show."""
    silent = db.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc p"
        " WHERE p.pronamespace = 'memory'::regnamespace AND p.proname NOT LIKE '\\_%'"
        " AND coalesce(obj_description(p.oid, 'pg_proc'), '') = '' ORDER BY 1"
    ).fetchall()
    assert silent == []
