"""pgmemory: long-term memory for AI assistants, as a PostgreSQL extension."""

from .calls import Document, DocumentInfo, FactHit, FileInfo, MessageHit, SavedFact
from .client import (
    Archival,
    AsyncArchival,
    AsyncDocuments,
    AsyncMemory,
    AsyncRecall,
    Documents,
    Memory,
    Recall,
)
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
    SetupError,
    TooLarge,
)

__version__ = "0.1.0"

__all__ = [
    "Ambiguous",
    "Archival",
    "AsyncArchival",
    "AsyncDocuments",
    "AsyncMemory",
    "AsyncRecall",
    "Conflict",
    "Document",
    "DocumentConflict",
    "DocumentInfo",
    "Documents",
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
    "MessageHit",
    "NoMatch",
    "NotFound",
    "OpenAIEmbedder",
    "PgMemoryError",
    "Recall",
    "SavedFact",
    "SetupError",
    "TooLarge",
]
