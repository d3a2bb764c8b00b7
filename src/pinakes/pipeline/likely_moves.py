"""The likely-move rule (spec §6.4: a move without the sidecar): a document leaving the index whose
sidecar was left behind, and the arrival it most likely became. Never acted on, only named with the
`pnk adopt` command that keeps the old ID; sync, `pnk status` and the pre-commit hook share it.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from pinakes.kb import SIDECAR_SUFFIX
from pinakes.pipeline.adopt import adopt_command
from pinakes.pipeline.types import IndexedDoc


class LikelyMove(NamedTuple):
    """A document gone from the index, and the arrival it most likely became (spec §6.4: a move
    without the sidecar). Never acted on: attaching an ID to the wrong file would redirect every
    link to it, so the pair is named with the command that keeps the old ID."""

    doc: IndexedDoc
    new_path: str
    why: str  # "the same content" | "the same file name" | "NN% of its lines"

    @property
    def adopt(self) -> str:
        return adopt_command(self.doc.path, self.new_path)


# A deleted document and a new one sharing at least this share of the deleted one's lines were most
# likely one file, moved and edited without its sidecar.
LIKELY_MOVE_SHARE = 0.5
# Comparing every deleted document with every new one is quadratic: beyond this many pairs, only the
# file-name rule runs.
LIKELY_MOVE_MAX_PAIRS = 20_000
# Source types whose files can be compared line by line with their indexed text.
_LINE_COMPARABLE = ("markdown", "text", "code")


@dataclass(frozen=True)
class MoveEvidence:
    """What the line-share half of the rule reads: a gone document's indexed text, an arrival's file."""

    conn: sqlite3.Connection  # the index the gone documents' chunks are in
    root: Path
    source_types: Mapping[str, str]  # doc path -> source type, from the walk

    def comparable(self, path: str) -> bool:
        return self.source_types.get(path) in _LINE_COMPARABLE

    def indexed_lines(self, doc_id: str) -> set[str]:
        return _significant_lines("\n".join(row[0] for row in self.conn.execute(
            "SELECT text FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,))))

    def file_lines(self, path: str) -> set[str]:
        return _significant_lines(_read_text(self.root / path))


def likely_moves(gone: Sequence[IndexedDoc], arrivals: Mapping[str, str], orphan_sidecars: Collection[str],
                 evidence: MoveEvidence | None = None) -> list[LikelyMove]:
    """The one rule for "likely moved without its sidecar", used by sync, `pnk status` and the
    pre-commit hook: a document leaving the index whose sidecar was left behind (so `pnk adopt` can put
    it back) and an arrival (path -> content hash, "" when not hashed) with its exact content (one that
    already carries a new ID, e.g. minted by the hook, or several copies), its file name or, given
    `evidence`, at least LIKELY_MOVE_SHARE of its lines (a move plus an edit loses the hash match)."""
    orphaned = set(orphan_sidecars)
    left_behind = [doc for doc in gone if doc.path + SIDECAR_SUFFIX in orphaned]
    if not left_behind:  # e.g. a first sync: its arrivals are the whole tree, and nothing left
        return []
    by_content: dict[str, list[str]] = defaultdict(list)
    by_name: dict[str, list[str]] = defaultdict(list)
    for path, content_hash in arrivals.items():
        if content_hash:
            by_content[content_hash].append(path)
        by_name[PurePosixPath(path).name].append(path)
    found: list[LikelyMove] = []
    named: set[tuple[str, str]] = set()
    for doc in left_behind:
        for why, paths in (("the same content", by_content.get(doc.content_hash, [])),
                           ("the same file name", by_name.get(PurePosixPath(doc.path).name, []))):
            for path in paths:
                if (doc.id, path) not in named:
                    named.add((doc.id, path))
                    found.append(LikelyMove(doc, path, why))
    if evidence is None:
        return found
    comparable = [path for path in arrivals if evidence.comparable(path)]
    if not comparable or not left_behind or len(comparable) * len(left_behind) > LIKELY_MOVE_MAX_PAIRS:
        return found
    new_lines = {path: evidence.file_lines(path) for path in comparable}
    for doc in left_behind:
        old_lines = evidence.indexed_lines(doc.id)
        if not old_lines:
            continue
        best = max(comparable, key=lambda path: len(old_lines & new_lines[path]))
        share = len(old_lines & new_lines[best]) / len(old_lines)
        if share >= LIKELY_MOVE_SHARE and (doc.id, best) not in named:
            found.append(LikelyMove(doc, best, f"{share:.0%} of its lines"))
    return found


def _significant_lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if len(line.strip()) >= 8}


def _read_text(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(1 << 20)
    except OSError:
        return ""


def likely_move_note(move: LikelyMove) -> str:
    """What a sync that has just soft-deleted the ID says about it."""
    doc = move.doc
    return (f"likely moved without its sidecar: {doc.path} -> {move.new_path} ({move.why}); {doc.path}'s "
            f"ID {doc.id} was soft-deleted, which breaks links to it, and {move.new_path} does not carry "
            f"it. To keep the old ID: {move.adopt} && pnk sync")
