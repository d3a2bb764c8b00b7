"""The golden-set loader: every structural rule of spec §7 is an error naming the file, the question
and the remedy — and the committed demo set passes all of them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.errors import EXIT_DATA
from pinakes.eval.golden import KINDS, GoldenSetError, load_golden_set
from pinakes.manifest import SourcesSection

TESTS_DIR = Path(__file__).resolve().parent
DEMO_ROOT = TESTS_DIR / "demo-kb"


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    (root / "docs" / "sub").mkdir(parents=True)
    (root / "eval").mkdir()
    for name in ("a.md", "b.md", "sub/c.md"):
        (root / "docs" / name).write_text(f"# {name}\n\nText.\n", encoding="utf-8")
    (root / "outside.md").write_text("not a source\n", encoding="utf-8")
    return root


def write(kb: Path, text: str) -> Path:
    path = kb / "eval" / "questions.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(kb: Path, text: str, **kwargs: SourcesSection | None) -> list[str]:
    path = write(kb, text)
    with pytest.raises(GoldenSetError) as caught:
        load_golden_set(path, kb, **kwargs)
    assert caught.value.path == path
    return [problem.render() for problem in caught.value.problems]


GOOD = """\
    questions:
      - id: q1
        kind: lexical
        query: "alpha"
        expect: [docs/a.md]
      - id: q2
        kind: multi-hop
        query: "alpha then beta"
        hops:
          - {query: "alpha", expect: [docs/a.md]}
          - {query: "beta", expect: [docs/b.md]}
        expect: [docs/a.md, docs/b.md]
      - id: q3
        kind: filter
        query: "c"
        filters: {path_prefix: "docs/sub/", source_type: markdown}
        expect: [docs/sub/c.md]
      - id: q4
        kind: no-answer
        query: "nothing"
        expect: []
"""


def test_a_valid_set_loads_with_every_field(kb: Path) -> None:
    golden = load_golden_set(write(kb, GOOD), kb)
    assert [q.id for q in golden.questions] == ["q1", "q2", "q3", "q4"]
    hop_question = golden.questions[1]
    assert [hop.expect for hop in hop_question.hops] == [("docs/a.md",), ("docs/b.md",)]
    filters = golden.questions[2].search_filters()
    assert filters.path_prefix == "docs/sub/" and filters.source_types == ("markdown",)
    assert not golden.questions[3].answerable and golden.questions[0].answerable
    assert len(golden.sha256) == 64


def test_the_committed_demo_set_is_valid_non_empty_and_spans_every_kind() -> None:
    from pinakes.manifest import load_manifest

    manifest = load_manifest(DEMO_ROOT / "pinakes.toml")
    golden = load_golden_set(DEMO_ROOT / "eval" / "questions.yaml", DEMO_ROOT, sources=manifest.sources)
    assert len(golden) >= 70
    assert {question.kind for question in golden.questions} == set(KINDS)


def test_a_misspelt_questions_key_is_an_error_not_an_empty_set(kb: Path) -> None:
    found = problems_of(kb, "question:\n  - id: q1\n")
    assert any("unknown top-level key 'question'" in p and "did you mean 'questions'" in p for p in found)
    assert any("no `questions` key" in p for p in found)


@pytest.mark.parametrize("kind_line", ["", "    kind: lookup\n"])
def test_an_absent_or_unknown_kind_is_an_error_naming_the_six(kb: Path, kind_line: str) -> None:
    text = "questions:\n  - id: q1\n" + kind_line + '    query: "x"\n    expect: [docs/a.md]\n'
    found = problems_of(kb, text)
    assert len(found) == 1 and found[0].startswith("question q1:")
    with pytest.raises(GoldenSetError) as caught:
        load_golden_set(kb / "eval" / "questions.yaml", kb)
    assert all(kind in (caught.value.remedy or "") for kind in KINDS)
    assert "never defaulted" in caught.value.message


def test_a_repeated_id_is_an_error_naming_both_positions(kb: Path) -> None:
    found = problems_of(kb, """\
        questions:
          - {id: q1, kind: lexical, query: a, expect: [docs/a.md]}
          - {id: q1, kind: lexical, query: b, expect: [docs/b.md]}
    """)
    assert found == ["question q1: the id is used twice (questions #1 and #2)"]


def test_a_missing_id_names_the_position(kb: Path) -> None:
    found = problems_of(kb, "questions:\n  - {kind: lexical, query: a, expect: [docs/a.md]}\n")
    assert found[0].startswith("question #1: `id` must be a non-empty string")


@pytest.mark.parametrize(
    ("expect", "fragment"),
    [
        ("[docs/nope.md]", "names docs/nope.md, which does not exist in the KB"),
        ("[../a.md]", "is not a plain KB-root-relative path"),
        ("[/etc/passwd]", "is not a plain KB-root-relative path"),
        ("[outside.md]", "which [sources] does not index"),
        ("[docs/a.md, docs/a.md]", "lists docs/a.md twice"),
        ("docs/a.md", "must be a list of paths"),
    ],
)
def test_expected_paths_must_be_indexed_files_of_the_kb(kb: Path, expect: str, fragment: str) -> None:
    found = problems_of(kb, f"questions:\n  - {{id: q1, kind: lexical, query: a, expect: {expect}}}\n",
                        sources=SourcesSection(roots=("docs",)))
    assert len(found) == 1 and found[0].startswith("question q1:") and fragment in found[0], found


def test_multi_hop_needs_hops_and_its_expect_is_exactly_their_union(kb: Path) -> None:
    found = problems_of(kb, """\
        questions:
          - {id: h1, kind: multi-hop, query: a, expect: [docs/a.md]}
          - id: h2
            kind: multi-hop
            query: a
            hops: [{query: a, expect: [docs/a.md]}, {query: b, expect: [docs/b.md]}]
            expect: [docs/a.md]
          - id: h3
            kind: multi-hop
            query: a
            hops: [{query: a, expect: [docs/a.md]}]
            expect: [docs/a.md]
          - id: h4
            kind: multi-hop
            query: a
            hops: [{query: a, expect: []}, {query: "", expect: [docs/b.md]}]
            expect: [docs/b.md]
    """)
    assert any(p.startswith("question h1: a multi-hop question needs `hops`") for p in found)
    assert any(p.startswith("question h2: `expect` must be exactly the union") for p in found)
    assert any(p.startswith("question h3: a multi-hop question needs at least 2 hops") for p in found)
    assert any(p.startswith("question h4: hop 1 expects no document") for p in found)
    assert any(p.startswith("question h4: `hop 2 query` must be a non-empty string") for p in found)


def test_kind_specific_rules(kb: Path) -> None:
    found = problems_of(kb, """\
        questions:
          - {id: n1, kind: no-answer, query: a, expect: [docs/a.md]}
          - {id: l1, kind: lexical, query: a, expect: []}
          - {id: l2, kind: lexical, query: a, expect: [docs/a.md], hops: [{query: a, expect: [docs/a.md]}]}
          - {id: f1, kind: filter, query: a, expect: [docs/a.md]}
          - {id: f2, kind: filter, query: a, expect: [docs/a.md], filters: {source_type: pdfx}}
          - {id: f3, kind: filter, query: a, expect: [docs/a.md], filters: {tag: [x]}}
          - {id: l3, kind: lexical, query: a, expect: [docs/a.md], expected: [docs/a.md]}
    """)
    expected = {
        "n1": "a no-answer question must have `expect: []`",
        "l1": "an answerable question needs at least one expected document",
        "l2": "only multi-hop questions have hops",
        "f1": "a filter question must carry `filters`",
        "f2": "invalid filters: unknown source type 'pdfx'",
        "f3": "unknown filter 'tag' (did you mean 'tags'?)",
        "l3": "unknown key 'expected' (did you mean 'expect'?)",
    }
    for qid, fragment in expected.items():
        assert any(p.startswith(f"question {qid}:") and fragment in p for p in found), (qid, found)


def test_yaml_syntax_errors_and_non_mapping_files_are_golden_set_errors(kb: Path) -> None:
    assert "invalid YAML" in problems_of(kb, "questions: [\n")[0]
    assert "must be a mapping with a `questions` list" in problems_of(kb, "- just a list\n")[0]


def test_the_cli_reports_a_broken_golden_set_without_a_traceback(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pinakes.init import init_kb

    root = kb.parent / "cli-kb"
    init_kb(root, name="cli")
    (root / "eval").mkdir()
    (root / "eval" / "questions.yaml").write_text("questions:\n  - {id: q1, query: a, expect: []}\n",
                                                  encoding="utf-8")
    assert main(["eval", str(root), "--no-sync"]) == EXIT_DATA
    err = capsys.readouterr().err
    assert "questions.yaml: question q1: no `kind`" in err and "remedy:" in err
    assert "Traceback" not in err
