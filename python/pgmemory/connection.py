"""Where a client's connections come from, and how one call is executed.

A client is given a DSN (it then owns one connection, opened on first use), a
connection (borrowed: never closed by us) or a pool. Every call runs in one
transaction: set the caller's claims transaction-locally, run the call's SQL,
commit; on error roll back and raise the translated error. A connection that is
already inside a transaction gets a savepoint instead (psycopg's nesting rule),
and then the claims stay set until that outer transaction ends.

`AsyncSource` is written in `_async/connection.py`; `Source` in
`_sync/connection.py` is generated from it by tools/async_to_sync.py.
"""

from ._async.connection import AsyncSource
from ._common import SET_CLAIMS
from ._sync.connection import Source

__all__ = ["SET_CLAIMS", "AsyncSource", "Source"]
