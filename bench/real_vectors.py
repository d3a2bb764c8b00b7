"""Real all-MiniLM-L6-v2 vectors for bench/bench_vector_tiers.py: the packaged model's own vectors of
real text, never synthetic ones, cached by text so a second run embeds nothing.

    python bench/real_vectors.py --minutes 45          # embed what is missing, at most 45 minutes
    python bench/real_vectors.py --borrow /tmp/x/.pinakes/index.db ...   # import an index's vectors

Two sources, both keyed by the text the model embedded (blake2b-128 of its UTF-8 bytes):

- **Borrowed** from indexes already on this machine that the packaged model wrote (meta stamped with
  its identity and sha256): each `embeddings` row with its chunk's text, so the product's own 250-token
  chunks of cranfield, tldr, the Python docs and the Python modules.
- **Embedded** here: every example of the tldr pages (all 38 translations and the English
  tldr-nl2bash-dev pages), one passage per example: the page's title line, the example's description
  and its command, as the page has them. The corpus's SOURCE.md counts 123k of them. Short passages
  embed at several times the rate of 250-token chunks on this 2-core machine, which is what makes
  100k real vectors reachable in under an hour. They are taken round-robin across languages, so a run
  cut short by --minutes is a mix of every language rather than the first few.

The cache is a directory of shards (`shard-NNNNN.npz`: keys (n, 16) uint8, vectors (n, 384) float32),
each written atomically, so a run killed at any point keeps what it finished.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sqlite3
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SHARED = REPO.parent / "shared" / "corpora"
DEFAULT_CACHE = Path(os.environ.get("PNK_VECTOR_CACHE", "/work/cache/vector-tiers"))
PACKAGED_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
DIM = 384
SHARD_ROWS = 512
EXAMPLE = re.compile(r"^- (?P<description>.+?)\n\n`(?P<command>.+?)`$", re.MULTILINE)


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def load_cache(cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """(keys (n, 16) uint8, vectors (n, 384) float32), distinct keys, in shard order."""
    keys: list[np.ndarray] = []
    vectors: list[np.ndarray] = []
    for shard in sorted(cache.glob("shard-*.npz")):
        with np.load(shard) as data:
            keys.append(data["keys"])
            vectors.append(data["vectors"])
    if not keys:
        return np.zeros((0, 16), np.uint8), np.zeros((0, DIM), np.float32)
    all_keys, all_vectors = np.concatenate(keys), np.concatenate(vectors)
    _, first = np.unique(all_keys.view("V16").reshape(-1), return_index=True)
    first.sort()
    return all_keys[first], all_vectors[first]


def write_shard(cache: Path, keys: Sequence[bytes], vectors: np.ndarray) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    number = len(list(cache.glob("shard-*.npz")))
    target = cache / f"shard-{number:05d}.npz"
    partial = cache / f".{target.name}.{os.getpid()}.partial.npz"
    key_array = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 16)
    np.savez(partial, keys=key_array, vectors=np.asarray(vectors, dtype=np.float32))
    os.replace(partial, target)


def borrow(index: Path, cache: Path, known: set[bytes]) -> int:
    """Import the vectors an index of the packaged model holds, keyed by their chunk's text."""
    conn = sqlite3.connect(f"{index.resolve().as_uri()}?mode=ro", uri=True)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("embedding_sha256") != PACKAGED_SHA256 or meta.get("embedding_dim") != str(DIM):
            print(f"  skipped {index}: not written by the packaged model", file=sys.stderr)
            return 0
        rows = conn.execute("SELECT c.text, e.vector FROM embeddings e JOIN chunks c ON c.id = e.chunk_id")
        keys: list[bytes] = []
        vectors: list[np.ndarray] = []
        for text, blob in rows:
            key = text_key(text)
            if key in known or len(blob) != DIM * 4:
                continue
            known.add(key)
            keys.append(key)
            vectors.append(np.frombuffer(blob, dtype=np.float32))
    finally:
        conn.close()
    for start in range(0, len(keys), SHARD_ROWS * 8):
        write_shard(cache, keys[start:start + SHARD_ROWS * 8], np.stack(vectors[start:start + SHARD_ROWS * 8]))
    return len(keys)


def tldr_examples() -> Iterator[str]:
    """Every example of every tldr page, round-robin across languages (English first)."""
    roots = [SHARED / "tldr-nl2bash-dev" / "docs"]
    roots += sorted(path for path in (SHARED / "tldr-pages-translations" / "docs").iterdir() if path.is_dir())
    per_language = [sorted(root.rglob("*.md")) for root in roots]
    pending = [iter(pages) for pages in per_language]
    while pending:
        still: list[Iterator[Path]] = []
        for pages in pending:
            page = next(pages, None)
            if page is None:
                continue
            still.append(pages)
            text = page.read_text(encoding="utf-8", errors="replace")
            title = next((line for line in text.splitlines() if line.startswith("# ")), "")
            for match in EXAMPLE.finditer(text):
                yield f"{title}\n{match['description']}\n{match['command']}"
        pending = still


def embed_missing(cache: Path, known: set[bytes], minutes: float, limit: int | None) -> int:
    from pinakes.embed import load_embedder
    from tests.fakes import default_section

    embedder = load_embedder(default_section("fastembed"), offline=True)
    deadline = time.monotonic() + minutes * 60
    started, done = time.monotonic(), 0
    batch_keys: list[bytes] = []
    batch_texts: list[str] = []

    def flush() -> None:
        nonlocal done
        counts = embedder.count_tokens_batch(batch_texts)
        fits = [i for i, count in enumerate(counts) if count <= embedder.max_input_tokens]
        vectors = embedder.embed_documents([batch_texts[i] for i in fits])
        write_shard(cache, [batch_keys[i] for i in fits], vectors)
        done += len(fits)
        rate = done / (time.monotonic() - started)
        print(f"  embedded {done} ({rate:.1f}/s), cache {len(known)}", file=sys.stderr, flush=True)
        batch_keys.clear()
        batch_texts.clear()

    for text in tldr_examples():
        if time.monotonic() > deadline or (limit is not None and len(known) >= limit):
            break
        key = text_key(text)
        if key in known:
            continue
        known.add(key)
        batch_keys.append(key)
        batch_texts.append(text)
        if len(batch_texts) == SHARD_ROWS:
            flush()
    if batch_texts:
        flush()
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--borrow", type=Path, nargs="*", default=[], help="index.db files to import")
    parser.add_argument("--minutes", type=float, default=0.0, help="embed missing examples for at most this long")
    parser.add_argument("--limit", type=int, default=None, help="stop embedding once the cache holds this many")
    args = parser.parse_args()
    keys, _ = load_cache(args.cache)
    known = {bytes(key) for key in keys}
    for index in args.borrow:
        print(f"  borrowed {borrow(index, args.cache, known)} from {index}", file=sys.stderr)
    if args.minutes > 0:
        embed_missing(args.cache, known, args.minutes, args.limit)
    print(f"cache {args.cache}: {len(load_cache(args.cache)[0])} distinct real vectors", file=sys.stderr)


if __name__ == "__main__":
    main()
