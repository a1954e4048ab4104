"""Loading facts in bulk: memory.save_facts with each fact's vector in the JSON (how
the client sent them before) against the vectors as one binary real[] per call
(`embeddings`, how it sends them now), 1,000 facts per call, dedupe on, into a table
of 200,000 facts; then an initial load with the HNSW index in place against the same
load with the index built afterwards. SECTION (below) is what is measured and how, as
docs/benchmarks.md shows it.

    .venv/bin/python -m bench.bulk --quick    # a table of 50,000 facts
    .venv/bin/python -m bench.bulk            # 200,000 facts
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np
import psycopg
from bench._common import (
    DIMENSIONS,
    ORG,
    Result,
    Row,
    create_database,
    embedded_server,
    index,
    join_large_namespaces,
    new_result,
    options,
    save,
    section,
    server_settings,
    server_versions,
    spread,
    stat,
    table,
)
from bench.search import Corpus
from pgvector.psycopg import register_vector

from pgmemory import calls

SECTION = """\
## Loading facts in bulk (bench/bulk.py)

`memory.save_facts` with dedupe on (default threshold {threshold}), {batch:,} facts per call, two ways: **JSON**, each fact's vector inside the facts' JSON (`"embedding": [...]`, parsed by the server; how the Python client sent them before), and **binary**, the call's vectors as one 2-D `real[]` bound in binary (`embeddings`; how `archival.save_extracted` sends them now). Each is timed end to end from the client: building the call's parameters, the round trip and the whole server-side call. Both methods load the same facts in a round (their order alternating between rounds), each into its own namespace; the table holds {table_facts:,} facts of {users:,} other users (bench/search.py's generated layout: clustered 384-dimensional vectors, Zipf-sized namespaces), loaded by COPY with the indexes built afterwards ({load}). The loaded facts are generated the same way, {dup_pct:.0f}% of them near-duplicates (cosine ≈ 0.99) of earlier ones, which dedupe refuses. Server: `shared_buffers` {shared_buffers}, otherwise the embedded server's defaults.

facts/s: median of {repeat} rounds (min..max); speed-up: binary over JSON per round, then the median (min..max).

{rates}

Where the time goes: the JSON path parses every vector on the server (~{parse_ms:.2f} ms per fact, measured alone: `memory._embedding_json` over the same {batch:,} vectors); once that is gone, each saved fact's entry in the HNSW index dominates (a fresh namespace's facts stay out of the shared index up to `exact_search_max_rows`, 2,000; the third call takes it past the line and moves its first 2,000 in, so each of the 3,000 gets its entry all the same): inserting {batch:,} rows with their vectors into this table took {insert_hnsw_ms:.2f} ms per row into the HNSW index and {insert_plain_ms:.2f} ms without the index (one `INSERT … SELECT`, rolled back). In the namespace of {big:,} facts the call's dedupe check compares each of its {batch:,} vectors with every live fact of the namespace, in one pass over the namespace (a batch of n is checked exactly while the namespace holds at most min(n, 10) {x} `exact_search_max_rows` live facts, 20,000 by default; above that each fact walks the HNSW index).

### An initial load: the HNSW index during the load or after it

{initial_facts:,} facts (of {initial_users} users, {batch:,} per user and call, binary; each user under `exact_search_max_rows`, so none of these facts enters the shared index) into an empty table, once with the HNSW index in place and once with it dropped first and built after the load (`CREATE INDEX` with `maintenance_work_mem` {mwm}); median of {repeat} rounds (min..max):

{initial}

Reproduce: `.venv/bin/python -m bench.bulk{quick}` (`--repeat N`)."""

BATCH = calls.SAVE_FACTS_MAX
FRESH = "fresh namespace"
SERVER_SETTINGS = {"shared_buffers": "2GB"}  # the table and its indexes fit
MWM = "1GB"
MODEL = "bench"
DUPLICATES = 0.05
TARGET_SPEEDUP = 5.0
X = "\N{MULTIPLICATION SIGN}"
JSON_SQL = (
    "SELECT ord, id, duplicate_of, similarity"
    " FROM memory.save_facts(%s::uuid, %s::jsonb, %s::jsonb, %s::float8)"
)


class Facts:
    """Facts to load: texts and clustered vectors as the search bench makes them, some
    of them near-duplicates of earlier ones."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus

    def make(
        self, n: int, seed: int, user: int | None = None
    ) -> tuple[list[str], list[list[float]]]:
        """`n` facts of `user` (its topics and offset; default: a user of its own)."""
        mine = np.random.default_rng((1, seed) if user is None else (2, user))
        c = self.corpus
        user_topics = c.topics[mine.integers(0, len(c.topics), size=4)]
        offset = mine.standard_normal(DIMENSIONS).astype(np.float32) / np.sqrt(DIMENSIONS)
        rng = np.random.default_rng(seed)
        topics = user_topics[rng.integers(0, 4, size=n)]
        noise = rng.standard_normal((n, DIMENSIONS)).astype(np.float32) / np.sqrt(DIMENSIONS)
        v = topics + 0.5 * offset + 0.6 * noise
        dups = rng.choice(np.arange(n // 2, n), size=int(n * DUPLICATES), replace=False)
        for d in dups:
            v[d] = v[rng.integers(0, n // 2)] + 0.1 * noise[d]  # cosine ~0.99
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        words = rng.choice(len(c.vocab), size=(n, 10), p=c.word_p)
        texts = [f"{seed}-{i} " + " ".join(c.vocab[w] for w in row) for i, row in enumerate(words)]
        return texts, v.tolist()


def owner() -> dict[str, str]:
    return {"owner_id": str(uuid.uuid4())}


def save_json(conn: psycopg.Connection, texts: list[str], vectors: list, ns: dict) -> int:
    """The vectors inside the facts' JSON, as the client sent them before."""
    saved = 0
    for s in range(0, len(texts), BATCH):
        items = [
            {"content": t, "embedding": calls._json_vector(v), "embedding_model": MODEL}
            for t, v in zip(texts[s : s + BATCH], vectors[s : s + BATCH], strict=True)
        ]
        rows = conn.execute(JSON_SQL, (ORG, calls._json(items), calls._ns(ns), None)).fetchall()
        saved += sum(r[1] is not None for r in rows)
    return saved


def save_binary(conn: psycopg.Connection, texts: list[str], vectors: list, ns: dict) -> int:
    """The client's calls: the vectors as one binary real[] per call."""
    items = [calls.fact_item(t) for t in texts]
    saved = 0
    for call in calls.save_facts(ORG, items, vectors, ns, None, MODEL):
        saved += sum(r.id is not None for r in call.shape(conn.execute(call.sql, call.params)))
    return saved


METHODS = {"JSON": save_json, "binary": save_binary}


def fill(conn: psycopg.Connection, corpus: Corpus) -> dict[str, float]:
    """The other users' facts by COPY, the HNSW and GIN indexes built afterwards."""
    out: dict[str, float] = {}
    defs = [
        r[0]
        for r in conn.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indexrelid = ANY"
            " (ARRAY['memory.facts_embedding_idx', 'memory.facts_search_idx']::regclass[])"
        ).fetchall()
    ]
    conn.execute("DROP INDEX memory.facts_embedding_idx, memory.facts_search_idx")
    t0 = time.perf_counter()
    conn.execute("CREATE UNLOGGED TABLE bench_staging (owner uuid, content text, embedding vector)")
    copy_sql = "COPY bench_staging FROM STDIN (FORMAT BINARY)"
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        copy.set_types(["uuid", "text", "vector"])
        for user, o in enumerate(corpus.owners):
            vecs, texts = corpus.facts(user)
            for v, t in zip(vecs, texts, strict=True):
                copy.write_row((uuid.UUID(o), t, v))
    conn.execute(
        "INSERT INTO memory.namespaces (organization_id, id, scope, owner_id) "
        "SELECT %(org)s, memory._namespace_id(%(org)s, 'user', o, NULL), 'user', o "
        "FROM (SELECT DISTINCT owner AS o FROM bench_staging) s",
        {"org": ORG},
    )
    join_large_namespaces(conn, "bench_staging")
    conn.execute(
        "INSERT INTO memory.facts (organization_id, namespace_id, content, embedding, embedding_model)"
        " SELECT %(org)s, memory._namespace_id(%(org)s, 'user', owner, NULL), content, embedding,"
        " 'generated' FROM bench_staging ORDER BY random()",
        {"org": ORG},
    )
    conn.execute("DROP TABLE bench_staging")
    out["copy_and_insert_s"] = time.perf_counter() - t0
    conn.execute("VACUUM ANALYZE memory.facts")
    conn.execute(f"SET maintenance_work_mem = '{MWM}'")
    conn.execute("SET max_parallel_maintenance_workers = 1")  # leader + 1 worker on 2 cores
    for d in defs:
        t0 = time.perf_counter()
        conn.execute(d)
        out["hnsw_build_s" if "hnsw" in d else "gin_build_s"] = time.perf_counter() - t0
    conn.execute("RESET maintenance_work_mem")
    conn.execute("RESET max_parallel_maintenance_workers")
    conn.execute("ANALYZE memory.facts")
    return out


def costs(conn: psycopg.Connection, texts: list[str], vectors: list) -> dict[str, float]:
    """ms per fact: the JSON parse of the vectors, and an INSERT of the rows with and
    without the HNSW index (rolled back)."""
    items = [{"content": t, "embedding": v} for t, v in zip(texts, vectors, strict=True)]
    batch = calls._json(items)
    t0 = time.perf_counter()
    conn.execute(
        "SELECT count(memory._embedding_json(f -> 'embedding')) FROM jsonb_array_elements(%s) f",
        (batch,),
    )
    out = {"parse_ms": (time.perf_counter() - t0) * 1000 / len(texts)}
    conn.execute(
        "CREATE TEMP TABLE bench_rows AS SELECT f ->> 'content' AS content,"
        " memory._embedding_json(f -> 'embedding') AS embedding FROM jsonb_array_elements(%s) f",
        (batch,),
    )
    nsid = conn.execute(
        "SELECT (memory._resolve(%s, %s, 'write')).id", (ORG, calls._ns(owner()))
    ).fetchone()[0]
    for key, drop in (("insert_hnsw_ms", False), ("insert_plain_ms", True)):
        with conn.transaction(force_rollback=True):
            if drop:
                conn.execute("DROP INDEX memory.facts_embedding_idx")
            t0 = time.perf_counter()
            conn.execute(  # flagged: into the shared index, as a joined namespace's facts go
                "INSERT INTO memory.facts (organization_id, namespace_id, content, embedding,"
                " in_shared_index) SELECT %s, %s, content, embedding, true FROM bench_rows",
                (ORG, nsid),
            )
            out[key] = (time.perf_counter() - t0) * 1000 / len(texts)
    conn.execute("DROP TABLE bench_rows")
    return out


def rates(
    conn: psycopg.Connection, facts: Facts, repeat: int, per_round: int, big: int
) -> list[Row]:
    """Both methods on the same facts in each round: into fresh namespaces, and into
    namespaces of `big` facts of one user (one per method, filled alike beforehand)."""
    bigs = {m: owner() for m in METHODS}
    texts, vectors = facts.make(big, seed=1, user=0)
    for ns in bigs.values():
        save_binary(conn, texts, vectors, ns)
    conn.execute("ANALYZE memory.facts")
    out: list[Row] = []
    for scenario, n in ((FRESH, per_round), (f"namespace of {big:,} facts", BATCH)):
        per: dict[str, list[float]] = {m: [] for m in METHODS}
        stored: dict[str, list[int]] = {m: [] for m in METHODS}
        for r in range(repeat):
            fresh = scenario == FRESH
            texts, vectors = facts.make(
                n, seed=100 + r + 1000 * (not fresh), user=None if fresh else 0
            )
            order = list(METHODS) if r % 2 == 0 else list(METHODS)[::-1]
            for m in order:
                ns = owner() if scenario == FRESH else bigs[m]
                t0 = time.perf_counter()
                stored[m].append(METHODS[m](conn, texts, vectors, ns))
                per[m].append(n / (time.perf_counter() - t0))
            print(
                f"  {scenario}, round {r + 1}: " + ", ".join(f"{m} {per[m][-1]:.0f}" for m in per)
            )
        for m in METHODS:
            out.append(
                {
                    "scenario": scenario,
                    "facts": n,
                    "method": m,
                    "facts_per_s": stat(per[m]),
                    "stored": stored[m],
                    "speedup": None
                    if m == "JSON"
                    else stat([b / a for a, b in zip(per["JSON"], per[m], strict=True)]),
                }
            )
        if stored["JSON"] != stored["binary"]:
            raise AssertionError(f"{scenario}: the methods stored {stored}")
    return out


def initial(srv: Any, facts: Facts, n: int, repeat: int) -> list[Row]:
    """`n` facts into an empty table (binary, `BATCH` per user), with the HNSW index in
    place, or dropped first and built after the load."""
    dsn = create_database(srv, "bulk_initial")
    seconds: dict[str, list[tuple[float, float]]] = {"index during the load": [], "index after": []}
    with psycopg.connect(dsn, autocommit=True) as conn:
        indexdef = conn.execute(
            "SELECT pg_get_indexdef('memory.facts_embedding_idx'::regclass)"
        ).fetchone()[0]
        for r in range(repeat):
            texts, vectors = facts.make(n, seed=5000 + r)
            for variant in seconds if r % 2 == 0 else list(seconds)[::-1]:
                conn.execute("TRUNCATE memory.facts")
                after = variant == "index after"
                if after:
                    conn.execute("DROP INDEX memory.facts_embedding_idx")
                t0 = time.perf_counter()
                for s in range(0, n, BATCH):
                    save_binary(conn, texts[s : s + BATCH], vectors[s : s + BATCH], owner())
                load_s, build_s = time.perf_counter() - t0, 0.0
                if after:
                    conn.execute(f"SET maintenance_work_mem = '{MWM}'")
                    conn.execute("SET max_parallel_maintenance_workers = 1")
                    t0 = time.perf_counter()
                    conn.execute(indexdef)
                    build_s = time.perf_counter() - t0
                    conn.execute("RESET maintenance_work_mem")
                    conn.execute("RESET max_parallel_maintenance_workers")
                seconds[variant].append((load_s, build_s))
                print(f"  initial load, round {r + 1}, {variant}: {load_s:.1f} + {build_s:.1f} s")
    return [
        {
            "variant": variant,
            "facts": n,
            "load_s": stat([a for a, _ in runs]),
            "index_s": stat([b for _, b in runs]),
            "facts_per_s": stat([n / (a + b) for a, b in runs]),
        }
        for variant, runs in seconds.items()
    ]


def main() -> None:
    ap = options(__doc__, "a table of 50,000 facts (instead of 200,000), smaller loads")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    table_facts = 50_000 if args.quick else 200_000
    users = table_facts // 40
    per_round = 2 * BATCH if args.quick else 3 * BATCH
    big = 5_000
    initial_facts = 10 * BATCH if args.quick else 20 * BATCH
    result = new_result(
        "bulk",
        args.quick,
        batch=BATCH,
        table_facts=table_facts,
        users=users,
        per_round=per_round,
        big=big,
        initial_facts=initial_facts,
        initial_users=initial_facts // BATCH,
        repeat=args.repeat,
        dup_pct=100 * DUPLICATES,
        mwm=MWM,
        server_settings_set=SERVER_SETTINGS,
    )
    # The isotropic kind, as the loaded facts (Facts.make) are drawn: this bench weighs
    # two ways of sending the same facts, not how hard they are to search.
    corpus = Corpus(table_facts, users, vectors="isotropic")
    facts = Facts(corpus)
    with embedded_server("bulk", settings=SERVER_SETTINGS) as srv:
        dsn = create_database(srv, "bulk")
        result["environment"]["versions"] = server_versions(dsn)
        result["environment"]["server_settings"] = server_settings(dsn, ["shared_buffers"])
        with psycopg.connect(dsn, autocommit=True) as conn:
            register_vector(conn)
            result["config"]["threshold"] = float(
                conn.execute("SELECT memory.setting('dedupe_threshold')").fetchone()[0]
            )
            print(f"loading {table_facts:,} facts of {users:,} users ...", flush=True)
            result["tables"]["load"] = [fill(conn, corpus)]
            print(result["tables"]["load"][0], flush=True)
            texts, vectors = facts.make(BATCH, seed=2)
            result["tables"]["costs"] = [costs(conn, texts, vectors)]
            result["tables"]["rates"] = rates(conn, facts, args.repeat, per_round, big)
        result["tables"]["initial"] = initial(srv, facts, initial_facts, args.repeat)
    save(result, args.out)


# ------------------------------------------------------------------ report


def _rates(r: Result) -> dict[str, dict[str, Row]]:
    return index(r["tables"]["rates"], "scenario", "method")


def targets(r: Result) -> list[dict[str, Any]]:
    by = _rates(r)[FRESH]
    x = by["binary"]["speedup"]
    return [
        {
            "target": f"save_facts with binary embeddings ≥ {TARGET_SPEEDUP:g}{X} the facts/s of "
            f"JSON embeddings, {r['config']['batch']:,} per call into a fresh namespace of a "
            f"{r['config']['table_facts']:,}-fact table, dedupe on",
            "measured": f"{x['median']:.1f}{X} ({x['min']:.1f}..{x['max']:.1f}): "
            f"{by['binary']['facts_per_s']['median']:.0f} vs "
            f"{by['JSON']['facts_per_s']['median']:.0f} facts/s",
            "met": x["median"] >= TARGET_SPEEDUP,
        }
    ]


def markdown(r: Result) -> str:
    c = r["config"]
    rows = [
        (
            f"{row['scenario']}, {row['facts']:,} facts",
            f"**{row['method']}**",
            spread(row["facts_per_s"], ".0f"),
            "" if row["speedup"] is None else spread(row["speedup"], ".2f"),
            "/".join(map(str, sorted(set(row["stored"])))),
        )
        for row in r["tables"]["rates"]
    ]
    initial_rows = [
        (
            row["variant"],
            spread(row["load_s"], ".1f"),
            spread(row["index_s"], ".1f") if row["index_s"]["max"] else "",
            spread(row["facts_per_s"], ".0f"),
        )
        for row in r["tables"]["initial"]
    ]
    load = r["tables"]["load"][0]
    env = r["environment"]
    return section(
        SECTION,
        r,
        r["tables"]["costs"][0],
        rates=table(["load", "method", "facts/s", "speed-up", "stored"], rows),
        initial=table(["HNSW index", "load, s", "index build, s", "facts/s overall"], initial_rows),
        load=f"COPY and INSERT {load['copy_and_insert_s']:.0f} s, HNSW index {load['hnsw_build_s']:.0f} s",
        shared_buffers=env.get("server_settings", {}).get("shared_buffers", "?"),
        threshold=c.get("threshold", 0.92),
        x=X,
    )


if __name__ == "__main__":
    main()
