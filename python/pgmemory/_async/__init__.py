"""The async side, written by hand: tools/async_to_sync.py generates `_sync/` from it.

The public names are in pgmemory.client, pgmemory.connection and pgmemory.anthropic.
"""
