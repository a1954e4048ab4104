"""Load: the load of tests/load_harness.py for 10 minutes (16 clients doing what an
assistant platform does, 2 of them embed workers and 2 capture workers), then its
integrity check of the database against what every client was told; throughput and
latency per operation and per kind. SECTION (below) is what is measured and how, as
docs/benchmarks.md shows it.

    .venv/bin/python -m bench.load                  # 10 minutes on a fresh embedded server
    .venv/bin/python -m bench.load --quick          # 1 minute
    .venv/bin/python -m bench.load --seconds 120    # any length

Nothing is timed against a target: the exit status is 1 when a call failed
unexpectedly or the integrity check found a problem.
"""

from __future__ import annotations

import sys
from typing import Any

import psycopg
from bench._common import Result, database, fill, new_result, options, save, table
from tests.load_harness import MIX, Config, Load

SECTION = """\
## Under load (bench/load.py)

{clients} clients on one database for {seconds:.0f} s (tests/load_harness.py, the load CI runs for 20 seconds in tests/sql/test_load_short.py): {mixed} mixed clients doing what an assistant platform does — core memory edits on shared files (row-lock contention) and in folders of their own, optimistic counters, fact saves with dedupe, fact and message searches, message indexing (many user messages carry something to remember), document read-modify-writes — {embed_workers} embed workers (`pending_embeddings` / `set_memory_embeddings` with random unit vectors) and {capture_workers} capture workers (`pending_captures` of up to {capture_batch} chats, {capture_max_messages} messages each, then per chat a read of the facts captured from it before and `capture_facts` with a rule's answer instead of a model's: adds, supersedes, forgets, duplicates, secrets and unknown fact ids, every status predicted and compared; some leases given back with `fail_capture`, some answers malformed, some applied captures sent again). {dimensions}-dimensional embeddings, seed {seed}. Every call is one transaction with the caller's claims, as the Python client makes it; latencies are per call as the client sees it, in milliseconds. Then the integrity check compares the database with what every client was told: files, counters, folders, facts, messages, embeddings, documents, dedupe, and for capture that no chat was leased to two workers at once, no capture or message was applied twice, and every captured fact is stored as acknowledged.

{outcome}

Per kind of operation (a kind's calls together):

{kinds}

Per operation (*retries*: expected conflicts, retried; *rows*: embeddings written, chats leased, capture operations applied, known facts read):

{operations}

Capture: {capture}

Reproduce: `.venv/bin/python -m bench.load` (`--quick`: 1 minute)."""

LATENCY_KEYS = ("ops", "per_second", "retries", "p50_ms", "p95_ms", "p99_ms", "rows")
LATENCY_HEADERS = ["ops", "ops/s", "retries", "p50 ms", "p95 ms", "p99 ms", "rows"]


def capture_backlog(dsn: str, org: Any) -> dict[str, int]:
    """The chats still pending capture when the clients stopped, and their messages."""
    with psycopg.connect(dsn) as conn:
        chats, messages = conn.execute(
            "SELECT count(*), coalesce(sum(pending_messages), 0)::int"
            " FROM memory.capture_status(%s) WHERE status = 'pending'",
            (org,),
        ).fetchone()
    return {"pending_chats": chats, "pending_messages": messages}


def main() -> int:
    ap = options(__doc__, "1 minute instead of 10")
    ap.add_argument("--seconds", type=float, help="how long the clients run (default 600)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    seconds = args.seconds or (60.0 if args.quick else 600.0)
    config = Config(clients=args.clients, seconds=seconds, seed=args.seed)
    result = new_result(
        "load",
        args.quick,
        seconds=seconds,
        clients=config.clients,
        embed_workers=config.embed_workers,
        capture_workers=config.capture_workers,
        mixed=config.clients - config.embed_workers - config.capture_workers,
        capture_batch=config.capture_batch,
        capture_max_messages=config.capture_max_messages,
        dimensions=config.dimensions,
        seed=args.seed,
        mix=MIX,
    )
    with database(result, "load", config.dimensions) as dsn:
        load = Load(dsn, config)
        world = load.prepare()
        print(f"running {config.clients} clients for {config.seconds:.0f} s ...", flush=True)
        load.run()
        backlog = capture_backlog(dsn, world.org)
        integrity = load.check()
    errors = load.errors()
    operations = [{"operation": name, **s} for name, s in load.throughput().items()]
    kinds = [{"kind": name, **s} for name, s in load.throughput(by_kind=True).items()]
    outcome = {
        "seconds": round(load.elapsed, 1),
        "total_ops": sum(s["ops"] for s in operations),
        "unexpected_errors": errors.unexpected_count,
        "unexpected_error_samples": errors.unexpected[:20],
        "interruptions": errors.interruptions,
        **integrity,
    }
    result["tables"] = {
        "operations": operations,
        "kinds": kinds,
        "captures": [{**load.captures(), **backlog}],
        "outcome": [outcome],
    }
    save(result, args.out)
    return 0 if not errors.unexpected_count and not integrity["problems"] else 1


def _rows(stats: list[dict[str, Any]], label: str) -> list[tuple[str, ...]]:
    def cell(v: Any) -> str:
        return f"{v:,}" if isinstance(v, int | float) else str(v)

    return [(s[label], *(cell(s[k]) for k in LATENCY_KEYS)) for s in stats]


def _kinds(r: Result) -> list[dict[str, Any]]:
    """The per-kind table; from the operations for a result written before it existed."""
    if "kinds" in r["tables"]:
        return r["tables"]["kinds"]
    merged: dict[str, dict[str, Any]] = {}
    for s in r["tables"]["operations"]:
        m = merged.setdefault(s["operation"].split(".")[0], {"ops": 0, "retries": 0, "rows": 0})
        for k in ("ops", "retries", "rows"):
            m[k] += s[k]
    seconds = r["tables"]["outcome"][0]["seconds"]
    return [
        {
            "kind": k,
            **m,
            "per_second": round(m["ops"] / seconds, 2),
            **dict.fromkeys(LATENCY_KEYS[3:6], ""),
        }
        for k, m in sorted(merged.items())
    ]


def _capture(r: Result) -> str:
    if not r["tables"].get("captures"):
        return "no capture workers in this run."
    c = r["tables"]["captures"][0]
    statuses = ", ".join(f"{k} {v:,}" for k, v in c["statuses"].items())
    return (
        f"{c['leases']:,} chats leased: {c['applied']:,} applied ({c['messages_captured']:,}"
        f" messages), {c['failed']:,} given back, {c['lost']:,} lost (lease ran out),"
        f" {c['abandoned']:,} abandoned; operations by status: {statuses}. When the clients"
        f" stopped, {c['pending_chats']:,} chats ({c['pending_messages']:,} messages) were"
        " still pending."
    )


def _outcome(r: Result) -> str:
    out = r["tables"]["outcome"][0]
    lines = [
        f"**{out['total_ops']:,} operations in {out['seconds']} s"
        f" ({out['total_ops'] / out['seconds']:,.0f}/s); {out['unexpected_errors']} unexpected"
        f" errors; integrity: {len(out['problems'])} problems** in"
        f" {out['acknowledged_writes']:,} acknowledged writes.",
        *(f"- unexpected: {line}" for line in out["unexpected_error_samples"]),
        *(f"- problem: {line}" for line in out["problems"][:20]),
        "",
        "Checked: " + ", ".join(f"{k} {v:,}" for k, v in out["checked"].items()) + ".",
    ]
    return "\n".join(lines)


def markdown(r: Result) -> str:
    c = r["config"]
    defaults = Config()
    values = {  # results written before the capture workers lack these
        "capture_workers": 0,
        "capture_batch": defaults.capture_batch,
        "capture_max_messages": defaults.capture_max_messages,
        "dimensions": defaults.dimensions,
        **c,
    }
    values.setdefault("mixed", c["clients"] - c["embed_workers"] - values["capture_workers"])
    return fill(
        SECTION,
        values,
        outcome=_outcome(r),
        kinds=table(["kind", *LATENCY_HEADERS], _rows(_kinds(r), "kind")),
        operations=table(
            ["operation", *LATENCY_HEADERS], _rows(r["tables"]["operations"], "operation")
        ),
        capture=_capture(r),
    )


def targets(r: Result) -> list[dict[str, Any]]:
    c, out = r["config"], r["tables"]["outcome"][0]
    under = f"{c['clients']} clients for {out['seconds']:.0f} s"
    capture = r["tables"].get("captures") or [{"applied": 0}]
    ops = {s["operation"]: s for s in r["tables"]["operations"]}
    p95 = ", ".join(
        f"{name.split('.')[1]} {ops[name]['p95_ms']:,} ms"
        for name in ("capture.lease", "capture.apply")
        if name in ops
    )
    return [
        {
            "target": f"no unexpected error under load ({under}, capture workers running)",
            "measured": f"{out['unexpected_errors']} unexpected errors",
            "met": out["unexpected_errors"] == 0,
        },
        {
            "target": "no integrity problem: the database holds what every client was told",
            "measured": f"{len(out['problems'])} problems in {out['acknowledged_writes']:,}"
            " acknowledged writes",
            "met": not out["problems"],
        },
        {
            "target": "throughput reported, capture included",
            "measured": f"{out['total_ops'] / out['seconds']:,.0f} operations/s;"
            f" {capture[0]['applied']:,} captures applied" + (f" (p95 {p95})" if p95 else ""),
            "met": out["total_ops"] > 0 and capture[0]["applied"] > 0,
        },
    ]


if __name__ == "__main__":
    sys.exit(main())
