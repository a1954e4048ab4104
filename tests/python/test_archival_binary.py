"""save_extracted sends each call's vectors as one binary real[] (memory.save_facts'
`embeddings`): the rows and the stored vectors over several calls, numpy's vectors,
and vectors the JSON path refused refused alike."""

from __future__ import annotations

import math
import struct
import uuid
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg
import pytest

from pgmemory import EmbeddingInvalid, Memory
from pgmemory.calls import SAVE_FACTS_MAX, RealRows, RealRowsDumper
from tests.conftest import SERVICE_LOGIN
from tests.python.conftest import DIMS, Connect, FakeEmbedder, method


def test_save_extracted_over_several_calls(
    connect: Connect, grant: Any, org: uuid.UUID, db: psycopg.Connection
) -> None:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((SAVE_FACTS_MAX + 1, DIMS)).astype(np.float32)
    vectors[-1] = 2 * vectors[0]  # the first fact again, in the second call: a duplicate
    texts = [f"fact {i}" for i in range(len(vectors))]
    fake = FakeEmbedder({t: v.tolist() for t, v in zip(texts, vectors, strict=True)})
    service = connect(embedder=fake)
    service.configure_embeddings()
    user = service.as_user(grant())
    rows = user.archival.save_extracted(org, texts, threshold=0.9999)
    assert fake.calls == [(method(service), texts)]
    assert [r.ord for r in rows] == list(range(1, len(texts) + 1))
    assert all(r.id is not None and r.duplicate_of is None for r in rows[:-1])
    assert (rows[-1].id, rows[-1].duplicate_of) == (None, rows[0].id)
    assert rows[-1].similarity == pytest.approx(1.0, abs=1e-6)
    # Each call's rows of the matrix went with its own facts.
    stored = db.execute(
        "SELECT content, embedding::real[] FROM memory.facts WHERE id = ANY(%s)"
        " AND embedding_model = 'fake-8' ORDER BY content",
        ([rows[0].id, rows[SAVE_FACTS_MAX - 1].id],),
    ).fetchall()
    assert [(c, np.array(v, dtype=np.float32).tolist()) for c, v in stored] == [
        (texts[0], vectors[0].tolist()),
        (texts[SAVE_FACTS_MAX - 1], vectors[SAVE_FACTS_MAX - 1].tolist()),
    ]


def test_vectors_refused_as_in_json(login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID):
    table = {
        "eight": [1.0, *[0.0] * 7],
        "seven": [1.0] * 7,
        "tiny": [1e-50, 1.0, *[0.0] * 6],  # nonzero, but 0 as a float4
        "beyond float4": [-1e39, *[0.0] * 7],
        "numpy": np.array([0.0, 1.0, *[0.0] * 6]),
    }
    with Memory(login_dsn(SERVICE_LOGIN), FakeEmbedder(table), service=True) as mem:
        mem.configure_embeddings()
        user = mem.as_user(grant())

        def refused(*texts: str) -> str:
            with pytest.raises(EmbeddingInvalid) as caught:
                user.archival.save_extracted(org, list(texts))
            return caught.value.message

        # Vectors of different lengths go in the JSON, where the database names the wrong one.
        assert refused("eight", "seven") == "embedding has 7 dimensions, expected 8"
        assert refused("seven") == "embedding has 7 dimensions, expected 8"
        for text in ("tiny", "beyond float4"):
            assert refused("eight", text) == "embedding elements must be finite float4 numbers"
        rows = user.archival.save_extracted(org, ["eight", "numpy"])
        assert [r.id is not None for r in rows] == [True, True]


def test_real_rows_binary_format() -> None:
    rows = RealRows.of([[1.5, -2.0], np.array([0.25, 1e39], dtype=np.float64), (3, 0)])
    assert rows is not None and (rows.rows, rows.dimensions) == (3, 2)
    assert rows.values.tolist() == [1.5, -2.0, 0.25, math.inf, 3.0, 0.0]
    data = RealRowsDumper(RealRows).dump(rows)
    # ndim, no nulls, float4, then (size, lower bound) per dimension; then (length, value).
    assert struct.unpack("!7i", data[:28]) == (2, 0, 700, 3, 1, 2, 1)
    body = struct.unpack("!" + "if" * 6, data[28:])
    assert body[0::2] == (4,) * 6 and list(body[1::2]) == rows.values.tolist()
    assert RealRows.of([[1.0], [1.0, 2.0]]) is None  # ragged
    assert RealRows.of([[], []]) is None  # no dimensions
    assert math.isnan(RealRows.of([[1e-50]]).values[0])  # type: ignore[union-attr]
    empty = RealRows(array("f"), 0, 0)
    assert RealRowsDumper(RealRows).dump(empty) == struct.pack("!3i", 0, 0, 700)
