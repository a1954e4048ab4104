"""pgmemory: long-term memory for AI assistants, as a PostgreSQL extension."""

from .calls import FactHit, FileInfo, SavedFact
from .client import Archival, AsyncArchival, AsyncMemory, Memory
from .embedders import Embedder, EmbedderError, LocalEmbedder, OpenAIEmbedder
from .errors import (
    Ambiguous,
    Conflict,
    DocumentConflict,
    EmbeddingInvalid,
    Exists,
    Forbidden,
    Invalid,
    InvalidPath,
    NoMatch,
    NotFound,
    PgMemoryError,
    TooLarge,
)

__version__ = "0.1.0"

__all__ = [
    "Ambiguous",
    "Archival",
    "AsyncArchival",
    "AsyncMemory",
    "Conflict",
    "DocumentConflict",
    "Embedder",
    "EmbedderError",
    "EmbeddingInvalid",
    "Exists",
    "FactHit",
    "FileInfo",
    "Forbidden",
    "Invalid",
    "InvalidPath",
    "LocalEmbedder",
    "Memory",
    "NoMatch",
    "NotFound",
    "OpenAIEmbedder",
    "PgMemoryError",
    "SavedFact",
    "TooLarge",
]
