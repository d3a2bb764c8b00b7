"""The fine-tuned cross-encoder as a search's `reader` feature (experiment only; nothing in src/)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

# Which fine-tuned model the measuring scripts load (CE_MODEL=<dir> to compare runs).
MODEL_DIR = Path(os.environ.get("CE_MODEL", "/work/cache/ce-minilm/model"))
DTYPE = os.environ.get("CE_DTYPE", "fp32")  # or "int8" (dynamic quantisation of the Linear layers)
MAX_LENGTH = 192


class Reader:
    """sigmoid(logit) of (question, passage) pairs, one forward pass per call, on the CPU."""

    def __init__(self, model_dir: Path = MODEL_DIR, threads: int = 1, max_length: int = MAX_LENGTH,
                 dtype: str = "fp32") -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        torch.set_num_threads(threads)
        self._torch = torch
        # transformers' Auto classes give pyright partially unknown types: the model and tokenizer as Any
        self.tokenizer: Any = cast(Any, AutoTokenizer).from_pretrained(str(model_dir))
        model: Any = cast(Any, AutoModelForSequenceClassification).from_pretrained(str(model_dir))
        model.eval()
        if dtype == "int8":
            # deprecated in torch (torchao's replacement), kept as the experiment measured it; untyped
            model = cast(Any, torch.ao.quantization).quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.model = model
        self.max_length = max_length

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        torch = self._torch
        encoded = self.tokenizer([query] * len(passages), list(passages), truncation="longest_first",
                                 max_length=self.max_length, padding=True, return_tensors="pt")
        with torch.inference_mode():
            logits = self.model(**encoded).logits.squeeze(-1)
        probabilities: Any = torch.sigmoid(logits)  # Tensor.tolist: partially unknown to pyright
        return probabilities.tolist()
