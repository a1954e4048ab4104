"""The sync side, generated from `_async/` by tools/async_to_sync.py: do not edit.

The public names are in pgmemory.client, pgmemory.connection and pgmemory.anthropic.
"""
