"""The disposable index: `.pinakes/index.db` (SQLite, WAL). Its schema lives in `schema.py` alone."""
