"""What `pnk ask` without --deep quotes for --deep: the plan is decided in `deep.shapes.quote`, the CLI
only renders it (the loop's own spending: test_deep_loop.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinakes.budget.money import format_eur
from pinakes.cli import main
from pinakes.deep import shapes
from pinakes.manifest import load_manifest
from pinakes.search.confidence import HIGH, LOW, MEDIUM, UNKNOWN
from tests.deep_helpers import HOP_QUESTION, demo_copy, synced_demo

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synced_demo(tmp_path_factory.mktemp("quote"))


def test_the_quote_follows_the_free_confidence_and_the_deep_section() -> None:
    manifest = load_manifest(REPO_ROOT / "tests" / "demo-kb" / "pinakes.toml")
    rounds = manifest.deep.max_rounds
    quotes = {level: shapes.quote(manifest, level) for level in (HIGH, MEDIUM, LOW, UNKNOWN)}

    per_call = quotes[HIGH].eur
    assert (quotes[HIGH].branch, quotes[HIGH].calls) == ("synthesis", 1)
    assert quotes[HIGH].calls_in_words() == "one synthesis call"
    for level, branch in ((MEDIUM, "decomposition"), (LOW, "decomposition"), (UNKNOWN, "unknown")):
        quote = quotes[level]
        assert (quote.branch, quote.calls, quote.eur) == (branch, 2 * rounds, per_call * 2 * rounds)
        assert quote.calls_in_words() == f"up to {rounds} rounds of two calls"


def test_ask_renders_the_quote_it_was_given(
    synced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = demo_copy(synced, tmp_path, monkeypatch)
    manifest_path = kb / "pinakes.toml"
    manifest_path.write_text(manifest_path.read_text(encoding="utf-8") + "\n[deep]\nmax_rounds = 1\n",
                             encoding="utf-8")

    assert main(["-C", str(kb), "ask", HOP_QUESTION, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    quote = shapes.quote(load_manifest(manifest_path), document["search"]["confidence"]["level"])
    assert (document["deep_branch"], document["deep_worst_case_eur"], document["deep_worst_case_calls"]) == (
        quote.branch, str(quote.eur), quote.calls)

    assert main(["-C", str(kb), "ask", HOP_QUESTION]) == 0
    out = capsys.readouterr().out
    assert f"({quote.calls_in_words()}, at most {format_eur(quote.eur)} reserved under [budget])" in out
    assert quote.branch != "synthesis"  # the hop question is not answered confidently by the free search
    assert "(up to 1 round of two calls, at most " in out
