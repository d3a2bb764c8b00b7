"""How far a remote model's probe vectors move under a server's float noise, and how far another
model's are: the measurements behind `embed/remote_identity.py` `MIN_PROBE_COSINE`.

    python bench/bench_probe_tolerance.py [--trials 200] [--no-models]

  noise     unit probe vectors (random ones of each width, and the packaged MiniLM's own for the
            probe texts), Gaussian noise of standard deviation s added to every component, then
            normalised as the provider normalises: the least cosine to the noiseless vectors over
            `--trials` draws (each draw's least over the four probes).
  models    the packaged all-MiniLM-L6-v2 in float32 (sentence-transformers, mean pooling) against:
            the same weights in int8 (fastembed's ONNX export), the same weights pooled from the
            [CLS] token instead of the mean (a "model" sharing every weight), and the test stub's
            hashed bag of words under another seed (tests/fake_openai_embeddings.py: a swapped
            model); each probe's cosine, and their least.

Prints the tables and one JSON line (for docs/perf/embedding.md). About 20 s with the models.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path
from typing import Any, cast

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from pinakes.embed.remote_identity import MIN_PROBE_COSINE, PROBE_TEXTS, probe_agreement  # noqa: E402

DIMS = (384, 768, 1024, 1536, 3072, 4096)
SIGMAS = (1e-6, 1e-5, 1e-4, 1e-3, 3e-3)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def worst_under_noise(vectors: np.ndarray, sigma: float, trials: int, rng: np.random.Generator) -> float:
    worst = 1.0
    for _ in range(trials):
        noisy = unit(vectors + rng.normal(0.0, sigma, vectors.shape).astype(np.float32))
        worst = min(worst, probe_agreement(noisy, vectors))
    return worst


def noise_table(trials: int, minilm: np.ndarray | None) -> list[dict[str, object]]:
    rng = np.random.default_rng(7)
    rows: list[dict[str, object]] = []
    cases = [(f"random d={dim}", unit(rng.normal(size=(len(PROBE_TEXTS), dim)))) for dim in DIMS]
    if minilm is not None:
        cases.insert(0, ("MiniLM probes d=384", minilm))
    for name, vectors in cases:
        worst = {sigma: worst_under_noise(vectors, sigma, trials, rng) for sigma in SIGMAS}
        rows.append({"vectors": name, **{f"{sigma:g}": round(value, 6) for sigma, value in worst.items()}})
        print(f"{name:<22}" + "".join(f"  s={sigma:<6g} {value:.6f}{'' if value >= MIN_PROBE_COSINE else ' (out)'}"
                                      for sigma, value in worst.items()))
    return rows


def minilm_dir() -> str:
    from pinakes.embed.packaged import packaged_model, sentence_transformers_dir

    packaged = packaged_model("sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2")
    assert packaged is not None
    return str(sentence_transformers_dir(packaged))


def minilm_float() -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = cast(Any, SentenceTransformer(minilm_dir(), device="cpu"))  # its encode: partially unknown to pyright
    return unit(np.asarray(model.encode(list(PROBE_TEXTS)), dtype=np.float32))


def model_table(float_vectors: np.ndarray) -> dict[str, list[float]]:
    from pinakes.embed import load_embedder
    from pinakes.manifest.sections import EmbeddingSection

    others: dict[str, np.ndarray] = {}
    int8 = load_embedder(EmbeddingSection(provider="fastembed", model="sentence-transformers/all-MiniLM-L6-v2",
                                          dim=384), offline=True)
    others["same weights, int8 (fastembed ONNX)"] = int8.embed_documents(list(PROBE_TEXTS))
    others["same weights, [CLS] pooling"] = cls_pooled()
    from tests.fake_openai_embeddings import FakeEmbeddings

    stub = FakeEmbeddings(dim=384)
    seed0 = unit(np.asarray([stub.vector(text) for text in PROBE_TEXTS]))
    stub.model_seed = 1
    seed1 = unit(np.asarray([stub.vector(text) for text in PROBE_TEXTS]))
    table: dict[str, list[float]] = {}
    for name, vectors in others.items():
        table[name] = [round(float(a @ b), 6) for a, b in zip(unit(vectors), float_vectors, strict=True)]
    table["test stub, another seed"] = [round(float(a @ b), 6) for a, b in zip(seed1, seed0, strict=True)]
    for name, cosines in table.items():
        print(f"{name:<38} least {min(cosines):.4f}   per probe {', '.join(f'{c:.4f}' for c in cosines)}")
    return table


def cls_pooled() -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    directory = minilm_dir()
    # transformers' Auto classes give pyright partially unknown types: the model and tokenizer as Any
    tokenizer = cast(Any, AutoTokenizer).from_pretrained(directory)
    model = cast(Any, AutoModel).from_pretrained(directory)
    with torch.no_grad():
        encoded = tokenizer(list(PROBE_TEXTS), padding=True, return_tensors="pt")
        hidden = model(**encoded).last_hidden_state
    return unit(hidden[:, 0, :].numpy())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--no-models", action="store_true", help="the noise table alone (no model loads)")
    args = parser.parse_args()
    float_vectors = None if args.no_models else minilm_float()
    print(f"least probe cosine under noise over {args.trials} draws (MIN_PROBE_COSINE = {MIN_PROBE_COSINE}):")
    noise = noise_table(args.trials, float_vectors)
    models = {} if float_vectors is None else model_table(float_vectors)
    print(json.dumps({"bench": "probe_tolerance", "date": datetime.date.today().isoformat(),
                      "machine": platform.machine(), "python": platform.python_version(),
                      "min_probe_cosine": MIN_PROBE_COSINE, "trials": args.trials, "noise": noise,
                      "models": models}))


if __name__ == "__main__":
    main()
