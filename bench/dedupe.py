"""Saving facts with dedupe: memory.save_facts of 100 facts in one call, against
client-side loops over the same 100 facts, and 8 concurrent writers.

Data: LoCoMo turns embedded with LocalEmbedder (real text, so the default
threshold 0.92 refuses a few). Every measurement saves into a fresh namespace
(a second save of the same facts would only find duplicates); a namespace may
be pre-filled with generated vectors so that the dedupe check runs against
an exact scan (small namespace) or the HNSW index (over exact_search_max_rows).
The table also holds a background tenant of 2,000 facts and is ANALYZEd before
the measurements start.

- save_facts: one call, 100 facts;
- search top-1, then INSERT (the client-side loop users write, 200 calls): per fact
  memory.search_facts with k 1 (vector only), then, when the nearest is below the
  threshold, an INSERT of the fact's row as save_facts would store it; each call its
  own transaction, as the pgmemory client runs them; not safe under concurrency;
- save_fact loop (100 calls): the dedupe check runs inside each call;
- plain SQL loop (200 calls): what a client writes on a bare pgvector table:
  `ORDER BY embedding <=> q LIMIT 1` within the namespace (pgvector defaults), then
  the same INSERT.
- 8 writers at once (threads, one connection each): into 8 namespaces, and
  all into one namespace (writers of one namespace serialize on its lock);
  then 8 writers saving the same 100 facts into one namespace: each stored once.

    .venv/bin/python -m bench.dedupe [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench._common import (
    ORG,
    RESULTS_DIR,
    create_database,
    embedded_server,
    pyplot,
    run_together,
    save_figure,
    server_versions,
    summary,
    table,
    write_results,
)
from bench.embed import locomo_turns

BATCH = 100
WRITERS = 8
TARGET_SPEEDUP = 5.0
BACKGROUND = 2000  # facts of another tenant, so that the table is never empty
X = "\N{MULTIPLICATION SIGN}"

SAVE_FACTS = "save_facts (1 call)"
SEARCH_INSERT = "search top-1, then INSERT (200 calls)"
SAVE_FACT_LOOP = "save_fact loop (100 calls)"
PLAIN_LOOP = "plain SQL top-1, then INSERT (200 calls)"
METHODS = (SAVE_FACTS, SEARCH_INSERT, SAVE_FACT_LOOP, PLAIN_LOOP)

INSERT = """
    INSERT INTO memory.facts (organization_id, namespace_id, content, embedding)
    VALUES (%(org)s, %(nsid)s, %(c)s, %(v)b::real[]::vector)
"""
PLAIN_NEAREST = """
    SELECT 1 - (embedding <=> %(v)b::real[]::vector) FROM memory.facts
    WHERE namespace_id = %(nsid)s AND forgotten_at IS NULL
    ORDER BY embedding <=> %(v)b::real[]::vector LIMIT 1
"""


class Namespaces:
    """Fresh user namespaces, each optionally pre-filled with generated facts."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.n = 0
        self.rng = np.random.default_rng(3)

    def fresh(self, prefill: int = 0) -> dict[str, str]:
        """A new namespace (its row created, as save_facts would) with `prefill` facts;
        `ns["id"]` is its namespace id, which the loops' INSERTs need."""
        self.n += 1
        owner = str(uuid.UUID(int=(0xDE << 120) | self.n))
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            nsid = conn.execute(
                "INSERT INTO memory.namespaces (organization_id, id, scope, owner_id) "
                "VALUES (%(org)s, memory._namespace_id(%(org)s, 'user', %(o)s, NULL), 'user', %(o)s) "
                "RETURNING id",
                {"org": ORG, "o": owner},
            ).fetchone()[0]
            if prefill:
                vecs = self.rng.standard_normal((prefill, 384)).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                with (
                    conn.cursor() as cur,
                    cur.copy(
                        "COPY memory.facts (organization_id, namespace_id, content, embedding)"
                        " FROM STDIN"
                    ) as copy,
                ):
                    for i, v in enumerate(vecs):
                        copy.write_row(
                            (
                                ORG,
                                nsid,
                                f"generated fact {i}",
                                "[" + ",".join(f"{x:.6g}" for x in v) + "]",
                            )
                        )
                conn.execute("ANALYZE memory.facts")
        return {"scope": "user", "owner_id": owner, "id": str(nsid)}


def _ns_json(ns: dict) -> str:
    return json.dumps({k: v for k, v in ns.items() if k != "id"})


def save_batch(conn: psycopg.Connection, payload: str, ns: dict) -> tuple[int, int]:
    rows = conn.execute(
        "SELECT id FROM memory.save_facts(%s, %s::jsonb, %s::jsonb)", (ORG, payload, _ns_json(ns))
    ).fetchall()
    return sum(r[0] is not None for r in rows), len(rows)


def save_loop(conn: psycopg.Connection, facts: list[tuple[str, list[float]]], ns: dict) -> int:
    ns_json = _ns_json(ns)
    ids = set()
    for content, vec in facts:
        ids.add(
            conn.execute(
                "SELECT memory.save_fact(%s, %s, %b::real[], %s::jsonb)",
                (ORG, content, vec, ns_json),
            ).fetchone()[0]
        )
    return len(ids)


def search_then_insert(
    conn: psycopg.Connection, facts: list[tuple[str, list[float]]], ns: dict, threshold: float
) -> int:
    """Per fact: memory.search_facts top-1 (vector only), then INSERT when no near-duplicate."""
    ns_json = _ns_json(ns)
    saved = 0
    for content, vec in facts:
        hit = conn.execute(
            "SELECT similarity FROM memory.search_facts(%s, %s, %b::real[], %s::jsonb, 1, "
            "'{\"text_weight\": 0}')",
            (ORG, content, vec, ns_json),
        ).fetchone()
        if hit is None or hit[0] < threshold:
            conn.execute(INSERT, {"org": ORG, "nsid": ns["id"], "c": content, "v": vec})
            saved += 1
    return saved


def plain_then_insert(
    conn: psycopg.Connection, facts: list[tuple[str, list[float]]], ns: dict, threshold: float
) -> int:
    """Per fact: the nearest live fact of the namespace by `<=>` (pgvector defaults), then
    INSERT when no near-duplicate."""
    saved = 0
    for content, vec in facts:
        params = {"org": ORG, "nsid": ns["id"], "c": content, "v": vec}
        hit = conn.execute(PLAIN_NEAREST, params).fetchone()
        if hit is None or hit[0] < threshold:
            conn.execute(INSERT, params)
            saved += 1
    return saved


def concurrent(dsn: str, jobs: list[tuple[str, dict]]) -> tuple[float, int]:
    """One thread and connection per job (a payload and its namespace); wall time."""
    conns = [psycopg.connect(dsn, autocommit=True) for _ in jobs]
    saved = [0] * len(jobs)

    def work(i: int) -> None:
        saved[i] = save_batch(conns[i], *jobs[i])[0]

    try:
        wall = run_together(len(jobs), work)
    finally:
        for c in conns:
            c.close()
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

    results: dict[str, Any] = {
        "quick": args.quick,
        "loadavg_before": os.getloadavg(),
        "batch": BATCH,
        "repeat": repeat,
        "background_facts": BACKGROUND,
        "single": {},
        "speedup": {},
        "concurrent": {},
    }
    with embedded_server("dedupe") as srv:
        dsn = create_database(srv, "dedupe")
        results["versions"] = server_versions(dsn)
        spaces = Namespaces(dsn)
        spaces.fresh(BACKGROUND)  # another tenant; ANALYZEs the table
        with psycopg.connect(dsn, autocommit=True) as conn:
            threshold = float(
                conn.execute("SELECT memory.setting('dedupe_threshold')").fetchone()[0]
            )
            results["threshold"] = threshold
            rows = []
            for prefill in prefills:
                rates: dict[str, list[float]] = {m: [] for m in METHODS}
                stored: dict[str, set[int]] = {m: set() for m in METHODS}
                for r in range(repeat):
                    b = r % len(batches)
                    # The same batch for every method of a round; their order rotates.
                    for method in METHODS[r % len(METHODS) :] + METHODS[: r % len(METHODS)]:
                        ns = spaces.fresh(prefill)
                        t0 = time.perf_counter()
                        if method == SAVE_FACTS:
                            n = save_batch(conn, payloads[b], ns)[0]
                        elif method == SAVE_FACT_LOOP:
                            n = save_loop(conn, batches[b], ns)
                        elif method == SEARCH_INSERT:
                            n = search_then_insert(conn, batches[b], ns, threshold)
                        else:
                            n = plain_then_insert(conn, batches[b], ns, threshold)
                        rates[method].append(BATCH / (time.perf_counter() - t0))
                        stored[method].add(n)
                speedups = {
                    m: summary([a / b for a, b in zip(rates[SAVE_FACTS], rates[m], strict=True)])
                    for m in METHODS
                    if m != SAVE_FACTS
                }
                results["speedup"][str(prefill)] = speedups
                for method in METHODS:
                    s = summary(rates[method])
                    results["single"][f"{method} prefill={prefill}"] = {
                        "prefill": prefill,
                        "method": method,
                        "facts_per_s": s,
                        "stored_of_100": sorted(stored[method]),
                    }
                    x = speedups.get(method)
                    rows.append(
                        (
                            f"{prefill:,}",
                            method,
                            f"{s['median']:.0f}",
                            f"{s['min']:.0f}..{s['max']:.0f}",
                            ""
                            if x is None
                            else f"{x['median']:.1f} ({x['min']:.1f}..{x['max']:.1f})",
                            "/".join(map(str, sorted(stored[method]))),
                        )
                    )
        print(
            f"\nOne writer, {BATCH} facts (LoCoMo turns, LocalEmbedder), threshold {threshold}; "
            f"facts/s median of {repeat} (min..max)"
        )
        print(
            table(
                [
                    "facts already in namespace",
                    "method",
                    "facts/s",
                    "min..max",
                    "save_facts speed-up",
                    "stored of 100",
                ],
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
            rates_c, stored_c = [], set()
            for _ in range(repeat):
                jobs = make()
                wall, saved = concurrent(dsn, jobs)
                rates_c.append(WRITERS * BATCH / wall)
                stored_c.add(saved)
            s = summary(rates_c)
            results["concurrent"][name] = {"facts_per_s": s, "stored": sorted(stored_c)}
            rows.append(
                (
                    name,
                    f"{s['median']:.0f}",
                    f"{s['min']:.0f}..{s['max']:.0f}",
                    "/".join(map(str, sorted(stored_c))),
                )
            )
        print(
            f"\nConcurrent: {WRITERS} threads, one connection each, save_facts of {BATCH} facts "
            f"each; facts offered per second of wall time, median of {repeat} (min..max)"
        )
        print(table(["scenario", "facts/s", "min..max", f"stored of {WRITERS * BATCH}"], rows))
    for t in targets(results):
        print(f"target {t['target']}: {'met' if t['met'] else 'MISSED'} ({t['measured']})")
    name = "dedupe-quick" if args.quick else "dedupe"
    write_results(name, results)
    plot(results, RESULTS_DIR / f"{name}.png")


def _one_ns(payloads: list[str], ns: dict) -> list[tuple[str, dict]]:
    return [(p, ns) for p in payloads]


# ------------------------------------------------------------------ report


def _single(results: dict[str, Any]) -> dict[int, dict[str, dict]]:
    """{prefill: {method: entry}}; older result files keyed only by 'method prefill=N'."""
    out: dict[int, dict[str, dict]] = {}
    for key, v in results["single"].items():
        method, _, pre = key.rpartition(" prefill=")
        out.setdefault(int(v.get("prefill", pre)), {})[v.get("method", method)] = v
    return out


def _loop_name(results: dict[str, Any]) -> str:
    """The client-side loop of the target (older files: search, then save_fact)."""
    methods = {m for by in _single(results).values() for m in by}
    return SEARCH_INSERT if SEARCH_INSERT in methods else "search top-1, then save_fact (200 calls)"


def _speedup(results: dict[str, Any], prefill: int, method: str) -> dict[str, float]:
    """save_facts over `method`: the median of per-round ratios, or (older files without
    them) the ratio of medians, min..max from the extremes."""
    sp = results.get("speedup", {}).get(str(prefill), {}).get(method)
    if sp:
        return sp
    by = _single(results)[prefill]
    a, b = by[SAVE_FACTS]["facts_per_s"], by[method]["facts_per_s"]
    return {
        "median": a["median"] / b["median"],
        "min": a["min"] / b["max"],
        "max": a["max"] / b["min"],
    }


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    loop = _loop_name(results)
    out = []
    for prefill, by in sorted(_single(results).items()):
        if SAVE_FACTS not in by or loop not in by:
            continue
        x = _speedup(results, prefill, loop)
        out.append(
            {
                "target": f"save_facts of {results['batch']} facts ≥ {TARGET_SPEEDUP:g}{X} the "
                f"client-side loop (search top-1, then insert), {prefill:,} facts in the namespace",
                "measured": f"{x['median']:.1f}{X} ({x['min']:.1f}..{x['max']:.1f}): "
                f"{by[SAVE_FACTS]['facts_per_s']['median']:.0f} vs "
                f"{by[loop]['facts_per_s']['median']:.0f} facts/s",
                "met": x["median"] >= TARGET_SPEEDUP,
            }
        )
    return out


def _cell(s: dict[str, float], fmt: str = ".0f") -> str:
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}..{s['max']:{fmt}})"


def markdown(results: dict[str, Any]) -> str:
    r = results
    quick = r.get("quick", False)
    name = "dedupe-quick" if quick else "dedupe"
    single = _single(r)
    loop = _loop_name(r)
    rows = []
    for prefill, by in sorted(single.items()):
        for method in [m for m in METHODS if m in by] + [m for m in by if m not in METHODS]:
            v = by[method]
            x = "" if method == SAVE_FACTS else f"{_cell(_speedup(r, prefill, method), '.1f')}"
            label = f"**{method}**" if method in (SAVE_FACTS, loop) else method
            rows.append(
                (
                    f"{prefill:,}",
                    label,
                    _cell(v["facts_per_s"]),
                    x,
                    "/".join(map(str, v["stored_of_100"])),
                )
            )
    conc = [
        (
            k,
            _cell(v["facts_per_s"]),
            f"{'/'.join(map(str, v['stored']))} of {WRITERS * r['batch']}",
        )
        for k, v in r["concurrent"].items()
    ]
    background = r.get("background_facts")
    out = [
        "## Saving with dedupe (bench/dedupe.py)",
        "",
        f"{r['batch']} LoCoMo turns with their LocalEmbedder vectors per measurement, default "
        f"threshold {r.get('threshold', 0.92)}, each measurement into a fresh namespace "
        "(saving the same facts twice would only find duplicates), optionally pre-filled "
        "with random unit vectors by COPY: 1,000 facts (under `exact_search_max_rows`: the "
        "dedupe check is an exact scan) or 5,000 (over it: the HNSW index)"
        + (
            f"; the table also holds another tenant's {background:,} facts and is ANALYZEd "
            "before the measurements."
            if background
            else "."
        ),
        "",
        "Methods, each on the same 100 facts in a round (their order rotating between rounds):",
        "",
        "- **save_facts**: one call of `memory.save_facts` with the 100 facts: per fact a "
        "lookup by normalized text, a top-1 nearest-neighbour check, an insert — all inside "
        "one function call, one transaction, under the namespace's lock;",
        "- **search top-1, then INSERT** — the client-side loop of the target: per fact "
        '`memory.search_facts(…, k => 1, options => {"text_weight": 0})`, then, when the '
        "nearest fact is below the threshold, a plain `INSERT` of the row as save_facts "
        "stores it (200 round trips, each call its own transaction as the pgmemory client "
        "runs them; two concurrent writers can both insert the same fact);",
        "- **save_fact loop**: 100 calls of `memory.save_fact` (the check runs in each);",
        "- **plain SQL top-1, then INSERT**: the loop on a bare pgvector table: "
        "`WHERE namespace_id = $1 AND forgotten_at IS NULL ORDER BY embedding <=> $2 LIMIT 1` "
        "with pgvector's defaults, then the same INSERT.",
        "",
        f"facts/s: median of {r['repeat']} (min..max). Speed-up: save_facts' rate over the "
        "method's, per round (the same facts), then the median (min..max) of the rounds.",
        "",
        table(
            [
                "facts already in namespace",
                "method",
                "facts/s",
                "save_facts speed-up",
                "stored of 100",
            ],
            rows,
        ),
        "",
        f"{WRITERS} concurrent writers (threads, one connection each, one save_facts of "
        f"{r['batch']} facts each, all released at once; facts offered per second of wall "
        f"time, median of {r['repeat']} (min..max)):",
        "",
        table(["scenario", "facts/s", "stored"], conc),
        "",
        f"![save_facts against client-side loops, and {WRITERS} writers]"
        f"(../bench/results/{name}.png)",
        "",
        *_notes(r),
        "",
        f"Reproduce: `.venv/bin/python -m bench.dedupe{' --quick' if quick else ''}` "
        "(`--repeat N`).",
    ]
    return "\n".join(out)


def _notes(r: dict[str, Any]) -> list[str]:
    single = _single(r)
    loop = _loop_name(r)
    out = [
        "Writers of one namespace serialize on its lock, so 8 writers saving the same 100 "
        "facts store each once; the few refusals among 800 distinct turns are real "
        "near-duplicates at cosine ≥ the threshold (in one namespace more turns meet each "
        "other).",
    ]
    xs = {p: _speedup(r, p, loop)["median"] for p, by in single.items() if loop in by}
    if xs:
        out += [
            "",
            "What bounds the speed-up: both save_facts and the loop pay, per fact, the "
            "nearest-neighbour check and the insert with its HNSW and GIN entries; the loop "
            "adds two round trips per fact, a commit (a WAL flush) per insert and "
            "`search_facts`' per-call "
            "work (namespace resolution, option parsing, the query's lexemes, a 40-deep "
            "list for k = 1). That overhead is fixed while the check grows with the "
            "namespace, so the speed-up shrinks as the namespace grows: "
            + ", ".join(f"{x:.1f}{X} at {p:,} facts" for p, x in sorted(xs.items()))
            + ".",
        ]
    slower = {
        p: _speedup(r, p, PLAIN_LOOP)["median"]
        for p, by in single.items()
        if PLAIN_LOOP in by and _speedup(r, p, PLAIN_LOOP)["median"] < 1
    }
    if slower:
        out += [
            "",
            "The plain SQL loop beats save_facts at "
            + ", ".join(f"{p:,} facts ({x:.1f}{X})" for p, x in sorted(slower.items()))
            + ": its top-1 query walks the HNSW index with pgvector's defaults "
            "(`hnsw.ef_search` 40, no iterative scan), where save_facts' check is an exact "
            "scan up to `exact_search_max_rows` (2,000 facts) and an HNSW scan with "
            "`ef_search` 400 above it, so that it does not miss a near-duplicate; a filtered "
            "HNSW scan with pgvector's defaults can miss the nearest fact or return no row "
            "at all (bench/search.py).",
        ]
    return out


def plot(results: dict[str, Any], path: Path) -> None:
    """facts/s by method and namespace size, and the concurrent scenarios."""
    plt = pyplot()
    if plt is None:
        return
    from matplotlib.ticker import FormatStrFormatter

    single = _single(results)
    prefills = sorted(single)
    methods = [m for m in METHODS if any(m in single[p] for p in prefills)] + sorted(
        {m for p in prefills for m in single[p]} - set(METHODS)
    )
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        stats = [single[p].get(m, {}).get("facts_per_s") for p in prefills]
        xs = [j + i * width for j, s in enumerate(stats) if s]
        ss = [s for s in stats if s]
        ax.bar(
            xs,
            [s["median"] for s in ss],
            width,
            yerr=[[s["median"] - s["min"] for s in ss], [s["max"] - s["median"] for s in ss]],
            capsize=2,
            label=m,
        )
    ax.set_xticks(
        [j + width * (len(methods) - 1) / 2 for j in range(len(prefills))],
        [f"{p:,} facts" for p in prefills],
    )
    ax.set_xlabel("facts already in the namespace")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_ylabel("facts/s (median, min..max; log scale)")
    ax.set_title(f"One writer, {results['batch']} facts")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    conc = results["concurrent"]
    labels = ["1 writer (save_facts,\nempty namespace)"] + [k.replace(", ", ",\n", 1) for k in conc]
    first = single[prefills[0]][SAVE_FACTS]["facts_per_s"]
    stats = [first] + [v["facts_per_s"] for v in conc.values()]
    y = list(range(len(stats)))[::-1]
    ax2.barh(
        y,
        [s["median"] for s in stats],
        xerr=[[s["median"] - s["min"] for s in stats], [s["max"] - s["median"] for s in stats]],
        capsize=3,
        color=["#9bb7d4"] + ["#d9822b"] * len(conc),
    )
    ax2.set_yticks(y, labels, fontsize=8)
    ax2.set_xlabel("facts offered per second of wall time")
    ax2.set_title(f"{WRITERS} concurrent writers, save_facts")
    ax2.grid(True, axis="x", alpha=0.3)
    save_figure(fig, path)


if __name__ == "__main__":
    main()
