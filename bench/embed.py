"""LocalEmbedder throughput, and the embedding pipeline's overhead over it.

1. Raw throughput: the same LoCoMo turns embedded in one `embed` call each,
   `--repeat` times, for each onnxruntime thread setting (the model loads once,
   timed apart).
2. The pipeline: the same texts saved without embeddings (half as facts through
   `save_extracted`, half as messages through `recall.index`), then
   `Memory.embed_pending(batch)` end to end: per batch `memory.pending_embeddings`
   (claim), one embedder call, one `memory.set_memory_embeddings` (write back, which
   also inserts into the HNSW indexes). Against it, the raw embedder on the same
   texts in batches of the same size. Rounds interleave raw and pipeline (their
   order alternates) so that noise hits both; each round refills the tables. The
   pipeline's time is split by thin timers around the client's connection source
   and embedder; a floor for the write is measured on the same rows: a plain
   `UPDATE … FROM unnest(ids, vectors)` with binary vectors (the HNSW insert
   without the JSON transport and validation).

    .venv/bin/python -m bench.embed [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._common import (
    LOCOMO_DIR,
    ORG,
    RESULTS_DIR,
    create_database,
    embedded_server,
    pyplot,
    save_figure,
    server_versions,
    summary,
    table,
    write_results,
)

X = "\N{MULTIPLICATION SIGN}"
TARGET_RATIO = 0.9  # embed_pending >= 0.9x the raw embedder's throughput
OWNER = "00000000-0000-0000-0000-0000000000e1"


def locomo_turns(n: int) -> list[str]:
    texts: list[str] = []
    for path in sorted(LOCOMO_DIR.glob("conv-*.json")):
        conv = json.loads(path.read_text())
        sessions = sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
        )
        texts += [f"{t['speaker']}: {t['text']}" for s in sessions for t in conv[s]]
    return texts[:n]


class _TimedSource:
    """The client's connection source with a timer per call kind (claim / write)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = {"claim": 0.0, "write": 0.0}

    def execute(self, claims: str | None, call: Any) -> Any:
        kind = "claim" if "pending_embeddings" in call.sql else "write"
        t0 = time.perf_counter()
        try:
            return self.inner.execute(claims, call)
        finally:
            self.seconds[kind] += time.perf_counter() - t0

    def close(self) -> None:
        self.inner.close()


class _TimedEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - t0


def raw_throughput(texts: list[str], threads: str, repeat: int) -> tuple[dict, tuple]:
    from pgmemory.embedders import LocalEmbedder

    embedder = LocalEmbedder(threads=None if threads == "default" else int(threads))
    t0 = time.perf_counter()
    embedder.embed(["warm up"])
    load_s = time.perf_counter() - t0
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        vectors = embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - t0))
        assert len(vectors) == len(texts) and len(vectors[0]) == 384
    s = summary(rates)
    row = (threads, f"{s['median']:.0f}", f"{s['min']:.0f}..{s['max']:.0f}", f"{load_s:.2f}")
    return {"load_s": load_s, "sentences_per_s": s}, row


def pipeline(texts: list[str], batch: int, rounds: int, threads: str = "default") -> dict[str, Any]:
    """embed_pending against the raw embedder on the same texts, interleaved rounds."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    from pgmemory import Memory
    from pgmemory.calls import _json_vector
    from pgmemory.embedders import LocalEmbedder

    embedder = LocalEmbedder(threads=None if threads == "default" else int(threads))
    embedder.embed(["warm up"])
    half = len(texts) // 2
    facts, messages = texts[:half], texts[half:]
    ns = {"scope": "user", "owner_id": OWNER}
    raw_rates: list[float] = []
    pipe_rates: list[float] = []
    ratios: list[float] = []
    parts: dict[str, list[float]] = {"claim": [], "embed": [], "write": [], "other": []}
    encode_ms: list[float] = []
    floor_ms: list[float] = []
    with embedded_server("embed") as srv:
        dsn = create_database(srv, "embed")
        versions = server_versions(dsn)
        admin = psycopg.connect(dsn, autocommit=True)
        register_vector(admin)
        filler = Memory(dsn, service=True)  # no embedder: everything is saved pending

        def fill() -> None:
            admin.execute("TRUNCATE memory.facts, memory.messages")
            for i in range(0, len(facts), 1000):
                saved = filler.archival.save_extracted(ORG, facts[i : i + 1000], ns)
                assert all(s.id is not None for s in saved), "a LoCoMo turn was refused"
            for i, text in enumerate(messages):
                filler.recall.index(
                    ORG,
                    {
                        "id": f"m{i}",
                        "chat_id": "c",
                        "owner_id": OWNER,
                        "role": "user",
                        "content": text,
                    },
                )
            admin.execute("ANALYZE memory.facts, memory.messages")

        def raw_round() -> float:
            t0 = time.perf_counter()
            for i in range(0, len(texts), batch):
                embedder.embed(texts[i : i + batch])
            return len(texts) / (time.perf_counter() - t0)

        def pipeline_round() -> tuple[float, dict[str, float]]:
            timed = _TimedEmbedder(embedder)
            mem = Memory(dsn, embedder=timed, service=True)  # type: ignore[arg-type]
            source = _TimedSource(mem._source)
            mem._source = source  # type: ignore[assignment]
            t0 = time.perf_counter()
            written = mem.embed_pending(batch=batch)
            total = time.perf_counter() - t0
            mem.close()
            assert written == len(texts), written
            split = {
                "claim": source.seconds["claim"],
                "embed": timed.seconds,
                "write": source.seconds["write"],
            }
            # The writes run in a second thread, overlapping the embedding: what the main
            # thread spends beyond claiming and embedding is waiting for them (and the loop).
            split["other"] = max(0.0, total - split["claim"] - split["embed"])
            return len(texts) / total, {k: 1000 * v / len(texts) for k, v in split.items()}

        vectors = dict(zip(texts, embedder.embed(texts), strict=True))

        def floor_round() -> tuple[float, float]:
            """The write without the JSON transport: plain UPDATEs with binary vectors;
            and the client's JSON encoding of the same vectors alone."""
            pending = admin.execute(
                "SELECT id, content FROM memory.facts WHERE embedding IS NULL "
                "UNION ALL SELECT id, content FROM memory.messages WHERE embedding IS NULL"
            ).fetchall()
            t0 = time.perf_counter()
            for i in range(0, len(pending), batch):
                ids = [p[0] for p in pending[i : i + batch]]
                vecs = [np.asarray(vectors[p[1]], dtype=np.float32) for p in pending[i : i + batch]]
                with admin.transaction():
                    for tbl in ("facts", "messages"):
                        admin.execute(
                            f"UPDATE memory.{tbl} t SET embedding = b.v, lease_until = NULL "
                            "FROM unnest(%s::uuid[], %s::vector[]) b(id, v) WHERE t.id = b.id",
                            (ids, vecs),
                        )
            floor = 1000 * (time.perf_counter() - t0) / len(pending)
            t0 = time.perf_counter()
            for i in range(0, len(texts), batch):
                json.dumps([_json_vector(vectors[t]) for t in texts[i : i + batch]])
            return floor, 1000 * (time.perf_counter() - t0) / len(texts)

        for r in range(rounds):
            fill()
            if r % 2 == 0:
                raw = raw_round()
                rate, split = pipeline_round()
            else:
                rate, split = pipeline_round()
                raw = raw_round()
            fill()
            floor, encode = floor_round()
            raw_rates.append(raw)
            pipe_rates.append(rate)
            ratios.append(rate / raw)
            for k, v in split.items():
                parts[k].append(v)
            floor_ms.append(floor)
            encode_ms.append(encode)
            print(
                f"round {r + 1}: raw {raw:.0f} texts/s, embed_pending {rate:.0f} texts/s "
                f"(ratio {rate / raw:.3f}); ms per text: "
                + ", ".join(f"{k} {v:.2f}" for k, v in split.items())
                + f"; write floor {floor:.2f}, JSON encoding {encode:.2f}"
            )
        admin.close()
        filler.close()
    return {
        "batch": batch,
        "texts": len(texts),
        "facts": len(facts),
        "messages": len(messages),
        "rounds": rounds,
        "threads": threads,
        "raw_texts_per_s": summary(raw_rates),
        "pipeline_texts_per_s": summary(pipe_rates),
        "ratio": summary(ratios),
        "ms_per_text": {k: summary(v) for k, v in parts.items()},
        "write_floor_ms_per_text": summary(floor_ms),
        "json_encode_ms_per_text": summary(encode_ms),
        "versions": versions,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, help="texts (default 1000; --quick: 500)")
    ap.add_argument(
        "--repeat", type=int, help="repeats and pipeline rounds (default 5; --quick: 3)"
    )
    ap.add_argument("--batch", type=int, default=100, help="embed_pending's batch size")
    ap.add_argument(
        "--threads",
        default="default,1",
        help="comma-separated onnxruntime intra-op thread counts ('default': one per core)",
    )
    ap.add_argument("--quick", action="store_true", help="500 texts, 3 repeats, default threads")
    args = ap.parse_args()
    n = args.n or (500 if args.quick else 1000)
    repeat = args.repeat or (3 if args.quick else 5)
    if args.quick:
        args.threads = "default"

    from tokenizers import Tokenizer

    from pgmemory.embedders._local import _tokenizer_json

    texts = locomo_turns(n)
    tok = Tokenizer.from_str(_tokenizer_json())
    tok.no_padding()
    lengths = [len(e.ids) for e in tok.encode_batch(texts)]
    print(
        f"{len(texts)} LoCoMo turns, word pieces per text: median {statistics.median(lengths):.0f}, "
        f"max {max(lengths)}, total {sum(lengths):,}"
    )
    results: dict[str, Any] = {
        "quick": args.quick,
        "loadavg_before": os.getloadavg(),
        "texts": len(texts),
        "tokens_median": statistics.median(lengths),
        "tokens_max": max(lengths),
        "tokens_total": sum(lengths),
        "repeat": repeat,
        "runs": {},
    }
    rows = []
    for setting in args.threads.split(","):
        results["runs"][setting], row = raw_throughput(texts, setting, repeat)
        rows.append(row)
    print(table(["onnxruntime threads", "sentences/s (median)", "min..max", "model load s"], rows))

    p = pipeline(texts, args.batch, repeat)
    results["versions"] = p.pop("versions")
    results["pipeline"] = p
    print()
    print(pipeline_table(p))
    print()
    print(breakdown_table(p))
    # The same with onnxruntime on one thread: a core left to the database, as when the
    # embedder and the database do not share a 2-core machine.
    results["pipeline_by_threads"] = {}
    for setting in args.threads.split(","):
        if setting != "default":
            q = pipeline(texts, args.batch, repeat, setting)
            q.pop("versions")
            results["pipeline_by_threads"][setting] = q
            print(f"\nonnxruntime threads {setting}:")
            print(pipeline_table(q))
    for t in targets(results):
        print(f"target {t['target']}: {'met' if t['met'] else 'MISSED'} ({t['measured']})")
    name = "embed-quick" if args.quick else "embed"
    write_results(name, results)
    plot(results, RESULTS_DIR / f"{name}.png")


# ------------------------------------------------------------------ report


def _spread(s: dict[str, float], fmt: str = ".0f") -> str:
    return f"{s['median']:{fmt}} ({s['min']:{fmt}}..{s['max']:{fmt}})"


def pipeline_table(p: dict[str, Any]) -> str:
    return table(
        ["", "texts/s, median (min..max)"],
        [
            (
                f"raw `LocalEmbedder.embed`, batches of {p['batch']}",
                _spread(p["raw_texts_per_s"]),
            ),
            (f"`Memory.embed_pending(batch={p['batch']})`", _spread(p["pipeline_texts_per_s"])),
            ("ratio embed_pending / raw (per round)", _spread(p["ratio"], ".3f")),
        ],
    )


def breakdown_table(p: dict[str, Any]) -> str:
    parts = p["ms_per_text"]
    labels = {
        "claim": "claim: `memory.pending_embeddings`",
        "embed": "embed: `LocalEmbedder.embed`",
        "write": "write: `memory.set_memory_embeddings` (JSON encoding, transfer, validation, "
        "UPDATE, HNSW insert), in a second thread while the next batch is embedded",
        "other": "waiting for a write, and the loop",
    }
    # Shares of the wall time: the writes overlap the embedding, so they are not added.
    total = sum(parts[k]["median"] for k in ("claim", "embed", "other"))
    rows = [
        (labels[k], _spread(parts[k], ".3f"), f"{parts[k]['median'] / total:.0%}") for k in labels
    ]
    rows += [
        (
            "for comparison: the JSON encoding of the vectors alone (client)",
            _spread(p["json_encode_ms_per_text"], ".3f"),
            "",
        ),
        (
            "for comparison: plain `UPDATE … FROM unnest(ids, vectors::vector[])`, binary "
            "vectors, same rows and indexes",
            _spread(p["write_floor_ms_per_text"], ".3f"),
            "",
        ),
    ]
    return table(
        ["embed_pending's time, per text", "ms, median (min..max)", "share of wall time"], rows
    )


def _write_note(p: dict[str, Any]) -> str:
    parts = p["ms_per_text"]
    write, floor = parts["write"]["median"], p["write_floor_ms_per_text"]["median"]
    encode = p["json_encode_ms_per_text"]["median"]
    return (
        f"The write takes {write:.2f} ms per text: the same rows written as binary vectors "
        f"by a plain UPDATE take {floor:.2f} ms (the UPDATE with its HNSW insert), so the "
        f"vectors' JSON transport adds {max(write - floor, 0):.2f} ms (the client's "
        f"encoding alone: {encode:.2f} ms). `embed_pending` writes a batch in a second "
        "thread while it embeds the next; with onnxruntime's default threads the embedder "
        "already uses both cores of this machine, so the database's work for the write "
        "still takes CPU from it."
    )


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    p = results.get("pipeline")
    target = f"embed_pending ≥ {TARGET_RATIO}{X} raw embedder throughput"
    if not p:
        return [
            {
                "target": target,
                "measured": "not measured (no pipeline run in this result file)",
                "met": False,
            }
        ]
    out = []
    for threads, q in [("default", p), *results.get("pipeline_by_threads", {}).items()]:
        ratio = q["ratio"]
        out.append(
            {
                "target": target
                + (
                    ""
                    if threads == "default"
                    else f", onnxruntime on {threads} thread (a core left to the database)"
                ),
                "measured": f"{ratio['median']:.2f}{X} ({ratio['min']:.2f}..{ratio['max']:.2f}; "
                f"{q['pipeline_texts_per_s']['median']:.0f} vs "
                f"{q['raw_texts_per_s']['median']:.0f} texts/s, batches of {q['batch']})",
                "met": ratio["median"] >= TARGET_RATIO,
            }
        )
    return out


def markdown(results: dict[str, Any]) -> str:
    r = results
    quick = r.get("quick", False)
    name = "embed-quick" if quick else "embed"
    out = [
        "## Embedding (bench/embed.py)",
        "",
        f"{r['texts']:,} LoCoMo turns (`speaker: text`; median {r['tokens_median']:.0f} word "
        f"pieces{', max ' + str(r['tokens_max']) if 'tokens_max' in r else ''}, "
        f"{r['tokens_total']:,} in all) through `LocalEmbedder` (all-MiniLM-L6-v2, int8 ONNX "
        "on onnxruntime).",
        "",
        "### Raw throughput",
        "",
        f"One `embed` call with all {r['texts']:,} texts (the embedder sorts them by length "
        f"and runs batches of 64), {r['repeat']} repeats; the model loads once, timed apart.",
        "",
        table(
            ["onnxruntime threads", "sentences/s, median", "min..max", "model load, s"],
            [
                (
                    "default (one per core)" if k == "default" else k,
                    f"{v['sentences_per_s']['median']:.0f}",
                    f"{v['sentences_per_s']['min']:.0f}..{v['sentences_per_s']['max']:.0f}",
                    f"{v['load_s']:.2f}",
                )
                for k, v in r["runs"].items()
            ],
        ),
    ]
    p = r.get("pipeline")
    if p:
        out += [
            "",
            "### The pipeline: embed_pending against the raw embedder",
            "",
            f"The same texts saved without embeddings — {p['facts']:,} as facts "
            f"(`archival.save_extracted`), {p['messages']:,} as messages (`recall.index`) — "
            f"then `Memory(dsn, embedder, service=True).embed_pending(batch={p['batch']})`: "
            "per batch `memory.pending_embeddings` leases the rows (claim), one embedder "
            "call embeds their texts, one `memory.set_memory_embeddings` writes the vectors "
            "back (sent as JSON, validated, then an UPDATE that also inserts into the HNSW "
            f"index). Against it, the raw embedder on the same texts in batches of "
            f"{p['batch']}. {p['rounds']} rounds; in each, raw and pipeline run back to back, "
            "their order alternating between rounds, and the tables are refilled before "
            "each; the ratio is taken per round, then its median. Thin timers around the "
            "client's connection source and embedder split the pipeline's time.",
            "",
            pipeline_table(p),
            "",
            breakdown_table(p),
            "",
            f"![embed_pending against the raw embedder](../bench/results/{name}.png)",
            "",
            _write_note(p),
        ]
        for threads, q in r.get("pipeline_by_threads", {}).items():
            out += [
                "",
                f"The same with onnxruntime on {threads} thread, which leaves a core to the "
                "database (as when they do not share a 2-core machine): `embed_pending` "
                "writes a batch while it embeds the next, so the write costs the "
                "embedder nothing when the database has a core of its own.",
                "",
                pipeline_table(q),
            ]
    out += [
        "",
        f"Reproduce: `.venv/bin/python -m bench.embed{' --quick' if quick else ''}` "
        "(`--n`, `--repeat`, `--batch`, `--threads`).",
    ]
    return "\n".join(out)


def plot(results: dict[str, Any], path: Path) -> None:
    """texts/s: raw embedder (one call, batches of the pipeline's size) and embed_pending;
    and the pipeline's time per text split into its parts."""
    p = results.get("pipeline")
    plt = pyplot()
    if plt is None:
        return
    if not p:
        return
    default = results["runs"].get("default", {}).get("sentences_per_s")
    bars = []
    if default:
        bars.append(("raw, one call\n(batches of 64)", default))
    bars += [
        (f"raw, batches\nof {p['batch']}", p["raw_texts_per_s"]),
        (f"embed_pending\n(batch {p['batch']})", p["pipeline_texts_per_s"]),
    ]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    med = [s["median"] for _, s in bars]
    err = [[s["median"] - s["min"] for _, s in bars], [s["max"] - s["median"] for _, s in bars]]
    colors = ["#9bb7d4"] * (len(bars) - 1) + ["#d9822b"]
    ax.bar([b[0] for b in bars], med, yerr=err, capsize=4, color=colors)
    for i, m in enumerate(med):
        ax.text(i, m / 2, f"{m:.0f}", ha="center", va="center", fontsize=9)
    raw = p["raw_texts_per_s"]["median"]
    ax.axhline(TARGET_RATIO * raw, color="grey", linestyle="--", linewidth=1)
    ax.text(len(bars) - 0.5, TARGET_RATIO * raw, f"{TARGET_RATIO}{X} raw", ha="right", va="bottom")
    ax.set_ylabel("texts/s (median, min..max)")
    ax.set_title(f"{p['texts']:,} LoCoMo turns, {p['rounds']} rounds")
    ax.grid(True, axis="y", alpha=0.3)
    parts = p["ms_per_text"]
    over = [
        ("claim\n(pending_embeddings)", parts["claim"], "#6a994e"),
        ("write\n(set_memory_embeddings)", parts["write"], "#d9822b"),
        ("  of it: JSON\nencoding (client)", p["json_encode_ms_per_text"], "#f2c49b"),
        ("plain UPDATE,\nbinary vectors", p["write_floor_ms_per_text"], "#9bb7d4"),
    ]
    y = list(range(len(over)))[::-1]
    ax2.barh(
        y,
        [s["median"] for _, s, _ in over],
        xerr=[
            [s["median"] - s["min"] for _, s, _ in over],
            [s["max"] - s["median"] for _, s, _ in over],
        ],
        capsize=3,
        color=[c for _, _, c in over],
    )
    ax2.set_yticks(y, [label for label, _, _ in over], fontsize=8)
    ax2.set_xlabel("ms per text (median, min..max)")
    ax2.set_title(f"Beside embedding ({parts['embed']['median']:.1f} ms per text)")
    ax2.grid(True, axis="x", alpha=0.3)
    save_figure(fig, path)


if __name__ == "__main__":
    main()
