"""Naming the weights a hub model was loaded from: the snapshot's commit and the weights' sha256.

In the Hugging Face cache a snapshot file is a symlink to `blobs/<etag>`, and for a file stored
in Git LFS (every weights file) the etag is the file's sha256, so the digest is usually free.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from pinakes.embed.packaged import cached_sha256
from pinakes.errors import ModelUnavailableError

_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Looked for in this order; the first present is the model's weights.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.onnx", "model_optimized.onnx",
                "onnx/model.onnx")


def snapshot_identity(repo_dir: Path, revision: str | None) -> tuple[str, str]:
    """(commit, weights sha256) of the cached snapshot `revision` (default: main) of a repository."""
    commit = revision if revision and _COMMIT.fullmatch(revision) else None
    if commit is None:
        try:
            commit = (repo_dir / "refs" / (revision or "main")).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ModelUnavailableError(
                f"the model loaded, but its snapshot is not in the cache where expected ({repo_dir})",
                remedy="set HF_HOME (or HF_HUB_CACHE) the same way for every Pinakes command",
            ) from exc
    return commit, weights_sha256(repo_dir / "snapshots" / commit)


def local_weights_identity(model_dir: Path) -> tuple[str, str]:
    return "local-directory", weights_sha256(model_dir)


def weights_sha256(model_dir: Path) -> str:
    """The sha256 of a model directory's weights file; for sharded weights, of the shards' digests."""
    for name in WEIGHT_FILES:
        if (model_dir / name).is_file():
            return file_sha256(model_dir / name)
    shards = sorted(model_dir.glob("*.safetensors")) or sorted(model_dir.glob("pytorch_model-*.bin"))
    if not shards:
        raise ModelUnavailableError(
            f"no weights file found in {model_dir}", remedy="delete the cached model and download it again"
        )
    combined = "\n".join(f"{shard.name} {file_sha256(shard)}" for shard in shards)
    return hashlib.sha256(combined.encode()).hexdigest()


def file_sha256(path: Path) -> str:
    blob = path.resolve()
    if blob.parent.name == "blobs" and _SHA256.fullmatch(blob.name):
        return blob.name
    return cached_sha256(path)
