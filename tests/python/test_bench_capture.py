"""bench/capture.py, small: the pre-fill stores what save_facts stores, a turn goes
through the queue, two workers drain a queue with no chat twice and none lost, the
profile counts each side's calls, and the section renders (no timings asserted)."""

from __future__ import annotations

import numpy as np
import psycopg
from bench import capture
from bench._common import new_result


def test_capture_bench_end_to_end_small(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT memory.configure_embeddings(%s)", (capture.DIMENSIONS,))
        rng = np.random.default_rng(3)
        capture.check_prefill_matches_save_facts(conn, rng)
    turns = capture.per_turn(dsn, 30, rounds=1, turns=2, rng=rng)
    assert turns["prefill"] == 30 and turns["ratio"]["n"] == 1
    wall, twice, lost = capture.drain(dsn, 12, 2, "smoke", rng)
    assert (twice, lost) == (0, 0) and wall > 0
    result = new_result("capture", True, **capture.config(1, 2, (30,), 12))
    profile = capture.profile(dsn, 30, rng)
    calls = {(x["side"], x["function"]): x["calls_per_turn"] for x in profile}
    assert calls == {
        ("capture", "pending_captures"): 1,
        ("capture", "capture_facts"): 1,
        ("capture", "save_facts"): 1,
        ("capture", "_insert_fact"): 1,
        ("capture", "_rows_upto"): 1,
        ("save_facts", "save_facts"): 1,
        ("save_facts", "_rows_upto"): 1,
    }
    result["tables"] = {
        "turns": [turns],
        "profile": profile,
        "idle_poll": [capture.idle_poll(dsn)],
        "drain": [capture.drain_row(w, 12, [(wall, twice, lost)]) for w in (capture.WORKERS, 1)],
    }
    text = capture.markdown(result)
    assert text.startswith("## Capture (bench/capture.py)") and "| 30 |" in text
    assert "| capture | `_insert_fact` | 1 |" in text and "At 30 facts capture adds" in text
    assert [t["met"] for t in capture.targets(result)][-1] is True
