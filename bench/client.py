"""The Python client's own cost per call: `Memory(dsn).as_user(user)` calls against the
same SQL sent by hand on a raw psycopg connection as the same user, and against the
client's previous way of sending a call (four round trips), on a tiny namespace.
SECTION (below) is what is measured and how, as docs/benchmarks.md shows it.

    .venv/bin/python -m bench.client [--quick] [--rounds N]
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg
from bench._common import (
    ORG,
    Result,
    database,
    fill,
    new_result,
    options,
    save,
    spread,
    stat,
    table,
)

from pgmemory import Memory
from pgmemory._common import SET_CLAIMS, user_claims
from pgmemory._sync.connection import Source, _prepare
from pgmemory.calls import Call
from pgmemory.errors import translate

SECTION = """\
## The client's cost per call (bench/client.py)

What the Python client adds to a call: one user (`as_user`) with a tiny namespace ({facts} facts, one file of {file_lines} lines) calls, on the embedded server over its unix socket, {ops}. Three sides, each on its own autocommit connection, as the superuser with the user's claims:

- **raw SQL**: the reference, the cheapest correct way by hand: on a psycopg connection in pipeline mode `BEGIN`, `set_config('request.jwt.claims', …, true)` (the claims for this call only), the client's own SQL statement and parameters, `COMMIT`, one Sync: one round trip;
- **client**: `Memory(dsn).as_user(user)` as released: the same statements in one round trip;
- **client, four round trips**: the client with its previous way of sending a call (`conn.transaction()`, then `set_config`, then the call, each waited for: BEGIN, the claims, the call and COMMIT, four round trips), kept in this bench as it was.

Each round makes {calls:,} calls per side and operation after {warmup} untimed ones, the sides taking turns call by call (so they see the same load); a round's p50 per side, and the ratio of the client's p50 to the raw SQL's in that round. {rounds} rounds: median (min..max) of the rounds, milliseconds.

{tables}

Reproduce: `.venv/bin/python -m bench.client{quick}`."""

SIDES = {"raw": "raw SQL", "client": "client", "four": "client, four round trips"}
OPS = {
    "archival.search": "`archival.search(org, query)` (full text: no embedder)",
    "run": "`run(org, view)` of the file",
}
TARGET = 1.2  # client p50 at most 1.2x raw SQL's
FACTS = [f"Fact {i}: the team meets on {day} at {9 + i % 8} o'clock" for i, day in
         enumerate(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"] * 4)]  # fmt: skip
FILE_LINES = 20
QUERY = "team meets Tuesday"
VIEW = {"command": "view", "path": "/memories/notes.md"}


def four_round_trips(self: Source, claims: str | None, call: Call[Any]) -> Any:
    """The client's `Source.execute` before it pipelined the call, word for word."""
    login = None
    try:
        with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            login = conn.info.user
            _prepare(conn)
            if claims is not None:
                cur.execute(SET_CLAIMS, (claims,))
            cur.execute(call.sql, call.params)
            rows = cur.fetchall()
    except psycopg.Error as exc:
        err = translate(exc, login)
        if err is exc:
            raise
        raise err from exc
    return call.shape(rows)


class Raw:
    """The same statements as the client's, by hand, in one round trip."""

    def __init__(self, dsn: str, claims: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.claims = claims

    def execute(self, call: Call[Any]) -> Any:
        conn = self.conn
        with conn.cursor() as cur:
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute(SET_CLAIMS, (self.claims,))
                cur.execute(call.sql, call.params)
                conn.execute("COMMIT")
            return call.shape(cur.fetchall())


def captured(client: Any, op: Callable[[Any], Any]) -> Call[Any]:
    """The Call the client sends for `op` (its SQL and parameters), for the raw side."""
    source = client._source
    seen: list[Call[Any]] = []
    real = source.execute

    def spy(claims: str | None, call: Call[Any]) -> Any:
        seen.append(call)
        return real(claims, call)

    source.execute = spy
    try:
        op(client)
    finally:
        del source.execute
    return seen[-1]


def measure(dsn: str, calls: int, warmup: int, rounds: int) -> list[dict[str, Any]]:
    user_id = uuid.UUID(int=0xC11E47)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, user_id))
    clients = {side: Memory(dsn).as_user(user_id) for side in ("client", "four")}
    four = clients["four"]._source
    four.execute = four_round_trips.__get__(four)
    setup = clients["client"]
    for fact in FACTS:
        setup.archival.save(ORG, fact)
    setup.write(ORG, VIEW["path"], "".join(f"line {i}\n" for i in range(FILE_LINES)))
    raw = Raw(dsn, user_claims(user_id))
    ops: dict[str, Callable[[Any], Any]] = {
        "archival.search": lambda c: c.archival.search(ORG, QUERY),
        "run": lambda c: c.run(ORG, VIEW),
    }
    rows = []
    try:
        for op_name, op in ops.items():
            call = captured(setup, op)
            expected = op(setup)
            assert expected, op_name  # the tiny namespace has hits and the file
            side_calls: dict[str, Callable[[], Any]] = {
                "raw": lambda call=call: raw.execute(call),
                "client": lambda op=op: op(clients["client"]),
                "four": lambda op=op: op(clients["four"]),
            }
            for fn in side_calls.values():
                assert fn() == expected  # all three sides return the same result
                for _ in range(warmup):
                    fn()
            p50s: dict[str, list[float]] = {side: [] for side in SIDES}
            for r in range(rounds):
                samples: dict[str, list[float]] = {side: [] for side in SIDES}
                order = list(SIDES)
                for i in range(calls):
                    k = (i + r) % len(order)  # each side first as often as the others
                    for side in order[k:] + order[:k]:
                        t0 = time.perf_counter()
                        side_calls[side]()
                        samples[side].append((time.perf_counter() - t0) * 1000)
                for side in SIDES:
                    p50s[side].append(statistics.median(samples[side]))
            row: dict[str, Any] = {"op": op_name, **{s: stat(v) for s, v in p50s.items()}}
            for side in ("client", "four"):
                ratios = [a / b for a, b in zip(p50s[side], p50s["raw"], strict=True)]
                row[f"{side}_ratio"] = stat(ratios)
            print(
                f"{op_name:>16}: raw {row['raw']['median']:.3f} ms, client"
                f" {row['client']['median']:.3f} ms ({row['client_ratio']['median']:.2f}x),"
                f" four round trips {row['four']['median']:.3f} ms"
                f" ({row['four_ratio']['median']:.2f}x)"
            )
            rows.append(row)
    finally:
        raw.conn.close()
        for c in clients.values():
            with suppress(Exception):
                c._source.close()
    return rows


def main() -> None:
    ap = options(__doc__, "300 calls per side and operation a round instead of 2,000")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (3 quick, 5 full)")
    args = ap.parse_args()
    calls, warmup = (300, 50) if args.quick else (2_000, 200)
    rounds = args.rounds or (3 if args.quick else 5)
    result = new_result(
        "client",
        args.quick,
        calls=calls,
        warmup=warmup,
        rounds=rounds,
        facts=len(FACTS),
        file_lines=FILE_LINES,
    )
    with database(result, "client") as dsn:
        result["tables"]["calls"] = measure(dsn, calls, warmup, rounds)
    save(result, args.out)


def targets(r: Result) -> list[dict[str, Any]]:
    out = []
    for row in r["tables"]["calls"]:
        ratio = row["client_ratio"]
        out.append(
            {
                "target": f"client call p50 ≤ {TARGET}x raw SQL as the same user ({row['op']})",
                "measured": f"{spread(ratio)}x ({row['client']['median']:.3f} ms vs"
                f" {row['raw']['median']:.3f} ms; four round trips:"
                f" {row['four_ratio']['median']:.2f}x)",
                "met": ratio["median"] <= TARGET,
            }
        )
    return out


def markdown(r: Result) -> str:
    headers = ("operation", *(f"{label}, p50 ms" for label in SIDES.values()))
    headers += ("client / raw", "four round trips / raw")
    rows = [
        (
            OPS[row["op"]],
            *(spread(row[side], ".3f") for side in SIDES),
            spread(row["client_ratio"]) + "x",
            spread(row["four_ratio"]) + "x",
        )
        for row in r["tables"]["calls"]
    ]
    quick = " --quick" if r["quick"] else ""
    ops = " and ".join(OPS.values())
    return fill(SECTION, r["config"], ops=ops, tables=table(headers, rows), quick=quick)


if __name__ == "__main__":
    main()
