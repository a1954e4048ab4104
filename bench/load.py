"""Load: the load of tests/load_harness.py for 10 minutes (16 clients doing what an
assistant platform does, 2 of them embed workers), then its integrity check of the
database against what every client was told; throughput and latency per operation.

    .venv/bin/python -m bench.load                  # 10 minutes on a fresh embedded server
    .venv/bin/python -m bench.load --quick          # 1 minute
    .venv/bin/python -m bench.load --seconds 120    # any length

Nothing is timed against a target: the exit status is 1 when a call failed
unexpectedly or the integrity check found a problem.
"""

from __future__ import annotations

import sys

from bench._common import Result, database, new_result, options, save, table
from tests.load_harness import Config, Load


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
        seed=args.seed,
    )
    with database(result, "load", config.dimensions) as dsn:
        load = Load(dsn, config)
        load.prepare()
        print(f"running {config.clients} clients for {config.seconds:.0f} s ...", flush=True)
        load.run()
        integrity = load.check()
    errors = load.errors()
    operations = [{"operation": name, **s} for name, s in load.throughput().items()]
    outcome = {
        "seconds": round(load.elapsed, 1),
        "total_ops": sum(s["ops"] for s in operations),
        "unexpected_errors": errors.unexpected_count,
        "unexpected_error_samples": errors.unexpected[:20],
        "interruptions": errors.interruptions,
        **integrity,
    }
    result["tables"] = {"operations": operations, "outcome": [outcome]}
    save(result, args.out)
    return 0 if not errors.unexpected_count and not integrity["problems"] else 1


def markdown(r: Result) -> str:
    """What the run did (printed; docs/benchmarks.md has no section for it)."""
    c, out = r["config"], r["tables"]["outcome"][0]
    keys = ("ops", "per_second", "retries", "p50_ms", "p95_ms", "rows")
    rows = [(s["operation"], *(f"{s[k]:,}" for k in keys)) for s in r["tables"]["operations"]]
    lines = [
        f"{c['clients']} clients ({c['embed_workers']} embed workers), {out['seconds']} s, "
        f"{out['total_ops']} operations",
        "",
        table(["operation", "ops", "ops/s", "retries", "p50 ms", "p95 ms", "rows"], rows),
        "",
        f"unexpected errors: {out['unexpected_errors']}",
        *(f"  {line}" for line in out["unexpected_error_samples"]),
        f"integrity: {len(out['problems'])} problems; checked {out['checked']}",
        *(f"  {line}" for line in out["problems"][:20]),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
