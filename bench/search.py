"""memory.search_facts at scale: latency and recall@10 for small and large
namespaces in one shared table, the plain pgvector query beside it, and the
exact-scan versus HNSW cost by namespace size (to choose the setting
`exact_search_max_rows` from data).

The table holds N facts (default 200,000) of U users (default 10,000): two
users hold N/10 facts each, one user per "ladder" size (200 ... N/10) holds
that many, and every other user holds a few (the probe users exactly 20).
Vectors are generated, 384 dimensions, clustered: 256 topics shared by all
users, each user writing about 4 of them with a personal offset, so a query's
nearest neighbours in the whole table mostly belong to other users (the hard
case for a filtered HNSW scan). Loaded with binary COPY as the superuser; the
HNSW and GIN indexes are built after loading.

    .venv/bin/python -m bench.search            # 200,000 facts (index build: minutes)
    .venv/bin/python -m bench.search --quick    # 50,000 facts
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench._common import (
    DIMENSIONS,
    ORG,
    RESULTS_DIR,
    create_database,
    embedded_server,
    percentile,
    server_versions,
    summary,
    table,
    write_results,
)
from pgvector.psycopg import register_vector

TOPICS = 256
TOPICS_PER_USER = 4
USER_OFFSET = 0.5
NOISE = 0.6
SMALL_SIZE = 20
LADDER = (200, 500, 1000, 2000, 5000, 10000, 20000)
SEARCH_SETTINGS = {  # what memory.search_facts sets for itself
    "hnsw.iterative_scan": "relaxed_order",
    "hnsw.ef_search": "200",
    "hnsw.max_scan_tuples": "100000",
}

EXACT = """
    SELECT id FROM memory.facts
    WHERE organization_id = %(org)s AND namespace_id = %(ns)s
      AND forgotten_at IS NULL AND embedding IS NOT NULL
    ORDER BY (embedding <=> %(q)s) + 0, id
    LIMIT %(k)s
"""
# The HNSW branch of memory._nearest (kind fact), run with the search's settings.
HNSW = """
    SELECT id FROM memory.facts
    WHERE organization_id = %(org)s AND namespace_id = %(ns)s AND forgotten_at IS NULL
    ORDER BY embedding <=> %(q)s
    LIMIT %(k)s
"""
# The plain queries a developer would write, run with pgvector's defaults.
PLAIN = {
    "plain, as written": """
        SELECT id FROM memory.facts WHERE namespace_id = %(ns)s
        ORDER BY embedding <=> %(q)s LIMIT 10""",
    "plain + forgotten_at IS NULL (can use the partial HNSW index)": """
        SELECT id FROM memory.facts WHERE namespace_id = %(ns)s AND forgotten_at IS NULL
        ORDER BY embedding <=> %(q)s LIMIT 10""",
}
# search_facts modes: options, with a query vector?, session settings for the run.
CUSTOM = {"plan_cache_mode": "force_custom_plan"}
MODES: dict[str, tuple[dict, bool, dict[str, str]]] = {
    "hybrid": ({}, True, {}),
    "vector-only": ({"text_weight": 0}, True, {}),
    "text-only": ({}, False, {}),
    "hybrid, session plan_cache_mode=force_custom_plan": ({}, True, CUSTOM),
    "vector-only, session plan_cache_mode=force_custom_plan": ({"text_weight": 0}, True, CUSTOM),
    "hybrid, session jit=off": ({}, True, {"jit": "off"}),
}
SMALL_SET = "SELECT memory._small_set('fact', %(org)s::uuid, ARRAY[%(ns)s]::uuid[], NULL)"
SEARCH = (
    "SELECT id FROM memory.search_facts(%(org)s, %(text)s, %(qa)s::real[], %(ns_json)s::jsonb, "
    "10, %(opts)s::jsonb)"
)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


class Corpus:
    """Generated users, facts (vectors and words) and queries."""

    def __init__(self, n_facts: int, n_users: int, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        big = n_facts // 10
        ladder = [s for s in LADDER if s <= big]
        sizes: list[int] = [big, big, *ladder]
        rest_users = n_users - len(sizes)
        rest_facts = n_facts - sum(sizes)
        if rest_users < 100 or rest_facts < rest_users * 2:
            raise SystemExit("too few facts or users for this layout")
        # Every other user: about 3 to 2 x mean facts; the 100 probe users exactly 20.
        mean = rest_facts / rest_users
        small = self.rng.integers(3, max(4, round(2 * mean) - 2), size=rest_users)
        small[:100] = SMALL_SIZE
        n_rest = rest_users - 100
        diff = int(rest_facts - small.sum())  # spread evenly: the total is exactly N
        adjust = np.full(n_rest, diff // n_rest)
        adjust[: diff % n_rest] += 1
        small[100:] += adjust
        sizes += [int(s) for s in small]
        self.signature = f"v2 facts={n_facts} users={n_users} seed={seed}"
        self.sizes = sizes
        self.owners = [str(uuid.UUID(int=(0xB0 << 120) | i)) for i in range(len(sizes))]
        self.big_users = [0, 1]
        self.ladder_users = {s: 2 + i for i, s in enumerate(ladder)}
        self.small_users = list(range(2 + len(ladder), 2 + len(ladder) + 100))
        d = DIMENSIONS
        self.topics = _unit(self.rng.standard_normal((TOPICS, d)))
        self.user_topics = self.rng.integers(0, TOPICS, size=(len(sizes), TOPICS_PER_USER))
        self.user_offsets = self.rng.standard_normal((len(sizes), d)).astype(np.float32) / np.sqrt(
            d
        )
        self.vocab = [_word(i) for i in range(5000)]
        # Zipf from rank 50 on: the commonest words are stop words, gone from a tsvector.
        zipf = 1.0 / np.arange(50, len(self.vocab) + 50)
        self.word_p = zipf / zipf.sum()

    def _vectors(self, user: int, n: int) -> np.ndarray:
        d = DIMENSIONS
        topics = self.user_topics[user][self.rng.integers(0, TOPICS_PER_USER, size=n)]
        noise = self.rng.standard_normal((n, d)).astype(np.float32) / np.sqrt(d)
        return _unit(self.topics[topics] + USER_OFFSET * self.user_offsets[user] + NOISE * noise)

    def text(self, n_words: int) -> str:
        idx = self.rng.choice(len(self.vocab), size=n_words, p=self.word_p)
        return " ".join(self.vocab[i] for i in idx)

    def facts(self, user: int) -> tuple[np.ndarray, list[str]]:
        n = self.sizes[user]
        return self._vectors(user, n), [self.text(10) for _ in range(n)]

    def query(self, user: int) -> tuple[np.ndarray, str]:
        return self._vectors(user, 1)[0], self.text(6)


_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "su",
    "ta",
    "ri",
    "po",
    "ve",
    "da",
    "gu",
    "ho",
    "zi",
    "be",
    "fa",
    "ju",
]


def _word(i: int) -> str:
    out = []
    i += 16 * 16  # at least three syllables
    while i:
        i, r = divmod(i, len(_SYLLABLES))
        out.append(_SYLLABLES[r])
    return "".join(out)


def load(conn: psycopg.Connection, corpus: Corpus) -> dict[str, float]:
    """Namespaces and facts in by COPY; the HNSW and GIN indexes rebuilt afterwards."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    index_defs = [
        r[0]
        for r in conn.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'memory.facts'::regclass "
            "AND indexrelid::regclass::text IN ('memory.facts_embedding_idx', 'memory.facts_search_idx')"
        ).fetchall()
    ]
    conn.execute("DROP INDEX memory.facts_embedding_idx, memory.facts_search_idx")
    conn.execute(
        "CREATE UNLOGGED TABLE bench_staging (owner uuid, content text, embedding vector(384))"
    )
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY bench_staging (owner, content, embedding) FROM STDIN (FORMAT BINARY)"
        ) as copy,
    ):
        copy.set_types(["uuid", "text", "vector"])
        for user, owner in enumerate(corpus.owners):
            vecs, texts = corpus.facts(user)
            owner_id = uuid.UUID(owner)
            for v, t in zip(vecs, texts, strict=True):
                copy.write_row((owner_id, t, v))
    timings["generate_and_copy_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute(
        "INSERT INTO memory.namespaces (organization_id, id, scope, owner_id) "
        "SELECT %(org)s, memory._namespace_id(%(org)s, 'user', o, NULL), 'user', o "
        "FROM (SELECT DISTINCT owner AS o FROM bench_staging) s",
        {"org": ORG},
    )
    conn.execute(
        "INSERT INTO memory.facts (organization_id, namespace_id, content, content_hash, text_key, "
        "search_text, embedding, embedding_model) "
        "SELECT %(org)s, memory._namespace_id(%(org)s, 'user', owner, NULL), content, md5(content), "
        "memory._normalized_key(content), to_tsvector('english', content), embedding, 'generated' "
        "FROM bench_staging ORDER BY random()",  # a user's facts spread over the table
        {"org": ORG},
    )
    conn.execute("DROP TABLE bench_staging")
    conn.execute("VACUUM ANALYZE memory.facts")
    conn.execute("VACUUM ANALYZE memory.namespaces")
    timings["insert_s"] = time.perf_counter() - t0
    conn.execute("SET maintenance_work_mem = '2GB'")
    conn.execute("SET max_parallel_maintenance_workers = 1")  # leader + 1 worker on 2 cores
    for d in index_defs:
        t0 = time.perf_counter()
        conn.execute(d)
        key = "hnsw_build_s" if "hnsw" in d else "gin_build_s"
        timings[key] = time.perf_counter() - t0
    conn.execute("RESET maintenance_work_mem")
    conn.execute("RESET max_parallel_maintenance_workers")
    conn.execute("ANALYZE memory.facts")
    return timings


def ns_id(conn: psycopg.Connection, owner: str) -> uuid.UUID:
    return conn.execute(
        "SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, owner)
    ).fetchone()[0]


def overlap(got: list, exact: list) -> float:
    return len(set(got) & set(exact)) / len(exact) if exact else 1.0


def timed(conn: psycopg.Connection, sql: str, params: dict) -> tuple[list, float]:
    t = time.perf_counter()
    rows = conn.execute(sql, params).fetchall()
    return [r[0] for r in rows], time.perf_counter() - t


def plan_of(conn: psycopg.Connection, sql: str, params: dict) -> str:
    rows = conn.execute("EXPLAIN (COSTS OFF) " + sql, params).fetchall()
    text = " ".join(r[0] for r in rows)
    for name in ("facts_embedding_idx", "facts_live_idx", "facts_id_idx", "facts_pkey"):
        if name in text:
            kind = "Index Only Scan" if "Index Only Scan" in text else "Index Scan"
            if "Bitmap" in text:
                kind = "Bitmap Heap Scan"
            return f"{kind} on {name}"
    return "Seq Scan" if "Seq Scan" in text else text[:80]


def measure_namespaces(
    conn: psycopg.Connection, corpus: Corpus, rounds: int, queries: int
) -> dict[str, Any]:
    """search_facts p50/p95 and recall@10 against the exact scan, small and large users."""
    groups = {
        f"small ({SMALL_SIZE} facts)": corpus.small_users,
        f"large ({corpus.sizes[0]:,} facts)": corpus.big_users,
    }
    out: dict[str, Any] = {}
    for label, users in groups.items():
        ids = {u: ns_id(conn, corpus.owners[u]) for u in users}
        qs = []
        for i in range(queries):
            u = users[i % len(users)]
            vec, text = corpus.query(u)
            qs.append((u, vec, text))
        # Exact answers once.
        exact = {}
        for i, (u, vec, _) in enumerate(qs):
            exact[i], _t = timed(conn, EXACT, {"org": ORG, "ns": ids[u], "q": vec, "k": 10})
        # Rounds outermost, so that a burst of load on a noisy machine hits every mode.
        p50s: dict[str, list[float]] = {m: [] for m in MODES}
        p95s: dict[str, list[float]] = {m: [] for m in MODES}
        recalls: dict[str, list[float]] = {m: [] for m in MODES}
        counts: dict[str, list[int]] = {m: [] for m in MODES}
        for _ in range(rounds):
            for mode, (opts, with_vector, session) in MODES.items():
                for key, value in session.items():
                    conn.execute(f"SET {key} = {value}")
                lat = []
                for i, (u, vec, text) in enumerate(qs):
                    params = {
                        "org": ORG,
                        "text": text,
                        "qa": vec.tolist() if with_vector else None,
                        "ns_json": json.dumps({"scope": "user", "owner_id": corpus.owners[u]}),
                        "opts": json.dumps(opts),
                    }
                    got, dt = timed(conn, SEARCH, params)
                    lat.append(dt * 1000)
                    if with_vector and opts.get("text_weight") == 0:
                        recalls[mode].append(overlap(got, exact[i]))
                    counts[mode].append(len(got))
                for key in session:
                    conn.execute(f"RESET {key}")
                p50s[mode].append(statistics.median(lat))
                p95s[mode].append(percentile(lat, 95))
        res: dict[str, Any] = {}
        for mode in MODES:
            res[mode] = {
                "p50_ms": summary(p50s[mode]),
                "p95_ms": summary(p95s[mode]),
                "rows_min": min(counts[mode]),
            }
            if recalls[mode]:
                res[mode]["recall_at_10"] = statistics.fmean(recalls[mode])
                res[mode]["recall_at_10_min"] = min(recalls[mode])
        # The plain query with pgvector's defaults (ef_search 40, iterative scan off).
        for name, sql in PLAIN.items():
            recalls, counts, lat = [], [], []
            for i, (u, vec, _) in enumerate(qs):
                got, dt = timed(conn, sql, {"ns": ids[u], "q": vec})
                lat.append(dt * 1000)
                recalls.append(overlap(got, exact[i]))
                counts.append(len(got))
            res[name] = {
                "plan": plan_of(conn, sql, {"ns": ids[users[0]], "q": qs[0][1]}),
                "rows_mean": statistics.fmean(counts),
                "rows_min": min(counts),
                "recall_at_10": statistics.fmean(recalls),
                "p50_ms": statistics.median(lat),
                "p95_ms": percentile(lat, 95),
            }
        out[label] = res
    return out


@contextmanager
def local_settings(conn: psycopg.Connection, settings: dict[str, str]) -> Iterator[None]:
    """A transaction with these settings (SET LOCAL), as search_facts has them."""
    with conn.transaction():
        for key, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (key, value))
        yield


# The HNSW branch with the index forced: a sort disabled leaves the btree + sort
# plan out, so the planner walks the HNSW index (checked with EXPLAIN).
FORCE_HNSW = {**SEARCH_SETTINGS, "enable_sort": "off", "enable_seqscan": "off"}


def measure_ladder(conn: psycopg.Connection, corpus: Corpus, rounds: int, queries: int) -> dict:
    """By namespace size: the exact scan, the HNSW branch (search settings) as the
    planner picks it and with the HNSW index forced, at search_facts' list depth
    40; and search_facts end to end (no query text) with exact_search_max_rows
    forced each way, with its recall@10 against the exact scan."""
    out: dict[int, Any] = {}
    sizes = sorted({*corpus.ladder_users, corpus.sizes[0]})
    for size in sizes:
        u = corpus.ladder_users.get(size, corpus.big_users[0])
        ns = ns_id(conn, corpus.owners[u])
        ns_json = json.dumps({"scope": "user", "owner_id": corpus.owners[u]})
        qs = [corpus.query(u)[0] for _ in range(queries)]
        exact = {}
        for i, vec in enumerate(qs):
            exact[i], _t = timed(conn, EXACT, {"org": ORG, "ns": ns, "q": vec, "k": 40})
        ms: dict[str, list[float]] = {
            "exact": [],
            "hnsw_planned": [],
            "hnsw_forced": [],
            "exact_jit_off": [],
            "search_exact": [],
            "search_hnsw": [],
            "search_hnsw_custom_plan": [],
            "small_set": [],
        }
        kinds = ("hnsw_planned", "hnsw_forced", "search_hnsw", "search_hnsw_custom_plan", "plain")
        recall: dict[str, list[float]] = {k: [] for k in kinds}
        rows: dict[str, list[int]] = {k: [] for k in kinds}
        plain_sql = PLAIN["plain + forgotten_at IS NULL (can use the partial HNSW index)"]
        for i, vec in enumerate(qs):  # pgvector defaults: ef_search 40, no iterative scan
            got, _t = timed(conn, plain_sql, {"ns": ns, "q": vec})
            recall["plain"].append(overlap(got, exact[i][:10]))
            rows["plain"].append(len(got))
        plan_plain = plan_of(conn, plain_sql, {"ns": ns, "q": qs[0]})
        p0 = {"org": ORG, "ns": ns, "q": qs[0], "k": 40}
        with local_settings(conn, SEARCH_SETTINGS):
            plan_planned = plan_of(conn, HNSW, p0)
        with local_settings(conn, FORCE_HNSW):
            plan_forced = plan_of(conn, HNSW, p0)
        for _ in range(rounds):
            lat: dict[str, list[float]] = {k: [] for k in ms}
            for i, vec in enumerate(qs):
                p = {"org": ORG, "ns": ns, "q": vec, "k": 40}  # search_facts' list depth
                _ex, dt = timed(conn, EXACT, p)
                lat["exact"].append(dt)
                with local_settings(conn, {"jit": "off"}):
                    _ex, dt = timed(conn, EXACT, p)
                lat["exact_jit_off"].append(dt)
                _r, dt = timed(conn, SMALL_SET, p)
                lat["small_set"].append(dt)
                for how, settings in (
                    ("hnsw_planned", SEARCH_SETTINGS),
                    ("hnsw_forced", FORCE_HNSW),
                ):
                    with local_settings(conn, settings):
                        got, dt = timed(conn, HNSW, p)
                    lat[how].append(dt)
                    recall[how].append(overlap(got[:10], exact[i][:10]))
                    rows[how].append(len(got))
            for how, limit in (
                ("search_exact", 100_000_000),
                ("search_hnsw", 0),
                ("search_hnsw_custom_plan", 0),
            ):
                conn.execute(
                    "SELECT memory.configure('exact_search_max_rows', %s::jsonb)", (str(limit),)
                )
                conn.execute(
                    "SET plan_cache_mode = "
                    + ("force_custom_plan" if how.endswith("custom_plan") else "DEFAULT")
                )
                for i, vec in enumerate(qs):
                    params = {
                        "org": ORG,
                        "text": "",  # no lexemes: an empty text list, the vector path alone
                        "qa": vec.tolist(),
                        "ns_json": ns_json,
                        "opts": "{}",
                    }
                    got, dt = timed(conn, SEARCH, params)
                    lat[how].append(dt)
                    if how != "search_exact":
                        recall[how].append(overlap(got, exact[i][:10]))
                        rows[how].append(len(got))
            conn.execute("SELECT memory.configure('exact_search_max_rows', NULL)")
            conn.execute("RESET plan_cache_mode")
            for k, v in lat.items():
                ms[k].append(1000 * statistics.median(v))
        out[size] = {
            **{f"{k}_p50_ms": summary(v) for k, v in ms.items()},
            **{f"{k}_recall_at_10": statistics.fmean(v) for k, v in recall.items()},
            **{f"{k}_rows_min": min(v) for k, v in rows.items()},
            "plan_hnsw_planned": plan_planned,
            "plan_hnsw_forced": plan_forced,
            "plan_plain": plan_plain,
        }
    return out


def measure_ef_search(conn: psycopg.Connection, corpus: Corpus, rounds: int, queries: int) -> dict:
    """The HNSW index forced on the largest namespace at several hnsw.ef_search values
    (the rest as search_facts sets it): what a higher ef_search buys in recall."""
    u = corpus.big_users[0]
    ns = ns_id(conn, corpus.owners[u])
    qs = [corpus.query(u)[0] for _ in range(queries)]
    exact = [timed(conn, EXACT, {"org": ORG, "ns": ns, "q": v, "k": 10})[0] for v in qs]
    out: dict[int, Any] = {}
    values = (100, 200, 400, 800)
    lat: dict[int, list[float]] = {ef: [] for ef in values}
    recall: dict[int, list[float]] = {ef: [] for ef in values}
    for _ in range(rounds):
        for ef in values:
            settings = {**FORCE_HNSW, "hnsw.ef_search": str(ef)}
            times = []
            for i, vec in enumerate(qs):
                with local_settings(conn, settings):
                    got, dt = timed(conn, HNSW, {"org": ORG, "ns": ns, "q": vec, "k": 40})
                times.append(dt)
                recall[ef].append(overlap(got[:10], exact[i]))
            lat[ef].append(1000 * statistics.median(times))
    for ef in values:
        out[ef] = {"p50_ms": summary(lat[ef]), "recall_at_10": statistics.fmean(recall[ef])}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="50,000 facts over 2,500 users")
    ap.add_argument("--facts", type=int)
    ap.add_argument("--users", type=int)
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds (median and spread)")
    ap.add_argument("--queries", type=int, default=100, help="queries per namespace group")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the server and its loaded table (bench-search-kept) and reuse them\n"
        "on the next --keep run with the same --facts/--users (skips the load)",
    )
    args = ap.parse_args()
    n_facts = args.facts or (50_000 if args.quick else 200_000)
    n_users = args.users or (2_500 if args.quick else 10_000)

    corpus = Corpus(n_facts, n_users)
    rest = corpus.sizes[2 + len(corpus.ladder_users) :]
    results: dict[str, Any] = {
        "facts": n_facts,
        "users": n_users,
        "rounds": args.rounds,
        "queries": args.queries,
        "layout": {
            "big_users": corpus.sizes[:2],
            "ladder_users": sorted(corpus.ladder_users),
            "other_users": len(rest),
            "other_users_facts": {
                "min": min(rest),
                "max": max(rest),
                "mean": sum(rest) / len(rest),
            },
        },
    }
    with embedded_server("search", keep=args.keep) as srv:
        dbname = f"search_{n_facts}_{n_users}"
        with psycopg.connect(srv.dsn(), autocommit=True) as conn:
            loaded = conn.execute(
                "SELECT FROM pg_database WHERE datname = %s", (dbname,)
            ).fetchone()
        reuse = args.keep and loaded is not None
        if reuse:
            with psycopg.connect(srv.dsn(dbname)) as conn:
                has_sig = conn.execute(
                    "SELECT to_regclass('public.bench_corpus') IS NOT NULL"
                ).fetchone()[0]
                sig = conn.execute("SELECT sig FROM bench_corpus").fetchone() if has_sig else None
                reuse = sig is not None and sig[0] == corpus.signature
        dsn = srv.dsn(dbname) if reuse else create_database(srv, dbname)
        results["versions"] = server_versions(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            register_vector(conn)
            # Plan every query afresh: a prepared statement's generic plan would ignore the
            # settings each measurement makes (enable_sort, hnsw.*).
            conn.prepare_threshold = None
            results["server_settings"] = {
                k: conn.execute(f"SHOW {k}").fetchone()[0]
                for k in ("shared_buffers", "work_mem", "effective_cache_size", "jit")
            }
            if reuse:
                print(f"reusing the loaded table of {dbname} (--keep)")
                for user, _owner in enumerate(corpus.owners):  # same random stream as a load
                    corpus.facts(user)
            else:
                print(f"loading {n_facts:,} facts of {len(corpus.sizes):,} users ...", flush=True)
                results["load"] = load(conn, corpus)
                conn.execute("CREATE TABLE bench_corpus (sig text)")
                conn.execute("INSERT INTO bench_corpus VALUES (%s)", (corpus.signature,))
                print(" ".join(f"{k} {v:.1f}" for k, v in results["load"].items()), flush=True)
            size = conn.execute(
                "SELECT pg_size_pretty(pg_total_relation_size('memory.facts'))"
            ).fetchone()[0]
            results["table_size"] = size
            print(f"memory.facts with indexes: {size}")
            if reuse:
                conn.execute("SELECT memory.configure('exact_search_max_rows', NULL)")

            results["namespaces"] = measure_namespaces(conn, corpus, args.rounds, args.queries)
            results["ladder"] = measure_ladder(
                conn, corpus, args.rounds, max(20, args.queries // 4)
            )
            results["ef_search"] = measure_ef_search(
                conn, corpus, args.rounds, max(20, args.queries // 4)
            )
    report(results)
    name = "search-quick" if args.quick else "search"
    write_results(name, results)
    plot(results, RESULTS_DIR / f"{name}-crossover.png")


def plot(r: dict[str, Any], path: Path) -> None:
    """Latency by namespace size, exact scan against HNSW (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    sizes = [int(s) for s in r["ladder"]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (
        ("exact_p50_ms", "exact scan (depth 40)", "o-"),
        ("hnsw_forced_p50_ms", "HNSW index, search settings", "s-"),
        ("search_exact_p50_ms", "search_facts, exact forced", "o--"),
        ("search_hnsw_p50_ms", "search_facts, HNSW forced (cached plans)", "s--"),
        ("search_hnsw_custom_plan_p50_ms", "search_facts, HNSW forced, custom plans", "^--"),
    ):
        med = [m[key]["median"] for m in r["ladder"].values()]
        lo = [m[key]["median"] - m[key]["min"] for m in r["ladder"].values()]
        hi = [m[key]["max"] - m[key]["median"] for m in r["ladder"].values()]
        ax.errorbar(sizes, med, yerr=[lo, hi], fmt=style, label=label, capsize=3)
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{x:,}" for x in sizes])
    ax.minorticks_off()
    ax.set_xlabel("live facts in the namespace")
    ax.set_ylabel("p50 latency, ms")
    ax.set_yscale("log")
    ax.set_title(f"Exact vs HNSW, {r['facts']:,} facts in the table")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    RESULTS_DIR.mkdir(exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path.relative_to(RESULTS_DIR.parent.parent)}")


def _ms(s: dict[str, float]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}..{s['max']:.2f})"


def report(r: dict[str, Any]) -> None:
    print(
        f"\nmemory.search_facts, {r['facts']:,} facts, {r['users']:,} users, k = 10; "
        f"latency: median over {r['rounds']} rounds (min..max)"
    )
    rows = []
    for label, res in r["namespaces"].items():
        for mode in MODES:
            m = res[mode]
            rows.append(
                (
                    label,
                    f"search_facts {mode}",
                    _ms(m["p50_ms"]),
                    _ms(m["p95_ms"]),
                    m["rows_min"],
                    f"{m['recall_at_10']:.3f}" if "recall_at_10" in m else "",
                )
            )
        for name in PLAIN:
            m = res[name]
            rows.append(
                (
                    label,
                    f"{name} [{m['plan']}]",
                    f"{m['p50_ms']:.2f}",
                    f"{m['p95_ms']:.2f}",
                    f"{m['rows_min']} (mean {m['rows_mean']:.1f})",
                    f"{m['recall_at_10']:.3f}",
                )
            )
    print(table(["namespace", "query", "p50 ms", "p95 ms", "rows (min)", "recall@10"], rows))
    print(
        "\nBy namespace size: exact scan vs the HNSW branch (search settings: iterative "
        "relaxed_order, ef_search 200, max_scan_tuples 100000), list depth 40, p50 ms "
        "median of rounds (min..max); recall@10 against the exact scan"
    )
    rows = []
    for size, m in r["ladder"].items():
        rows.append(
            (
                f"{int(size):,}",
                _ms(m["exact_p50_ms"]),
                _ms(m["exact_jit_off_p50_ms"]),
                f"{_ms(m['hnsw_planned_p50_ms'])} [{m['plan_hnsw_planned']}]",
                f"{_ms(m['hnsw_forced_p50_ms'])} [{m['plan_hnsw_forced']}]",
                f"{m['hnsw_forced_recall_at_10']:.3f}",
                m["hnsw_forced_rows_min"],
            )
        )
    print(
        table(
            [
                "facts in namespace",
                "exact scan",
                "exact, jit off",
                "HNSW branch as planned [plan]",
                "HNSW index forced [plan]",
                "HNSW recall@10",
                "HNSW rows (min of 40)",
            ],
            rows,
        )
    )
    print(
        "\nmemory.search_facts end to end (no query text), exact_search_max_rows forced each way; "
        "memory._small_set alone (the count search_facts makes first, default setting); "
        'the plain query with pgvector defaults; "custom plans": the session sets '
        "plan_cache_mode = force_custom_plan, which search_facts' inner queries then follow"
    )
    rows = [
        (
            f"{int(size):,}",
            _ms(m["search_exact_p50_ms"]),
            _ms(m["search_hnsw_p50_ms"]),
            f"{m['search_hnsw_recall_at_10']:.3f}",
            _ms(m["search_hnsw_custom_plan_p50_ms"]),
            f"{m['search_hnsw_custom_plan_recall_at_10']:.3f}",
            _ms(m["small_set_p50_ms"]),
            f"{m['plain_rows_min']} / {m['plain_recall_at_10']:.3f} [{m['plan_plain']}]",
        )
        for size, m in r["ladder"].items()
    ]
    print(
        table(
            [
                "facts in namespace",
                "search exact p50 ms",
                "search HNSW p50 ms",
                "recall@10",
                "search HNSW, custom plans, p50 ms",
                "recall@10",
                "_small_set p50 ms",
                "plain query: rows (min) / recall@10 [plan]",
            ],
            rows,
        )
    )

    print(
        f"\nHNSW index forced on a {r['layout']['big_users'][0]:,}-fact namespace, list depth 40, "
        "by hnsw.ef_search (search_facts sets 200)"
    )
    print(
        table(
            ["hnsw.ef_search", "p50 ms", "recall@10"],
            [
                (ef, _ms(m["p50_ms"]), f"{m['recall_at_10']:.3f}")
                for ef, m in r["ef_search"].items()
            ],
        )
    )

    def first_faster(a: str, b: str) -> int | None:
        return next(
            (int(s) for s, m in r["ladder"].items() if m[a]["median"] < m[b]["median"]), None
        )

    cross = {
        "hnsw_forced_vs_exact": first_faster("hnsw_forced_p50_ms", "exact_p50_ms"),
        "search_facts": first_faster("search_hnsw_p50_ms", "search_exact_p50_ms"),
        "search_facts_custom_plans": first_faster(
            "search_hnsw_custom_plan_p50_ms", "search_exact_p50_ms"
        ),
    }
    print(
        "crossover (first size where HNSW is faster): direct queries "
        f"{cross['hnsw_forced_vs_exact']}, search_facts {cross['search_facts']}, "
        f"search_facts with custom plans {cross['search_facts_custom_plans']}"
    )
    r["crossover"] = cross


if __name__ == "__main__":
    main()
