"""Saving facts with dedupe: memory.save_facts of 100 facts in one call, against
client-side loops over the same 100 facts, and 8 concurrent writers.

Data: LoCoMo turns embedded with LocalEmbedder (real text, so the default
threshold 0.92 refuses a few). Every measurement saves into fresh namespaces
(a second save of the same facts would only find duplicates); a namespace may
be pre-filled with generated vectors so that the dedupe check runs against
an exact scan (small namespace) or the HNSW index (over exact_search_max_rows).

- save_facts batch: one call, 100 facts;
- save_fact loop: 100 calls (the dedupe check runs inside each);
- search-then-save loop: per fact, search_facts top-1 (vector only), then
  save_fact when the nearest is below the threshold: what a client without
  save_facts would do (two round trips, and not safe under concurrency).
- 8 writers at once (threads, one connection each): into 8 namespaces, and
  all into one namespace (writers of one namespace serialize on its lock);
  then 8 writers saving the same 100 facts into one namespace: each stored once.

    .venv/bin/python -m bench.dedupe [--quick]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from typing import Any

import numpy as np
import psycopg
from bench._common import (
    ORG,
    create_database,
    embedded_server,
    server_versions,
    summary,
    table,
    write_results,
)
from bench.embed import locomo_turns

BATCH = 100
WRITERS = 8


class Namespaces:
    """Fresh user namespaces, each optionally pre-filled with generated facts."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.n = 0
        self.rng = np.random.default_rng(3)

    def fresh(self, prefill: int = 0) -> dict[str, str]:
        self.n += 1
        owner = str(uuid.UUID(int=(0xDE << 120) | self.n))
        ns = {"scope": "user", "owner_id": owner}
        if prefill:
            vecs = self.rng.standard_normal((prefill, 384)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                nsid = conn.execute(
                    "INSERT INTO memory.namespaces (organization_id, id, scope, owner_id) "
                    "VALUES (%(org)s, memory._namespace_id(%(org)s, 'user', %(o)s, NULL), 'user', %(o)s) "
                    "RETURNING id",
                    {"org": ORG, "o": owner},
                ).fetchone()[0]
                with (
                    conn.cursor() as cur,
                    cur.copy(
                        "COPY memory.facts (organization_id, namespace_id, content, content_hash, "
                        "text_key, search_text, embedding) FROM STDIN"
                    ) as copy,
                ):
                    for i, v in enumerate(vecs):
                        content = f"generated fact {i}"
                        copy.write_row(
                            (
                                ORG,
                                nsid,
                                content,
                                "0",
                                f"k{i}",
                                f"'fact' 'generat' '{i}'",
                                "[" + ",".join(f"{x:.6g}" for x in v) + "]",
                            )
                        )
                conn.execute("ANALYZE memory.facts")
        return ns


def save_batch(conn: psycopg.Connection, payload: str, ns: dict) -> tuple[int, int]:
    rows = conn.execute(
        "SELECT id FROM memory.save_facts(%s, %s::jsonb, %s::jsonb)", (ORG, payload, json.dumps(ns))
    ).fetchall()
    return sum(r[0] is not None for r in rows), len(rows)


def save_loop(conn: psycopg.Connection, facts: list[tuple[str, list[float]]], ns: dict) -> int:
    ns_json = json.dumps(ns)
    ids = set()
    for content, vec in facts:
        ids.add(
            conn.execute(
                "SELECT memory.save_fact(%s, %s, %s::real[], %s::jsonb)",
                (ORG, content, vec, ns_json),
            ).fetchone()[0]
        )
    return len(ids)


def search_then_save(
    conn: psycopg.Connection, facts: list[tuple[str, list[float]]], ns: dict, threshold: float
) -> int:
    ns_json = json.dumps(ns)
    saved = 0
    for content, vec in facts:
        hit = conn.execute(
            "SELECT similarity FROM memory.search_facts(%s, %s, %s::real[], %s::jsonb, 1, "
            "'{\"text_weight\": 0}')",
            (ORG, content, vec, ns_json),
        ).fetchone()
        if hit is None or hit[0] < threshold:
            conn.execute(
                "SELECT memory.save_fact(%s, %s, %s::real[], %s::jsonb)",
                (ORG, content, vec, ns_json),
            )
            saved += 1
    return saved


def concurrent(dsn: str, jobs: list[tuple[str, dict]]) -> tuple[float, int]:
    """One thread and connection per job (a payload and its namespace); wall time."""
    conns = [psycopg.connect(dsn, autocommit=True) for _ in jobs]
    barrier = threading.Barrier(len(jobs) + 1)
    saved = [0] * len(jobs)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            barrier.wait()
            saved[i] = save_batch(conns[i], *jobs[i])[0]
        except BaseException as e:  # reported after the join
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for c in conns:
        c.close()
    if errors:
        raise errors[0]
    return wall, sum(saved)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats, smaller pre-fills")
    ap.add_argument("--repeat", type=int)
    args = ap.parse_args()
    repeat = args.repeat or (3 if args.quick else 5)
    prefills = (0, 1000) if args.quick else (0, 1000, 5000)

    from pgmemory.embedders import LocalEmbedder

    texts = locomo_turns(WRITERS * BATCH)
    t0 = time.perf_counter()
    vectors = LocalEmbedder().embed(texts)
    print(f"embedded {len(texts)} LoCoMo turns in {time.perf_counter() - t0:.1f}s")
    facts = [(t, [float(f"{x:.7g}") for x in v]) for t, v in zip(texts, vectors, strict=True)]
    batches = [facts[i : i + BATCH] for i in range(0, len(facts), BATCH)]
    payloads = [json.dumps([{"content": c, "embedding": v} for c, v in b]) for b in batches]

    results: dict[str, Any] = {"batch": BATCH, "repeat": repeat, "single": {}, "concurrent": {}}
    with embedded_server("dedupe") as srv:
        dsn = create_database(srv, "dedupe")
        results["versions"] = server_versions(dsn)
        spaces = Namespaces(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            threshold = float(
                conn.execute("SELECT memory.setting('dedupe_threshold')").fetchone()[0]
            )
            rows = []
            for prefill in prefills:
                per_method: dict[str, list[float]] = {
                    "save_facts (1 call)": [],
                    "save_fact loop (100 calls)": [],
                    "search top-1, then save_fact (200 calls)": [],
                }
                stored: dict[str, set[int]] = {m: set() for m in per_method}
                for r in range(repeat):
                    b = r % len(batches)
                    for method in per_method:
                        ns = spaces.fresh(prefill)
                        t0 = time.perf_counter()
                        if method.startswith("save_facts"):
                            n = save_batch(conn, payloads[b], ns)[0]
                        elif method.startswith("save_fact loop"):
                            n = save_loop(conn, batches[b], ns)
                        else:
                            n = search_then_save(conn, batches[b], ns, threshold)
                        per_method[method].append(BATCH / (time.perf_counter() - t0))
                        stored[method].add(n)
                for method, rates in per_method.items():
                    s = summary(rates)
                    results["single"][f"{method} prefill={prefill}"] = {
                        "facts_per_s": s,
                        "stored_of_100": sorted(stored[method]),
                    }
                    rows.append(
                        (
                            f"{prefill:,}",
                            method,
                            f"{s['median']:.0f}",
                            f"{s['min']:.0f}..{s['max']:.0f}",
                            "/".join(map(str, sorted(stored[method]))),
                        )
                    )
        print(
            f"\nOne writer, {BATCH} facts (LoCoMo turns, LocalEmbedder), threshold {threshold}; "
            f"facts/s median of {repeat} (min..max)"
        )
        print(
            table(
                ["facts already in namespace", "method", "facts/s", "min..max", "stored of 100"],
                rows,
            )
        )

        rows = []
        scenarios = {
            f"{WRITERS} writers, {WRITERS} namespaces": lambda: [
                (p, spaces.fresh()) for p in payloads
            ],
            f"{WRITERS} writers, one namespace": lambda: _one_ns(payloads, spaces.fresh()),
            f"{WRITERS} writers, one namespace, the same {BATCH} facts": lambda: _one_ns(
                [payloads[0]] * WRITERS, spaces.fresh()
            ),
        }
        for name, make in scenarios.items():
            rates, stored = [], set()
            for _ in range(repeat):
                jobs = make()
                wall, saved = concurrent(dsn, jobs)
                rates.append(WRITERS * BATCH / wall)
                stored.add(saved)
            s = summary(rates)
            results["concurrent"][name] = {"facts_per_s": s, "stored": sorted(stored)}
            rows.append(
                (
                    name,
                    f"{s['median']:.0f}",
                    f"{s['min']:.0f}..{s['max']:.0f}",
                    "/".join(map(str, sorted(stored))),
                )
            )
        print(
            f"\nConcurrent: {WRITERS} threads, one connection each, save_facts of {BATCH} facts "
            f"each; facts offered per second of wall time, median of {repeat} (min..max)"
        )
        print(table(["scenario", "facts/s", "min..max", f"stored of {WRITERS * BATCH}"], rows))
    write_results("dedupe-quick" if args.quick else "dedupe", results)


def _one_ns(payloads: list[str], ns: dict) -> list[tuple[str, dict]]:
    return [(p, ns) for p in payloads]


if __name__ == "__main__":
    main()
