"""`pnk eval` end to end over real indexes, with the deterministic fake embedder (fast).

The demo KB is synced once per module and copied per test. Numbers are never hard-coded against the
demo corpus (it is still growing); the tests compare a run with itself, with a baseline written by
the same code, or with values derived from a tiny synthetic KB whose rankings are known.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from pinakes.eval.harness import EvalPaths, evaluate, load_for_run
from pinakes.eval.outcomes import read_outcomes
from pinakes.init import init_kb
from pinakes.manifest import EmbeddingSection, load_manifest
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder, substitute_embedder

DEMO_ROOT = Path(__file__).resolve().parent / "demo-kb"


@pytest.fixture(autouse=True)
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model load in these tests (sync and search) gets the fake embedder."""
    def fake(section: EmbeddingSection, *args: object, **kwargs: object) -> FakeEmbedder:
        return FakeEmbedder(provider=section.provider)

    substitute_embedder(monkeypatch, fake)


@pytest.fixture(scope="module")
def synced_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo") / "demo-kb"
    shutil.copytree(DEMO_ROOT, root, ignore=shutil.ignore_patterns(".pinakes"))
    for committed in ("baseline.json", "outcomes.json"):
        (root / "eval" / committed).unlink(missing_ok=True)  # produced by the real model, not this one
    # Thresholds fitted on the real model's scores mean nothing for the fake one: start uncalibrated.
    manifest = root / "pinakes.toml"
    manifest.write_text(re.sub(r"\[retrieval\.confidence\]\n(?:\w+ = .*\n)*", "",
                               manifest.read_text(encoding="utf-8")), encoding="utf-8")
    assert load_manifest(manifest).retrieval.confidence is None
    report = run_sync(root, SyncOptions(index_only=True, quiet=True), embedder=FakeEmbedder())
    assert report.ok, report.failures
    return root


@pytest.fixture
def demo(synced_demo: Path, tmp_path: Path) -> Path:
    root = tmp_path / "demo-kb"
    shutil.copytree(synced_demo, root)
    return root


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["eval", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def set_retrieval(kb: Path, **values: object) -> None:
    """Rewrite [retrieval] keys in a copy's manifest (the demo manifest stays untouched)."""
    manifest = kb / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())
    assert "[retrieval]\n" in text
    manifest.write_text(text.replace("[retrieval]\n", "[retrieval]\n" + lines, 1), encoding="utf-8")
    load_manifest(manifest)  # still valid


# ------------------------------------------------------------------------------------------------
# The golden-set run


def test_a_run_writes_outcomes_that_rescore_to_the_same_scoreboard(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, live = run_json(capsys, str(demo))
    assert code == 0 and live["ok"] and live["regressions"] == []
    outcomes_path = demo / "eval" / "outcomes.json"
    outcomes = read_outcomes(outcomes_path)
    golden, _ = load_for_run(EvalPaths.for_kb(demo), load_manifest(demo / "pinakes.toml"))
    assert golden is not None
    assert [row.id for row in outcomes.rows] == [question.id for question in golden.questions]
    header: Mapping[str, Any] = outcomes.header  # parsed JSON, read by key
    assert header["embedding"]["revision"] == "fake"  # the index's own identity
    assert header["golden_set"]["questions"] == len(golden)
    code, rescored = run_json(capsys, "--rescore", str(outcomes_path))
    assert code == 0 and rescored["scoreboard"] == live["scoreboard"]
    # Re-running an unchanged configuration rewrites the file byte for byte.
    first = outcomes_path.read_bytes()
    assert main(["eval", str(demo)]) == 0
    assert outcomes_path.read_bytes() == first


def test_every_rate_carries_its_numerator_and_denominator(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, data = run_json(capsys, str(demo))
    classes = data["scoreboard"]["classes"]
    assert list(classes) == ["lexical", "simple-lookup", "paraphrase", "filter", "multi-hop", "no-answer", "all"]
    for name, scores in classes.items():
        for metric in ("recall@k", "mrr", "rerank_precision", "false_abstain", "false_confidence"):
            rate = scores[metric]
            assert {"value", "numerator", "denominator"} <= set(rate), (name, metric)
            if rate["value"] is None:
                assert rate["reason"], (name, metric)
            else:
                assert rate["denominator"] > 0
    # The demo manifest reranks nothing, so rerank precision is null everywhere, with the reason.
    assert "rerank is off" in classes["all"]["rerank_precision"]["reason"]


def test_the_gate_passes_against_its_own_baseline_and_fails_when_final_k_is_lowered(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(demo), "--update-baseline"]) == 0
    assert (demo / "eval" / "baseline.json").exists()
    capsys.readouterr()
    assert main(["eval", str(demo)]) == 0
    assert "no regression" in capsys.readouterr().out
    set_retrieval(demo, final_k=1)
    code, data = run_json(capsys, str(demo))
    assert code == 1 and not data["ok"]
    regressed = {(item["class"], item["metric"]) for item in data["regressions"]}
    assert ("all", "recall@k") in regressed
    assert "retrieval.final_k: 8 -> 1" in data["baseline_changes"]
    assert main(["eval", str(demo)]) == 1
    assert "REGRESSION" in capsys.readouterr().out


def test_the_gate_fails_when_query_analysis_is_broken(
    demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["eval", str(demo), "--update-baseline"]) == 0
    capsys.readouterr()
    from pinakes.search import core

    real_analyze = core.analyze

    def garbled(text: str, tokenizer: Any) -> Any:
        # A tokenizer that no longer produces the index's terms: every word comes out reversed.
        return real_analyze(" ".join(word[::-1] for word in text.split()), tokenizer)

    monkeypatch.setattr(core, "analyze", garbled)
    code, data = run_json(capsys, str(demo))
    assert code == 1
    regressed = {(item["class"], item["metric"]) for item in data["regressions"]}
    assert ("lexical", "mrr") in regressed and ("all", "mrr") in regressed


def test_a_shrunken_or_deleted_golden_set_fails_the_question_count_gate(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(demo), "--update-baseline"]) == 0
    questions = demo / "eval" / "questions.yaml"
    text = questions.read_text(encoding="utf-8")
    first_no_answer = text.index("  - id: nil-")
    questions.write_text(text[:first_no_answer], encoding="utf-8")  # drop the no-answer class
    capsys.readouterr()
    code, data = run_json(capsys, str(demo))
    assert code == 1
    assert ("no-answer", "questions") in {(item["class"], item["metric"]) for item in data["regressions"]}
    questions.unlink()
    code, data = run_json(capsys, str(demo))
    assert code == 1 and data["scoreboard"]["classes"]["all"]["questions"] == 0


def test_fit_confidence_prints_a_block_whose_rates_the_next_run_reproduces(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, fit = run_json(capsys, str(demo), "--fit-confidence")
    assert code == 0 and fit["false_confidence"]["denominator"] >= fit["no_answer_needed"] == 9
    assert main(["eval", str(demo), "--fit-confidence"]) == 0
    assert "too few to promise" not in capsys.readouterr().out  # 11 no-answer questions are enough
    block = fit["manifest_block"]
    assert block.startswith("[retrieval.confidence]\n") and "sentence-transformers/all-MiniLM-L6-v2" in block
    manifest = demo / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").rstrip() + "\n\n" + block, encoding="utf-8")
    _, data = run_json(capsys, str(demo))
    metrics = data["scoreboard"]["classes"]["all"]
    for name in ("false_abstain", "false_confidence"):
        assert metrics[name]["value"] is not None
        assert (metrics[name]["numerator"], metrics[name]["denominator"]) == (
            fit[name]["numerator"], fit[name]["denominator"])
    # 11 no-answer questions are fewer than a golden set needs to carry its own thresholds, but the
    # demo's questions ask in their own words, unlike the questions its self-calibration made (its
    # first sync made one: 33 documents): the fit keeps #25's rule and says why.
    assert fit["shrunk_towards"] is None and "asks unlike you" in fit["note"]
    # Offline (an outcomes file names no KB to shrink towards): #25's fit, from the file alone.
    _, offline = run_json(capsys, "--rescore", str(demo / "eval" / "outcomes.json"), "--fit-confidence")
    assert offline["shrunk_towards"] is None and offline["note"] is None


def test_compare_reports_paired_moves_and_the_sign_test(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(demo), "--outcomes", str(demo / "before.json")]) == 0
    set_retrieval(demo, final_k=1)
    assert main(["eval", str(demo), "--outcomes", str(demo / "after.json")]) == 0  # no baseline: no gate
    capsys.readouterr()
    code, data = run_json(capsys, "--compare", str(demo / "before.json"), str(demo / "after.json"))
    assert code == 0
    assert data["improved"] == [] and data["worsened"]
    assert data["p_value"] == 1.0
    assert "retrieval.final_k: 8 -> 1" in data["header_changes"]


def test_a_kb_without_a_golden_set_is_skipped_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "fresh"
    init_kb(root, name="fresh")
    assert main(["eval", str(root)]) == 0
    assert "eval skipped: no golden set at eval/questions.yaml" in capsys.readouterr().out
    (root / "eval").mkdir()
    (root / "eval" / "questions.yaml").write_text("questions: []\n", encoding="utf-8")
    code, data = run_json(capsys, "-C", str(root))
    assert code == 0 and "lists no questions" in data["skipped"]
    assert not (root / ".pinakes" / "index.db").exists()  # skipping syncs nothing


# ------------------------------------------------------------------------------------------------
# A tiny KB whose rankings are known


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    init_kb(root, name="tiny")
    docs = root / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("zephyr zephyr quokka\n", encoding="utf-8")
    (docs / "b.md").write_text("zephyr lorem ipsum dolor sit amet consectetur adipiscing elit\n", encoding="utf-8")
    (docs / "c.md").write_text("harbour boats sail\n", encoding="utf-8")
    (docs / "sub" / "d.md").write_text("zephyr wind report with many other words in it today\n", encoding="utf-8")
    assert run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder()).ok
    return root


def ranking(kb: Path, query: str) -> list[str]:
    from pinakes.search.core import Searcher

    with Searcher.for_kb(kb) as searcher:
        return [passage.path for passage in searcher.search(query, final_k=100).passages]


def test_multi_hop_is_scored_on_every_hop_not_on_its_own_query(tiny: Path) -> None:
    (tiny / "eval").mkdir()
    (tiny / "eval" / "questions.yaml").write_text(textwrap.dedent("""\
        questions:
          - id: both-hops
            kind: multi-hop
            query: "quokka harbour"
            hops:
              - {query: "quokka", expect: [docs/a.md]}
              - {query: "harbour boats", expect: [docs/c.md]}
            expect: [docs/a.md, docs/c.md]
          - id: second-hop-misses
            kind: multi-hop
            query: "quokka harbour"
            hops:
              - {query: "quokka", expect: [docs/a.md]}
              - {query: "quokka", expect: [docs/c.md]}
            expect: [docs/a.md, docs/c.md]
          - id: unfiltered
            kind: simple-lookup
            query: "zephyr"
            expect: [docs/sub/d.md]
          - id: filtered
            kind: filter
            query: "zephyr"
            filters: {path_prefix: "docs/sub/"}
            expect: [docs/sub/d.md]
    """), encoding="utf-8")
    # The question's own query finds both documents; only the hops decide.
    assert {"docs/a.md", "docs/c.md"} <= set(ranking(tiny, "quokka harbour"))
    paths = EvalPaths.for_kb(tiny)
    manifest = load_manifest(tiny / "pinakes.toml")
    golden, _ = load_for_run(paths, manifest)
    assert golden is not None
    rows = {row.id: row for row in evaluate(paths, manifest, golden, embedder=FakeEmbedder()).outcomes.rows}
    assert rows["both-hops"].hit is True and rows["both-hops"].hop_ranks == (1, 1)
    assert rows["both-hops"].hit_rank == 1
    assert rows["second-hop-misses"].hit is False and rows["second-hop-misses"].hop_ranks == (1, None)
    assert rows["second-hop-misses"].hit_rank is None
    unfiltered_rank = ranking(tiny, "zephyr").index("docs/sub/d.md") + 1
    assert unfiltered_rank > 1 and rows["unfiltered"].hit_rank == unfiltered_rank
    assert rows["filtered"].hit_rank == 1  # the filter is applied


def test_questions_jsonl_scores_ndcg_recall_and_mrr_exactly(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ranking(tiny, "quokka") == ["docs/a.md"]
    zephyr = ranking(tiny, "zephyr")
    assert zephyr[0] == "docs/a.md" and "docs/b.md" in zephyr
    b_rank = zephyr.index("docs/b.md") + 1
    questions = tiny / "q.jsonl"
    lines = [
        {"id": "1", "query": "quokka", "relevant": ["a.md"]},
        {"id": "2", "query": "zephyr", "relevant": ["b.md"]},
        {"id": "3", "query": "quokka", "relevant": ["a.md", "c.md"], "extra": "ignored"},
        {"id": "4", "query": "quokka", "relevant": ["missing.md"]},
    ]
    questions.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    code, data = run_json(capsys, "-C", str(tiny), "--questions", str(questions))
    assert code == 0
    ndcg = [1.0, (1 / math.log2(b_rank + 1)) / 1.0, 1.0 / (1.0 + 1 / math.log2(3))]
    assert data["questions"] == 3 and data["skipped"] == ["4"] and data["missing_relevant"] == 1
    assert data["ndcg@10"] == pytest.approx(sum(ndcg) / 3, abs=1e-6)
    assert data["recall@10"] == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-6)
    assert data["recall@100"] == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-6)
    assert data["mrr"] == pytest.approx((1 + 1 / b_rank + 1) / 3, abs=1e-6)


def test_questions_jsonl_whose_paths_match_nothing_is_an_error(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = tiny / "q.jsonl"
    questions.write_text(json.dumps({"id": "1", "query": "x", "relevant": ["docs/a.md"]}) + "\n", encoding="utf-8")
    assert main(["eval", "-C", str(tiny), "--questions", str(questions)]) == 65
    assert "relative to the KB's [sources] root" in capsys.readouterr().err


def test_sync_failures_are_reported_and_the_run_goes_on(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tiny / "eval").mkdir()
    (tiny / "eval" / "questions.yaml").write_text(
        "questions:\n  - {id: q1, kind: lexical, query: quokka, expect: [docs/a.md]}\n", encoding="utf-8")
    (tiny / "docs" / "broken.md").write_bytes(b"# Broken\n\nbad byte \xff here\n")
    run_sync(tiny, SyncOptions(quiet=True), embedder=FakeEmbedder())  # mints its sidecar; extraction fails
    (tiny / "docs" / "new.md").write_text("a document written after the last full sync\n", encoding="utf-8")
    code = main(["eval", str(tiny), "--json"])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["scoreboard"]["classes"]["all"]["recall@k"]["value"] == 1.0
    assert "warning: sync failed for docs/broken.md [unextractable]" in captured.err
    assert "warning: sync: docs/new.md: not indexed yet, it has no sidecar" in captured.err


def test_init_then_fit_confidence_calibrates_a_fresh_kb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.init import init_kb

    root = tmp_path / "fresh"
    init_kb(root, name="fresh")
    topics = {"harbour": "Dredging the harbour channel", "library": "Opening hours of the library",
              "bees": "Keeping bees on a roof", "bread": "Baking sourdough bread", "trains": "Night trains"}
    for name, heading in topics.items():
        (root / "docs" / f"{name}.md").write_text(
            f"# {name.title()}\n\n## {heading}\n\nNotes about {heading.lower()}, with details on {name}.\n",
            encoding="utf-8")
    assert run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder()).ok
    code, skipped = run_json(capsys, str(root), "--fit-confidence")  # nothing to fit on yet
    assert code == 2 and "pnk eval --init" in skipped["remedy"]
    code, written = run_json(capsys, str(root), "--init")
    assert code == 0 and written["drafted"] == 10 and written["no_answer"] >= 5  # a heading and a passage each
    # Too few words for the 9 the fit needs: said, with what to do.
    assert written["no_answer_needed"] == 9 and "add questions of your own" in written["short"]
    golden = (root / "eval" / "questions.yaml").read_text(encoding="utf-8")
    assert '"Dredging the harbour channel"' in golden and "kind: no-answer" in golden
    assert "rewrite" in golden.splitlines()[0] + golden  # marked as a draft to edit
    code, again = run_json(capsys, str(root), "--init")
    assert code == 2 and "never overwrites" in again["message"]
    code, fitted = run_json(capsys, str(root), "--fit-confidence")
    assert code == 0, fitted
    block = fitted["manifest_block"]
    assert block.startswith("[retrieval.confidence]") and "high = " in block and "low = " in block


def test_a_fit_on_too_few_no_answer_questions_says_its_ceiling_cannot_be_promised(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.init import init_kb

    root = tmp_path / "few"
    init_kb(root, name="few")
    for name in ("harbour", "library", "bees", "bread", "trains"):
        (root / "docs" / f"{name}.md").write_text(f"# {name.title()}\n\nNotes about {name}.\n", encoding="utf-8")
    assert run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder()).ok
    assert main(["eval", str(root), "--init"]) == 0
    shown = capsys.readouterr().out
    assert "note: only 2 no-answer questions could be drafted from this KB's words; the fit needs 9" in shown

    code, few = run_json(capsys, str(root), "--fit-confidence")
    assert code == 0 and few["no_answer_needed"] == 9 and few["max_false_confidence"] == 0.1
    assert (few["false_confidence"]["numerator"], few["false_confidence"]["denominator"]) == (0, 2)
    assert few["shrunk_towards"] is None  # 5 documents give too few questions to self-calibrate on
    assert main(["eval", str(root), "--fit-confidence"]) == 0
    shown = capsys.readouterr().out
    assert "note: 2 no-answer questions, and no self-calibration to shrink them towards" in shown
    assert "note: 2 no-answer questions are too few to promise false-confidence <= 0.1 on new questions " \
           "(that needs 9); the fit leaves none of them confident" in shown
