"""`Memory` and `AsyncMemory`: the same API, sync and async.

Each method builds its call (calls.py, shared by both) and executes it on the
client's connection source as the client's identity. The identity is
the value given to `request.jwt.claims`: None leaves the setting alone (the
application sets it itself), '' means no claims (the service, which the server
trusts only from a login that is a member of its service role), and a JSON
object names a user.

Methods that need vectors first ask the client's embedder (one call for all
their texts), then make their one SQL call; `embed_pending` repeats that per
batch. `.archival` (facts), `.recall` (earlier messages) and `.documents` are
views through the same client: its connections, identity and embedder.

The async classes are written in `_async/client.py`; the sync ones in
`_sync/client.py` are generated from them by tools/async_to_sync.py
(docs/development.md).
"""

from ._async.client import AsyncArchival, AsyncDocuments, AsyncMemory, AsyncRecall
from ._common import DocumentInfos, FactInput, Id, Ns, OnBatch
from ._sync.client import Archival, Documents, Memory, Recall

__all__ = [
    "Archival",
    "AsyncArchival",
    "AsyncDocuments",
    "AsyncMemory",
    "AsyncRecall",
    "DocumentInfos",
    "Documents",
    "FactInput",
    "Id",
    "Memory",
    "Ns",
    "OnBatch",
    "Recall",
]
