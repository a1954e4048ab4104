"""bench/core.py's trace and replay, small: memory.run gives the oracle's outcomes and
ends with its files, as the reference memory tool does (no timings asserted)."""

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

from tests.oracle import SpecOracle


def test_trace_is_deterministic_and_mixed() -> None:
    trace = make_trace(400, seed=3)
    assert [s.command for s in trace.steps] == [s.command for s in make_trace(400, 3).steps]
    assert len(trace.steps) == 400
    assert set(trace.mix()) <= set(LABELS)
    assert {"view file", "view dir", "str_replace", "insert", "create"} <= set(trace.mix())
    assert any(not s.ok for s in trace.steps)


def test_replay_matches_the_oracle(dsn: str, tmp_path: Path) -> None:
    trace = make_trace(80, seed=11)
    oracle = SpecOracle(tmp_path / "oracle")
    expected = replay(oracle, trace.steps)
    expected_views = final_views(oracle)
    local = LocalSide()
    local.use(tmp_path / "local")
    replay(local, trace.steps)
    local_views = final_views(local)
    sql = SqlSide(dsn, uuid.uuid4(), org=str(uuid.uuid4()))
    try:
        got = replay(sql, trace.steps)
        got_views = final_views(sql)
    finally:
        sql.close()
    assert unexpected(trace.steps, expected) == 0
    assert sorted(expected_views) == sorted(trace.files)
    assert view_mismatches(expected_views, local_views) == 0
    assert view_mismatches(expected_views, got_views) == 0
    assert outcome_mismatches(expected, got) == 0
