"""bench/dedupe.py, small: the INSERT alone (the floor under every method) stores the
rows save_facts stores, with no check, and the report says why a missed target is
missed from the floor's figures (no timings asserted)."""

from __future__ import annotations

import numpy as np
import psycopg
from bench import dedupe
from bench._common import stat

X = dedupe.X


def _facts(n: int) -> dedupe.Facts:
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((n, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [
        (f"Fact number {i}: the river floods in spring", [float(x) for x in v])
        for i, v in enumerate(vecs)
    ]


ROWS = """
    SELECT content, embedding::text, search_text::text, text_key, content_hash, forgotten_at
    FROM memory.facts WHERE namespace_id = %s ORDER BY content
"""


def test_the_insert_alone_stores_what_save_facts_stores(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT memory.configure_embeddings(384)")
        spaces = dedupe.Namespaces(dsn)
        facts = [*_facts(3), _facts(3)[0]]  # a repeat, which only save_facts refuses
        floor_ns, saved_ns = spaces.fresh(), spaces.fresh()
        assert dedupe.insert_alone(conn, facts, floor_ns, 0.92) == 4
        assert dedupe.save_batch(conn, facts, saved_ns) == 3
        floor = conn.execute(ROWS, (floor_ns["id"],)).fetchall()
        saved = conn.execute(ROWS, (saved_ns["id"],)).fetchall()
    assert floor[:1] + floor[2:] == saved and floor[0] == floor[1]


def _row(prefill: int, method: str, rate: float, speedup: float | None) -> dict:
    return {
        "prefill": prefill,
        "method": method,
        "facts_per_s": stat([rate]),
        "stored_of_100": [100],
        "speedup": None if speedup is None else stat([speedup]),
    }


def test_a_missed_target_is_explained_by_the_floor() -> None:
    single = {
        1000: {
            dedupe.SAVE_FACTS: _row(1000, dedupe.SAVE_FACTS, 1000, None),
            dedupe.SEARCH_INSERT: _row(1000, dedupe.SEARCH_INSERT, 250, 4.0),
            dedupe.INSERT_ALONE: _row(1000, dedupe.INSERT_ALONE, 1250, 0.8),
        },
        5000: {
            dedupe.SAVE_FACTS: _row(5000, dedupe.SAVE_FACTS, 500, None),
            dedupe.SEARCH_INSERT: _row(5000, dedupe.SEARCH_INSERT, 50, 10.0),
            dedupe.INSERT_ALONE: _row(5000, dedupe.INSERT_ALONE, 1000, 0.5),
        },
        0: {
            dedupe.SAVE_FACTS: _row(0, dedupe.SAVE_FACTS, 1000, None),
            dedupe.SEARCH_INSERT: _row(0, dedupe.SEARCH_INSERT, 400, 2.5),
            dedupe.INSERT_ALONE: _row(0, dedupe.INSERT_ALONE, 4000, 0.25),
        },
    }
    lines = dedupe._why_missed(single).strip().splitlines()
    assert lines[0] == "**The targets missed, and why:**"
    assert lines[2].startswith(
        "- 1,000 facts: save_facts 100.0 ms per call (medians), of which storing the rows,"
        " measured as the INSERT alone, 80.0 ms; the loop 400.0 ms. A save_facts that cost"
        f" nothing beyond storing its rows would be 5.0{X} the loop: the check and the call's"
        f" other work, 20.0 ms, keep it under 5{X}."
    )
    assert lines[3].startswith(
        "- 0 facts: save_facts 100.0 ms per call (medians), of which storing the rows,"
        " measured as the INSERT alone, 25.0 ms; the loop 250.0 ms. A save_facts that cost"
        f" nothing beyond storing its rows would be 10.0{X} the loop: the check"
    )
    assert len(lines) == 4  # 5,000 facts met its target
    single[1000][dedupe.INSERT_ALONE] = _row(1000, dedupe.INSERT_ALONE, 1100, 0.9)
    line = dedupe._why_missed(single).strip().splitlines()[2]
    assert f"would be 4.4{X} the loop, under 5{X}: storing the rows" in line
    assert line.endswith(
        "not the dedupe check, bounds the speed-up at this size (`--without-graph` measures"
        " the same rounds without that graph: bench/results/dedupe-without-graph.md)."
    )


def test_the_graph_study_sets_each_method_with_the_graph_beside_without_it() -> None:
    rows = [
        _row(p, m, rate, x) | {"graph": graph}
        for p in (0, 1000)
        for graph, scale in ((True, 1), (False, 4))
        for m, rate, x in (
            (dedupe.SAVE_FACTS, 500 * scale, None),
            (dedupe.SEARCH_INSERT, 100, 5.0 * scale),
            (dedupe.INSERT_ALONE, 1000 * scale, 0.5),
        )
    ]
    result = {
        "config": {"batch": 100, "repeat": 1, "background_facts": 2000, "prefills": [0, 1000]},
        "tables": {"single": rows},
    }
    lines = dedupe.without_graph_markdown(result).splitlines()
    assert lines[2] == (
        "| facts in namespace | method | facts/s, with the graph | facts/s, without it"
        " | save_facts speed-up, with | without |"
    )
    assert lines[4:7] == [
        f"| 0 | {dedupe.SAVE_FACTS} | 500 (500..500) | 2000 (2000..2000) |  |  |",
        f"| 0 | {dedupe.SEARCH_INSERT} | 100 (100..100) | 100 (100..100) | 5.0 (5.0..5.0)"
        " | 20.0 (20.0..20.0) |",
        f"| 0 | {dedupe.INSERT_ALONE} | 1000 (1000..1000) | 4000 (4000..4000) | 0.5 (0.5..0.5)"
        " | 0.5 (0.5..0.5) |",
    ]
    assert lines[7].startswith("| 1,000 | save_facts (1 call) |") and len(lines) == 10


def test_the_storage_study_sets_each_content_length_on_one_line() -> None:
    def row(storage: str, toasted: float, search: float, save: float) -> dict:
        return {
            "storage": storage,
            "words": 40,
            "content_chars": 222.4,
            "row_bytes": 2083.0,
            "toasted_share": toasted,
            "search_ms": stat([search]),
            "save_ms": stat([save]),
        }

    result = {
        "config": {"rows": 2000, "repeat": 1},
        "tables": {"storage": [row("EXTERNAL", 0.98, 7.5, 340.0), row("MAIN", 0.0, 2.5, 85.0)]},
    }
    lines = dedupe.storage_markdown(result).splitlines()
    assert lines[4:] == [
        "| 222 | 2,083 | 98% / 0% | 7.50 (7.50..7.50) | 2.50 (2.50..2.50) | 340.0 (340.0..340.0)"
        f" | 85.0 (85.0..85.0) | 3.0{X} / 4.0{X} |"
    ]
