"""Issue #40: `pnk eval tests/demo-kb` rewrote the committed eval/outcomes.json with 6th-decimal
jitter (the model runtime's arithmetic is not bit-exact from run to run). A run whose numbers moved
only by such noise leaves the file as it is; a run that changed something is written in full.

The noise is real: the query model adds a different random perturbation of about 1e-6 per component
on every load, as a multi-threaded runtime does, over a tiny KB synced by the real sync."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pinakes.cli import main
from pinakes.eval.unchanged import FLOAT_TOLERANCE, same_within
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder, substitute_embedder

QUESTIONS = """\
questions:
  - id: q1
    kind: lexical
    query: "archive quokka"
    expect: [docs/a.md]
  - id: q2
    kind: simple-lookup
    query: "archive harbour boats"
    expect: [docs/c.md]
  - id: q3
    kind: paraphrase
    query: "archive zephyr wind"
    expect: [docs/sub/d.md]
"""
_SEEDS = itertools.count(1)


class NoisyEmbedder(FakeEmbedder):
    """The fake model, its query vectors moved by noise of about 1e-6 per component, new each load."""

    def __init__(self, provider: str) -> None:
        super().__init__(provider=provider)
        self._noise = np.random.default_rng(next(_SEEDS))

    def embed_query(self, text: str) -> np.ndarray:
        vector = super().embed_query(text) + self._noise.normal(0.0, 1e-6, self.identity.dim).astype(np.float32)
        return vector / np.linalg.norm(vector)


@pytest.fixture(autouse=True)
def noisy_model(monkeypatch: pytest.MonkeyPatch) -> None:
    substitute_embedder(monkeypatch,
                        lambda section, offline=None, threads=None: NoisyEmbedder(section.provider))


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    init_kb(root, name="tiny")
    (root / "docs/sub").mkdir(parents=True)
    # every text shares a word with every query: no cosine sits at exactly 0, where noise would flip
    # which passages the vector search returns at all (a fake model's artefact, not noise)
    for name, text in {"a.md": "archive zephyr zephyr quokka\n", "b.md": "archive zephyr lorem ipsum dolor\n",
                       "c.md": "archive harbour boats sail\n", "sub/d.md": "archive zephyr wind report\n"}.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    (root / "eval").mkdir()
    (root / "eval/questions.yaml").write_text(QUESTIONS, encoding="utf-8")
    assert run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder()).ok
    return root


def _features(outcomes: dict[str, Any]) -> list[dict[str, float]]:
    return [row["features"] for row in outcomes["rows"]]


def test_a_run_that_moved_only_by_noise_leaves_the_outcomes_file_as_it_was(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = kb / "eval/outcomes.json"
    assert main(["eval", str(kb), "--update-baseline"]) == 0
    written, baseline = outcomes.read_bytes(), (kb / "eval/baseline.json").read_bytes()
    stamps = outcomes.stat().st_mtime_ns, (kb / "eval/baseline.json").stat().st_mtime_ns
    capsys.readouterr()
    # the noise is there: the runs' own numbers differ in the 6th decimal
    assert main(["eval", str(kb), "--outcomes", str(kb / "second.json")]) == 0
    second = json.loads((kb / "second.json").read_text(encoding="utf-8"))
    assert _features(second) != _features(json.loads(written)), "no noise reached the file: the test means nothing"
    for _ in range(3):
        assert main(["eval", str(kb)]) == 0
        assert main(["eval", str(kb), "--update-baseline"]) == 0
    assert outcomes.read_bytes() == written and (kb / "eval/baseline.json").read_bytes() == baseline
    assert (outcomes.stat().st_mtime_ns, (kb / "eval/baseline.json").stat().st_mtime_ns) == stamps


def test_a_run_that_changed_something_is_written(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = kb / "eval/outcomes.json"
    assert main(["eval", str(kb)]) == 0
    before = json.loads(outcomes.read_text(encoding="utf-8"))
    edited = QUESTIONS.replace('"archive harbour boats"', '"archive boats sail"')
    (kb / "eval/questions.yaml").write_text(edited, encoding="utf-8")
    capsys.readouterr()
    main(["eval", str(kb)])
    after = json.loads(outcomes.read_text(encoding="utf-8"))
    assert after["header"]["golden_set"]["sha256"] != before["header"]["golden_set"]["sha256"]


@pytest.mark.parametrize(("old", "new", "same"), [
    ({"a": 0.126471}, {"a": 0.126472}, True),  # the jitter the issue saw
    ({"a": 0.5}, {"a": 0.5 + 2 * FLOAT_TOLERANCE}, False),
    ({"a": 1}, {"a": 1.0}, True),
    ({"a": True}, {"a": 1}, False),
    ({"a": None}, {"a": 0.0}, False),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, False),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),  # another key order is another file
    ({"a": "x"}, {"a": "x "}, False),
])
def test_same_within_compares_numbers_within_the_tolerance_and_everything_else_exactly(
        old: object, new: object, same: bool) -> None:
    assert same_within(old, new) is same
