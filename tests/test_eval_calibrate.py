"""Calibrating a fresh KB the way its user would (issue #25): `pnk init` → documents → `pnk sync` →
`pnk eval --init` → the drafts edited → `pnk eval --fit-confidence --write` → `pnk search` reports a
level, with no hand edit of pinakes.toml and every byte of it outside the block kept. And the three
readers of that confidence (`pnk search`, MCP `pinakes_search`, `pnk ask` with and without --deep)
report the same one.

Every command runs through `pinakes.cli.main` with the deterministic fake embedder in place of the
model (tests/fakes.py); the indexes are built by the product's own sync.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from pinakes.eval.skeleton import MIN_NO_ANSWER
from pinakes.manifest import load_manifest
from tests.budget_helpers import set_budget
from tests.deep_helpers import DeepFake, Turn, kind_of, serving
from tests.fakes import FakeEmbedder, substitute_embedder
from tests.test_serve_helpers import call_tool

TOPICS = {
    "harbour": ("Harbour", "Dredging the harbour channel",
                "The harbour channel is dredged every spring so that ferries keep a draught of six metres."),
    "library": ("Library", "Opening hours of the reading room",
                "The reading room opens at nine on weekdays and closes at noon on Saturdays."),
    "bees": ("Bees", "Keeping hives on the roof",
             "Rooftop hives need shade, water within fifty metres and an inspection every fortnight."),
    "bread": ("Bread", "Feeding the sourdough starter",
              "The starter is fed flour and water twice a day and kept at twenty-four degrees."),
    "trains": ("Trains", "Booking a sleeper berth",
               "Sleeper berths are booked ninety days ahead; couchettes sleep six travellers."),
    "archive": ("Archive", "Handling parchment deeds",
                "Parchment deeds are handled with clean dry hands and supported on foam wedges."),
    "garden": ("Garden", "Pruning the apple trees",
               "Apple trees are pruned in winter, removing crossing branches and opening the centre."),
    "boats": ("Boats", "Antifouling a wooden hull",
              "A wooden hull is antifouled each year after scraping, before the boat is relaunched."),
    "choir": ("Choir", "Rehearsal schedule for the spring concert",
              "Rehearsals for the spring concert run on Tuesday evenings in the church hall."),
}
PLACEHOLDER = re.compile(r"# \[retrieval\.confidence\]\r\n(?:# [a-z_]+ = .*\r\n)*")


@pytest.fixture(autouse=True)
def fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model load (sync, eval, search, serve, ask) gets the fake embedder."""
    substitute_embedder(monkeypatch,
                        lambda section, offline=None, threads=None: FakeEmbedder(provider=section.provider))


def pnk(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    """One command with --json, as a script runs it: (exit status, the JSON it printed)."""
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def fresh_kb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """`pnk init`, documents added, `pnk sync`, `pnk eval --init`: a KB with drafts to edit."""
    root = tmp_path / "fresh"
    assert pnk(capsys, "init", str(root), "--name", "fresh")[0] == 0
    for name, (title, heading, text) in TOPICS.items():
        (root / "docs" / f"{name}.md").write_text(f"# {title}\n\n## {heading}\n\n{text}\n", encoding="utf-8")
    assert pnk(capsys, "-C", str(root), "sync")[0] == 0
    code, drafted = pnk(capsys, "-C", str(root), "eval", "--init")
    # A heading and a passage per document, and in-domain no-answer questions to check.
    assert code == 0 and drafted["drafted"] == 2 * len(TOPICS) and drafted["no_answer"] >= MIN_NO_ANSWER == 9
    assert "pnk eval --fit-confidence --write" in drafted["next"]
    return root


def edit_drafts_as_a_user_would(root: Path) -> None:
    """Rewrite two drafts as questions, drop one no-answer draft, confirm the rest (their TODO
    removed) and add a no-answer question of one's own."""
    golden = root / "eval" / "questions.yaml"
    text = golden.read_text(encoding="utf-8")
    for heading, question in (("Dredging the harbour channel", "How often is the harbour channel dredged?"),
                              ("Booking a sleeper berth", "How far ahead can I book a sleeper berth?")):
        text, count = re.subn(rf'query: ".*{heading}"', f"query: {json.dumps(question)}", text)
        assert count == 1, heading
    text, dropped = re.subn(r"  - id: none-001 .*\n(?:    .*\n){3}", "", text)
    assert dropped == 1
    text = text.replace("# TODO check", "# checked")
    text += ('  - id: mine-001  # my own\n    kind: no-answer\n'
             '    query: "Which ferry company operates the night crossing?"\n    expect: []\n')
    golden.write_text(text, encoding="utf-8")


def make_the_manifest_odd(manifest: Path) -> bytes:
    """The manifest as a person might have left it: CRLF, comments, odd spacing, no final newline."""
    text = manifest.read_text(encoding="utf-8")
    text = "# my notes on this KB\n\n" + text
    text, count = re.subn(r"^final_k = 8 .*$", "final_k    =     8      # eight passages", text, flags=re.M)
    assert count == 1
    text = text.replace("[rerank]\n", "   \t\n[rerank]   # the cross-encoder\n", 1)
    data = text.rstrip("\n").replace("\n", "\r\n").encode("utf-8")
    manifest.write_bytes(data)
    load_manifest(manifest)  # still a valid manifest
    return data


def test_init_edit_fit_write_calibrates_a_fresh_kb_and_keeps_every_other_byte(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fresh_kb(tmp_path, capsys)
    code, before = pnk(capsys, "-C", str(root), "search", "How often is the harbour channel dredged?")
    # No golden set, too few documents to self-calibrate: the shipped prior speaks.
    assert code == 0 and before["confidence"]["source"] == "prior", before["confidence"]
    edit_drafts_as_a_user_would(root)
    manifest = root / "pinakes.toml"
    original = make_the_manifest_odd(manifest)

    code, fit = pnk(capsys, "-C", str(root), "eval", "--fit-confidence", "--write")

    assert code == 0, fit
    block = fit["manifest_block"].replace("\n", "\r\n").encode("utf-8")
    placeholder = PLACEHOLDER.search(original.decode("utf-8"))
    assert placeholder is not None
    start, end = placeholder.span()
    assert manifest.read_bytes() == original[:start] + block + original[end:]
    assert fit["written"]["placement"] == "placeholder"
    assert Path(fit["written"]["backup"]).read_bytes() == original
    curve = fit["trade_off_curve"]
    assert [point["chosen"] for point in curve].count(True) == 1 and all(
        point["false_abstain"]["denominator"] == fit["false_abstain"]["denominator"] for point in curve)

    for query in ("How often is the harbour channel dredged?", "Which ferry company operates the night crossing?"):
        code, after = pnk(capsys, "-C", str(root), "search", query)
        assert code == 0 and after["confidence"]["level"] in ("high", "medium", "low"), after["confidence"]
        assert after["confidence"]["source"] == "fitted"

    # A second write (the golden set grew, so the fit names another question count) replaces the block.
    golden = root / "eval" / "questions.yaml"
    golden.write_text(golden.read_text(encoding="utf-8") + '  - id: mine-002\n    kind: simple-lookup\n'
                      '    query: "When do choir rehearsals happen?"\n    expect: ["docs/choir.md"]\n',
                      encoding="utf-8")
    first = manifest.read_bytes()
    code, refit = pnk(capsys, "-C", str(root), "eval", "--fit-confidence", "--write")
    assert code == 0 and refit["written"]["placement"] == "replaced"
    second_block = refit["manifest_block"].replace("\n", "\r\n").encode("utf-8")
    assert second_block != block
    assert manifest.read_bytes() == first[:start] + second_block + first[start + len(block):]
    assert manifest.read_bytes().count(b"\n[retrieval.confidence]\r\n") == 1


def test_init_drafts_in_domain_no_answer_questions_from_words_no_document_shares(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fresh_kb(tmp_path, capsys)
    golden = (root / "eval" / "questions.yaml").read_text(encoding="utf-8")
    assert "pnk eval --fit-confidence --write" in golden and "TODO" in golden  # says how, and what to check
    documents = [f"{title} {heading} {text}".lower() for title, heading, text in TOPICS.values()]
    pairs = re.findall(r"# TODO check: .*'(\w+)' and '(\w+)' never meet in one", golden)
    assert len(pairs) >= MIN_NO_ANSWER
    for first, second in pairs:
        assert any(first.lower() in document for document in documents)  # the KB's own words
        assert any(second.lower() in document for document in documents)
        assert not any(first.lower() in document and second.lower() in document for document in documents)
        assert f"{first}" in golden.split(f"'{first}' and '{second}'")[1].split("expect")[0]  # in its query


def test_without_write_the_block_is_printed_and_write_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fresh_kb(tmp_path, capsys)
    original = (root / "pinakes.toml").read_bytes()
    assert main(["-C", str(root), "eval", "--fit-confidence"]) == 0
    out = capsys.readouterr().out
    assert "`pnk eval --fit-confidence --write` writes this block into pinakes.toml" in out
    assert re.search(r"^  > \S+ +\d+/\d+ +\d+/\d+$", out, re.M)  # the fitted point, marked on the curve
    assert (root / "pinakes.toml").read_bytes() == original
    # the cross-fitted forecast `--json` gives is in the text too, beside the in-sample floor
    code, fitted = pnk(capsys, "-C", str(root), "eval", "--fit-confidence")
    forecast = fitted["cross_validated"]
    assert code == 0 and forecast is not None
    shown = re.search(r"^forecast for new questions \((\d+)-fold cross-fitted.*\): false-abstain \S+ \((\d+)/(\d+)\), "
                      r"false-confidence \S+ \((\d+)/(\d+)\)$", out, re.M)
    assert shown is not None, out
    assert [int(number) for number in shown.groups()] == [
        forecast["folds"], forecast["false_abstain"]["numerator"], forecast["false_abstain"]["denominator"],
        forecast["false_confidence"]["numerator"], forecast["false_confidence"]["denominator"]]


def test_a_block_the_writer_cannot_place_is_refused_and_the_manifest_left_untouched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fresh_kb(tmp_path, capsys)
    manifest = root / "pinakes.toml"
    inline = manifest.read_text(encoding="utf-8").replace(
        "rrf_k = 60\n", 'rrf_k = 60\nconfidence = { high = 0.9, low = 0.1, fitted_for = "someone else" }\n', 1)
    manifest.write_text(inline, encoding="utf-8")
    assert load_manifest(manifest).retrieval.confidence is not None
    listing = sorted(root.iterdir())

    code, refused = pnk(capsys, "-C", str(root), "eval", "--fit-confidence", "--write")

    assert code != 0 and "cannot place [retrieval.confidence]" in refused["message"]
    assert "pnk eval --fit-confidence" in refused["remedy"]
    assert manifest.read_text(encoding="utf-8") == inline and sorted(root.iterdir()) == listing


def test_an_immutable_manifest_is_an_error_naming_it_and_nothing_is_left_behind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fresh_kb(tmp_path, capsys)
    edit_drafts_as_a_user_would(root)
    manifest = root / "pinakes.toml"
    original = manifest.read_bytes()
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: no immutable flag to make the fault with")
    flagged = subprocess.run(["chattr", "+i", str(manifest)], capture_output=True, text=True)
    if flagged.returncode != 0:
        pytest.skip(f"this filesystem or user cannot set the immutable flag: {flagged.stderr.strip()}")
    try:
        listing = sorted(root.iterdir())
        code = main(["-C", str(root), "eval", "--fit-confidence", "--write", "--no-sync"])
        captured = capsys.readouterr()
    finally:
        subprocess.run(["chattr", "-i", str(manifest)], check=False, capture_output=True)
    assert code != 0 and "Traceback" not in captured.err
    assert "pnk: error:" in captured.err and "pinakes.toml" in captured.err
    assert manifest.read_bytes() == original and sorted(root.iterdir()) == listing


def test_write_needs_fit_confidence_and_a_golden_set_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, refused = pnk(capsys, "eval", str(tmp_path), "--write")
    assert code == 2 and "--fit-confidence --write" in refused["remedy"]
    code, refused = pnk(capsys, "eval", "--rescore", str(tmp_path / "outcomes.json"), "--fit-confidence", "--write")
    assert code == 2 and "drop --write" in refused["remedy"]


# -- one confidence, three readers --------------------------------------------------------------------


def deep_turns(body: dict[str, Any]) -> dict[str, Any]:
    """A model that re-asks the question when asked to decompose and answers with no citation."""
    if kind_of(body) == "decompose":
        return {"queries": ["harbour channel dredging"]}
    return {"answer": "", "citations": []}


def test_search_mcp_and_ask_read_the_same_confidence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.serve.config import load_kb
    from pinakes.serve.tools import PinakesTools

    root = fresh_kb(tmp_path, capsys)
    edit_drafts_as_a_user_would(root)
    assert pnk(capsys, "-C", str(root), "eval", "--fit-confidence", "--write")[0] == 0
    set_budget(root, confirm_above_eur="2.00")
    queries = ["How often is the harbour channel dredged?", "Which ferry company operates the night crossing?",
               "Rehearsal schedule for the spring concert", "pruning apple sourdough hull"]
    fake: DeepFake
    tools = PinakesTools([load_kb(root)])
    levels: set[str] = set()
    try:
        for fake in serving(monkeypatch):
            for query in queries:
                _, search = pnk(capsys, "-C", str(root), "search", query)
                served = call_tool(tools, "pinakes_search", {"query": query})
                _, free = pnk(capsys, "-C", str(root), "ask", query)
                fake.reply_with(*[Turn("json", deep_turns)] * 8)
                code, deep = pnk(capsys, "-C", str(root), "ask", "--deep", query)
                assert code == 0, deep
                expected = search["confidence"]
                assert expected["level"] != "unknown", expected
                assert {key: served["confidence"][key] for key in expected} == expected
                assert free["search"]["confidence"] == expected
                assert deep["free_confidence"] == expected
                levels.add(expected["level"])
    finally:
        tools.close()
    assert len(levels) >= 2, levels  # the agreement covers more than one level
