"""The search benches' generated vectors: the real-like kind has the low intrinsic
dimension of real embeddings, the isotropic kind is the earlier draw unchanged, and
bench/vectors.py reports where each set first reaches recall@10 0.97."""

from __future__ import annotations

import numpy as np
import pytest
from bench import search, tenants, vectors
from bench._common import stat


def _draw(kind: str, n: int = 4_000) -> tuple[np.ndarray, np.ndarray]:
    c = search.Corpus(50_000, 20, vectors=kind)
    rng = np.random.default_rng(3)
    return c._vectors(rng, 0, n), c._vectors(rng, 0, 100)


@pytest.mark.parametrize("kind", search.VECTOR_KINDS)
def test_vectors_are_unit_and_repeat_by_seed(kind: str) -> None:
    first, _ = _draw(kind, 500)
    again, _ = _draw(kind, 500)
    assert first.dtype == np.float32 and first.shape == (500, search.DIMENSIONS)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(first, again)


def test_the_isotropic_kind_is_the_earlier_draw() -> None:
    c = search.Corpus(50_000, 20, vectors="isotropic")
    got = c._vectors(np.random.default_rng(5), 3, 50)
    rng = np.random.default_rng(5)
    topics = c.user_topics[3][rng.integers(0, search.TOPICS_PER_USER, size=50)]
    noise = rng.standard_normal((50, search.DIMENSIONS)).astype(np.float32)
    noise /= np.sqrt(search.DIMENSIONS)
    want = c.topics[topics] + search.USER_OFFSET * c.user_offsets[3] + 0.6 * noise
    np.testing.assert_allclose(got, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-6)


def test_real_like_vectors_have_a_low_intrinsic_dimension() -> None:
    real_like = vectors.geometry(*_draw("real-like"))
    isotropic = vectors.geometry(*_draw("isotropic"))
    # Real MiniLM vectors of short texts measure about 6 (bench/results/vectors.md).
    assert 3 < real_like["intrinsic_dimension"] < 12
    assert isotropic["intrinsic_dimension"] > 30
    assert 0.6 < real_like["nearest_cosine"] < 0.95


def test_the_corpus_signature_names_the_kind_so_kept_loads_are_not_mixed() -> None:
    signatures = {search.Corpus(1_000, 10, vectors=k).signature for k in search.VECTOR_KINDS} | {
        tenants.corpus(10_000, 100, (0.1,), 7, k).signature for k in search.VECTOR_KINDS
    }
    assert len(signatures) == 4
    assert all("vectors=" in s for s in signatures)


def _ladder(recalls: list[float]) -> list[dict]:
    return [
        {"ef_search": ef, "recall_at_10": r, "p50_ms": stat([0.5])}
        for ef, r in zip(vectors.EF_LADDER, recalls, strict=True)
    ]


def test_the_study_reports_the_first_ef_search_reaching_the_recall() -> None:
    geometry = {"intrinsic_dimension": 5.7, "nearest_cosine": 0.81, "mean_cosine": 0.11}
    result = {
        "config": {
            "rows": 50_000,
            "queries": 200,
            "neighbours": 20,
            "rounds": 3,
            "synopses": 59_852,
        },
        "tables": {
            "sets": [
                {"set": "real", **geometry, "ladder": _ladder([0.9, 0.93, 0.97, *[0.99] * 6])},
                {"set": "isotropic", **geometry, "ladder": _ladder([0.3] * 9)},
            ]
        },
    }
    text = vectors.markdown(result)
    assert "| real | 5.7 | 0.810 | 0.110 | 40 |" in text
    assert "| isotropic | 5.7 | 0.810 | 0.110 | not reached |" in text
    assert "| 40 | 0.970, 0.50 (0.50..0.50) ms | 0.300, 0.50 (0.50..0.50) ms |" in text
