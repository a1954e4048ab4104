"""LocalEmbedder throughput, and the embedding pipeline's overhead over it: the raw
embedder on LoCoMo turns, then `Memory.embed_pending` end to end against the raw
embedder on the same texts, its time split into its parts. SECTION (below) is what is
measured and how, as docs/benchmarks.md shows it.

    .venv/bin/python -m bench.embed [--quick]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from bench._common import (
    ORG,
    Result,
    Row,
    database,
    error_bars,
    fill,
    locomo_turns,
    medians,
    new_result,
    options,
    save,
    section,
    spread,
    stat,
    table,
    timed,
)

SECTION = """\
## Embedding (bench/embed.py)

{texts:,} LoCoMo turns (`speaker: text`; median {tokens_median:.0f} word pieces, max {tokens_max}, {tokens_total:,} in all) through `LocalEmbedder` (all-MiniLM-L6-v2, int8 ONNX on onnxruntime).

### Raw throughput

One `embed` call with all {texts:,} texts (the embedder sorts them by length and runs batches of 64), {repeat} repeats; the model loads once, timed apart.

{raw}

### The pipeline: embed_pending against the raw embedder

The same texts saved without embeddings — {facts:,} as facts (`archival.save_extracted`), {messages:,} as messages (`recall.index`) — then `Memory(dsn, embedder, service=True).embed_pending(batch={batch})`: per batch `memory.pending_embeddings` leases the rows (claim), one embedder call embeds their texts, one `memory.set_memory_embeddings` writes the vectors back (bound in binary as one 2-D `real[]`, validated, then an UPDATE that also inserts into the HNSW index). Against it, the raw embedder on the same texts in batches of {batch}. {rounds} rounds; in each, raw and pipeline run back to back, their order alternating between rounds, and the tables are refilled before each; the ratio is taken per round, then its median. Thin timers around the client's connection source and embedder split the pipeline's time.

{pipeline}

{breakdown}

![embed_pending against the raw embedder](../bench/results/{name}.png)

The write takes {write:.2f} ms per text: the same rows written by a plain UPDATE with the same binary vectors take {floor:.2f} ms (the UPDATE with its HNSW insert), so the call itself (the hash check, validation and the conversion to vectors) and the CPU it shares with the embedder, which runs meanwhile in the other thread, add {transport:.2f} ms (the client's binary encoding alone: {encode:.2f} ms; with onnxruntime on one thread, below, the write takes {write_one:.2f} ms against a floor of {floor_one:.2f} ms). `embed_pending` writes a batch in a second thread while it embeds the next; with onnxruntime's default threads the embedder already uses both cores of this machine, so the database's work for the write still takes CPU from it.
{others}
Reproduce: `.venv/bin/python -m bench.embed{quick}` (`--n`, `--repeat`, `--batch`, `--threads`)."""
OTHER_THREADS = """
The same with onnxruntime on {threads} thread, which leaves a core to the database (as when they do not share a 2-core machine): `embed_pending` writes a batch while it embeds the next, so the write costs the embedder nothing when the database has a core of its own.

{table}
"""

X = "\N{MULTIPLICATION SIGN}"
TARGET_RATIO = 0.9  # embed_pending >= 0.9x the raw embedder's throughput
OWNER = "00000000-0000-0000-0000-0000000000e1"
PARTS = ("claim", "embed", "write", "other")  # embed_pending's time, ms per text


class _TimedSource:
    """The client's connection source with a timer per call kind (claim / write)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = {"claim": 0.0, "write": 0.0}

    def execute(self, claims: str | None, call: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.execute(claims, call)
        finally:
            kind = "claim" if "pending_embeddings" in call.sql else "write"
            self.seconds[kind] += time.perf_counter() - t0

    def close(self) -> None:
        self.inner.close()


class _TimedEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model, self.dimensions = inner.model, inner.dimensions
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors, seconds = timed(self.inner.embed, texts)
        self.seconds += seconds
        return vectors


def _embedder(threads: str) -> Any:
    from pgmemory.embedders import LocalEmbedder

    return LocalEmbedder(threads=None if threads == "default" else int(threads))


def raw_throughput(texts: list[str], threads: str, repeat: int) -> Row:
    embedder = _embedder(threads)
    _, load_s = timed(embedder.embed, ["warm up"])
    rates = []
    for _ in range(repeat):
        vectors, seconds = timed(embedder.embed, texts)
        rates.append(len(texts) / seconds)
        assert len(vectors) == len(texts) and len(vectors[0]) == 384
    return {"threads": threads, "load_s": load_s, "sentences_per_s": stat(rates)}


def pipeline(result: Result, texts: list[str], batch: int, rounds: int, threads: str) -> Row:
    """embed_pending against the raw embedder on the same texts, interleaved rounds."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    from pgmemory import Memory
    from pgmemory.calls import RealRows, RealRowsDumper

    embedder = _embedder(threads)
    embedder.embed(["warm up"])
    half = len(texts) // 2
    facts, messages = texts[:half], texts[half:]
    samples: dict[str, list[float]] = {}
    with database(result, "embed") as dsn:
        admin = psycopg.connect(dsn, autocommit=True)
        register_vector(admin)
        filler = Memory(dsn, service=True)  # no embedder: everything is saved pending

        def fill() -> None:
            admin.execute("TRUNCATE memory.facts, memory.messages")
            ns = {"scope": "user", "owner_id": OWNER}
            for i in range(0, len(facts), 1000):
                saved = filler.archival.save_extracted(ORG, facts[i : i + 1000], ns)
                assert all(s.id is not None for s in saved), "a LoCoMo turn was refused"
            for i, text in enumerate(messages):
                message = {"id": f"m{i}", "chat_id": "c", "owner_id": OWNER, "role": "user"}
                filler.recall.index(ORG, {**message, "content": text})
            admin.execute("ANALYZE memory.facts, memory.messages")

        def raw_round() -> dict[str, float]:
            t0 = time.perf_counter()
            for i in range(0, len(texts), batch):
                embedder.embed(texts[i : i + batch])
            return {"raw_texts_per_s": len(texts) / (time.perf_counter() - t0)}

        def pipeline_round() -> dict[str, float]:
            embed = _TimedEmbedder(embedder)
            mem = Memory(dsn, embedder=embed, service=True)  # type: ignore[arg-type]
            source = mem._source = _TimedSource(mem._source)  # type: ignore[assignment]
            written, total = timed(mem.embed_pending, batch)
            mem.close()
            assert written == len(texts), written
            split = {"claim": source.seconds["claim"], "embed": embed.seconds}
            split["write"] = source.seconds["write"]
            # The writes run in a second thread, overlapping the embedding: what the main
            # thread spends beyond claiming and embedding is waiting for them (and the loop).
            split["other"] = max(0.0, total - split["claim"] - split["embed"])
            ms = {f"{k}_ms": 1000 * v / len(texts) for k, v in split.items()}
            return {"pipeline_texts_per_s": len(texts) / total, **ms}

        vectors = dict(zip(texts, embedder.embed(texts), strict=True))

        def floor_round() -> dict[str, float]:
            """The write without the call: plain UPDATEs with binary vectors; and the
            client's binary encoding of the same vectors alone."""
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
                            "FROM unnest(%s::uuid[], %b::vector[]) b(id, v) WHERE t.id = b.id",
                            (ids, vecs),
                        )
            floor = 1000 * (time.perf_counter() - t0) / len(pending)
            t0 = time.perf_counter()
            for i in range(0, len(texts), batch):
                rows = RealRows.of([vectors[t] for t in texts[i : i + batch]])
                RealRowsDumper(RealRows).dump(rows)
            encode = 1000 * (time.perf_counter() - t0) / len(texts)
            return {"write_floor_ms": floor, "encode_ms": encode}

        for r in range(rounds):
            fill()
            first, second = (raw_round, pipeline_round)[:: 1 if r % 2 == 0 else -1]
            got = {**first(), **second()}
            fill()
            got |= floor_round()
            got["ratio"] = got["pipeline_texts_per_s"] / got["raw_texts_per_s"]
            for k, v in got.items():
                samples.setdefault(k, []).append(v)
            print(
                f"round {r + 1}: raw {got['raw_texts_per_s']:.0f} texts/s, embed_pending "
                f"{got['pipeline_texts_per_s']:.0f} texts/s (ratio {got['ratio']:.3f}); ms per "
                "text: " + ", ".join(f"{k} {got[k + '_ms']:.2f}" for k in PARTS) + "; write "
                f"floor {got['write_floor_ms']:.2f}, encoding {got['encode_ms']:.2f}"
            )
        admin.close()
        filler.close()
    sizes = {"facts": len(facts), "messages": len(messages), "rounds": rounds}
    return {"threads": threads, "batch": batch, "texts": len(texts), **sizes} | {
        k: stat(v) for k, v in samples.items()
    }


def main() -> None:
    ap = options(__doc__, "500 texts, 3 repeats, default threads")
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
    args = ap.parse_args()
    n = args.n or (500 if args.quick else 1000)
    repeat = args.repeat or (3 if args.quick else 5)
    threads = ["default"] if args.quick else args.threads.split(",")

    from tokenizers import Tokenizer

    from pgmemory.embedders._local import _tokenizer_json

    texts = locomo_turns(n)
    tok = Tokenizer.from_str(_tokenizer_json())
    tok.no_padding()
    lengths = [len(e.ids) for e in tok.encode_batch(texts)]
    result = new_result(
        "embed",
        args.quick,
        texts=len(texts),
        tokens_median=statistics.median(lengths),
        tokens_max=max(lengths),
        tokens_total=sum(lengths),
        repeat=repeat,
        batch=args.batch,
        threads=threads,
    )
    print(f"{len(texts)} LoCoMo turns, {sum(lengths):,} word pieces")
    tables = result["tables"]
    tables["raw"] = [raw_throughput(texts, t, repeat) for t in threads]
    # Then with onnxruntime on one thread: a core left to the database, as when the
    # embedder and the database do not share a 2-core machine.
    threads = ["default", *(t for t in threads if t != "default")]
    tables["pipeline"] = [pipeline(result, texts, args.batch, repeat, t) for t in threads]
    save(result, args.out)


def pipeline_table(p: Row) -> str:
    return table(
        ["", "texts/s, median (min..max)"],
        [
            (
                f"raw `LocalEmbedder.embed`, batches of {p['batch']}",
                spread(p["raw_texts_per_s"], ".0f"),
            ),
            (
                f"`Memory.embed_pending(batch={p['batch']})`",
                spread(p["pipeline_texts_per_s"], ".0f"),
            ),
            ("ratio embed_pending / raw (per round)", spread(p["ratio"], ".3f")),
        ],
    )


def breakdown_table(p: Row) -> str:
    labels = {
        "claim": "claim: `memory.pending_embeddings`",
        "embed": "embed: `LocalEmbedder.embed`",
        "write": "write: `memory.set_memory_embeddings` (binary encoding, transfer, validation, "
        "UPDATE, HNSW insert), in a second thread while the next batch is embedded",
        "other": "waiting for a write, and the loop",
        "encode": "for comparison: the binary encoding of the vectors alone (client)",
        "write_floor": "for comparison: plain `UPDATE … FROM unnest(ids, vectors::vector[])`, "
        "binary vectors, same rows and indexes",
    }
    # Shares of the wall time: the writes overlap the embedding, so they are not added.
    total = sum(p[f"{k}_ms"]["median"] for k in ("claim", "embed", "other"))
    rows = [
        (
            label,
            spread(p[f"{k}_ms"], ".3f"),
            f"{p[f'{k}_ms']['median'] / total:.0%}" if k in PARTS else "",
        )
        for k, label in labels.items()
    ]
    return table(
        ["embed_pending's time, per text", "ms, median (min..max)", "share of wall time"], rows
    )


def targets(r: Result) -> list[dict[str, Any]]:
    target = f"embed_pending ≥ {TARGET_RATIO}{X} raw embedder throughput"
    return [
        {
            "target": target
            + (
                ""
                if p["threads"] == "default"
                else f", onnxruntime on {p['threads']} thread (a core left to the database)"
            ),
            "measured": f"{p['ratio']['median']:.2f}{X} ({p['ratio']['min']:.2f}..{p['ratio']['max']:.2f}; "
            f"{p['pipeline_texts_per_s']['median']:.0f} vs "
            f"{p['raw_texts_per_s']['median']:.0f} texts/s, batches of {p['batch']})",
            "met": p["ratio"]["median"] >= TARGET_RATIO,
        }
        for p in r["tables"]["pipeline"]
    ]


def markdown(r: Result) -> str:
    p, *others = r["tables"]["pipeline"]
    raw = [
        (
            "default (one per core)" if row["threads"] == "default" else row["threads"],
            f"{row['sentences_per_s']['median']:.0f}",
            f"{row['sentences_per_s']['min']:.0f}..{row['sentences_per_s']['max']:.0f}",
            f"{row['load_s']:.2f}",
        )
        for row in r["tables"]["raw"]
    ]
    write, floor = p["write_ms"]["median"], p["write_floor_ms"]["median"]
    return section(
        SECTION,
        r,
        p,
        raw=table(["onnxruntime threads", "sentences/s, median", "min..max", "model load, s"], raw),
        pipeline=pipeline_table(p),
        breakdown=breakdown_table(p),
        write=write,
        floor=floor,
        transport=max(write - floor, 0),
        encode=p["encode_ms"]["median"],
        write_one=(others or [p])[0]["write_ms"]["median"],
        floor_one=(others or [p])[0]["write_floor_ms"]["median"],
        others="".join(fill(OTHER_THREADS, q, table=pipeline_table(q)) for q in others),
    )


def figure(plt: Any, r: Result) -> Any:
    """texts/s: raw embedder (one call, batches of the pipeline's size) and embed_pending;
    and the pipeline's time per text split into its parts."""
    p = r["tables"]["pipeline"][0]
    bars = [
        ("raw, one call\n(batches of 64)", row["sentences_per_s"])
        for row in r["tables"]["raw"]
        if row["threads"] == "default"
    ]
    bars += [
        (f"raw, batches\nof {p['batch']}", p["raw_texts_per_s"]),
        (f"embed_pending\n(batch {p['batch']})", p["pipeline_texts_per_s"]),
    ]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    stats = [s for _, s in bars]
    colors = ["#9bb7d4"] * (len(bars) - 1) + ["#d9822b"]
    ax.bar([b[0] for b in bars], medians(stats), yerr=error_bars(stats), capsize=4, color=colors)
    for i, m in enumerate(medians(stats)):
        ax.text(i, m / 2, f"{m:.0f}", ha="center", va="center", fontsize=9)
    raw = p["raw_texts_per_s"]["median"]
    ax.axhline(TARGET_RATIO * raw, color="grey", linestyle="--", linewidth=1)
    ax.text(len(bars) - 0.5, TARGET_RATIO * raw, f"{TARGET_RATIO}{X} raw", ha="right", va="bottom")
    ax.set_ylabel("texts/s (median, min..max)")
    ax.set_title(f"{p['texts']:,} LoCoMo turns, {p['rounds']} rounds")
    ax.grid(True, axis="y", alpha=0.3)
    over = [
        ("claim\n(pending_embeddings)", p["claim_ms"], "#6a994e"),
        ("write\n(set_memory_embeddings)", p["write_ms"], "#d9822b"),
        ("  of it: binary\nencoding (client)", p["encode_ms"], "#f2c49b"),
        ("plain UPDATE,\nbinary vectors", p["write_floor_ms"], "#9bb7d4"),
    ]
    y = list(range(len(over)))[::-1]
    stats = [s for _, s, _ in over]
    ax2.barh(y, medians(stats), xerr=error_bars(stats), capsize=3, color=[c for *_, c in over])
    ax2.set_yticks(y, [label for label, _, _ in over], fontsize=8)
    ax2.set_xlabel("ms per text (median, min..max)")
    ax2.set_title(f"Beside embedding ({p['embed_ms']['median']:.1f} ms per text)")
    ax2.grid(True, axis="x", alpha=0.3)
    return fig


FIGURES = {"": figure}


if __name__ == "__main__":
    main()
