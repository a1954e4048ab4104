"""Embedders: turn texts into the vectors stored with memories.

- `LocalEmbedder`: all-MiniLM-L6-v2 (384 dimensions) on onnxruntime, offline;
  needs the extra `pgmemory[local]` (importing it does not).
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` endpoint over httpx.

Both follow the `Embedder` protocol; any object with the same four members works.
"""

from ._base import Embedder, EmbedderError
from ._local import LocalEmbedder
from ._openai import OpenAIEmbedder

__all__ = ["Embedder", "EmbedderError", "LocalEmbedder", "OpenAIEmbedder"]
