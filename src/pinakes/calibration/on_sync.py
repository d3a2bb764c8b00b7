"""Self-calibration run by a sync (issue #41): once, when the KB first reaches MIN_DOCUMENTS, and
again when what it was made from has moved (another embedding model, other rules, or a KB half or
twice the size), bounded to SYNC_SECONDS. Never where it would not be used or could cost money:
pinakes.toml has a `[retrieval.confidence]` (fitted, or `signal = "none"`), the embedding model
is a remote endpoint (its queries may be priced), or the sync embedded on a cluster (its driver
holds no model); `pnk eval --self-calibrate` runs it on request.

A failure never fails the sync: it becomes a warning naming the command that retries it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from pinakes.calibration.self_calibration import (
    DEFAULT_RULES,
    MIN_DOCUMENTS,
    SYNC_SECONDS,
    self_calibrate,
    store,
)
from pinakes.embed.base import Embedder
from pinakes.errors import PinakesError
from pinakes.jsontypes import is_dict
from pinakes.kb import KBPaths
from pinakes.manifest import Manifest
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import return_freed_memory
from pinakes.search.calibrated import SELF_CALIBRATION_FORMAT, self_calibration_path
from pinakes.search.confidence import model_named_in

GROWTH = 2.0  # a KB this many times larger or smaller than when it was calibrated is calibrated again


def after_sync(paths: KBPaths, manifest: Manifest, report: SyncReport, embedder: Embedder | None,
               say: Callable[[str], None] | None = None, *, model_elsewhere: bool = False) -> None:
    """Self-calibrate if this KB should be and is not (module docstring); what happened goes into
    the report's notes or warnings. `say` hears one line before it starts: the sync's work is done
    and reported only after it, so a person would otherwise wait on a silent terminal.
    `model_elsewhere`: the sync embedded on a cluster's workers, and this process holds no model;
    calibrating here would load one (seconds and hundreds of MB the cluster was chosen to spare), so
    the note names the command that does it on request instead."""
    if manifest.retrieval.confidence is not None or manifest.embedding.remote is not None:
        return
    if model_elsewhere:
        if _why_calibrate(paths) is not None:
            report.notes.append("confidence was not self-calibrated: the model ran on the cluster's workers, and this "
                                "process holds none; `pnk eval --self-calibrate` does it here")
        return
    try:
        due = _why_calibrate(paths)
        if due is None:
            return
        why = due.why
        # The sync's run (its context, stages and doit's tasks) went when it returned; what it freed
        # is handed back before the searcher maps the vector file on top of what the process holds.
        return_freed_memory(due.documents)
        if say is not None:
            say(f"sync: calibrating confidence from the KB's own documents ({why}; at most {SYNC_SECONDS:.0f} s)")
        searcher = None
        if embedder is not None:  # the sync's own model (tests hand one in): no second load
            from pinakes.search.calibrated import KBConfidence
            from pinakes.search.core import Searcher, SearchSettings

            searcher = Searcher(paths.index_db, SearchSettings.from_retrieval(
                manifest.retrieval, KBConfidence.for_kb(paths, None)), embedder=embedder)
        try:
            calibration = self_calibrate(paths.root, seconds=SYNC_SECONDS, searcher=searcher)
        finally:
            if searcher is not None:
                searcher.close()
    except (PinakesError, sqlite3.Error, OSError) as exc:
        report.warnings.append(f"confidence was not self-calibrated ({exc}); run `pnk eval --self-calibrate`")
        return
    if calibration.fit is None:
        report.notes.append(f"confidence was not self-calibrated: {calibration.why_not}")
        return
    store(paths.root, calibration)
    report.notes.append(f"confidence self-calibrated ({why}): {calibration.questions} questions made from the KB's "
                        f"documents, {calibration.seconds:.0f} s; `pnk eval --self-calibrate` redoes it and says more")


class _Due(NamedTuple):
    why: str  # why this KB needs a self-calibration now
    documents: int  # its active documents


def _why_calibrate(paths: KBPaths) -> _Due | None:
    """Why this KB needs a self-calibration now (and how many documents it holds), or None when it
    does not."""
    from pinakes.index import schema

    if not paths.index_db.exists():
        return None
    conn = schema.open_reader(paths.index_db)
    try:
        documents = int(conn.execute("SELECT count(*) FROM documents WHERE state = 'active'").fetchone()[0])
        model = schema.read_meta(conn).get("embedding_model")
    finally:
        conn.close()
    if documents < MIN_DOCUMENTS or not model:
        return None
    stored = _stored(self_calibration_path(paths))
    if stored is None:
        return _Due("none yet", documents)
    confidence = stored.get("confidence")
    fitted_for = confidence.get("fitted_for") if is_dict(confidence) else None
    fitted_for = fitted_for if isinstance(fitted_for, str) else ""
    if not model_named_in(model, fitted_for):
        return _Due("the embedding model changed", documents)
    if stored.get("rules") != DEFAULT_RULES.describe():
        return _Due("its rules changed", documents)
    before = stored.get("documents")
    if isinstance(before, int) and before > 0 and not 1 / GROWTH < documents / before < GROWTH:
        return _Due(f"the KB went from {before} to {documents} documents", documents)
    return None


def _stored(path: Path) -> dict[object, object] | None:
    try:
        data: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if is_dict(data) and data.get("format") == SELF_CALIBRATION_FORMAT else None
