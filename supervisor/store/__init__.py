"""The daemon's SQLite state: one connection, versioned migrations, one transaction helper, the queries."""

from __future__ import annotations

from supervisor.store.connection import StoreError, transaction
from supervisor.store.queries import Store

__all__ = ["Store", "StoreError", "transaction"]
