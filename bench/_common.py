"""What the benches share: the result schema, the embedded server, the statistics,
and the one writer of tables and figures.

A bench is its configuration and its measurement. Its `main()` parses its options
(`options`), starts a `Result` (`new_result`), fills `result["tables"]` with rows of
measurements and hands it to `save`, which writes `bench/results/<bench>.json`
(`<bench>-quick.json` with --quick), prints the bench's `markdown(result)` and
`targets(result)`, and draws its `FIGURES`. bench/report.py reads the same files
into docs/benchmarks.md.

Benchmarks never assert timings (the machines they run on are noisy): every timing
is repeated and reported as a `Stat`, its median with its spread.
"""

from __future__ import annotations

import argparse
import importlib
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
from typing import Any, TypedDict

import numpy as np
import psycopg

from pgmemory import server as embedded

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
LOCOMO_DIR = ROOT.parent / "shared" / "data" / "locomo"
ORG = "00000000-0000-0000-0000-00000000000a"  # one organization for every benchmark
DIMENSIONS = 384  # all-MiniLM-L6-v2


# ------------------------------------------------------------------------- the schema


class Stat(TypedDict):
    """One figure measured `n` times: the median and the spread of the repeats."""

    n: int
    median: float
    min: float
    max: float
    p95: float


# A row of a table: its labels (str, int) and its figures (numbers, Stats, or lists
# with one number per round).
Row = dict[str, Any]


class Result(TypedDict):
    """What a bench writes and bench/report.py reads (bench/results/<bench>[-quick].json)."""

    bench: str  # the module: "core" for bench/core.py
    quick: bool  # run with --quick (smaller scale, fewer repeats)
    config: dict[str, Any]  # what was run: sizes, rounds, seeds, the data it ran on
    tables: dict[str, list[Row]]  # the measurements, table by table
    environment: dict[str, Any]  # written_at, machine, versions, load averages, settings


def new_result(bench: str, quick: bool, **config: Any) -> Result:
    environment = {"machine": machine(), "loadavg_before": list(os.getloadavg())}
    return {
        "bench": bench,
        "quick": quick,
        "config": config,
        "tables": {},
        "environment": environment,
    }


def result_name(result: Result) -> str:
    """bench[-variant][-quick]: a variant (another configuration) keeps its own file."""
    variant = result["config"].get("variant")
    name = f"{result['bench']}-{variant}" if variant else result["bench"]
    return f"{name}-quick" if result["quick"] else name


def options(doc: str, quick: str) -> argparse.ArgumentParser:
    """The arguments every bench takes (--quick, --out); the bench adds its own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--out", type=Path, default=RESULTS_DIR, help="for the result and figures")
    return ap


def save(result: Result, out: Path = RESULTS_DIR) -> None:
    """Writes the result file, prints the bench's section and targets, draws its figures."""
    env = result["environment"]
    env["loadavg_after"] = list(os.getloadavg())
    env["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    module = importlib.import_module(f"bench.{result['bench']}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result_name(result)}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    if hasattr(module, "markdown"):
        print("\n" + module.markdown(result) + "\n")
    for t in getattr(module, "targets", lambda _: [])(result):
        print(f"[{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['measured']}")
    print(f"wrote {_shown(path)}")
    draw_figures(result, out)


def save_study(result: Result, out: Path, text: str) -> None:
    """A side study's result (not a docs/benchmarks.md section): `out`.json, and
    its markdown `text` in `out`.md, printed too."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(text + "\n")
    print("\n" + text + f"\nwrote {_shown(out)}.json and .md")


def unit_vectors(rng: np.random.Generator, n: int, dimensions: int = DIMENSIONS) -> np.ndarray:
    """n random unit vectors (float32): the benches' stand-in embeddings."""
    v = rng.standard_normal((n, dimensions)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def join_large_namespaces(conn: psycopg.Connection, staged: str) -> None:
    """Before a COPY-style fill from `staged` (owner, ...): marks each user namespace with
    more than exact_search_max_rows staged rows as joined to the shared HNSW index, as
    save_facts would have once it passed the line, so that a trigger puts its facts into
    the index as they are inserted (docs/archival.md, "Search")."""
    conn.execute(
        "INSERT INTO memory.shared_index_namespaces (organization_id, namespace_id) "
        f"SELECT %(org)s, memory._namespace_id(%(org)s, 'user', owner, NULL) FROM {staged} "
        "GROUP BY owner HAVING count(*) > memory._setting_int('exact_search_max_rows')",
        {"org": ORG},
    )


def join_if_past_line(conn: psycopg.Connection, namespace_id: str, rows: int) -> None:
    """Before a COPY of `rows` facts into one namespace of ORG: joins it to the shared
    HNSW index if they take it past exact_search_max_rows (as join_large_namespaces)."""
    conn.execute(
        "SELECT memory._join_shared_index(%s, %s) WHERE %s > memory._setting_int('exact_search_max_rows')",
        (ORG, namespace_id, rows),
    )


# memory.maintain()'s index builds: memory for the build, leader + 1 worker on 2 cores.
INDEX_BUILD = {"maintenance_work_mem": "2GB", "max_parallel_maintenance_workers": "1"}


def set_index_build(conn: psycopg.Connection) -> None:
    """The session's settings for HNSW index builds (INDEX_BUILD)."""
    for key, value in INDEX_BUILD.items():
        conn.execute("SELECT set_config(%s, %s, false)", (key, value))


def run_maintain(conn: psycopg.Connection, min_rows: int | None) -> tuple[list, float]:
    """memory.maintain() with namespace_index_min_rows set to `min_rows` (None: the
    default; 0 drops every own index): the rows it returns and the seconds it took."""
    conn.execute(
        "SELECT memory.configure('namespace_index_min_rows', %s)",
        (None if min_rows is None else str(min_rows),),
    )
    set_index_build(conn)
    rows, seconds = timed(lambda: conn.execute("SELECT * FROM memory.maintain()").fetchall())
    conn.execute("ANALYZE memory.facts")
    conn.execute("ANALYZE memory.messages")
    return rows, seconds


# ------------------------------------------------------------------------- statistics


def stat(samples: Sequence[float]) -> Stat:
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
    return xs[max(1, min(len(xs), math.ceil(p / 100 * len(xs)))) - 1]


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """`fn(*args)` and the seconds it took."""
    t0 = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - t0


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


# ------------------------------------------------------------------------- tables and figures


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (printed, and written into docs/benchmarks.md)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(out)


def fill(template: str, *values: dict[str, Any], **more: Any) -> str:
    """A section template (str.format syntax) filled from dicts of values (later ones win)."""
    return template.format_map({k: v for d in (*values, more) for k, v in d.items()})


def section(template: str, r: Result, *values: dict[str, Any], **more: Any) -> str:
    """`fill` with the result's config first, `{name}` (the result file's stem) and
    `{quick}` (" --quick" or nothing) for the figure and the command to reproduce it."""
    quick = " --quick" if r["quick"] else ""
    return fill(template, r["config"], *values, name=result_name(r), quick=quick, **more)


def index(rows: Sequence[Row], *keys: str) -> dict[Any, Any]:
    """Rows by the values of `keys`: {row[keys[0]]: {row[keys[1]]: row}} for two."""
    out: dict[Any, Any] = {}
    for row in rows:
        level = out
        for key in keys[:-1]:
            level = level.setdefault(row[key], {})
        level[row[keys[-1]]] = row
    return out


def spread(s: Stat, fmt: str = ".2f") -> str:
    """A Stat as a table cell: `median (min..max)`."""
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}..{s['max']:{fmt}})"


def medians(stats: Sequence[Stat]) -> list[float]:
    return [s["median"] for s in stats]


def error_bars(stats: Sequence[Stat]) -> list[list[float]]:
    """matplotlib's yerr/xerr for bars at the medians: down to min, up to max."""
    return [[s["median"] - s["min"] for s in stats], [s["max"] - s["median"] for s in stats]]


def grouped_bars(
    ax: Any, labels: Sequence[str], series: dict[str, Sequence[Stat]], **ticks: Any
) -> float:
    """Bars at the medians (error bars min..max), the series side by side in each group
    of `labels`; returns the width of a bar."""
    width = 0.8 / len(series)
    for i, (name, stats) in enumerate(series.items()):
        xs = [j + i * width for j in range(len(labels))]
        ax.bar(xs, medians(stats), width, yerr=error_bars(stats), capsize=2, label=name)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(labels))], labels, **ticks)
    return width


def log_scale(ax: Any) -> None:
    """A log y axis with plain numbers at its ticks."""
    from matplotlib.ticker import FormatStrFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))


def draw_figures(result: Result, out: Path = RESULTS_DIR) -> None:
    """The bench's `FIGURES` ({suffix: draw(plt, result) -> figure}) as
    `<out>/<bench>[-quick]<suffix>.png`; none without matplotlib."""
    figures = getattr(importlib.import_module(f"bench.{result['bench']}"), "FIGURES", {})
    if not figures:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figures")
        return
    for suffix, draw in figures.items():
        fig = draw(plt, result)
        if fig is None:
            continue
        fig.tight_layout()
        path = out / f"{result_name(result)}{suffix}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(f"wrote {_shown(path)}")


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


# ------------------------------------------------------------------------- the server


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
        srv = embedded.start(embedded.scratch_root() / f"{prefix}-kept")
    else:
        embedded.sweep_stale_runs(prefix)
        srv = embedded.start(embedded.scratch_root() / f"{prefix}-{os.getpid()}", fresh=True)
    try:
        with psycopg.connect(srv.dsn(), autocommit=True) as conn:
            changed = False
            for key, value in (settings or {}).items():  # SHOW fails on an unknown name
                if conn.execute(f"SHOW {key}").fetchone()[0] != value:
                    conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
                    changed = True
        if changed:
            srv.stop()
            srv.handle.start()  # re-reads postmaster.pid: the handle is cached per data directory
        yield srv
    finally:
        srv.stop()
        if not keep:
            shutil.rmtree(srv.data_dir, ignore_errors=True)


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


@contextmanager
def database(result: Result, name: str, dimensions: int = DIMENSIONS) -> Iterator[str]:
    """A fresh embedded server with one database `name` (create_database); its DSN.
    The server's versions go into the result's environment."""
    with embedded_server(name) as srv:
        dsn = create_database(srv, name, dimensions)
        result["environment"]["versions"] = server_versions(dsn)
        yield dsn


def server_versions(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
        rows = conn.execute(
            "SELECT extname, extversion FROM pg_extension WHERE extname IN ('vector', 'memory')"
        ).fetchall()
    return {"postgresql": pg, **dict(rows)}


def server_settings(dsn: str, names: Sequence[str]) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        return {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}


def function_stats(dsn: str, function: str, calls: int = 1) -> list[tuple[str, int, float, float]]:
    """pg_stat_user_functions of the memory schema, (name, calls, total ms, self ms), most
    self time first, once they show `calls` calls of `function`: a session's counters
    reach them only when its backend goes idle or exits. [] if they never do."""
    query = (
        "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions "
        "WHERE schemaname = 'memory' ORDER BY self_time DESC"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(50):
            rows = conn.execute(query).fetchall()
            if any(name == function and n >= calls for name, n, *_ in rows):
                return rows
            time.sleep(0.1)
            conn.execute("SELECT pg_stat_clear_snapshot()")
    return []


def locomo_sessions(conversation: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The sessions of a LoCoMo conversation in order, each a list of turns
    ({"speaker", "dia_id", "text", ...})."""
    names = [k for k in conversation if re.fullmatch(r"session_\d+", k)]
    return [conversation[k] for k in sorted(names, key=lambda k: int(k.split("_")[1]))]


def locomo_turns(n: int) -> list[str]:
    """The first `n` turns of the LoCoMo conversations as `speaker: text`."""
    texts: list[str] = []
    for path in sorted(LOCOMO_DIR.glob("conv-*.json")):
        data = json.loads(path.read_text())
        sessions = locomo_sessions(data.get("conversation", data))
        texts += [f"{t['speaker']}: {t['text']}" for s in sessions for t in s]
    return texts[:n]


def vector_literal(values: Sequence[float]) -> str:
    """A real[] / vector literal: `{0.1,0.2,...}` (shortest float repr)."""
    return "{" + ",".join(f"{v:.7g}" for v in values) + "}"


def machine() -> dict[str, Any]:
    """nproc, CPU model, memory and the versions that matter for the figures."""
    import numpy
    import onnxruntime

    def proc(path: str, pattern: str) -> str | None:
        try:
            m = re.search(pattern, Path(path).read_text(), re.MULTILINE)
        except OSError:
            return None
        return m.group(1).strip() if m else None

    mem_kb = proc("/proc/meminfo", r"^MemTotal:\s+(\d+)")

    def git(*args: str) -> str:
        try:
            run = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        except OSError:
            return ""
        return run.stdout.strip()

    dirty = git("status", "--porcelain", "extension")
    return {
        "nproc": os.cpu_count(),
        "cpu": proc("/proc/cpuinfo", r"^model name\s*:(.*)$") or "unknown",
        "mem_gb": round(int(mem_kb) / 1024 / 1024, 1) if mem_kb else None,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "onnxruntime": onnxruntime.__version__,
        "psycopg": psycopg.__version__,
        "commit": git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else ""),
    }
