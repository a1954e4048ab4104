"""pgmemory: long-term memory for AI assistants, as a PostgreSQL extension."""

__version__ = "0.1.0"
