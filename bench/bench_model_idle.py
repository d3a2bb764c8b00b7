"""The CPU the embedding model's threads burn between a sync's calls (#45: the cold sync's bar).

    python bench/bench_model_idle.py [--calls 20] [--texts 4] [--gap-ms 100] [--kb DIR]

ONNX Runtime's thread pools spin (busy-wait) after a run before they sleep, by default. A sync does
other work between its model calls (writing the batch, the chunk-ahead worker's extraction, the
self-calibration's searches), so what the pools spin is CPU taken from that work and from other
processes; pure embedding calls back to back and never sees it. This loads the packaged model twice
in one process, alternating: "product" is the session a sync embeds with
(provider_fastembed.rebuild_session_for_documents: memory pattern and spinning off), "spinning" the
same session with ONNX Runtime's default spinning left on. Each makes `--calls` document calls of
`--texts` chunk texts, each followed by a sleep of `--gap-ms`; the CPU of the process during the
calls and during the sleeps is printed per arm, and the ratios (product / spinning). The texts are
the first chunks of `--kb`'s index when given, else generated sentences.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pinakes.embed import Embedder

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))


def texts_for(kb: Path | None, count: int) -> list[str]:
    if kb is None:
        return [" ".join(f"word{(n * 7 + k) % 97} of sentence {n}" for k in range(40)) for n in range(count)]
    conn = sqlite3.connect(f"file:{kb / '.pinakes' / 'index.db'}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT text FROM chunks ORDER BY id LIMIT ?", (count,))]
    finally:
        conn.close()


def load(spinning: bool) -> Embedder:
    """The packaged model's embedder with the sync's document session, its spinning put back on
    when `spinning` (the rest as the product sets it)."""
    import onnxruntime  # pyright: ignore[reportMissingTypeStubs] -- onnxruntime ships no stubs

    from pinakes.embed import load_embedder
    from pinakes.manifest.sections import EmbeddingSection

    embedder = load_embedder(EmbeddingSection(provider="fastembed", model="sentence-transformers/all-MiniLM-L6-v2",
                                              dim=384), offline=True)
    embedder.embed_documents(["warm up the model"])  # the first document call rebuilds the session
    if spinning:
        ort = cast(Any, onnxruntime)  # its compiled module's names: nothing pyright can read
        session = cast(Any, embedder)._model.model.model  # fastembed's ONNX session, untyped
        options = session.get_session_options()
        ort.set_default_logger_severity(3)  # overwriting the product's entries is the point here
        for pool in ("intra_op", "inter_op"):
            options.add_session_config_entry(f"session.{pool}.allow_spinning", "1")
        cast(Any, embedder)._model.model.model = ort.InferenceSession(  # fastembed's ONNX session, untyped
            session._model_path, sess_options=options, providers=session.get_providers())
        embedder.embed_documents(["warm up the model"])
    return embedder


def sample(embedder: Embedder, texts: list[str], calls: int, per_call: int, gap_s: float) -> tuple[float, float]:
    in_calls = in_gaps = 0.0
    for number in range(calls):
        start = time.process_time()
        embedder.embed_documents(texts[(number * per_call) % len(texts):][:per_call])
        between = time.process_time()
        time.sleep(gap_s)
        in_calls += between - start
        in_gaps += time.process_time() - between
    return in_calls, in_gaps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--texts", type=int, default=4)
    parser.add_argument("--gap-ms", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kb", type=Path, default=None)
    args = parser.parse_args()
    texts = texts_for(args.kb, max(args.texts * args.calls, 1))
    arms = {"product": load(spinning=False), "spinning": load(spinning=True)}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name, embedder in arms.items():
            results[name].append(sample(embedder, texts, args.calls, args.texts, args.gap_ms / 1000))
    summary = {name: {"cpu_in_calls_s": sorted(c for c, _ in rows)[len(rows) // 2],
                      "cpu_in_gaps_s": sorted(g for _, g in rows)[len(rows) // 2],
                      "samples": rows} for name, rows in results.items()}
    product, spinning = summary["product"], summary["spinning"]
    # each arm's medians are floats (its "samples" the rows they were taken from)
    per_call_ms = {name: 1000 * cast(float, arm["cpu_in_gaps_s"]) / args.calls for name, arm in summary.items()}
    print(json.dumps({"calls": args.calls, "texts_per_call": args.texts, "gap_ms": args.gap_ms, **summary,
                      "cpu_between_calls_ms_per_call": per_call_ms,
                      "ratio_cpu_in_calls": (cast(float, product["cpu_in_calls_s"])
                                             / cast(float, spinning["cpu_in_calls_s"])),
                      }, indent=1))


if __name__ == "__main__":
    main()
