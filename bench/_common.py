"""Shared set-up for the benchmarks: an embedded server, a database with the
extension, machine facts, result files and summary statistics.

Benchmarks print what they measure and write it to `bench/results/*.json`;
they never assert timings (the machines they run on are noisy: every timing
is repeated and reported as median with its spread).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from pgmemory import server as embedded

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
LOCOMO_DIR = ROOT.parent / "shared" / "data" / "locomo"
ORG = "00000000-0000-0000-0000-00000000000a"  # one organization for every benchmark
DIMENSIONS = 384  # all-MiniLM-L6-v2


@contextmanager
def embedded_server(
    name: str, keep: bool = False, settings: dict[str, str] | None = None
) -> Iterator[embedded.EmbeddedServer]:
    """A fresh embedded server in a throwaway data directory, removed afterwards;
    with `keep`, a server in `bench-<name>-kept` that is reused and left in place.
    `settings` (server-wide, e.g. shared_buffers) are written with ALTER SYSTEM and
    the server restarted when any differs."""
    prefix = f"bench-{name}"
    if keep:
        data_dir = embedded.scratch_root() / f"{prefix}-kept"
        srv = _configured(embedded.start(data_dir), settings)
        try:
            yield srv
        finally:
            srv.stop()
        return
    embedded.sweep_stale_runs(prefix)
    srv = embedded.start(embedded.scratch_root() / f"{prefix}-{os.getpid()}", fresh=True)
    srv = _configured(srv, settings)
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(srv.data_dir, ignore_errors=True)


def _configured(
    srv: embedded.EmbeddedServer, settings: dict[str, str] | None
) -> embedded.EmbeddedServer:
    if not settings:
        return srv
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        changed = False
        for key, value in settings.items():
            row = conn.execute(
                "SELECT setting, unit FROM pg_settings WHERE name = %s", (key,)
            ).fetchone()
            if row is None:
                raise SystemExit(f"unknown server setting {key}")
            current = conn.execute(f"SHOW {key}").fetchone()[0]
            if current != value:
                conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
                changed = True
    if not changed:
        return srv
    srv.stop()
    srv.handle.start()  # re-reads postmaster.pid: the handle is cached per data directory
    return srv


def create_database(srv: embedded.EmbeddedServer, dbname: str, dimensions: int = DIMENSIONS) -> str:
    """A new database with the extension and `dimensions`-wide embeddings; its DSN (superuser)."""
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{dbname}"')
    dsn = srv.dsn(dbname)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION memory CASCADE")
        conn.execute("SELECT memory.configure_embeddings(%s)", (dimensions,))
    return dsn


def vector_literal(values: Sequence[float]) -> str:
    """A real[] / vector literal: `{0.1,0.2,...}` (shortest float repr)."""
    return "{" + ",".join(f"{v:.7g}" for v in values) + "}"


def machine() -> dict[str, Any]:
    """nproc, CPU model, memory and the versions that matter for the figures."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        m = re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())
        mem_gb = round(int(m.group(1)) / 1024 / 1024, 1) if m else None
    except OSError:
        pass
    import numpy
    import onnxruntime

    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_gb": mem_gb,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "onnxruntime": onnxruntime.__version__,
        "psycopg": psycopg.__version__,
    }
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "extension"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        info["commit"] = commit + ("+dirty" if dirty else "")
    except OSError:
        pass
    return info


def server_versions(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
        rows = conn.execute(
            "SELECT extname, extversion FROM pg_extension WHERE extname IN ('vector', 'memory')"
        ).fetchall()
    return {"postgresql": pg, **{name: version for name, version in rows}}


def summary(samples: Sequence[float]) -> dict[str, float]:
    """Median and spread of repeated measurements."""
    xs = sorted(samples)
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "min": xs[0],
        "max": xs[-1],
        "p95": percentile(xs, 95),
    }


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile."""
    xs = sorted(samples)
    if not xs:
        return float("nan")
    rank = max(1, min(len(xs), math.ceil(p / 100 * len(xs))))
    return xs[rank - 1]


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    data = {"written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), **data}
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")
    return path


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (printed, and pasted into docs/benchmarks.md)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(out)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or None (and no plots) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return None
    return plt


def save_figure(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def run_together(count: int, work: Callable[[int], None]) -> float:
    """`work(0)` .. `work(count - 1)` in threads released at once; the wall seconds
    until all have ended. The first error of any thread is raised after the join."""
    barrier = threading.Barrier(count + 1)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as e:  # reported after the join
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return wall
