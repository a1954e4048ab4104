"""AsyncMemory has every method Memory has, and each part likewise."""

from __future__ import annotations

import inspect

from pgmemory import AsyncMemory, Memory
from pgmemory.client import Archival, AsyncArchival, AsyncDocuments, AsyncRecall, Documents, Recall


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


def test_async_client_mirrors_the_sync_one():
    for sync, async_ in (
        (Memory, AsyncMemory),
        (Archival, AsyncArchival),
        (Recall, AsyncRecall),
        (Documents, AsyncDocuments),
    ):
        assert _public(sync) == _public(async_), sync.__name__
        for name in _public(sync):
            member = getattr(sync, name)
            if inspect.isfunction(member) and name not in ("as_user",):
                assert inspect.iscoroutinefunction(getattr(async_, name)), (sync.__name__, name)
                assert list(inspect.signature(member).parameters) == list(
                    inspect.signature(getattr(async_, name)).parameters
                ), (sync.__name__, name)
