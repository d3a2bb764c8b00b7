"""The manifest loader: every validation rule has its own message naming its dotted key."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

import pytest

import pinakes
from pinakes.doctor import Check, DoctorContext, checks_manifest
from pinakes.errors import EXIT_CONFIG, ManifestError
from pinakes.extract.source_types import DEFAULT_SOURCE_TYPES, MARKDOWN_WRITTEN
from pinakes.init import render_manifest
from pinakes.manifest import (
    ALWAYS_EXCLUDED,
    DEFAULT_INCLUDE,
    SECTION_KEYS,
    InvalidManifestError,
    Manifest,
    ManifestProblem,
    SourcesSection,
    load_manifest,
    parse_manifest,
)
from pinakes.template_catalog import TemplateCatalog

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Section = TypeVar("_Section", bound="DataclassInstance")

REPO_ROOT = Path(__file__).resolve().parent.parent
KB_ID = "01M8P05RX7E8691VQVZ35N5HS3"
PARTNER_ID = "01M8P05RXHZDCE7J4M0T0EDGMH"
THIRD_ID = "01M8P05RXHZDCE7J4M0T0EDGMJ"

KB = f'[kb]\nname = "archive"\nid = "{KB_ID}"\n'
SOURCES = '[sources]\nroots = ["docs"]\n'
EMBEDDING = ('[embedding]\nprovider = "fastembed"\nmodel = "sentence-transformers/all-MiniLM-L6-v2"\n'
             "dim = 384\n")
MINIMAL = KB + SOURCES + EMBEDDING


def manifest_text(extra: str = "", *, kb: str = KB, sources: str = SOURCES, embedding: str = EMBEDDING) -> str:
    return kb + sources + embedding + extra


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pinakes.toml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(tmp_path: Path, text: str) -> tuple[ManifestProblem, ...]:
    with pytest.raises(InvalidManifestError) as excinfo:
        load_manifest(write(tmp_path, text))
    return excinfo.value.problems


def link(alias: str, kb_id: str, path: str = "../partner-kb", extra: str = "") -> str:
    return f'[[links.kb]]\nid = "{kb_id}"\nalias = "{alias}"\npath = "{path}"\n{extra}'


# (case id, manifest text, the dotted key the one problem names, a fragment of its message)
RULES = [
    ("unknown-key-did-you-mean", manifest_text("[retrieval]\nfinal_kk = 3\n"),
     "retrieval.final_kk", "did you mean `final_k`"),
    ("unknown-key-no-match", manifest_text("[chunking]\nzebra = 1\n"), "chunking.zebra", "unknown key"),
    ("unknown-key-in-kb", manifest_text(kb=KB + 'nmae = "x"\n'), "kb.nmae", "did you mean `name`"),
    ("unknown-key-in-link", manifest_text(link("partner", PARTNER_ID, extra='aliass = "x"\n')),
     "links.kb[0].aliass", "did you mean `alias`"),
    ("unknown-key-in-confidence",
     manifest_text('[retrieval.confidence]\nhigh = 0.8\nlow = 0.2\nfitted_for = "x"\nmid = 0.5\n'),
     "retrieval.confidence.mid", "unknown key"),
    ("unknown-section", manifest_text("[retreival]\nfinal_k = 3\n"), "retreival",
     "did you mean [retrieval]"),
    ("section-not-a-table", "retrieval = 3\n" + MINIMAL, "retrieval", "must be a table"),
    ("missing-kb", SOURCES + EMBEDDING, "kb", "required section [kb] is missing"),
    ("missing-sources", KB + EMBEDDING, "sources", "required section [sources] is missing"),
    ("missing-embedding", KB + SOURCES, "embedding", "required section [embedding] is missing"),
    ("missing-required-key", manifest_text(embedding='[embedding]\nprovider = "fastembed"\nmodel = "m"\n'),
     "embedding.dim", "is required"),
    ("empty-string-required", manifest_text(
        embedding='[embedding]\nprovider = "fastembed"\nmodel = ""\ndim = 384\n'),
     "embedding.model", "empty string"),
    ("empty-string-optional", manifest_text('[budget]\ntimezone = ""\n'), "budget.timezone",
     "empty string"),
    ("empty-string-in-list", manifest_text(sources='[sources]\nroots = ["docs", ""]\n'),
     "sources.roots", "item 1 is an empty string"),
    ("wrong-type-int", manifest_text('[retrieval]\nfinal_k = "8"\n'), "retrieval.final_k",
     "must be an integer, got a string"),
    ("wrong-type-bool-for-int", manifest_text("[deep]\nmax_rounds = true\n"), "deep.max_rounds",
     "must be an integer, got a boolean"),
    ("wrong-type-bool", manifest_text('[retrieval]\nrerank = "yes"\n'), "retrieval.rerank",
     "must be a boolean, got a string"),
    ("wrong-type-list", manifest_text(sources='[sources]\nroots = "docs"\n'), "sources.roots",
     "must be an array of strings, got a string"),
    ("wrong-type-list-item", manifest_text(sources='[sources]\nroots = ["docs", 3]\n'),
     "sources.roots", "item 1 must be a string, got an integer"),
    ("widths-final-above-fusion", manifest_text("[retrieval]\nfinal_k = 30\n"), "retrieval.final_k",
     "widths must narrow"),
    ("widths-fusion-above-candidates", manifest_text("[retrieval]\nfusion_top_k = 60\n"),
     "retrieval.fusion_top_k", "widths must narrow"),
    ("width-below-one", manifest_text("[retrieval]\nfinal_k = 0\n"), "retrieval.final_k", "must be >= 1"),
    ("overlap-not-below-max-tokens", manifest_text("[chunking]\nmax_tokens = 100\noverlap = 100\n"),
     "chunking.overlap", "must be smaller than max_tokens"),
    ("overlap-negative", manifest_text("[chunking]\noverlap = -1\n"), "chunking.overlap", "must be >= 0"),
    ("chunking-strategy", manifest_text('[chunking]\nstrategy = "semantic"\n'), "chunking.strategy",
     '"structural"'),
    ("chunking-headings", manifest_text('[chunking]\nheadings = "numberd"\n'), "chunking.headings",
     'did you mean "numbered"'),
    ("confirm-above-per-operation", manifest_text('[budget]\nconfirm_above_eur = "3.00"\n'),
     "budget.confirm_above_eur", "prompt would be unreachable"),
    ("cap-negative", manifest_text('[budget]\ndaily_eur = "-1"\n'), "budget.daily_eur", "must be >= 0"),
    ("money-not-a-number", manifest_text('[budget]\nmonthly_eur = "lots"\n'), "budget.monthly_eur",
     "is not an amount"),
    ("money-not-finite", manifest_text("[budget]\nmonthly_eur = inf\n"), "budget.monthly_eur",
     "must be a finite amount"),
    ("on-exceed", manifest_text('[budget]\non_exceed = "continue"\n'), "budget.on_exceed", '"abort"'),
    ("bad-timezone", manifest_text('[budget]\ntimezone = "Mars/Olympus_Mons"\n'), "budget.timezone",
     "not an IANA time zone"),
    ("price-age", manifest_text("[budget]\nmax_price_age_days = 0\n"), "budget.max_price_age_days",
     "must be >= 1"),
    ("thresholds-unordered",
     manifest_text('[retrieval.confidence]\nhigh = 0.2\nlow = 0.9\nfitted_for = "minilm, golden v1"\n'),
     "retrieval.confidence.low", "must be ordered low <= high"),
    ("thresholds-without-fitted-for", manifest_text("[retrieval.confidence]\nhigh = 0.8\nlow = 0.2\n"),
     "retrieval.confidence.fitted_for", "required whenever thresholds are present"),
    ("threshold-missing", manifest_text('[retrieval.confidence]\nhigh = 0.8\nfitted_for = "x"\n'),
     "retrieval.confidence.low", "is required"),
    ("threshold-not-finite",
     manifest_text('[retrieval.confidence]\nhigh = nan\nlow = 0.2\nfitted_for = "x"\n'),
     "retrieval.confidence.high", "finite"),
    ("confidence-not-a-table", manifest_text("[retrieval]\nconfidence = 0.5\n"),
     "retrieval.confidence", "must be a table"),
    ("sqlite-vec-refused", manifest_text('[retrieval]\nvector_tier = "sqlite-vec"\n'),
     "retrieval.vector_tier", 'is not built in this Pinakes (built: "auto", "numpy")'),
    ("ppr-refused", manifest_text('[retrieval]\ngraph_channel = "ppr"\n'), "retrieval.graph_channel",
     'is not built in this Pinakes (built: "off", "expand")'),
    ("unknown-extraction-backend", manifest_text('[extraction]\nbackend = "tesseract"\n'),
     "extraction.backend", '"pypdfium2"'),
    ("unknown-embedding-provider", manifest_text(
        embedding='[embedding]\nprovider = "openai"\nmodel = "m"\ndim = 3\n'),
     "embedding.provider", '"sentence-transformers", "fastembed"'),
    ("unknown-rerank-provider", manifest_text('[rerank]\nprovider = "cohere"\n'), "rerank.provider",
     "is not one of"),
    ("dim-zero", manifest_text(embedding='[embedding]\nprovider = "fastembed"\nmodel = "m"\ndim = 0\n'),
     "embedding.dim", "must be >= 1"),
    ("bad-ulid", manifest_text(kb='[kb]\nname = "a"\nid = "not-a-ulid"\n'), "kb.id", "is not a ULID"),
    ("lowercase-ulid", manifest_text(kb=f'[kb]\nname = "a"\nid = "{KB_ID.lower()}"\n'), "kb.id",
     f"write it in uppercase: {KB_ID}"),
    ("requires-pinakes-malformed", manifest_text(kb=KB + 'requires_pinakes = "1.0"\n'),
     "kb.requires_pinakes", "is not a version X.Y.Z"),
    ("template-malformed", manifest_text(kb=KB + 'template = "default"\n'), "kb.template",
     "NAME@VERSION"),
    ("root-absolute", manifest_text(sources='[sources]\nroots = ["/srv/docs"]\n'), "sources.roots",
     "is absolute"),
    ("root-escapes", manifest_text(sources='[sources]\nroots = ["docs/../../elsewhere"]\n'),
     "sources.roots", "leaves the KB"),
    ("root-backslash", manifest_text(sources='[sources]\nroots = ["docs\\\\notes"]\n'), "sources.roots",
     "backslash"),
    ("root-state-dir", manifest_text(sources='[sources]\nroots = [".pinakes/cache"]\n'),
     "sources.roots", "derived state"),
    ("roots-overlap", manifest_text(sources='[sources]\nroots = ["docs", "docs/notes"]\n'),
     "sources.roots", "overlaps the root 'docs'"),
    ("roots-empty", manifest_text(sources="[sources]\nroots = []\n"), "sources.roots", "is empty"),
    ("include-empty", manifest_text(sources='[sources]\nroots = ["docs"]\ninclude = []\n'),
     "sources.include", "is empty"),
    ("glob-invalid", manifest_text(sources='[sources]\nroots = ["docs"]\nexclude = ["[z-a]"]\n'),
     "sources.exclude", "is not a valid glob"),
    ("duplicate-link-alias", manifest_text(link("partner", PARTNER_ID) + link("partner", THIRD_ID)),
     "links.kb[1].alias", 'alias "partner" is already used by links.kb[0]'),
    ("duplicate-link-id", manifest_text(link("partner", PARTNER_ID) + link("museum", PARTNER_ID)),
     "links.kb[1].id", "is already linked by links.kb[0]"),
    ("link-alias-self", manifest_text(link("self", PARTNER_ID)), "links.kb[0].alias", "reserved"),
    ("link-alias-ulid", manifest_text(link(THIRD_ID, PARTNER_ID)), "links.kb[0].alias",
     "looks like a ULID"),
    ("link-bad-ulid", manifest_text(link("partner", "01M8P05RXHZDCE7J4M0T0EDGM")), "links.kb[0].id",
     "is not a ULID"),
    ("link-missing-path", manifest_text(f'[[links.kb]]\nid = "{PARTNER_ID}"\nalias = "partner"\n'),
     "links.kb[0].path", "is required"),
    ("links-kb-not-an-array", manifest_text(f'[links.kb]\nid = "{PARTNER_ID}"\nalias = "p"\npath = "x"\n'),
     "links.kb", "must be an array of tables ([[links.kb]])"),
]


@pytest.mark.parametrize(("text", "key", "fragment"), [case[1:] for case in RULES],
                         ids=[case[0] for case in RULES])
def test_each_rule_reports_its_own_problem(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    problems = problems_of(tmp_path, text)
    # Exactly one problem: a rule's failure must not cascade into noise about other keys.
    assert [problem.key for problem in problems] == [key], problems
    assert fragment in problems[0].problem
    assert problems[0].remedy  # every problem says what to do


def test_the_error_names_the_file_the_key_and_the_fix(tmp_path: Path) -> None:
    path = write(tmp_path, manifest_text("[retrieval]\nfinal_k = 30\n"))
    with pytest.raises(ManifestError) as excinfo:
        load_manifest(path)
    error = excinfo.value
    assert error.exit_code == EXIT_CONFIG
    assert error.path == path
    rendered = error.render()
    assert rendered.startswith(f"{path}: retrieval.final_k: final_k (30) is larger than fusion_top_k (20)")
    assert "remedy: lower final_k to at most 20" in rendered


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = manifest_text('[retrieval]\nfinal_kk = 3\nvector_tier = "sqlite-vec"\n[budget]\ndaily_eur = ""\n')
    problems = problems_of(tmp_path, text)
    assert sorted(cast(str, problem.key) for problem in problems) == [  # every one names a key
        "budget.daily_eur", "retrieval.final_kk", "retrieval.vector_tier"]
    with pytest.raises(ManifestError) as excinfo:
        load_manifest(tmp_path / "pinakes.toml")
    assert "3 problems" in excinfo.value.message
    for key in ("budget.daily_eur", "retrieval.final_kk", "retrieval.vector_tier"):
        assert key in excinfo.value.message


def test_invalid_toml_names_line_and_column(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, MINIMAL + "[retrieval]\nfinal_k = = 3\n")
    bad_line = MINIMAL.count("\n") + 2
    assert problems[0].key is None
    assert re.search(rf"invalid TOML: .*line {bad_line}, column 11\b", problems[0].problem)


def test_unreadable_files_are_manifest_errors(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="the manifest does not exist"):
        load_manifest(tmp_path / "pinakes.toml")
    (tmp_path / "pinakes.toml").write_bytes(MINIMAL.encode() + b'# \xff\n')
    with pytest.raises(ManifestError, match="not valid UTF-8"):
        load_manifest(tmp_path / "pinakes.toml")


def newer_than_us() -> str:
    major, minor = (int(part) for part in pinakes.__version__.split(".")[:2])
    return f"{major}.{minor + 1}.0"


def test_requires_pinakes_newer_is_diagnosed_before_unknown_keys(tmp_path: Path) -> None:
    floor = newer_than_us()
    text = manifest_text(
        '[retrieval]\nhybrid_weights = [0.5, 0.5]\n[ner]\nmodel = "x"\n',
        kb=KB + f'requires_pinakes = "{floor}"\nlicense = "CC-BY"\n',
    )
    problems = problems_of(tmp_path, text)
    assert [problem.key for problem in problems] == ["kb.requires_pinakes"]
    assert f"requires Pinakes {floor} or newer; this is Pinakes {pinakes.__version__}" in problems[0].problem
    assert "upgrade Pinakes" in problems[0].remedy


def test_requires_pinakes_newer_is_diagnosed_even_when_the_toml_does_not_parse(tmp_path: Path) -> None:
    floor = newer_than_us()
    text = f'[kb]\nname = "a"\nrequires_pinakes = "{floor}"\nid = "{KB_ID}"\n[sources]\nroots = ["docs"]\n' \
           "weights = {{ nested = 1 }, 2}\n"
    problems = problems_of(tmp_path, text)
    assert [problem.key for problem in problems] == ["kb.requires_pinakes"]


@pytest.mark.parametrize("floor", ["0.0.1", pinakes.__version__])
def test_requires_pinakes_at_or_below_us_loads(tmp_path: Path, floor: str) -> None:
    manifest = load_manifest(write(tmp_path, manifest_text(kb=KB + f'requires_pinakes = "{floor}"\n')))
    assert manifest.kb.requires_pinakes == floor


def test_minimal_manifest_takes_the_spec_defaults(tmp_path: Path) -> None:
    manifest = load_manifest(write(tmp_path, MINIMAL))
    assert manifest.root == tmp_path
    assert manifest.kb.id == KB_ID
    assert manifest.sources.roots == ("docs",)
    assert manifest.sources.include == DEFAULT_INCLUDE
    assert manifest.embedding.batch_size == 32
    assert manifest.extraction.backend == "pypdfium2"
    assert (manifest.chunking.max_tokens, manifest.chunking.overlap, manifest.chunking.headings) == (250, 25, "none")
    retrieval = manifest.retrieval
    assert (retrieval.candidates_per_source, retrieval.fusion_top_k, retrieval.final_k, retrieval.rrf_k) == (
        50, 20, 8, 60)
    assert retrieval.rerank is True
    assert retrieval.confidence is None  # absent: confidence is reported "unknown", never guessed
    # "auto" since #45: exact NumPy below 100k vectors, the vector file above; "numpy" is the override.
    assert (retrieval.vector_tier, retrieval.graph_channel, retrieval.adjacent_k) == ("auto", "off", 5)
    # [rerank] mirrors [embedding]: its provider defaults to the embedding provider.
    assert manifest.rerank.provider == "fastembed"
    assert (manifest.rerank.model, manifest.rerank.batch_size) == ("BAAI/bge-reranker-base", 16)
    assert manifest.budget.timezone == "UTC"
    assert manifest.budget.on_exceed == "abort"
    assert manifest.deep.max_rounds == 3
    assert manifest.links == ()


def test_money_is_decimal_parsed_from_text_never_float(tmp_path: Path) -> None:
    text = manifest_text('[budget]\nconfirm_above_eur = "0.10"\nper_operation_eur = 0.3\ndaily_eur = 7\n')
    budget = load_manifest(write(tmp_path, text)).budget
    assert type(budget.confirm_above_eur) is Decimal
    assert str(budget.confirm_above_eur) == "0.10"
    # A TOML float goes through its text: 0.3, not 0.299999999999999988897769753748...
    assert budget.per_operation_eur == Decimal("0.3")
    assert budget.per_operation_eur.as_tuple() == Decimal("0.3").as_tuple()
    assert budget.daily_eur == Decimal(7)
    assert type(budget.monthly_eur) is Decimal and str(budget.monthly_eur) == "20.00"


def test_confirm_equal_to_the_cap_is_allowed(tmp_path: Path) -> None:
    # A request exactly at the cap is allowed and still asked about (spec §5): equal is not unreachable.
    text = manifest_text('[budget]\nconfirm_above_eur = "2.00"\nper_operation_eur = "2.00"\n')
    assert load_manifest(write(tmp_path, text)).budget.confirm_above_eur == Decimal("2.00")


def test_confidence_and_links_load(tmp_path: Path) -> None:
    text = manifest_text(
        '[retrieval.confidence]\nhigh = 1\nlow = -2.5\nfitted_for = "minilm + bge, golden v3"\n'
        + link("partner", PARTNER_ID) + link("museum", THIRD_ID, path="/abs/museum")
    )
    manifest = load_manifest(write(tmp_path, text))
    confidence = manifest.retrieval.confidence
    assert confidence is not None
    assert (confidence.high, confidence.low, confidence.fitted_for) == (1.0, -2.5, "minilm + bge, golden v3")
    assert [(linked.alias, linked.id, linked.path) for linked in manifest.links] == [
        ("partner", PARTNER_ID, "../partner-kb"), ("museum", THIRD_ID, "/abs/museum")]
    partner = manifest.link(PARTNER_ID)
    assert partner is not None and partner.alias == "partner"
    assert manifest.link("museum") is manifest.links[1]
    assert manifest.link("nobody") is None


def test_a_manifest_may_link_to_itself(tmp_path: Path) -> None:
    # Spec §6.2 names the case ("a manifest may list itself"), so it is not refused.
    manifest = load_manifest(write(tmp_path, manifest_text(link("self-kb", KB_ID, path="."))))
    assert manifest.links[0].id == manifest.kb.id


def test_roots_are_normalised(tmp_path: Path) -> None:
    text = manifest_text(sources='[sources]\nroots = ["./docs/", "notes/../papers"]\n')
    assert load_manifest(write(tmp_path, text)).sources.roots == ("docs", "papers")


# -- the default template ----------------------------------------------------------------------


def test_default_template_loads_and_round_trips_the_defaults(tmp_path: Path) -> None:
    rendered = parse_manifest(render_manifest("archive", KB_ID, "fastembed"), path=tmp_path / "pinakes.toml")
    defaults = parse_manifest(MINIMAL, path=tmp_path / "pinakes.toml")
    assert rendered.kb.name == "archive"
    assert rendered.kb.id == KB_ID
    assert rendered.kb.template == TemplateCatalog().get("default").ref
    assert rendered.embedding == defaults.embedding
    # Every value the template writes is the loader's default, except the one it turns off:
    # no reranker weights ship offline yet.
    assert rendered.retrieval.rerank is False
    assert rendered.retrieval == _replace(defaults.retrieval, rerank=False)
    # ... and [sources] types: `pnk init` writes every type but image (OCR is opt-in), a manifest
    # without the line keeps the four a KB indexed before the document formats (no type switched on
    # by an upgrade).
    assert defaults.sources.types == DEFAULT_SOURCE_TYPES
    assert rendered.sources == _replace(defaults.sources, types=DEFAULT_SOURCE_TYPES + MARKDOWN_WRITTEN)
    for section in ("extraction", "chunking", "rerank", "budget", "deep", "links"):
        assert getattr(rendered, section) == getattr(defaults, section), section


def _replace(section: _Section, **changes: object) -> _Section:
    from dataclasses import replace

    return replace(section, **changes)


def test_default_template_ships_confidence_commented_out() -> None:
    text = render_manifest("archive", KB_ID, "sentence-transformers")
    assert "# [retrieval.confidence]" in text
    assert not re.search(r"^\[retrieval\.confidence\]", text, re.MULTILINE)


def test_rendered_name_is_escaped_as_a_toml_string(tmp_path: Path) -> None:
    name = 'Museo "Civico" \\ Ñandú 博物館'
    manifest = parse_manifest(render_manifest(name, KB_ID, "fastembed"), path=tmp_path / "pinakes.toml")
    assert manifest.kb.name == name


def test_every_key_is_documented() -> None:
    doc = (REPO_ROOT / "docs" / "MANIFEST.md").read_text(encoding="utf-8")
    for section, keys in SECTION_KEYS.items():
        header = "[[links.kb]]" if section == "links.kb" else f"[{section}]"
        assert header in doc, header
        for key in keys:
            assert f"`{key}`" in doc, f"{section}.{key}"


# -- source selection --------------------------------------------------------------------------


@pytest.mark.parametrize(("include", "exclude", "path", "selected"), [
    (DEFAULT_INCLUDE, (), "docs/a.md", True),
    (DEFAULT_INCLUDE, (), "docs/deep/er/Paper.PDF", True),  # extensions ignore case
    (DEFAULT_INCLUDE, (), "docs/a.gif", False),  # no source type: no extension of one
    (DEFAULT_INCLUDE, (), "elsewhere/a.md", False),  # outside every root
    (DEFAULT_INCLUDE, (), "docs/a.md.pnk.yaml", False),  # sidecars are never sources
    (DEFAULT_INCLUDE, (), "docs/.pinakes/a.md", False),  # nor is derived state
    (DEFAULT_INCLUDE, ("drafts/",), "docs/x/drafts/a.md", False),  # unanchored directory: any depth
    (DEFAULT_INCLUDE, ("drafts/",), "docs/x/drafts.md", True),  # ... and only a directory
    (DEFAULT_INCLUDE, ("/docs/private/",), "docs/private/a.md", False),  # anchored at the KB root
    (DEFAULT_INCLUDE, ("docs/*.md",), "docs/sub/a.md", True),  # `*` stays inside one component
    (DEFAULT_INCLUDE, ("docs/**/*.md",), "docs/sub/deeper/a.md", False),  # `**` crosses them
    (DEFAULT_INCLUDE, ("docs/**/*.md",), "docs/a.md", False),  # `**/` also matches zero directories
    (("*.md",), ("README.*",), "docs/README.md", False),
    (("*.md",), ("note-[0-9].md",), "docs/note-7.md", False),
    (("*.md",), ("note-[!0-9].md",), "docs/note-7.md", True),
    (("*.md",), ("note-?.md",), "docs/note-77.md", True),
    (("Makefile", "*.md"), (), "docs/sub/Makefile", True),  # a name, not a suffix, in include
    (("docs/sub/",), (), "docs/sub/deeper/a.txt", True),  # a whole directory included
    (("docs/sub/",), (), "docs/other/a.txt", False),
])
def test_selects_follows_gitignore_shaped_globs(include: tuple[str, ...], exclude: tuple[str, ...],
                                                path: str, selected: bool) -> None:
    sources = SourcesSection(roots=("docs",), include=include, exclude=exclude)
    assert sources.selects(path) is selected
    # The walk's form of the same question, asked of the file's directory once for all its files:
    directory, _, name = path.rpartition("/")
    assert SourcesSection(roots=("docs",), include=include, exclude=exclude).selector(directory)(path, name) is selected


def test_prunes_excluded_directories_only() -> None:
    sources = SourcesSection(roots=(".",), exclude=("node_modules/",))
    assert sources.prunes("docs/.pinakes")
    assert sources.prunes("src/node_modules")
    assert not sources.prunes("docs/notes")
    assert ALWAYS_EXCLUDED[0] in sources.effective_exclude


# -- doctor -------------------------------------------------------------------------------------


def doctor(root: Path) -> tuple[list[Check], DoctorContext]:
    ctx = DoctorContext(root)
    return list(checks_manifest.checks(ctx)), ctx


def test_doctor_on_a_valid_kb(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    write(tmp_path, MINIMAL)
    results, ctx = doctor(tmp_path)
    by_name = {check.name: check for check in results}
    assert by_name["manifest"].status == "OK"
    assert by_name["manifest.confidence"].status == "WARN"
    assert "self-calibration or the shipped prior" in by_name["manifest.confidence"].detail
    assert by_name["manifest.confidence"].remedy == "fit thresholds on this KB's golden set and write them: `pnk eval --fit-confidence --write`"
    assert by_name["manifest.sources"].status == "OK"
    assert isinstance(ctx.cache[checks_manifest.CACHE_KEY], Manifest)


def test_doctor_confidence_present_links_absolute_roots_missing(tmp_path: Path) -> None:
    text = manifest_text(
        '[retrieval.confidence]\nhigh = 0.8\nlow = 0.2\nfitted_for = "golden v1"\n'
        + link("partner", PARTNER_ID) + link("museum", THIRD_ID, path="/srv/kbs/museum"),
        sources='[sources]\nroots = ["docs", "papers"]\n',
    )
    (tmp_path / "docs").mkdir()
    write(tmp_path, text)
    results, _ = doctor(tmp_path)
    statuses = [(check.name, check.status) for check in results]
    assert statuses == [
        ("manifest", "OK"),
        ("manifest.confidence", "OK"),
        ("manifest.links", "WARN"),
        ("manifest.sources", "FAIL"),
    ]
    assert "'museum'" in results[2].detail and "/srv/kbs/museum" in results[2].detail
    assert "'papers'" in results[3].detail


def test_doctor_reports_each_manifest_problem(tmp_path: Path) -> None:
    write(tmp_path, manifest_text('[retrieval]\nfinal_k = 30\ngraph_channel = "ppr"\n'))
    results, ctx = doctor(tmp_path)
    assert [(check.name, check.status) for check in results] == [("manifest", "FAIL")] * 2
    details = sorted(check.detail for check in results)
    assert details[0].startswith("retrieval.final_k: final_k (30) is larger than fusion_top_k")
    assert details[1].startswith('retrieval.graph_channel: "ppr" is not built')
    assert all(check.remedy for check in results)
    assert checks_manifest.CACHE_KEY not in ctx.cache


def test_doctor_outside_a_kb_checks_nothing() -> None:
    assert list(checks_manifest.checks(DoctorContext(None))) == []
