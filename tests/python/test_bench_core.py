"""bench/core.py's trace and replay, small: memory.run and the reference memory tool
end with the same files and give the same outcomes (no timings asserted)."""

from __future__ import annotations

import uuid
from pathlib import Path

from bench.core import (
    LABELS,
    LocalSide,
    SqlSide,
    final_views,
    make_trace,
    outcome_mismatches,
    replay,
    unexpected,
    view_mismatches,
)


def test_trace_is_deterministic_and_mixed() -> None:
    trace = make_trace(400, seed=3)
    assert [s.command for s in trace.steps] == [s.command for s in make_trace(400, 3).steps]
    assert len(trace.steps) == 400
    assert set(trace.mix()) <= set(LABELS)
    assert {"view file", "view dir", "str_replace", "insert", "create"} <= set(trace.mix())
    assert any(not s.ok for s in trace.steps)


def test_replay_matches_the_reference_tool(dsn: str, tmp_path: Path) -> None:
    trace = make_trace(80, seed=11)
    local = LocalSide(tmp_path)
    expected = replay(local, trace.steps)
    sql = SqlSide(dsn, uuid.uuid4(), org=str(uuid.uuid4()))
    try:
        got = replay(sql, trace.steps)
        got_views = final_views(sql)
    finally:
        sql.close()
    local_views = final_views(local)
    assert unexpected(trace.steps, expected) == 0
    assert sorted(local_views) == sorted(trace.files)
    assert view_mismatches(local_views, got_views) == 0
    assert outcome_mismatches(trace.steps, expected, got) == 0
