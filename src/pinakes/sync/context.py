"""The state one sync run shares between its steps (the doit tasks in `rules/`).

doit passes values between tasks through its own database, which suits hashes and counts but not
text and vectors; the steps of one run therefore share this object in memory instead. Per-document
keys live in the index (`documents.build_key`), committed in the same transaction as the chunks and
vectors they describe, so a crash never leaves a key claiming work that was not stored.
"""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import dataclass, field
from typing import Any

from pinakes.kb import KBPaths
from pinakes.sync.report import SyncReport


@dataclass(frozen=True)
class SyncOptions:
    rebuild: bool = False
    index_only: bool = False  # never write into the source tree (post-commit / post-merge hooks)
    sidecars_only: bool = False  # never open the index (pre-commit hook)
    stage: bool = False  # with sidecars_only: only staged documents, and `git add` what was written
    quiet: bool = False
    force_unlock: bool = False
    offline: bool | None = None
    extract_backend: str | None = None  # --extract: overrides [extraction] backend for this run
    progress: bool = False  # draw a progress line on stderr


@dataclass
class SyncContext:
    paths: KBPaths
    manifest: Any  # pinakes.manifest.Manifest
    options: SyncOptions
    report: SyncReport
    conn: sqlite3.Connection | None = None  # the writer connection (None when only inspecting)
    read_only: bool = False  # `pnk doit list/info`: compute the plan, change nothing
    embedder: Any = None  # injected (tests) or loaded on first use
    walk: Any = None  # rules/walk.py WalkResult
    plan: Any = None  # rules/pair.py Plan
    extracted: dict[str, Any] = field(default_factory=dict)  # doc_id -> ExtractedText
    chunks: dict[str, list[Any]] = field(default_factory=dict)  # doc_id -> [Chunk]
    failed: set[str] = field(default_factory=set)  # doc_ids whose pipeline stopped
    keys: Any = None  # rules.pair.BuildKeys, fixed for the run
    fatal: Exception | None = None  # an error that must stop the run (raised after doit returns)

    @property
    def kb_id(self) -> str:
        return self.manifest.kb.id

    def get_embedder(self) -> Any:
        if self.embedder is None:
            from pinakes.embed import check_max_tokens, load_embedder
            from pinakes.errors import PinakesError

            self.embedder = load_embedder(self.manifest.embedding, offline=self.options.offline)
            try:
                check_max_tokens(self.manifest.chunking.max_tokens, self.embedder)
            except PinakesError as exc:
                exc.path = self.paths.manifest
                raise
        return self.embedder

    def progress(self, message: str) -> None:
        if self.options.progress and not self.options.quiet:
            sys.stderr.write(f"\r\x1b[2K{message}")
            sys.stderr.flush()

    def progress_done(self) -> None:
        if self.options.progress and not self.options.quiet:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()
