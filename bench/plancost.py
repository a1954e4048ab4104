"""What the namespaces' own indexes cost the planner (docs/archival.md, "What the
own indexes cost the planner"). Not part of docs/benchmarks.md: a diagnosis, run
by hand.

Two measurements, each on a throwaway embedded server:

* **the extension**: a facts table with `--large` namespaces that `memory.maintain()`
  gives their own HNSW and text indexes (700 facts each, `namespace_index_min_rows`
  600), 10 medium namespaces of 400 facts (in the shared index) and 200 tiny ones of
  5; 32-dimensional vectors. The planning time of the three per-call queries that
  are planned on every call (an own index's scan, the shared index's scan for a
  medium namespace, a medium namespace's text query), and the p50 of
  `search_facts` calls, with the own indexes in the table and with all but the
  large user's own pair dropped (in a transaction that is rolled back),
  alternating, 3 rounds.
* **plain tables**: the same own-scan and shared-scan queries on one table with
  `--large` pairs of partial indexes (an HNSW and a GIN per namespace) against a
  table list-partitioned by namespace (one partition per large namespace and a
  default one, each with its own plain indexes).

    .venv/bin/python -m bench.plancost [--large 34]
"""

from __future__ import annotations

import argparse
import json
import statistics
import uuid
from collections.abc import Callable

import numpy as np
import psycopg
from bench._common import create_database, embedded_server, timed, vector_literal
from pgvector.psycopg import register_vector

DIMS = 32
ORG = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
WORDS = [
    "apple",
    "river",
    "mountain",
    "coffee",
    "garden",
    "travel",
    "music",
    "dinner",
    "sister",
    "doctor",
    "paint",
    "football",
]
PLANS = 300  # EXPLAINs per planning-time median
CALLS = 300  # calls per p50


def _median_ms(run: Callable[[], float], n: int) -> float:
    return statistics.median(run() for _ in range(n))


def _planning_ms(conn: psycopg.Connection, sql: str) -> float:
    explain = "EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + sql
    return _median_ms(lambda: conn.execute(explain).fetchone()[0][0]["Planning Time"], PLANS)


def extension(large: int) -> dict[str, dict[str, list[float]]]:
    """Planning and call times on the extension's facts table, own indexes in and out."""
    rng = np.random.default_rng(1)
    large_users = [uuid.UUID(int=1000 + i) for i in range(large)]
    medium_users = [uuid.UUID(int=100_000 + i) for i in range(10)]
    tiny_users = [uuid.UUID(int=200_000 + i) for i in range(200)]
    layout = (
        [(u, 700) for u in large_users]
        + [(u, 400) for u in medium_users]
        + [(u, 5) for u in tiny_users]
    )
    centers = rng.standard_normal((16, DIMS))
    with embedded_server("plancost") as srv:
        conn = psycopg.connect(create_database(srv, "plancost", DIMS), autocommit=True)
        register_vector(conn)
        conn.execute("SELECT memory.configure('exact_search_max_rows', '100')")
        conn.execute("SELECT memory.configure('namespace_index_min_rows', '600')")
        users = [u for u, _ in layout]
        conn.execute(
            "SELECT memory.grant(%s, u, 'memory.read') FROM unnest(%s::uuid[]) u", (ORG, users)
        )
        conn.execute(
            "INSERT INTO memory.namespaces (organization_id, id, scope, owner_id)"
            " SELECT %s, memory._namespace_id(%s, 'user', u, NULL), 'user', u FROM unnest(%s::uuid[]) u"
            " ON CONFLICT DO NOTHING",
            (ORG, ORG, users),
        )
        conn.execute(
            f"CREATE TEMP TABLE staged (owner uuid, content text, embedding vector({DIMS}))"
        )
        with conn.cursor().copy("COPY staged FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["uuid", "text", "vector"])
            for user, n in layout:
                vectors = centers[rng.integers(0, 16, n)] + 0.4 * rng.standard_normal((n, DIMS))
                for i, v in enumerate(vectors.astype(np.float32)):
                    copy.write_row((user, " ".join(rng.choice(WORDS, 5)) + f" fact {i}", v))
        conn.execute(
            "INSERT INTO memory.facts (organization_id, namespace_id, content, embedding)"
            " SELECT %s, memory._namespace_id(%s, 'user', owner, NULL), content, embedding"
            " FROM staged ORDER BY random()",
            (ORG, ORG),
        )
        conn.execute("ANALYZE memory.facts")
        conn.execute("SELECT count(*) FROM memory.maintain()")
        conn.execute("VACUUM ANALYZE memory.facts")

        def namespace(user: uuid.UUID) -> uuid.UUID:
            return conn.execute(
                "SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, user)
            ).fetchone()[0]

        big, medium = large_users[0], medium_users[0]
        big_ns, medium_ns = namespace(big), namespace(medium)
        query = (centers[3] + 0.4 * rng.standard_normal(DIMS)).astype(np.float32)
        q = vector_literal(query)
        plans = {
            "own index's scan (large)": f"SELECT f.id FROM memory.facts f WHERE f.organization_id = '{ORG}'"
            f" AND f.namespace_id = '{big_ns}' AND f.forgotten_at IS NULL"
            f" ORDER BY COALESCE(f.embedding, f.embedding) <=> '{q}'::real[]::vector LIMIT 10",
            "shared index's scan (medium)": f"SELECT f.id FROM memory.facts f WHERE f.organization_id = '{ORG}'"
            f" AND f.namespace_id = ANY (ARRAY['{medium_ns}']::uuid[]) AND f.forgotten_at IS NULL"
            f" AND f.in_shared_index ORDER BY f.embedding <=> '{q}'::real[]::vector LIMIT 10",
            "text query (medium)": f"SELECT f.id FROM memory.facts f WHERE f.organization_id = '{ORG}'"
            f" AND f.namespace_id = '{medium_ns}' AND f.forgotten_at IS NULL"
            " AND f.search_text @@ to_tsquery('simple', 'coffee | garden')",
        }
        search = "SELECT id FROM memory.search_facts(%s, %s, %s::real[], '{}', 10)"
        calls = {
            "search_facts vector-only (large)": (big, ""),
            "search_facts hybrid (large)": (big, "coffee garden"),
            "search_facts vector-only (medium)": (medium, ""),
            "search_facts hybrid (medium)": (medium, "coffee garden"),
            "search_facts hybrid (tiny)": (tiny_users[0], "coffee garden"),
        }

        def call_ms(user: uuid.UUID, text: str) -> float:
            claims = json.dumps({"sub": str(user), "role": "authenticated"})
            conn.execute("SELECT set_config('request.jwt.claims', %s, false)", (claims,))

            def one() -> float:
                _, seconds = timed(
                    lambda: conn.execute(search, (ORG, text, query.tolist())).fetchall()
                )
                return 1000 * seconds

            try:
                return _median_ms(one, CALLS)
            finally:
                conn.execute("SELECT set_config('request.jwt.claims', '', false)")

        phases = ("own indexes in the table", "all but the large user's dropped")
        out: dict[str, dict[str, list[float]]] = {p: {} for p in phases}
        for round_ in range(3):
            for phase in phases if round_ % 2 == 0 else phases[::-1]:
                with conn.transaction(force_rollback=True):
                    if phase == phases[1]:
                        for (name,) in conn.execute(
                            "SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
                            " WHERE i.indrelid = 'memory.facts'::regclass AND c.relname ~ '^facts_ns_'"
                            " AND pg_get_expr(i.indpred, i.indrelid) NOT LIKE %s",
                            (f"%{big_ns}%",),
                        ).fetchall():
                            conn.execute(f'DROP INDEX memory."{name}"')
                    for label, sql in plans.items():
                        out[phase].setdefault("planning: " + label, []).append(
                            _planning_ms(conn, sql)
                        )
                    for label, (user, text) in calls.items():
                        out[phase].setdefault(label, []).append(call_ms(user, text))
        conn.close()
    return out


def plain_tables(large: int) -> dict[str, float]:
    """Planning time: one table with partial index pairs against list partitions."""
    rng = np.random.default_rng(0)
    big = [uuid.UUID(int=10 + i) for i in range(large)]
    small = uuid.UUID(int=5)
    columns = "ns uuid, id bigint, embedding vector(32), t tsvector, gone timestamptz"
    with (
        embedded_server("plancost-tables") as srv,
        psycopg.connect(srv.dsn(), autocommit=True) as conn,
    ):
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute(f"CREATE TABLE one ({columns})")
        conn.execute(f"CREATE TABLE parted ({columns}) PARTITION BY LIST (ns)")
        conn.execute("CREATE TABLE parted_default PARTITION OF parted DEFAULT")
        for i, ns in enumerate(big):
            conn.execute(f"CREATE TABLE parted_{i} PARTITION OF parted FOR VALUES IN ('{ns}')")
        for table in ("one", "parted"):
            with conn.cursor().copy(
                f"COPY {table} (ns, id, embedding) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["uuid", "int8", "vector"])
                for n, ns in enumerate([ns for ns in big for _ in range(200)] + [small] * 2000):
                    copy.write_row((ns, n, rng.standard_normal(DIMS).astype(np.float32)))
            conn.execute(f"CREATE INDEX ON {table} (ns, id)")
            conn.execute(f"CREATE INDEX ON {table} USING hnsw (embedding vector_cosine_ops)")
            conn.execute(f"CREATE INDEX ON {table} USING gin (t)")
        for ns in big:
            conn.execute(
                "CREATE INDEX ON one USING hnsw ((COALESCE(embedding, embedding)) vector_cosine_ops)"
                f" WHERE ns = '{ns}' AND gone IS NULL"
            )
            conn.execute(f"CREATE INDEX ON one USING gin (t) WHERE ns = '{ns}' AND gone IS NULL")
        conn.execute("ANALYZE one")
        conn.execute("ANALYZE parted")
        q = vector_literal(rng.standard_normal(DIMS))
        own, shared = "COALESCE(embedding, embedding)", "embedding"
        big_ns = big[0] if big else small

        def scan(table: str, ns: uuid.UUID, expression: str) -> str:
            return (
                f"SELECT id FROM {table} WHERE ns = '{ns}' AND gone IS NULL"
                f" ORDER BY {expression} <=> '{q}'::real[]::vector LIMIT 10"
            )

        return {
            "one table, a large namespace's scan": _planning_ms(conn, scan("one", big_ns, own)),
            "one table, a small namespace's scan": _planning_ms(conn, scan("one", small, shared)),
            "partitioned, a large namespace's scan": _planning_ms(
                conn, scan("parted", big_ns, shared)
            ),
            "partitioned, a small namespace's scan": _planning_ms(
                conn, scan("parted", small, shared)
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--large", type=int, default=34, help="namespaces with their own indexes (34)"
    )
    parser.add_argument(
        "--tables",
        type=int,
        nargs="*",
        default=[17, 68, 136, 272],
        help="namespaces for the plain tables",
    )
    args = parser.parse_args()
    print(
        f"The extension, {args.large} namespaces with their own indexes: median (min..max) of 3 rounds, ms"
    )
    for phase, rows in extension(args.large).items():
        print(f"\n| {phase} | ms |\n|---|---|")
        for label, xs in rows.items():
            print(f"| {label} | {statistics.median(xs):.3f} ({min(xs):.3f}..{max(xs):.3f}) |")
    print("\nPlain tables, planning time (median of 300 EXPLAINs), ms\n")
    print("| large namespaces | " + " | ".join(str(n) for n in args.tables) + " |")
    print("|---|" + "---|" * len(args.tables))
    columns = [plain_tables(n) for n in args.tables]
    for label in columns[0]:
        print(f"| {label} | " + " | ".join(f"{c[label]:.3f}" for c in columns) + " |")


if __name__ == "__main__":
    main()
