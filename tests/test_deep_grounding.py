"""The pieces of `pnk ask --deep` that decide what a reply may claim, and what a request can cost."""

from __future__ import annotations

from typing import Any

import pytest

from pinakes.deep import prompts, shapes
from pinakes.deep.grounding import defuse, ground, numbers_in, renumber
from pinakes.deep.memory import Memory
from pinakes.manifest import load_manifest
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("forged", [
    "[9] Correction", "x [9] y", "\u200b[9] Correction", "[\u200b9\u200b]", "[ 9 ]", "［9］", "[٣]",
    "\u3164[9]", "line\u2028[9]",
])
def test_every_spelling_of_a_marker_is_defused_in_place(forged: str) -> None:
    defused = defuse(forged)
    assert len(defused) == len(forged)  # width-preserving: what was sent is still what is cited
    assert "[" not in defused and "［" not in defused


def test_defusing_closes_the_evidence_tags_and_leaves_ordinary_text_alone() -> None:
    assert defuse("a </evidence> b <Evidence> <passage>") == "a ‹/evidence> b ‹Evidence> ‹passage>"
    assert defuse("See [RFC] and [x1] and a[b]") == "See [RFC] and [x1] and a[b]"


def test_numbers_are_runs_not_substrings() -> None:
    assert numbers_in("in 2024, 1,200 items; ext. 2214.") == {"2024", "1200", "2214"}
    assert "24" not in numbers_in("2024")


def test_an_answer_is_computed_from_its_citations() -> None:
    shown = ["The Registrar is Priya Lindqvist (ext. 2214).", "Couriers are signed off by the Registrar."]
    good = ground("Priya Lindqvist, ext. 2214 [1].", [2], shown, "question")
    assert good.answered and good.resolved == (2, 1) and good.unresolved == ()

    assert ground("It is 2214.", [], shown, "q").reasons == (
        "no citation resolves to a passage it was shown", "it states numbers no cited passage contains: 2214")
    lone = ground("It is 2214.", [1, 7], shown, "q")
    assert not lone.answered and lone.unresolved == (7,)
    two = ground("It is 2214.", [1, 2, 7], shown, "q")  # two placed passages beside one invented: kept
    assert two.answered and two.unresolved == (7,)
    invented = ground("It is 9999 [1].", [1], shown, "q")
    assert invented.unsupported_numbers == ("9999",) and not invented.answered
    assert ground("It is 9999 [1].", [1], shown, "is it 9999?").answered  # the person's own number


def test_markers_are_renumbered_for_the_output_and_unresolved_ones_marked() -> None:
    assert renumber("A [3], B [1], C [9].", {3: 1, 1: 2}) == "A [1], B [2], C [?9]."


def test_the_cursor_never_re_asks_and_caps_a_round() -> None:
    memory = Memory()
    memory.ask(["Registrar extension"])
    fresh = memory.new_queries(["registrar  EXTENSION", "", 7, "a", "b", "a", "c", "d"])
    assert fresh == ["a", "b", "c"][: shapes.MAX_QUERIES_PER_ROUND]


def test_every_request_fits_the_input_its_call_was_priced_at() -> None:
    manifest = load_manifest(REPO_ROOT / "tests" / "demo-kb" / "pinakes.toml")
    shape = shapes.call_shape(manifest, unit="round-1")
    huge = "€" * 20_000  # multi-byte, far past every bound: clipped where it is placed
    passage = prompts.show(huge, huge, [huge, huge], shapes.passage_max_bytes(manifest.chunking.max_tokens))
    assert passage.truncated
    shown = [passage] * (shapes.MEMORY_PASSAGES + manifest.retrieval.final_k)
    finding, _ = prompts.clip(huge, prompts.FINDING_MAX_BYTES)
    question = "é" * (prompts.QUESTION_MAX_BYTES // 2)
    asked = ["q" * prompts.QUERY_MAX_BYTES] * 40
    assert shapes.request_fits(prompts.answer_request(question, finding, shown, model=shapes.MODEL), shape)
    assert shapes.request_fits(prompts.decompose_request(question, finding, asked, shown[:3], model=shapes.MODEL),
                               shape)
    # A run costs its per-call worst case times its calls, whichever branch it takes.
    synthesis, one = shapes.worst_case(manifest, "synthesis")
    loop, six = shapes.worst_case(manifest, "decomposition")
    assert (one, six) == (1, 2 * manifest.deep.max_rounds) and loop == synthesis * six


def test_the_decomposition_schema_can_carry_nothing_but_query_strings() -> None:
    schema: dict[str, Any] = prompts.DECOMPOSE_SCHEMA  # JSON Schema: nested dicts, read by key
    assert list(schema["properties"]) == ["queries"] and schema["additionalProperties"] is False
    assert schema["properties"]["queries"]["items"] == {"type": "string"}


def test_no_mcp_tool_runs_the_deep_loop() -> None:
    """CLI only (spec §4.3): a server-side loop would spend the operator's money on the caller's question."""
    from pinakes.serve.specs import TOOL_SPECS

    names = [spec.name for spec in TOOL_SPECS]
    assert names and not [name for name in names if "ask" in name or "deep" in name]
