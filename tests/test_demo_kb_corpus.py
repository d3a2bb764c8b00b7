"""The two synthetic corpora (tests/demo-kb, tests/partner-kb) and the demo golden set, checked as data.

Spec §7: authored links are deliberately sparse, and this gate keeps them so. It caps the share of
documents carrying links and, separately, any one document's degree (density alone permits a hub
wired to everything), and requires a same-KB link in each corpus (a corpus linked only outward
contributes no derived structure). Sidecars are parsed with ruamel.yaml directly, so the gate does not
depend on `pinakes.sidecar` and cannot be loosened by a change there.

Every gate is a function returning its violations; the tests assert the real corpora have none, and a
planted corpus proves each gate can fail.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from ruamel.yaml import YAML
from ulid import ULID

TESTS_DIR = Path(__file__).resolve().parent
DEMO_ROOT = TESTS_DIR / "demo-kb"
PARTNER_ROOT = TESTS_DIR / "partner-kb"
GOLDEN_SET = DEMO_ROOT / "eval" / "questions.yaml"

SIDECAR_SUFFIX = ".pnk.yaml"

# §7's gate. The share is of documents whose own sidecar carries a link; the degree counts a
# document's links in both directions, within its KB and across.
MAX_LINKED_SHARE = 0.20
MAX_DEGREE = 3

# The corpus brief: documents long enough to chunk into several passages, short enough to stay
# topically distinct.
MIN_WORDS, MAX_WORDS = 300, 900
MAX_TAGS = 4
TAG_VOCABULARY = frozenset(
    {
        "collections",
        "conservation",
        "digitisation",
        "emergency",
        "environment",
        "exhibitions",
        "governance",
        "guide",
        "loans",
        "partnership",
        "policy",
        "procedure",
        "reading-room",
        "records",
    }
)
SOURCE_TYPE_BY_SUFFIX = {".md": "markdown", ".txt": "text"}

MIN_QUESTIONS = 70
MIN_PER_KIND = 8
QUESTION_KINDS = frozenset({"lexical", "simple-lookup", "paraphrase", "filter", "multi-hop", "no-answer"})
QUESTION_KEYS = frozenset({"id", "kind", "query", "expect", "filters", "hops"})
FILTER_KEYS = frozenset({"tags", "path_prefix", "source_type"})

PNK_URI = re.compile(r"^pnk://(?P<kb>[^/]+)/(?P<doc>[^/]+)$")
SELF_KB = "self"


@dataclass(frozen=True)
class DocumentMeta:
    """What the gate needs from one sidecar."""

    doc_id: str
    title: str
    tags: tuple[str, ...]
    link_targets: tuple[str, ...]
    created: object
    text: str = ""


@dataclass
class Corpus:
    kb_id: str
    root: Path
    linked_kbs: dict[str, Path] = field(default_factory=dict[str, Path])
    documents: dict[str, DocumentMeta] = field(default_factory=dict[str, DocumentMeta])  # KB-root-relative path -> meta
    missing_sidecars: list[str] = field(default_factory=list[str])
    orphan_sidecars: list[str] = field(default_factory=list[str])


def _safe_yaml() -> YAML:
    return YAML(typ="safe", pure=True)


def _yaml_mapping(path: Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (a sidecar, the golden set), typed as the parsed data it is."""
    return cast(dict[str, Any], _safe_yaml().load(path.read_text(encoding="utf-8")))


def _source_roots(root: Path, manifest: dict[str, Any]) -> list[Path]:
    return [root / source_root for source_root in manifest["sources"]["roots"]]


def _read_meta(sidecar: Path, document: Path) -> DocumentMeta:
    data = _yaml_mapping(sidecar)
    links = cast("list[dict[str, Any]]", data.get("links") or [])
    provenance = cast("dict[str, Any]", data.get("provenance") or {})
    return DocumentMeta(
        doc_id=str(data["id"]),
        title=str(data.get("title") or ""),
        tags=tuple(data.get("tags") or ()),
        link_targets=tuple(str(link["target"]) for link in links),
        created=provenance.get("created"),
        text=document.read_text(encoding="utf-8"),
    )


def load_corpus(root: Path) -> Corpus:
    manifest = tomllib.loads((root / "pinakes.toml").read_text(encoding="utf-8"))
    corpus = Corpus(
        kb_id=manifest["kb"]["id"],
        root=root,
        linked_kbs={
            entry["id"]: (root / entry["path"]).resolve() for entry in manifest.get("links", {}).get("kb", [])
        },
    )
    for source_root in _source_roots(root, manifest):
        for path in sorted(source_root.rglob("*")):
            if not path.is_file():
                continue
            relative = path.relative_to(root).as_posix()
            if path.name.endswith(SIDECAR_SUFFIX):
                if not path.with_name(path.name[: -len(SIDECAR_SUFFIX)]).is_file():
                    corpus.orphan_sidecars.append(relative)
                continue
            sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
            if sidecar.is_file():
                corpus.documents[relative] = _read_meta(sidecar, path)
            else:
                corpus.missing_sidecars.append(relative)
    return corpus


def resolve_target(target: str, owner_kb: str) -> tuple[str, str] | None:
    """(kb id, doc id) a pnk:// link names, `self` expanded to the owning KB; None if malformed."""
    match = PNK_URI.match(target)
    if match is None:
        return None
    kb = match["kb"]
    return (owner_kb if kb == SELF_KB else kb, match["doc"])


def _ids_by_kb(corpora: list[Corpus]) -> dict[str, set[str]]:
    return {c.kb_id: {meta.doc_id for meta in c.documents.values()} for c in corpora}


def dangling_link_violations(corpora: list[Corpus]) -> list[str]:
    """Links that are malformed, name an undeclared KB, or name a document absent from their KB."""
    known = _ids_by_kb(corpora)
    problems: list[str] = []
    for corpus in corpora:
        for path, meta in corpus.documents.items():
            for target in meta.link_targets:
                resolved = resolve_target(target, corpus.kb_id)
                if resolved is None:
                    problems.append(f"{corpus.kb_id}:{path}: malformed link target {target!r}")
                    continue
                kb, doc = resolved
                if kb != corpus.kb_id and kb not in corpus.linked_kbs:
                    problems.append(f"{corpus.kb_id}:{path}: links to undeclared KB {kb}")
                elif doc not in known.get(kb, set()):
                    problems.append(f"{corpus.kb_id}:{path}: no document {doc} in KB {kb}")
    return problems


def link_degrees(corpora: list[Corpus]) -> Counter[tuple[str, str]]:
    """Authored links per (kb id, doc id), counting both ends of every link."""
    degree: Counter[tuple[str, str]] = Counter()
    for corpus in corpora:
        for meta in corpus.documents.values():
            for target in meta.link_targets:
                resolved = resolve_target(target, corpus.kb_id)
                if resolved is None:
                    continue
                degree[(corpus.kb_id, meta.doc_id)] += 1
                degree[resolved] += 1
    return degree


def sparsity_violations(corpora: list[Corpus]) -> list[str]:
    """§7's gate: capped share of linking documents, capped degree, a same-KB link in each corpus."""
    problems: list[str] = []
    for corpus in corpora:
        linking = [path for path, meta in corpus.documents.items() if meta.link_targets]
        share = len(linking) / len(corpus.documents) if corpus.documents else 0.0
        if share > MAX_LINKED_SHARE:
            problems.append(
                f"{corpus.kb_id}: {len(linking)}/{len(corpus.documents)} documents carry links "
                f"({share:.0%} > {MAX_LINKED_SHARE:.0%})"
            )
        same_kb = [
            target
            for meta in corpus.documents.values()
            for target in meta.link_targets
            if (resolved := resolve_target(target, corpus.kb_id)) and resolved[0] == corpus.kb_id
        ]
        if not same_kb:
            problems.append(f"{corpus.kb_id}: no same-KB link")
    for (kb, doc), degree in sorted(link_degrees(corpora).items()):
        if degree > MAX_DEGREE:
            problems.append(f"{kb}/{doc}: degree {degree} > {MAX_DEGREE}")
    return problems


def cross_kb_directions(corpora: list[Corpus]) -> set[tuple[str, str]]:
    """(source kb, target kb) pairs for which at least one cross-KB link exists."""
    directions: set[tuple[str, str]] = set()
    for corpus in corpora:
        for meta in corpus.documents.values():
            for target in meta.link_targets:
                resolved = resolve_target(target, corpus.kb_id)
                if resolved and resolved[0] != corpus.kb_id:
                    directions.add((corpus.kb_id, resolved[0]))
    return directions


def sidecar_violations(corpus: Corpus) -> list[str]:
    """Missing or orphaned sidecars, invalid ULIDs, and tags outside the shared vocabulary."""
    problems = [f"{p}: document without a sidecar" for p in corpus.missing_sidecars]
    problems += [f"{p}: sidecar without its document" for p in corpus.orphan_sidecars]
    for path, meta in corpus.documents.items():
        try:
            ULID.from_str(meta.doc_id)
        except ValueError:
            problems.append(f"{path}: id {meta.doc_id!r} is not a ULID")
        if not meta.title:
            problems.append(f"{path}: no title")
        if not 1 <= len(meta.tags) <= MAX_TAGS:
            problems.append(f"{path}: {len(meta.tags)} tags (want 1..{MAX_TAGS})")
        if unknown := set(meta.tags) - TAG_VOCABULARY:
            problems.append(f"{path}: tags outside the vocabulary: {sorted(unknown)}")
        # A date left unquoted parses as a date object, which the index cannot store as JSON (§2.2).
        if not isinstance(meta.created, str):
            problems.append(f"{path}: provenance.created is {type(meta.created).__name__}, not a string")
    return problems


# ---------------------------------------------------------------------------------------------
# the corpora


@pytest.fixture(scope="module")
def demo() -> Corpus:
    return load_corpus(DEMO_ROOT)


@pytest.fixture(scope="module")
def partner() -> Corpus:
    return load_corpus(PARTNER_ROOT)


@pytest.fixture(scope="module")
def corpora(demo: Corpus, partner: Corpus) -> list[Corpus]:
    return [demo, partner]


def test_the_two_manifests_name_each_other(demo: Corpus, partner: Corpus) -> None:
    assert demo.linked_kbs == {partner.kb_id: PARTNER_ROOT.resolve()}
    assert partner.linked_kbs == {demo.kb_id: DEMO_ROOT.resolve()}


@pytest.mark.parametrize(("root", "low", "high"), [(DEMO_ROOT, 28, 36), (PARTNER_ROOT, 15, 20)])
def test_corpus_sizes_match_the_brief(root: Path, low: int, high: int) -> None:
    count = len(load_corpus(root).documents)
    assert low <= count <= high


def test_demo_kb_mixes_markdown_and_plain_text(demo: Corpus) -> None:
    suffixes = Counter(Path(path).suffix for path in demo.documents)
    assert suffixes[".txt"] >= 2
    assert set(suffixes) <= set(SOURCE_TYPE_BY_SUFFIX)


@pytest.mark.parametrize("root", [DEMO_ROOT, PARTNER_ROOT], ids=["demo", "partner"])
def test_every_document_has_a_valid_sidecar(root: Path) -> None:
    assert sidecar_violations(load_corpus(root)) == []


@pytest.mark.parametrize("root", [DEMO_ROOT, PARTNER_ROOT], ids=["demo", "partner"])
def test_document_lengths_are_within_the_brief(root: Path) -> None:
    corpus = load_corpus(root)
    outside = {
        path: len(meta.text.split())
        for path, meta in corpus.documents.items()
        if not MIN_WORDS <= len(meta.text.split()) <= MAX_WORDS
    }
    assert outside == {}


def test_document_ids_are_unique_across_both_kbs(corpora: list[Corpus]) -> None:
    ids = [meta.doc_id for corpus in corpora for meta in corpus.documents.values()]
    repeated = [doc_id for doc_id, n in Counter(ids).items() if n > 1]
    assert repeated == []


def test_every_link_target_resolves(corpora: list[Corpus]) -> None:
    assert dangling_link_violations(corpora) == []


def test_links_are_sparse(corpora: list[Corpus]) -> None:
    assert sparsity_violations(corpora) == []


def test_cross_kb_links_run_in_both_directions(demo: Corpus, partner: Corpus) -> None:
    directions = cross_kb_directions([demo, partner])
    assert {(demo.kb_id, partner.kb_id), (partner.kb_id, demo.kb_id)} <= directions


# ---------------------------------------------------------------------------------------------
# negative controls: each gate fails on a corpus planted to violate it


def _planted(kb_id: str, links: dict[str, tuple[str, ...]], unlinked: int) -> Corpus:
    corpus = Corpus(kb_id=kb_id, root=Path("/planted"))
    for name, targets in links.items():
        corpus.documents[f"docs/{name}.md"] = DocumentMeta(name, name, ("guide",), targets, "x")
    for index in range(unlinked):
        name = f"plain{index}"
        corpus.documents[f"docs/{name}.md"] = DocumentMeta(name, name, ("guide",), (), "x")
    return corpus


def test_sparsity_gate_catches_a_hub() -> None:
    spokes = ("pnk://self/plain0", "pnk://self/plain1", "pnk://self/plain2", "pnk://self/plain3")
    corpus = _planted("KB", {"hub": spokes}, unlinked=30)
    assert sparsity_violations([corpus]) == ["KB/hub: degree 4 > 3"]


def test_sparsity_gate_catches_too_many_linking_documents() -> None:
    linking = {f"doc{i}": (f"pnk://self/plain{i}",) for i in range(3)}
    corpus = _planted("KB", linking, unlinked=7)
    assert sparsity_violations([corpus]) == ["KB: 3/10 documents carry links (30% > 20%)"]


def test_sparsity_gate_requires_a_same_kb_link() -> None:
    outward = _planted("A", {"out": ("pnk://B/plain0",)}, unlinked=9)
    target = _planted("B", {"in": ("pnk://self/plain1",)}, unlinked=9)
    assert sparsity_violations([outward, target]) == ["A: no same-KB link"]


def test_link_gate_catches_dangling_and_undeclared_targets() -> None:
    corpus = _planted(
        "KB",
        {"a": ("pnk://self/missing",), "b": ("pnk://ELSEWHERE/plain0",), "c": ("http://x/y",)},
        unlinked=1,
    )
    assert dangling_link_violations([corpus]) == [
        "KB:docs/a.md: no document missing in KB KB",
        "KB:docs/b.md: links to undeclared KB ELSEWHERE",
        "KB:docs/c.md: malformed link target 'http://x/y'",
    ]


def test_sidecar_gate_catches_missing_orphaned_and_malformed_sidecars(tmp_path: Path) -> None:
    (tmp_path / "pinakes.toml").write_text(
        '[kb]\nname = "planted"\nid = "01M8P05RX7E8691VQVZ35N5HS3"\n[sources]\nroots = ["docs"]\n'
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bare.md").write_text("# no sidecar\n")
    (docs / "gone.md.pnk.yaml").write_text("id: 01M8P0MB87VWNY4PS1B7TRCNCT\n")
    (docs / "bad.md").write_text("# bad sidecar\n")
    (docs / "bad.md.pnk.yaml").write_text(
        "id: not-a-ulid\ntitle: Bad\ntags: [cheese]\nprovenance:\n  created: 2026-11-30\n"
    )
    assert sidecar_violations(load_corpus(tmp_path)) == [
        "docs/bare.md: document without a sidecar",
        "docs/gone.md.pnk.yaml: sidecar without its document",
        "docs/bad.md: id 'not-a-ulid' is not a ULID",
        "docs/bad.md: tags outside the vocabulary: ['cheese']",
        "docs/bad.md: provenance.created is date, not a string",
    ]


# ---------------------------------------------------------------------------------------------
# the golden set


@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    data = _yaml_mapping(GOLDEN_SET)
    return list(data["questions"])


def _of_kind(questions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [q for q in questions if q.get("kind") == kind]


def test_golden_set_is_large_enough_with_unique_ids(questions: list[dict[str, Any]]) -> None:
    ids = [q.get("id") for q in questions]
    assert len(questions) >= MIN_QUESTIONS
    assert all(isinstance(i, str) and i for i in ids)
    assert [i for i, n in Counter(ids).items() if n > 1] == []


def test_every_question_has_a_known_kind_and_only_known_keys(questions: list[dict[str, Any]]) -> None:
    assert [q.get("id") for q in questions if q.get("kind") not in QUESTION_KINDS] == []
    assert [q["id"] for q in questions if set(q) - QUESTION_KEYS] == []
    assert [q["id"] for q in questions if not str(q.get("query") or "").strip()] == []


def test_every_kind_is_represented(questions: list[dict[str, Any]]) -> None:
    counts = Counter(q["kind"] for q in questions)
    assert {kind: n for kind, n in counts.items() if n < MIN_PER_KIND} == {}
    assert set(counts) == QUESTION_KINDS


def _all_expected_paths(question: dict[str, Any]) -> list[str]:
    paths: list[str] = list(question.get("expect") or [])
    hops = cast("list[dict[str, Any]]", question.get("hops") or [])
    for hop in hops:
        paths += list(hop.get("expect") or [])
    return paths


def test_every_expected_path_is_a_demo_document(questions: list[dict[str, Any]], demo: Corpus) -> None:
    unknown = {
        q["id"]: path for q in questions for path in _all_expected_paths(q) if path not in demo.documents
    }
    assert unknown == {}


def test_answerable_questions_expect_a_document(questions: list[dict[str, Any]]) -> None:
    empty = [q["id"] for q in questions if q["kind"] != "no-answer" and not q.get("expect")]
    assert empty == []


def test_no_answer_questions_expect_nothing(questions: list[dict[str, Any]]) -> None:
    for question in _of_kind(questions, "no-answer"):
        assert question["expect"] == [], question["id"]
        assert "hops" not in question and "filters" not in question, question["id"]


def test_multi_hop_expect_is_exactly_the_union_of_its_hops(questions: list[dict[str, Any]]) -> None:
    for question in _of_kind(questions, "multi-hop"):
        hops = cast("list[dict[str, Any]]", question.get("hops") or [])
        assert 2 <= len(hops) <= 3, question["id"]
        for hop in hops:
            assert str(hop.get("query") or "").strip() and hop.get("expect"), question["id"]
        union = {path for hop in hops for path in hop["expect"]}
        expect = question["expect"]
        assert len(expect) == len(set(expect)) and set(expect) == union, question["id"]


def test_only_multi_hop_questions_have_hops(questions: list[dict[str, Any]]) -> None:
    assert [q["id"] for q in questions if "hops" in q and q["kind"] != "multi-hop"] == []


def _matches_filters(path: str, meta: DocumentMeta, filters: dict[str, Any]) -> bool:
    if not set(filters.get("tags") or ()) <= set(meta.tags):
        return False
    if not path.startswith(filters.get("path_prefix", "")):
        return False
    source_type = filters.get("source_type")
    return source_type is None or SOURCE_TYPE_BY_SUFFIX[Path(path).suffix] == source_type


def test_filter_questions_carry_filters_their_answers_satisfy(
    questions: list[dict[str, Any]], demo: Corpus
) -> None:
    assert [q["id"] for q in questions if "filters" in q and q["kind"] != "filter"] == []
    for question in _of_kind(questions, "filter"):
        filters = question.get("filters")
        assert isinstance(filters, dict) and filters, question["id"]
        filters = cast("dict[str, Any]", filters)
        assert set(filters) <= FILTER_KEYS, question["id"]
        for path in question["expect"]:
            assert _matches_filters(path, demo.documents[path], filters), (question["id"], path)
        # A filter that admits every document tests nothing about filtering.
        admitted = [p for p, meta in demo.documents.items() if _matches_filters(p, meta, filters)]
        assert len(admitted) < len(demo.documents), question["id"]


def _documents_containing(term: str, demo: Corpus) -> set[str]:
    pattern = re.compile(rf"(?<![\w-]){re.escape(term)}(?![\w-])", re.IGNORECASE)
    return {path for path, meta in demo.documents.items() if pattern.search(meta.text)}


def test_each_lexical_question_names_a_term_found_only_in_its_document(
    questions: list[dict[str, Any]], demo: Corpus
) -> None:
    """A lexical question is only lexical if some term of it singles out the expected document."""
    without_unique_term: list[str] = []
    for question in _of_kind(questions, "lexical"):
        terms = re.findall(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*", question["query"])
        if not any(_documents_containing(t, demo) == set(question["expect"]) for t in terms if len(t) >= 4):
            without_unique_term.append(question["id"])
    assert without_unique_term == []
