"""How hard the generated vectors are for an HNSW graph, against real embeddings.

The search benches (bench/search.py, bench/tenants.py, bench/bulk.py) generate
their vectors. This study sets them beside LocalEmbedder's (MiniLM) vectors of
real short texts, the unique package synopses of this machine's Debian archive
(`apt-cache dumpavail`): per set, the local intrinsic dimension (Levina and
Bickel's estimate over each query's 20 nearest neighbours), the cosine of the
nearest neighbour, and recall@10 and p50 by `ef_search` of one HNSW graph
(m 16, ef_construction 64, as the tenants' reference) over 50,000 of the vectors,
queried with 200 more that are not in it.

    .venv/bin/python -m bench.vectors   # about 5 minutes (bench/results/vectors.md)
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import numpy as np
import psycopg
from bench._common import (
    Result,
    Row,
    embedded_server,
    options,
    save_study,
    server_versions,
    set_index_build,
    spread,
    table,
)
from bench.search import VECTOR_KINDS
from bench.tenants import HEADS, corpus, ef_ladder, vector_table
from pgvector.psycopg import register_vector

ROWS = 50_000
QUERIES = 200
NEIGHBOURS = 20  # for the intrinsic dimension
K = 10
EF_LADDER = (10, 20, 40, 60, 100, 200, 400, 600, 1000)
TENANT = HEADS.index(0.05)  # the generated sets are the 5% tenant's (50,000 rows at 1,000,000)


def synopses() -> list[str]:
    """The archive's package synopses, once each (case-insensitively), in archive order."""
    if shutil.which("apt-cache") is None:
        raise SystemExit("bench/vectors.py reads real texts from apt-cache (a Debian machine)")
    out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True)
    seen: set[str] = set()
    texts = []
    for line in out.stdout.splitlines():
        if line.startswith("Description: "):
            text = line.removeprefix("Description: ").strip()
            if text.lower() not in seen:
                seen.add(text.lower())
                texts.append(text)
    return texts


def real_vectors(rows: int, queries: int) -> tuple[np.ndarray, np.ndarray, int]:
    from pgmemory.embedders import LocalEmbedder

    texts = synopses()
    if len(texts) < rows + queries:
        raise SystemExit(f"only {len(texts):,} synopses: fewer than {rows + queries:,}")
    picked = np.random.default_rng(0).permutation(len(texts))[: rows + queries]
    vectors = np.asarray(LocalEmbedder().embed([texts[i] for i in picked]), dtype=np.float32)
    return vectors[:rows], vectors[rows:], len(texts)


def generated_vectors(kind: str, rows: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """The 5% tenant's vectors as bench/tenants.py draws them, and new queries near them."""
    c = corpus(1_000_000, 20_000, HEADS, seed=7, vectors=kind)
    rng = np.random.default_rng(11)
    return c._vectors(rng, TENANT, rows), c._vectors(rng, TENANT, queries)


def geometry(rows: np.ndarray, queries: np.ndarray) -> Row:
    sims = queries @ rows.T
    nearest = np.sort(1 - sims, axis=1)[:, :NEIGHBOURS].clip(min=1e-9)
    lid = -1 / np.mean(np.log(nearest[:, :-1] / nearest[:, -1:]), axis=1)
    return {
        "intrinsic_dimension": float(np.median(lid)),
        "nearest_cosine": float(np.median(sims.max(axis=1))),
        "mean_cosine": float(sims.mean()),
    }


def ladder(
    conn: psycopg.Connection, rows: np.ndarray, queries: np.ndarray, rounds: int
) -> list[Row]:
    vector_table(conn, "points", rows)
    conn.execute(
        "CREATE INDEX ON points USING hnsw (embedding vector_cosine_ops)"
        " WITH (m = 16, ef_construction = 64)"
    )
    exact = [set(np.argsort(-(rows @ q))[:K].tolist()) for q in queries]
    return ef_ladder(conn, "points", list(queries), exact, EF_LADDER, rounds)


def markdown(r: Result) -> str:
    c, sets = r["config"], r["tables"]["sets"]
    first = {
        s["set"]: next((x for x in s["ladder"] if x["recall_at_10"] >= 0.97), None) for s in sets
    }
    summary = [
        [
            s["set"],
            f"{s['intrinsic_dimension']:.1f}",
            f"{s['nearest_cosine']:.3f}",
            f"{s['mean_cosine']:.3f}",
            "not reached" if first[s["set"]] is None else str(first[s["set"]]["ef_search"]),
        ]
        for s in sets
    ]
    by_ef = [
        [str(ef)]
        + [
            f"{x['recall_at_10']:.3f}, {spread(x['p50_ms'])} ms"
            for s in sets
            for x in s["ladder"]
            if x["ef_search"] == ef
        ]
        for ef in EF_LADDER
    ]
    return "\n".join(
        [
            "# Generated vectors against real embeddings (bench/vectors.py)",
            "",
            f"{c['rows']:,} vectors per set and {c['queries']} queries not among them."
            f" *Real*: LocalEmbedder's (MiniLM) vectors of {c['rows'] + c['queries']:,} of the"
            f" {c['synopses']:,} unique package synopses of this machine's Debian archive"
            " (`apt-cache dumpavail`), drawn at random. *Real-like* and *isotropic*: bench/search.py's"
            " two kinds of generated vectors, the 5% tenant's of bench/tenants.py and new queries"
            " near its topics. Local intrinsic dimension: Levina and Bickel's estimate over each"
            f" query's {c['neighbours']} nearest neighbours, median over the queries; cosines: median"
            " over the queries of the nearest one, and the mean over all pairs. The graph: one HNSW"
            " index (m 16, ef_construction 64) over the set, `ORDER BY embedding <=> q LIMIT 10`;"
            f" recall@10 against the exact scan, p50 median of {c['rounds']} rounds (min..max).",
            "",
            table(
                [
                    "vectors",
                    "intrinsic dimension",
                    "nearest cosine",
                    "mean cosine",
                    "ef_search for recall@10 0.97",
                ],
                summary,
            ),
            "",
            table(["ef_search"] + [f"{s['set']}: recall@10, p50" for s in sets], by_ef),
            "",
            "Reproduce: `.venv/bin/python -m bench.vectors`.",
        ]
    )


def main() -> None:
    ap = options(__doc__, "10,000 vectors per set")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows = 10_000 if args.quick else ROWS
    real, real_queries, n_synopses = real_vectors(rows, QUERIES)
    sets: list[tuple[str, np.ndarray, np.ndarray]] = [("real", real, real_queries)]
    sets += [(kind, *generated_vectors(kind, rows, QUERIES)) for kind in VECTOR_KINDS]
    measured: list[dict[str, Any]] = []
    with embedded_server("vectors") as srv, psycopg.connect(srv.dsn(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        set_index_build(conn)
        for name, vectors, queries in sets:
            print(f"  {name} ...", flush=True)
            measured.append(
                {
                    "set": name,
                    **geometry(vectors, queries),
                    "ladder": ladder(conn, vectors, queries, args.rounds),
                }
            )
        versions = server_versions(srv.dsn())
    result = {
        "bench": "vectors",
        "quick": args.quick,
        "config": {
            "rows": rows,
            "queries": QUERIES,
            "neighbours": NEIGHBOURS,
            "rounds": args.rounds,
            "synopses": n_synopses,
        },
        "tables": {"sets": measured},
        "environment": {"versions": versions},
    }
    save_study(result, args.out / f"vectors{'-quick' if args.quick else ''}", markdown(result))


if __name__ == "__main__":
    main()
