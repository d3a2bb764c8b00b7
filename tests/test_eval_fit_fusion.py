"""`pnk eval --fit-fusion [--write]` (issue #46): the KB's fusion of its keyword and vector lists
chosen on its own golden set, kept at fixed RRF unless another arm beats it by a sign test at
p < 0.005, written as [retrieval.fusion] with its provenance, and read by `pnk search`.

The KBs are built by the product's sync; every command runs through `pinakes.cli.main`. The vector
side is made noise on purpose: every query embeds as one fixed vector, so the vector list is the
same ranking whatever is asked, and the keyword list is the only signal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from pinakes.eval.fusion_fit import MOVE_AT
from pinakes.manifest import InvalidManifestError, load_manifest
from tests.fakes import VectorTableEmbedder, substitute_embedder
from tests.kb_helpers import Doc, build_kb

WORDS = ("walrus", "heron", "lynx", "otter", "marten", "badger", "osprey", "plover", "stoat", "curlew",
         "vole", "shrew", "dormouse", "pipit", "bittern", "grebe")
GROUPS = ("budget", "harvest", "survey")  # each shared by 5 or 6 of the 16 reports: under half, so not weightless


def group(word: str) -> str:
    return GROUPS[WORDS.index(word) % len(GROUPS)]


def query(word: str) -> str:
    return f"{word} {group(word)}"


def docs() -> list[Doc]:
    # "notes" repeated i times puts ever more of report i's hashed vector in one place: a vector order
    # fixed by i, whatever the query asks
    return [Doc(f"docs/{word}.md", f"# The {word} report\n\nThe {word} report covers the {group(word)} of the "
                                   f"reserve.{' notes' * i}\n") for i, word in enumerate(WORDS)]


def golden(words: tuple[str, ...]) -> str:
    lines = ["questions:"]
    for word in words:
        lines += [f"  - id: q-{word}", "    kind: lexical", f'    query: "{query(word)}"',
                  f"    expect: [docs/{word}.md]"]
    lines += ["  - id: none-1", "    kind: no-answer", '    query: "night ferry timetable"', "    expect: []"]
    return "\n".join(lines) + "\n"


def noise_embedder() -> VectorTableEmbedder:
    return VectorTableEmbedder({}, query=[1.0] * 64)  # near every report alike: a fixed order, no signal


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    embedder = noise_embedder()
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: embedder)
    root = tmp_path / "kb"
    build_kb(root, docs(), embedder)
    (root / "eval").mkdir()
    (root / "eval" / "questions.yaml").write_text(golden(WORDS), encoding="utf-8")
    return root


def pnk(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def first_paths(capsys: pytest.CaptureFixture[str], root: Path) -> dict[str, str]:
    firsts: dict[str, str] = {}
    for word in WORDS:
        code, result = pnk(capsys, "-C", str(root), "search", query(word), "--no-rerank")
        assert code == 0
        firsts[word] = result["passages"][0]["path"]
    return firsts


def test_a_golden_set_that_shows_the_vector_side_is_noise_moves_the_fusion_and_search_follows(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = first_paths(capsys, kb)
    wrong_before = [word for word, path in before.items() if path != f"docs/{word}.md"]
    assert len(wrong_before) >= 7  # fixed RRF lets the vector side's favourites in front
    manifest = kb / "pinakes.toml"
    original = manifest.read_text(encoding="utf-8")

    code, fit = pnk(capsys, "-C", str(kb), "eval", "--fit-fusion", "--write")
    assert code == 0 and fit["moved"] is True, fit
    chosen, fixed = fit["chosen"], fit["fixed"]
    assert (fixed["keyword_weight"], fixed["vector_weight"], fixed["rrf_k"]) == (1.0, 1.0, 60)
    assert chosen["keyword_weight"] > chosen["vector_weight"]  # the keyword list weighs more, or alone
    assert chosen["ndcg@10"] == pytest.approx(1.0) and fixed["ndcg@10"] < 0.9
    assert chosen["p"] < MOVE_AT and chosen["worsened"] == 0
    assert fit["questions"] == len(WORDS)  # the no-answer question is not fitted on

    fusion = load_manifest(manifest).retrieval.fusion
    assert fusion is not None
    assert (fusion.keyword_weight, fusion.vector_weight, fusion.rrf_k) == (
        chosen["keyword_weight"], chosen["vector_weight"], chosen["rrf_k"])
    assert "test/vector-table" in fusion.fitted_for and f"{len(WORDS)} queries" in fusion.fitted_for
    written = manifest.read_text(encoding="utf-8")
    block = fit["block"]
    assert block in written and written.replace(block, "", 1).replace("\n\n\n", "\n\n") .strip() == original.strip()
    assert Path(fit["written"]["backup"]).read_text(encoding="utf-8") == original

    after = first_paths(capsys, kb)
    assert after == {word: f"docs/{word}.md" for word in WORDS}

    code, again = pnk(capsys, "-C", str(kb), "eval", "--fit-fusion", "--write")
    assert code == 0 and again["written"]["backup"] is None  # the same block: nothing rewritten


def test_a_small_golden_set_keeps_fixed_rrf(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five questions, all moved one way, reach p 0.031 at best: not below 0.005, so fixed RRF stays."""
    (kb / "eval" / "questions.yaml").write_text(golden(WORDS[:5]), encoding="utf-8")
    code, fit = pnk(capsys, "-C", str(kb), "eval", "--fit-fusion", "--no-sync")
    assert code == 0 and fit["moved"] is False
    assert fit["arms"][0]["ndcg@10"] > fit["fixed"]["ndcg@10"]  # the best arm was better, not provably
    assert fit["chosen"] == fit["fixed"]
    assert "keyword_weight = 1\nvector_weight = 1\nrrf_k = 60\n" in fit["block"]
    assert fit["written"] is None and load_manifest(kb / "pinakes.toml").retrieval.fusion is None


def test_fit_fusion_without_a_golden_set_says_how_to_make_one(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (kb / "eval" / "questions.yaml").unlink()
    code = main(["-C", str(kb), "eval", "--fit-fusion", "--no-sync"])
    err = capsys.readouterr().err
    assert code != 0 and "nothing to fit on" in err and "pnk eval --init" in err


@pytest.mark.parametrize(("block", "problem"), [
    ("keyword_weight = -1\nvector_weight = 1\nrrf_k = 60\nfitted_for = \"x\"\n", "keyword_weight"),
    ("keyword_weight = 0\nvector_weight = 0\nrrf_k = 60\nfitted_for = \"x\"\n", "nothing to fuse"),
    ("keyword_weight = 2\nvector_weight = 1\nrrf_k = 60\n", "fitted_for"),
    ("keyword_weight = 2\nvector_weight = 1\nfitted_for = \"x\"\n", "rrf_k"),
])
def test_a_broken_fusion_block_is_refused_by_name(tmp_path: Path, block: str, problem: str) -> None:
    from pinakes.init import init_kb

    root = tmp_path / "kb"
    init_kb(root, name="kb")
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8") + "\n[retrieval.fusion]\n" + block, encoding="utf-8")
    with pytest.raises(InvalidManifestError) as raised:
        load_manifest(manifest)
    assert problem in str(raised.value)
