"""Self-calibration (issue #41): questions a KB makes of its own documents by fixed rules, each
searched as it is and with its source left out by a query-time filter, the model fitted on them,
stored with its provenance, run by the first sync of a large enough KB, and what searches then use
— every result naming where its confidence came from. KBs built through the real sync with the
hashed-words embedder (no model download; no prior is fitted for it)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from pinakes.calibration import self_calibration
from pinakes.calibration.questions import QuestionRules, content_words, make_questions, sentences
from pinakes.calibration.self_calibration import MIN_DOCUMENTS, self_calibrate, store
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.lexical.filters import SearchFilters
from pinakes.manifest import load_manifest
from pinakes.search.calibrated import (
    FITTED,
    PRIOR,
    SELF_CALIBRATED,
    UNCALIBRATED,
    CalibratedBlock,
    KBConfidence,
    self_calibration_path,
)
from pinakes.search.core import Searcher, SearchSettings
from tests.fakes import HashEmbedder, substitute_embedder
from tests.kb_helpers import Doc, build_kb, sync

TOPICS = ("glacier", "harbour", "orchard", "foundry", "lighthouse", "vineyard", "observatory", "tannery",
          "monastery", "quarry", "brewery", "aqueduct", "granary", "shipyard", "windmill", "apiary",
          "smithy", "ropewalk", "kiln", "saltpan", "sawmill", "dairy", "pottery", "mint")
SENTENCES = ("The {t} ledger records {a} deliveries during the {b} season.",
             "Visitors reach the {t} through a {a} gate beside the old {b} road.",
             "Every {t} inspection checks the {a} beams and the {b} drainage channels.",
             "Apprentices at the {t} learn {a} techniques from the senior {b} masters.")
WORDS = ("amber", "basalt", "cedar", "dune", "ember", "fjord", "garnet", "heather", "indigo", "juniper", "kestrel",
         "lichen", "marble", "nettle", "obsidian", "pewter", "quartz", "russet", "saffron", "thistle", "umber",
         "willow", "yarrow", "zinnia")


def corpus(count: int = len(TOPICS)) -> list[Doc]:
    docs: list[Doc] = []
    for number, topic in enumerate(TOPICS[:count]):
        a, b = WORDS[number], WORDS[(number * 7 + 3) % len(WORDS)]
        text = f"# The {topic}\n\n" + "\n\n".join(s.format(t=topic, a=a, b=b) for s in SENTENCES) + "\n"
        docs.append(Doc(f"docs/{topic}.md", text))
    # A verbatim copy: a question made from the glacier states what this document states too.
    docs.append(Doc("docs/copies/glacier-copy.md", docs[0].content))
    return docs


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, HashEmbedder]:
    embedder = HashEmbedder()
    root = tmp_path_factory.mktemp("selfcal") / "kb"
    build_kb(root, corpus(), embedder)
    return root, embedder


@pytest.fixture
def kb(built: tuple[Path, HashEmbedder], tmp_path: Path) -> tuple[Path, HashEmbedder]:
    root, embedder = built
    copy = tmp_path / "kb"
    shutil.copytree(root, copy)
    return copy, embedder


def searcher_for(root: Path, embedder: HashEmbedder) -> Searcher:
    """The Searcher `pnk search` builds (the KB's confidence sources), with the test's embedder."""
    paths = KBPaths(root)
    manifest = load_manifest(paths.manifest)
    settings = SearchSettings.from_retrieval(manifest.retrieval,
                                             KBConfidence.for_kb(paths, manifest.retrieval.confidence))
    return Searcher(paths.index_db, settings, embedder=embedder)


def test_questions_are_made_by_fixed_rules_from_the_documents_own_sentences(built: tuple[Path, HashEmbedder]) -> None:
    root, _ = built
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        first = make_questions(conn, QuestionRules(words=4))
        again = make_questions(conn, QuestionRules(words=4))
        paths = dict(conn.execute("SELECT id, path FROM documents"))
        texts = {doc_id: "\n".join(text for (text,) in conn.execute(
            "SELECT text FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,))) for doc_id in paths}
    finally:
        conn.close()
    assert first == again and len(first) == min(200, 4 * (len(TOPICS) + 1))
    copy_of_glacier = next(doc_id for doc_id, path in paths.items() if path == "docs/copies/glacier-copy.md")
    glacier = next(doc_id for doc_id, path in paths.items() if path == "docs/glacier.md")
    for question in first:
        words = question.query.split()
        assert len(words) == 4 and question.left_out[0] == question.source
        # A run of one sentence's content words, in that sentence's order: never the sentence itself.
        assert any(" ".join(words) in " ".join(content_words(sentence)) for sentence in sentences(texts[question.source]))
        if question.source == glacier:
            assert copy_of_glacier in question.left_out  # the same statement, copied: left out too
    # Every document gives questions before any gives a fourth.
    assert {question.source for question in first[: len(paths)]} == set(paths)


def test_the_unanswerable_twin_never_meets_what_was_left_out(built: tuple[Path, HashEmbedder]) -> None:
    root, embedder = built
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        question = make_questions(conn, QuestionRules(max_questions=1))[0]
    finally:
        conn.close()
    with searcher_for(root, embedder) as searcher:
        asked = searcher.search(question.query)
        twin = searcher.search(question.query, filters=SearchFilters(exclude_doc_ids=question.left_out))
        twin_vectors = searcher.search(question.query, mode="vector",
                                       filters=SearchFilters(exclude_doc_ids=question.left_out))
    assert asked.passages[0].doc_id in question.left_out  # its source, or a copy of it
    assert twin.passages and not {p.doc_id for p in twin.passages} & set(question.left_out)
    assert twin_vectors.passages and not {p.doc_id for p in twin_vectors.passages} & set(question.left_out)


def test_self_calibration_is_stored_with_its_provenance_and_used_by_searches(kb: tuple[Path, HashEmbedder]) -> None:
    root, embedder = kb
    self_calibration_path(KBPaths(root)).unlink()  # the build's sync made one (the last tests show how)
    with searcher_for(root, embedder) as searcher:
        assert searcher.search("glacier ledger amber deliveries").confidence.source == PRIOR  # none of its own yet
        calibration = self_calibrate(root, searcher=searcher)
        assert calibration.fit is not None and calibration.fit.model is not None, calibration.why_not
        assert len(calibration.rows) == 2 * calibration.questions
        assert {row.kind for row in calibration.rows} == {"synthetic", "no-answer"}
        stored = store(root, calibration)
        data = json.loads(stored.read_text())
        assert stored == self_calibration_path(KBPaths(root))
        assert data["format"] == "pinakes-self-calibration/1" and data["documents"] == len(TOPICS) + 1
        assert data["questions"] == calibration.questions and data["rules"] == calibration.rules.describe()
        assert data["confidence"]["fitted_for"].startswith("test/hash-bow")
        assert "self-calibration" in data["confidence"]["fitted_for"]
        # The same Searcher picks the stored calibration up at its next search: no restart.
        result = searcher.search("glacier ledger amber deliveries")
    confidence = result.confidence
    assert confidence.source == SELF_CALIBRATED and confidence.level in ("high", "medium", "low")
    assert confidence.to_dict()["source"] == SELF_CALIBRATED


def test_a_fitted_block_wins_and_signal_none_turns_confidence_off(kb: tuple[Path, HashEmbedder]) -> None:
    root, embedder = kb
    with searcher_for(root, embedder) as searcher:
        store(root, self_calibrate(root, searcher=searcher))
    manifest = root / "pinakes.toml"
    original = manifest.read_text(encoding="utf-8")
    manifest.write_text(original + '\n[retrieval.confidence]\nsignal = "model"\nfeatures = ["cosine"]\n'
                        'weights = [4.0]\nbias = -2.0\nhigh = 0.7\nlow = 0.4\n'
                        'fitted_for = "test/hash-bow (evidence model, rerank off), eval/questions.yaml"\n',
                        encoding="utf-8")
    with searcher_for(root, embedder) as searcher:
        fitted = searcher.search("glacier ledger amber deliveries").confidence
    assert fitted.source == FITTED and fitted.level in ("high", "medium", "low")
    manifest.write_text(original + '\n[retrieval.confidence]\nsignal = "none"\n', encoding="utf-8")
    with searcher_for(root, embedder) as searcher:
        off = searcher.search("glacier ledger amber deliveries").confidence
        nothing = searcher.search("zzzunheard", mode="bm25").confidence
    assert off.level == "unknown" and off.source == UNCALIBRATED and 'signal = "none"' in off.reason
    assert nothing.level == "low"  # nothing matched: low whatever the sources say


def test_signal_none_takes_no_other_key(tmp_path: Path) -> None:
    from pinakes.manifest import InvalidManifestError

    root = tmp_path / "kb"
    build_kb(root, corpus(2), HashEmbedder())
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text() + '\n[retrieval.confidence]\nsignal = "none"\nlow = 0.3\n')
    with pytest.raises(InvalidManifestError, match=r"retrieval\.confidence\.low"):
        load_manifest(manifest)


def test_a_derived_source_for_another_model_gives_way_to_the_next(kb: tuple[Path, HashEmbedder]) -> None:
    root, embedder = kb
    paths = KBPaths(root)
    stored = self_calibration_path(paths)
    data = json.loads(stored.read_text())  # the build's sync made it; now as if another model had
    data["confidence"]["fitted_for"] = data["confidence"]["fitted_for"].replace("test/hash-bow", "some/other-model")
    stored.write_text(json.dumps(data))
    other = CalibratedBlock(high=0.9, low=0.1, fitted_for="some/other-model (evidence model, rerank off), prior",
                            features=("cosine",), weights=(1.0,), bias=0.0)
    mine = CalibratedBlock(high=0.9, low=0.8, fitted_for="test/hash-bow (evidence model, rerank off), prior",
                           features=("cosine",), weights=(1.0,), bias=0.0)
    settings = SearchSettings(rerank=False, confidence=KBConfidence(None, stored, mine))
    with Searcher(paths.index_db, settings, embedder=embedder) as searcher:
        assert searcher.search("glacier ledger").confidence.source == PRIOR
    settings = SearchSettings(rerank=False, confidence=KBConfidence(None, stored, other))
    with Searcher(paths.index_db, settings, embedder=embedder) as searcher:
        confidence = searcher.search("glacier ledger").confidence
    assert confidence.level == "unknown" and confidence.source == UNCALIBRATED
    assert "pnk eval --self-calibrate" in confidence.reason


def test_a_fit_whose_low_equals_high_says_it_has_no_medium_band(kb: tuple[Path, HashEmbedder]) -> None:
    root, embedder = kb
    paths = KBPaths(root)
    band = CalibratedBlock(high=0.6, low=0.6, fitted_for="test/hash-bow (evidence model, rerank off), prior",
                           features=("cosine",), weights=(1.0,), bias=0.0)
    settings = SearchSettings(rerank=False, confidence=KBConfidence(None, None, band))
    with Searcher(paths.index_db, settings, embedder=embedder) as searcher:
        confidence = searcher.search("glacier ledger").confidence
    assert confidence.level in ("high", "low") and "no medium band" in confidence.reason


def test_the_first_sync_of_a_large_enough_kb_self_calibrates_once(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    small = tmp_path / "small"
    build_kb(small, corpus(MIN_DOCUMENTS - 2), embedder)  # with the copy: one below the size
    assert not self_calibration_path(KBPaths(small)).exists()

    root = tmp_path / "kb"
    build_kb(root, corpus(), embedder)
    stored = self_calibration_path(KBPaths(root))
    assert stored.exists()
    made = stored.stat().st_mtime_ns
    report = sync(root, embedder)  # nothing changed: a no-op never recalibrates
    assert report.noop and stored.stat().st_mtime_ns == made
    assert not any("self-calibrated" in note for note in report.notes)


def test_a_sync_says_before_it_spends_time_calibrating_and_a_quiet_one_does_not(tmp_path: Path) -> None:
    from io import StringIO

    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.kb_helpers import init_test_kb, write_documents

    embedder = HashEmbedder()
    said, quiet = StringIO(), StringIO()
    for root, stream, is_quiet in ((tmp_path / "kb", said, False), (tmp_path / "quiet", quiet, True)):
        init_test_kb(root, embedder.identity)
        write_documents(root, corpus())
        run_sync(root, SyncOptions(quiet=is_quiet), embedder=embedder, progress_stream=stream)
        assert self_calibration_path(KBPaths(root)).exists()
    assert "sync: calibrating confidence from the KB's own documents (none yet; at most 60 s)" in said.getvalue()
    assert "calibrating" not in quiet.getvalue()


def test_a_sync_reports_it_and_leaves_a_fitted_kb_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = HashEmbedder()
    monkeypatch.setattr(self_calibration, "SYNC_SECONDS", 120.0)
    root = tmp_path / "kb"
    from tests.kb_helpers import init_test_kb, write_documents

    init_test_kb(root, embedder.identity)
    write_documents(root, corpus())
    report = sync(root, embedder)
    assert any(re.match(r"confidence self-calibrated \(none yet\): \d+ questions", note) for note in report.notes)

    fitted = tmp_path / "fitted"
    init_test_kb(fitted, embedder.identity)
    manifest = fitted / "pinakes.toml"
    manifest.write_text(manifest.read_text() + '\n[retrieval.confidence]\nsignal = "none"\n')
    write_documents(fitted, corpus())
    report = sync(fitted, embedder)
    assert not self_calibration_path(KBPaths(fitted)).exists()
    assert not any("self-calibrated" in note for note in report.notes)


def test_pnk_eval_self_calibrate_stores_it_and_says_what_searches_use(
        kb: tuple[Path, HashEmbedder], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.cli import main

    root, embedder = kb
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: embedder)
    stored = self_calibration_path(KBPaths(root))
    stored.unlink(missing_ok=True)
    code = main(["-C", str(root), "eval", "--self-calibrate", "--no-sync", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["ok"] and data["used_as"] == SELF_CALIBRATED
    assert stored.exists() and data["stored"] == str(stored)
    assert data["confidence"]["signal"] == "model" and data["questions"] > 0
    code = main(["-C", str(root), "eval", "--self-calibrate", "--no-sync"])
    out = capsys.readouterr().out
    assert code == 0 and "searches now report confidence from it (source: self-calibrated)" in out
    assert os.path.getsize(stored) > 0
