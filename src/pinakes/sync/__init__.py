"""The sync driver: lock the KB, plan the change (walk + pair), run the dirty work as doit tasks.

The steps themselves live in `rules/` (walk, pair, extract, chunk, embed, graph), one module each.
This package holds what surrounds them: the lock, the shared context the tasks read and write, the
doit loader, and the report. `run_sync()` in `engine.py` is the core API the CLI and hooks call.
"""
