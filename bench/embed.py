"""LocalEmbedder throughput: sentences per second on 1,000 LoCoMo turns.

The model loads once (timed apart); then the same 1,000 texts are embedded
`--repeat` times in one `embed` call each, for each thread setting.

    .venv/bin/python -m bench.embed [--quick]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from typing import Any

from bench._common import LOCOMO_DIR, summary, table, write_results


def locomo_turns(n: int) -> list[str]:
    texts: list[str] = []
    for path in sorted(LOCOMO_DIR.glob("conv-*.json")):
        conv = json.loads(path.read_text())
        sessions = sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
        )
        texts += [f"{t['speaker']}: {t['text']}" for s in sessions for t in conv[s]]
    return texts[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--threads",
        default="default,1",
        help="comma-separated onnxruntime intra-op thread counts ('default': one per core)",
    )
    ap.add_argument("--quick", action="store_true", help="3 repeats, default threads only")
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.threads = 3, "default"

    from tokenizers import Tokenizer

    from pgmemory.embedders import LocalEmbedder
    from pgmemory.embedders._local import _tokenizer_json

    texts = locomo_turns(args.n)
    tok = Tokenizer.from_str(_tokenizer_json())
    tok.no_padding()
    lengths = [len(e.ids) for e in tok.encode_batch(texts)]
    print(
        f"{len(texts)} LoCoMo turns, word pieces per text: median {statistics.median(lengths):.0f}, "
        f"max {max(lengths)}, total {sum(lengths):,}"
    )
    results: dict[str, Any] = {
        "texts": len(texts),
        "tokens_median": statistics.median(lengths),
        "tokens_total": sum(lengths),
        "repeat": args.repeat,
        "runs": {},
    }
    rows = []
    for setting in args.threads.split(","):
        threads = None if setting == "default" else int(setting)
        embedder = LocalEmbedder(threads=threads)
        t0 = time.perf_counter()
        embedder.embed(["warm up"])
        load_s = time.perf_counter() - t0
        rates = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            vectors = embedder.embed(texts)
            rates.append(len(texts) / (time.perf_counter() - t0))
            assert len(vectors) == len(texts) and len(vectors[0]) == 384
        s = summary(rates)
        results["runs"][setting] = {"load_s": load_s, "sentences_per_s": s}
        rows.append(
            (
                setting,
                f"{s['median']:.0f}",
                f"{s['min']:.0f}..{s['max']:.0f}",
                f"{load_s:.2f}",
            )
        )
    print(table(["onnxruntime threads", "sentences/s (median)", "min..max", "model load s"], rows))
    write_results("embed-quick" if args.quick else "embed", results)


if __name__ == "__main__":
    main()
