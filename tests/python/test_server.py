"""The embedded server helper: a data directory left by a killed run is cleaned up."""

from __future__ import annotations

import subprocess
import sys

import psycopg

from pgmemory import server


def test_stale_run_is_stopped_and_removed():
    # A process that started a server and died without stopping it.
    dead_pid = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_pid.wait()
    stale_dir = server.scratch_root() / f"stale-{dead_pid.pid}"
    srv = server.start(stale_dir, fresh=True)
    postmaster = server._postmaster_pid(stale_dir)
    assert postmaster is not None and server._alive(postmaster)
    with psycopg.connect(srv.dsn()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)

    server.sweep_stale_runs("stale")

    assert not stale_dir.exists()
    assert not server._alive(postmaster)
