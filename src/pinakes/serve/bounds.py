"""Server-side bounds on what one tool call returns, and how a cut is reported.

A caller cannot ask for an unbounded response: `k` is clamped, each passage and each get carry at
most a fixed number of characters, and the whole response stays within a token budget (estimated
at ~4 characters per token, which is what matters to the caller's context window, not an exact
count from any one tokenizer). Every cut is reported in the response under `truncated`, naming
the bound that cut it: rows (k) and tokens (the budget) separately, so a caller can tell "ask
for fewer passages" from "narrow the search".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    max_k: int = 50
    passage_chars: int = 4_000  # characters of one search passage
    get_chars: int = 20_000  # characters one pinakes_get returns
    token_budget: int = 12_000  # estimated tokens of one whole response
    chars_per_token: int = 4

    def tokens(self, payload: object) -> int:
        """Estimated tokens of `payload` as the caller receives it (its JSON)."""
        return math.ceil(len(json.dumps(payload, ensure_ascii=False)) / self.chars_per_token)

    def chars_for(self, tokens: int) -> int:
        return max(0, tokens * self.chars_per_token)


def cut(text: str, limit: int) -> tuple[str, bool]:
    """At most `limit` characters of `text`, and whether anything was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True
