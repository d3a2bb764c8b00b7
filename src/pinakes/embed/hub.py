"""Where model weights live and whether Pinakes may fetch them.

Weights go to the shared Hugging Face cache (HF_HOME), never into a KB, so N KBs on a machine
share one copy (spec §4.5). fastembed left alone caches under $TMPDIR, so it is always handed an
explicit directory under HF_HOME. Paths are resolved from the environment at call time rather than
taken from huggingface_hub's import-time constants, which go stale when HF_HOME changes later.

Nothing may hang on the network: offline mode is passed to every loader as local_files_only (the
env var alone is read by huggingface_hub only at import time), and online lookups get short
timeouts, since a firewall that drops packets otherwise stalls a load for minutes (fastembed #218).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinakes.embed.registry import Cache

OFFLINE_ENV = "PNK_OFFLINE"
_TRUE = {"1", "true", "yes", "on"}
# Seconds; huggingface_hub's own default for downloads is 10 for metadata and no bound on a
# stalled body read in some versions.
HUB_ETAG_TIMEOUT_S = "10"
HUB_DOWNLOAD_TIMEOUT_S = "30"


def resolve_offline(offline: bool | None) -> bool:
    """`offline` when given, else the PNK_OFFLINE environment variable (or HF_HUB_OFFLINE)."""
    if offline is not None:
        return offline
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in (OFFLINE_ENV, "HF_HUB_OFFLINE"))


def prepare_hub_environment(offline: bool) -> None:
    """Set the huggingface_hub environment before any model library is imported."""
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", HUB_ETAG_TIMEOUT_S)
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", HUB_DOWNLOAD_TIMEOUT_S)


def hf_home() -> Path:
    explicit = os.environ.get("HF_HOME")
    if explicit:
        return Path(explicit).expanduser()
    cache_root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_root).expanduser() / "huggingface"


def hub_cache_dir() -> Path:
    """Where sentence-transformers (through huggingface_hub) keeps downloaded repositories."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(explicit).expanduser() if explicit else hf_home() / "hub"


def fastembed_cache_dir() -> Path:
    """fastembed's cache_dir: under HF_HOME, never fastembed's $TMPDIR default."""
    return hf_home() / "fastembed"


def pinakes_model_dir() -> Path:
    """Pinakes' own small files beside the weights: the sha256 verification record, and the
    directory that presents the packaged int8 model to fastembed."""
    return hf_home() / "pinakes"


def repo_cache_name(model: str) -> str:
    """huggingface_hub's directory name for a model repository (`models--org--name`)."""
    return "models--" + model.replace("/", "--")


def local_copy(cache: Cache, model: str, revision: str | None) -> tuple[Path | None, str]:
    """A hub model's directory in `cache` (None when it is not there), and that cache, in words.
    Read without loading anything (doctor asks, before a sync would download it)."""
    if cache == "hub":
        return _hub_snapshot(model, revision), f"the Hugging Face cache ({hub_cache_dir()})"
    return _fastembed_cache_entry(model), f"fastembed's cache under HF_HOME ({fastembed_cache_dir()})"


def _hub_snapshot(model: str, revision: str | None) -> Path | None:
    repo = hub_cache_dir() / repo_cache_name(model)
    try:
        commit = revision if revision and len(revision) == 40 else (
            repo / "refs" / (revision or "main")).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    snapshot = repo / "snapshots" / commit
    return snapshot if (snapshot / "config.json").is_file() else None


def _fastembed_cache_entry(model: str) -> Path | None:
    """fastembed names its cache entries after its own source repository (e.g. Qdrant's ONNX
    export of a model), so the entry is found by the model's name rather than computed."""
    name = model.split("/")[-1].lower()
    cache = fastembed_cache_dir()
    if not cache.is_dir():
        return None
    for entry in sorted(cache.iterdir()):
        if name not in entry.name.lower():
            continue
        tokenizers = sorted(entry.rglob("tokenizer.json"))
        if tokenizers:
            return tokenizers[0].parent
    return None
