"""What a sync did, for people (`render_text`) and scripts (`to_dict`, `pnk sync --json`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Failure:
    path: str
    stage: str
    error: str


@dataclass
class SyncReport:
    kb_root: str
    mode: str  # "sync" | "rebuild" | "index-only" | "sidecars-only"
    skipped_reason: str | None = None  # e.g. another sync holds the lock
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    reembedded: list[str] = field(default_factory=list)  # same content, new extractor/chunking/model key
    renamed: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    metadata_refreshed: list[str] = field(default_factory=list)
    sidecars_written: list[str] = field(default_factory=list)
    orphaned_sidecars: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    chunks_embedded: int = 0
    files_hashed: int = 0
    graph_census: dict[str, int] | None = None
    graph_seconds: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def noop(self) -> bool:
        return not (self.added or self.changed or self.reembedded or self.renamed or self.deleted
                    or self.metadata_refreshed or self.sidecars_written or self.failures)

    def fail(self, path: str, stage: str, error: str) -> None:
        self.failures.append(Failure(path, stage, error))

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["renamed"] = [{"from": old, "to": new} for old, new in self.renamed]
        data["ok"] = self.ok
        data["noop"] = self.noop
        return data

    def render_text(self) -> str:
        if self.skipped_reason:
            return f"sync skipped: {self.skipped_reason}"
        lines: list[str] = [f"warning: {w}" for w in self.warnings]
        counts = (f"added {len(self.added)}, changed {len(self.changed)}, renamed {len(self.renamed)}, "
                  f"deleted {len(self.deleted)}, failed {len(self.failures)}")
        if self.reembedded:
            counts += f", re-embedded {len(self.reembedded)}"
        if self.metadata_refreshed:
            counts += f", metadata refreshed {len(self.metadata_refreshed)}"
        lines.append(f"{self.mode}: {counts} ({self.wall_seconds:.2f}s)")
        for old, new in self.renamed:
            lines.append(f"  renamed {old} -> {new}")
        for path in self.deleted:
            lines.append(f"  deleted {path} (soft: its ID is kept; the sidecar stays on disk)")
        for path in self.sidecars_written:
            lines.append(f"  wrote sidecar {path}")
        for path in self.orphaned_sidecars:
            lines.append(f"  orphaned sidecar {path} (no document beside it; never deleted automatically)")
        lines.extend(f"  note: {note}" for note in self.notes)
        if self.graph_census is not None:
            census = ", ".join(f"{kind} {count}" for kind, count in self.graph_census.items())
            lines.append(f"graph: {census} ({(self.graph_seconds or 0) * 1000:.0f} ms)")
        if self.failures:
            lines.append(f"{len(self.failures)} document(s) failed:")
            lines.extend(f"  {f.path} [{f.stage}]: {f.error}" for f in self.failures)
        return "\n".join(lines)
