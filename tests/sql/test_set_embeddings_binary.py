"""memory.set_memory_embeddings with its vectors as `embeddings` (a 2-D real[], one row
per id): the same rows as the JSON path, its own refusals, and nothing half-written."""

from __future__ import annotations

import uuid

from tests.support import Failure

OWNER = "22222222-2222-2222-2222-222222222222"
BINARY = "SELECT memory.set_memory_embeddings(%s, %s, NULL, 'binary-model', %s::real[])"


def _literal(rows: list[list[float]]) -> str:
    return "{" + ",".join("{" + ",".join(map(repr, row)) + "}" for row in rows) + "}"


def _pending(db, org, contents: list[str]) -> list[tuple]:
    """Facts saved without vectors, leased: (id, content_hash) in the contents' order."""
    for content in contents:
        db.value("SELECT memory.save_fact(%s, %s, NULL, %s)", org, content, {"owner_id": OWNER})
    leased = {
        content: (id_, content_hash)
        for id_, content, content_hash in db.rows(
            "SELECT id, content, content_hash FROM memory.pending_embeddings(100)"
        )
    }
    return [leased[c] for c in contents]


def _stored(db) -> list[tuple]:
    return db.rows(
        "SELECT content, embedding::text, embedding_model, lease_until IS NULL"
        " FROM memory.facts ORDER BY content"
    )


def test_binary_batch_writes_what_the_json_batch_writes(dims4, org):
    leased = _pending(dims4, org, ["alpha", "beta", "gamma"])
    ids, hashes = [i for i, _ in leased], [h for _, h in leased]
    vectors = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.25, 0.125], [0.0, 0.0, 0.0, -1.0]]
    # gamma's text changes after its lease: its vector is refused by the hash guard.
    dims4.value("SELECT memory.edit_fact(%s, %s, 'gamma, edited')", org, ids[2])
    assert dims4.value(BINARY, ids, hashes, _literal(vectors)) == 2
    assert _stored(dims4) == [
        ("alpha", "[1,0,0,0]", "binary-model", True),
        ("beta", "[0,0.5,0.25,0.125]", "binary-model", True),
        ("gamma, edited", None, None, True),
    ]
    # The JSON batch of the same vectors writes the same rows.
    dims4.rows("UPDATE memory.facts SET embedding = NULL, embedding_model = NULL RETURNING id")
    assert (
        dims4.value(
            "SELECT memory.set_memory_embeddings(%s, %s, %s, 'binary-model')",
            ids[:2],
            hashes[:2],
            vectors[:2],
        )
        == 2
    )
    assert _stored(dims4)[:2] == [
        ("alpha", "[1,0,0,0]", "binary-model", True),
        ("beta", "[0,0.5,0.25,0.125]", "binary-model", True),
    ]


def test_binary_batch_refuses_bad_input_and_writes_nothing(dims4, org):
    leased = _pending(dims4, org, ["one", "two"])
    ids, hashes = [i for i, _ in leased], [h for _, h in leased]
    row = [1.0, 0.0, 0.0, 0.0]
    cases = {
        "embeddings must be a two-dimensional array, one row per id": [
            (ids[:1], hashes[:1], "{1,0,0,0}"),
            (ids[:1], hashes[:1], "{{{1,0,0,0}}}"),
        ],
        "embeddings must have one row per id: 1 rows for 2 ids": [(ids, hashes, _literal([row]))],
        "embeddings must have one row per id: 0 rows for 2 ids": [(ids, hashes, "{}")],
        "expected one content hash per id: 2 ids, 1 hashes": [
            (ids, hashes[:1], _literal([row, row]))
        ],
        "embedding has 3 dimensions, expected 4": [(ids, hashes, "{{1,0,0},{1,0,0}}")],
        "embedding elements must be finite float4 numbers": [
            (ids, hashes, "{{1,0,0,0},{1,0,0,NaN}}"),
            (ids, hashes, "{{1,0,0,0},{Infinity,0,0,0}}"),
            (ids, hashes, "{{1,0,0,0},{1,NULL,0,0}}"),
        ],
    }
    for message, attempts in cases.items():
        for batch_ids, batch_hashes, embeddings in attempts:
            assert dims4.fails(BINARY, batch_ids, batch_hashes, embeddings) == Failure(
                "22023", "EMBEDDING_INVALID", message
            ), (message, embeddings)
    both = "SELECT memory.set_memory_embeddings(%s, %s, %s, NULL, %s::real[])"
    assert dims4.fails(both, ids, hashes, [row, row], _literal([row, row])) == Failure(
        "22023", "EMBEDDING_INVALID", "give the vectors either as JSON or as embeddings, not both"
    )
    assert dims4.value("SELECT count(*) FROM memory.facts WHERE embedding IS NOT NULL") == 0
    # An empty batch writes nothing, either way.
    empty = "SELECT memory.set_memory_embeddings('{}', '{}', NULL, NULL, '{}'::real[])"
    assert dims4.value(empty) == 0


def test_binary_batch_is_refused_to_everyone_but_the_service(dims4, org, member):
    leased = _pending(dims4, org, ["secret"])
    ids, hashes = [i for i, _ in leased], [h for _, h in leased]
    _, user = member()
    _, admin = member("memory.read", "memory.manage")
    _, stranger = member(organization=uuid.uuid4())
    for who in (user, admin, stranger):
        failure = who.fails(BINARY, ids, hashes, _literal([[1.0, 0.0, 0.0, 0.0]]))
        assert (failure.sqlstate, failure.hint) == ("42501", "MEMORY_FORBIDDEN")
    assert dims4.value("SELECT count(*) FROM memory.facts WHERE embedding IS NOT NULL") == 0
