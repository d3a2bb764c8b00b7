"""Shared by the `pnk ask --deep` tests (this module holds no tests): a scripted Messages-API responder
built on `tests/fake_anthropic.py`, and the demo KB copied, calibrated for the fake embedder and synced.

`DeepFake` is the extractor tests' local server with one addition: a queue of *turns*, each answering
one Messages request of the loop — a decomposition, an answer (whose citations may be chosen by
reading the passages the request actually showed), a refusal, a truncation or a body that is not
JSON. Anything the turn queue does not cover falls through to the base server's own behaviour
(`Reply` scripts: status codes, delays). Usage is derived from the request's size, so a
reconciliation is checkable and always below the reservation.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.conftest import REPO_ROOT
from tests.fake_anthropic import FakeAnthropic, Reply
from tests.fakes import FakeEmbedder, substitute_embedder

DEMO_ROOT = REPO_ROOT / "tests" / "demo-kb"
KEY = "sk-ant-test-CANARY-deep-0123456789"  # must never appear in output, ledger or transcript

# The golden set's hop-001 (tests/demo-kb/eval/questions.yaml): the courier's approver is in one
# document, the approver's extension in another.
HOP_QUESTION = "Who signs off the courier for a loan, and what is their phone extension?"
# nil-003: answered nowhere in the corpus.
NIL_QUESTION = "How many volunteers help at the record office?"

# Thresholds on the fake embedder's scale (hashed bag-of-words cosines run lower than a real
# model's): with them the hop question is "medium" (0.570), the first round's queries are medium
# and low, and the second round's query is "high" (0.606), so a calibrated run stops after two.
FAKE_HIGH, FAKE_LOW = 0.59, 0.45

_EVIDENCE = re.compile(r"<evidence>\n(.*)\n</evidence>", re.S)
_PASSAGE_HEAD = re.compile(r"^\[(\d+)\] ", re.M)

Responder = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Turn:
    """One scripted reply: `kind` "json" (`payload` is the object, or a function of the request
    body returning it), "refusal", "truncated" (a cut-off JSON body, stop_reason max_tokens) or
    "malformed" (stop_reason end_turn, a body that is not JSON)."""

    kind: str = "json"
    payload: dict[str, Any] | Responder | None = None


def decompose(*queries: str) -> Turn:
    return Turn("json", {"queries": list(queries)})


def answer(text: str, citations: list[int] | None = None) -> Turn:
    return Turn("json", {"answer": text, "citations": list(citations or [])})


def answer_citing(text: str, *needles: str, extra: tuple[int, ...] = ()) -> Turn:
    """An answer citing, for each needle, the first passage shown whose text contains it (the
    marker is read from the request, as a model would); `extra` adds raw indexes."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        shown = shown_passages(body)
        cited: list[int] = []
        for needle in needles:
            matches = [number for number, passage in shown.items() if needle in passage]
            assert matches, f"no passage shown contains {needle!r}; shown: {list(shown.values())}"
            cited.append(matches[0])
        return {"answer": text, "citations": [*cited, *extra]}

    return Turn("json", respond)


def shown_passages(body: dict[str, Any]) -> dict[int, str]:
    """Marker -> passage text (the marker line included) of the evidence block a request carried."""
    match = _EVIDENCE.search(user_text(body))
    if not match:
        return {}
    block = match.group(1)
    heads = list(_PASSAGE_HEAD.finditer(block))
    return {int(head.group(1)): block[head.start(): heads[i + 1].start() if i + 1 < len(heads) else len(block)]
            for i, head in enumerate(heads)}


def user_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(block.get("text", "") for block in content)


def kind_of(body: dict[str, Any]) -> str:
    """"decompose" or "answer", from the request's schema."""
    schema = body["output_config"]["format"]["schema"]
    return "decompose" if "queries" in schema["properties"] else "answer"


class DeepFake(FakeAnthropic):
    """The extractor tests' server, answering the loop's requests from a queue of turns."""

    def __init__(self) -> None:
        super().__init__()
        self.turns: deque[Turn] = deque()

    def reply_with(self, *turns: Turn | Reply) -> None:
        """Queue replies in request order; a `Reply` goes to the base server's script."""
        for turn in turns:
            if isinstance(turn, Reply):
                self.turns.append(Turn("base", None))
                self.queue(turn)
            else:
                self.turns.append(turn)

    def bodies(self) -> list[dict[str, Any]]:
        return [recorded.body for recorded in self.messages_requests() if recorded.body is not None]

    def answer(self, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes, float]:
        if path != "/v1/messages" or body is None:
            return super().answer(path, body)
        with self._lock:
            turn = self.turns.popleft() if self.turns else Turn("json", {"answer": "", "citations": []})
        if turn.kind == "base":
            return super().answer(path, body)
        payload = turn.payload(body) if callable(turn.payload) else turn.payload
        text = json.dumps(payload or {})
        stop = {"refusal": "refusal", "truncated": "max_tokens"}.get(turn.kind, "end_turn")
        if turn.kind == "refusal":
            text = ""
        elif turn.kind == "truncated":
            text = text[: len(text) // 2]
        elif turn.kind == "malformed":
            text = "Here is the answer: " + text[:20]
        sent = len(json.dumps(body).encode("utf-8"))
        message = {
            "id": f"msg_deep{len(self.requests):04d}", "type": "message", "role": "assistant",
            "model": body.get("model", "unknown"), "content": [{"type": "text", "text": text}],
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": sent // 4, "output_tokens": max(1, len(text) // 4),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }
        return 200, {}, json.dumps(message).encode(), 0.0




def set_deep(kb: Path, max_rounds: int) -> None:
    manifest = kb / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text + f"\n[deep]\nmax_rounds = {max_rounds}\n", encoding="utf-8")


def uncalibrate(kb: Path) -> None:
    """Replace [retrieval.confidence] with `signal = "none"`: every search's confidence becomes
    unknown (a KB without the block would fall back on its self-calibration or the shipped prior)."""
    manifest = kb / "pinakes.toml"
    manifest.write_text(re.sub(r"\[retrieval\.confidence\]\n(?:\w+ = .*\n)*", '[retrieval.confidence]\nsignal = "none"\n',
                               manifest.read_text(encoding="utf-8")), encoding="utf-8")


def ledger_records(kb: Path) -> list[dict[str, Any]]:
    ledger = kb / ".pinakes" / "ledger.jsonl"
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines() if line.strip()]


def synced_demo(directory: Path) -> Path:
    """tests/demo-kb copied under `directory`, calibrated on the fake embedder's scale
    (FAKE_HIGH/FAKE_LOW), synced through the sync API. Copy it per test (`demo_copy`)."""
    root = directory / "demo-kb"
    shutil.copytree(DEMO_ROOT, root, ignore=shutil.ignore_patterns(".pinakes"))
    manifest = root / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    text = re.sub(r"^high = .*$", f"high = {FAKE_HIGH}", text, count=1, flags=re.M)
    text = re.sub(r"^low = .*$", f"low = {FAKE_LOW}", text, count=1, flags=re.M)
    # The thresholds are on the best cosine: the demo's fitted model and its weights go.
    text = re.sub(r"^(?:signal|features|weights|bias) = .*\n", "", text, flags=re.M)
    manifest.write_text(text, encoding="utf-8")
    report = run_sync(root, SyncOptions(index_only=True, quiet=True), embedder=FakeEmbedder())
    assert report.ok, report.failures
    return root


def demo_copy(synced: Path, directory: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the synced demo KB (its own ledger), searched with the fake embedder."""
    root = directory / "demo-kb"
    shutil.copytree(synced, root)
    substitute_embedder(monkeypatch,
                        lambda section, offline=None, threads=None: FakeEmbedder(provider=section.provider))
    return root


def serving(monkeypatch: pytest.MonkeyPatch) -> Iterator[DeepFake]:
    """The scripted server, with the key and base URL the real client reads (a fixture's body)."""
    server = DeepFake()
    with server:
        monkeypatch.setenv("PINAKES_ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server
