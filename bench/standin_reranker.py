"""Cross-encoders with the real architectures and made-up weights: rerank *latency* without weights.

No PyPI package ships cross-encoder weights and this machine cannot download any (docs/QUALITY.md),
so the quality of reranking cannot be measured here. Its cost can: a transformer's forward pass
costs the same whatever its weights are, so a model with the right shape, the right tokenizer
length limit and the real loading path (sentence-transformers' CrossEncoder, through
pinakes.search.rerank) times the stage honestly. Scores from these models are noise; nothing
but timing may be read from them.

Two shapes:
  minilm-l6  cross-encoder/ms-marco-MiniLM-L-6-v2: BERT, 6 layers, 384 wide. Built from the packaged
             all-MiniLM-L6-v2 encoder (same shape, same WordPiece tokenizer) plus a fresh
             one-logit head.
  bge-base   BAAI/bge-reranker-base, the spec's default: XLM-RoBERTa base, 12 layers, 768 wide,
             250 002-token vocabulary, randomly initialised. Tokenized with the MiniLM WordPiece
             tokenizer (XLM-R's sentencepiece model is not available offline), so token counts
             are WordPiece's, typically within ~10 % of sentencepiece's on English; the token-type
             table has two rows so that WordPiece's pair segment ids fit (no effect on cost).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

SHAPES = ("minilm-l6", "bge-base")


def standin_dir(shape: str, cache: Path) -> Path:
    """A CrossEncoder-loadable directory for `shape`, built once under `cache`."""
    if shape not in SHAPES:
        raise ValueError(f"unknown stand-in shape {shape!r}; use one of {SHAPES}")
    target = cache / f"rerank-standin-{shape}"
    if (target / "config.json").exists():
        return target
    import torch
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForSequenceClassification,
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
    )

    from pinakes.embed.packaged import packaged_model, sentence_transformers_dir

    packaged = packaged_model("sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2")
    assert packaged is not None
    encoder_dir = sentence_transformers_dir(packaged)
    # transformers' from_pretrained and save_pretrained, and torch's manual_seed, are partially unknown
    # to the type checker: the tokenizer and the model as Any
    tokenizer = cast(Any, AutoTokenizer).from_pretrained(str(encoder_dir), model_max_length=512)
    cast(Any, torch).manual_seed(20261130)
    model: Any
    if shape == "minilm-l6":
        config = cast(Any, BertConfig).from_pretrained(str(encoder_dir), num_labels=1)
        model = cast(Any, BertForSequenceClassification).from_pretrained(str(encoder_dir), config=config)
    else:
        config = XLMRobertaConfig(
            vocab_size=250_002, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=514, type_vocab_size=2, num_labels=1,  # pyright: ignore[reportCallIssue]  # accepted at run time: the config takes num_labels without declaring it
            pad_token_id=1, bos_token_id=0, eos_token_id=2,
        )
        model = XLMRobertaForSequenceClassification(config)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target


def standin_reranker(shape: str, cache: Path, batch_size: int = 16):
    """pinakes' own sentence-transformers reranker, loading the stand-in from its directory."""
    from pinakes.search.rerank_local import SentenceTransformersReranker

    reranker = SentenceTransformersReranker(str(standin_dir(shape, cache)), None, batch_size, offline=True)
    reranker.model = f"stand-in:{shape}"
    return reranker
