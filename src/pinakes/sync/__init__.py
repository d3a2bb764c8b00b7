"""The sync driver: lock the KB, plan the change (walk + pair), run the dirty work as doit tasks.

The steps' cores live in `pinakes.pipeline` (with the context the tasks share and the report) and
`pinakes.sources` (the walk); `pinakes.rules` adapts them into doit tasks, one module each. This package
holds what surrounds them: the lock, the doit loader, status and estimates. `run_sync()` in `engine.py`
is the core API the CLI and hooks call; `SyncOptions` is its input.
"""

from pinakes.pipeline.run import SyncOptions

__all__ = ["SyncOptions"]
