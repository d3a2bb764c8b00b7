"""The two dialects a reranker endpoint speaks (`[rerank] api`), as requests and checked answers.

  tei     text-embeddings-inference: `POST {base_url}/rerank` with `{"query", "texts", "truncate",
          "raw_scores", "return_text"}`, answered by a list of `{"index", "score"}` (best first).
          `raw_scores = false` asks for sigmoid(logit), what the local cross-encoders report
          (search/rerank.py); `truncate = true` cuts a pair past the model's input as a local
          cross-encoder does, where TEI would otherwise refuse the whole request.
  cohere  the Cohere/Jina-compatible `POST {base_url}/rerank` that vLLM (`/v1/rerank`), Infinity,
          Jina and Cohere (`/v2/rerank`) serve: `{"model", "query", "documents", "top_n"}`, answered
          by `{"results": [{"index", "relevance_score"}, ...]}`, with the billed usage in `usage`
          (`total_tokens`: Jina, vLLM, Infinity) or `meta.billed_units.search_units` (Cohere).

Every answer is checked whole before a score is used: one score per text sent (each index 0..n-1
exactly once, whatever order they come in), every score a finite number. Anything else is a
`MalformedAnswer` naming what was wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pinakes.jsontypes import JSONValue
from pinakes.manifest.sections import RERANK_APIS


class MalformedAnswer(ValueError):
    """The endpoint answered 2xx with something that is not one score per text."""


@dataclass(frozen=True)
class Usage:
    """What the answer says it billed; None where it says nothing usable."""

    tokens: int | None = None
    search_units: int | None = None


@dataclass(frozen=True)
class RerankAPI:
    name: str
    path: str = "rerank"

    def body(self, model: str, query: str, texts: Sequence[str]) -> dict[str, object]:
        if self.name == "tei":
            return {"query": query, "texts": list(texts), "truncate": True, "raw_scores": False,
                    "return_text": False}
        return {"model": model, "query": query, "documents": list(texts), "top_n": len(texts)}

    def parse(self, content: bytes) -> JSONValue:
        try:
            return json.loads(content)
        except ValueError:
            raise MalformedAnswer("its answer is not JSON") from None

    def scores(self, payload: JSONValue, count: int) -> list[float]:
        """One score per text, in the order the texts were sent."""
        if self.name == "tei":
            items, key = payload, "score"
        else:
            items = payload.get("results") if isinstance(payload, dict) else None
            key = "relevance_score"
        if not isinstance(items, list):
            shape = "a list of {index, score}" if self.name == "tei" else 'an object with "results"'
            raise MalformedAnswer(f"its answer is not {shape}")
        scores: list[float | None] = [None] * count
        for item in items:
            index = item.get("index") if isinstance(item, dict) else None
            score = item.get(key) if isinstance(item, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
                raise MalformedAnswer(f"an item's index is not one of 0..{count - 1} ({_shown(index)})")
            if scores[index] is not None:
                raise MalformedAnswer(f"index {index} is scored twice")
            if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
                raise MalformedAnswer(f"the score of index {index} is not a finite number ({_shown(score)})")
            scores[index] = float(score)
        missing = sum(1 for score in scores if score is None)
        if missing:
            raise MalformedAnswer(f"it scored {count - missing} of the {count} texts sent")
        return [score for score in scores if score is not None]

    def usage(self, payload: JSONValue, headers: Mapping[str, str]) -> Usage:
        if self.name == "tei":  # TEI reports its work in headers, not in the body
            return Usage(tokens=_count(headers.get("x-compute-tokens")))
        if not isinstance(payload, dict):
            return Usage()
        usage, meta = payload.get("usage"), payload.get("meta")
        tokens = None
        if isinstance(usage, dict):
            tokens = _count(usage.get("total_tokens", usage.get("prompt_tokens")))
        billed = meta.get("billed_units") if isinstance(meta, dict) else None
        units = _count(billed.get("search_units")) if isinstance(billed, dict) else None
        return Usage(tokens=tokens, search_units=units)


APIS = {name: RerankAPI(name) for name in RERANK_APIS}


def _count(value: object) -> int | None:
    """A positive count, from a JSON number or a header's digits; None for anything else."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _shown(value: object) -> str:
    return json.dumps(value)[:40] if value is not None else "missing"
