"""Where a KB lives: finding its root and naming the files inside it.

One directory is one KB. Its root holds pinakes.toml; `.pinakes/` beside it is derived state.
Every KB command acts on the KB containing the current directory, or on -C DIR, as git does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import KBNotFoundError

MANIFEST_NAME = "pinakes.toml"
STATE_DIR_NAME = ".pinakes"
SIDECAR_SUFFIX = ".pnk.yaml"


@dataclass(frozen=True)
class KBPaths:
    """Every path Pinakes reads or writes inside one KB."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_NAME

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR_NAME

    @property
    def index_db(self) -> Path:
        return self.state_dir / "index.db"

    @property
    def rebuild_db(self) -> Path:
        return self.state_dir / "index.db.new"

    @property
    def ledger(self) -> Path:
        return self.state_dir / "ledger.jsonl"

    @property
    def lock(self) -> Path:
        return self.state_dir / "sync.lock"

    @property
    def cache_dir(self) -> Path:
        return self.state_dir / "cache"

    @property
    def extract_cache(self) -> Path:
        return self.cache_dir / "extract"

    @property
    def transcripts(self) -> Path:
        """The transcripts of paid `pnk ask --deep` runs (deep/transcripts.py)."""
        return self.state_dir / "transcripts"


    def relative(self, path: Path) -> str:
        """A KB-root-relative POSIX path, the form stored in the index."""
        return path.resolve().relative_to(self.root).as_posix()


def find_kb_root(start: Path | str | None = None) -> Path:
    """The nearest directory at or above `start` holding pinakes.toml."""
    here = Path(start) if start is not None else Path.cwd()
    here = here.resolve()
    if not here.exists():
        raise KBNotFoundError(f"directory does not exist: {here}", remedy="check the -C argument")
    for candidate in (here, *here.parents):
        if (candidate / MANIFEST_NAME).is_file():
            return candidate
    raise KBNotFoundError(
        f"not inside a Pinakes KB (no {MANIFEST_NAME} here or in any parent of {here})",
        remedy="run `pnk init` to create one, or pass -C DIR to name a KB",
    )


def open_kb(start: Path | str | None = None) -> KBPaths:
    return KBPaths(find_kb_root(start))
