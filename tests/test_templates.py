"""Templates (spec §6.1, §7): what each one ships, that its manifest loads strictly, that the archive
freezes every released version, and that a KB stamped from each one syncs and searches."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.errors import EXIT_CONFIG
from pinakes.manifest import load_manifest, parse_manifest
from pinakes.manifest.lines import layout
from pinakes.template_catalog import (
    ARCHIVE_DIR,
    RenderValues,
    TemplateCatalog,
    archive_problems,
    freeze,
    render,
)
from pinakes.upgrade.changes import flatten
from tests.conftest import REPO_ROOT
from tests.fakes import FakeEmbedder, substitute_embedder
from tests.test_extract_text import make_pdf

SHIPPED = ("code-docs", "default", "notes", "research-papers")
KB_ID = "01J9Z8Y7X6W5V4T3S2R1Q0P9N8"
CATALOG = TemplateCatalog()


def rendered(name: str, provider: str = "fastembed") -> str:
    return render(CATALOG.manifest_source(name), RenderValues("t", KB_ID, provider), CATALOG.get(name).ref)


def test_the_four_templates_ship() -> None:
    assert set(SHIPPED) <= set(CATALOG.names())


@pytest.mark.parametrize("name", SHIPPED)
def test_a_template_declares_itself_and_ships_no_golden_set(name: str) -> None:
    directory = REPO_ROOT / "templates" / name
    meta = tomllib.loads((directory / "template.toml").read_text(encoding="utf-8"))
    assert meta["name"] == name
    assert re.fullmatch(r"\d+(\.\d+)*", meta["version"])
    assert meta["description"]
    assert (directory / "README.md").is_file() and (directory / "prompts").is_dir()
    # spec §7: a template scaffolds an empty docs/, so a question it shipped would name nothing
    assert not (directory / "eval").exists()
    assert not list(directory.rglob("questions.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("provider", ["fastembed", "sentence-transformers"])
def test_every_template_manifest_loads_under_the_strict_rules(name: str, provider: str, tmp_path: Path) -> None:
    text = rendered(name, provider)
    manifest = parse_manifest(text, path=tmp_path / "pinakes.toml")
    assert manifest.kb.template == CATALOG.get(name).ref
    assert manifest.embedding.provider == provider
    assert manifest.extraction.backend == "pypdfium2"  # free by default; paid is a deliberate run
    # Every key sits on a line the upgrade can place (otherwise a later version could not be applied).
    placed = set(layout(text).keys)
    assert set(flatten(tomllib.loads(text))) <= placed


# `key = "value"   # or "other": ...`: a comment offering the alternative value of a string key.
_OFFERED_ALTERNATIVE = re.compile(r'(?m)^(?P<key>\w+) = "(?P<value>[^"]*)"\s+# or "(?P<other>[^"]+)"')


@pytest.mark.parametrize("name", SHIPPED)
def test_every_alternative_a_template_comment_offers_loads(name: str, tmp_path: Path) -> None:
    # A comment that names a value the loader refuses misleads exactly the reader who acts on it.
    text = rendered(name)
    offers = list(_OFFERED_ALTERNATIVE.finditer(text))
    assert {match["key"] for match in offers} >= {"graph_channel", "on_exceed"}
    for match in offers:
        edited = text.replace(match.group(0), match.group(0).replace(f'"{match["value"]}"', f'"{match["other"]}"', 1))
        parse_manifest(edited, path=tmp_path / "pinakes.toml")


def test_the_templates_differ_where_their_readmes_say() -> None:
    manifests = {name: parse_manifest(rendered(name), path=Path("/kb/pinakes.toml")) for name in SHIPPED}
    assert manifests["research-papers"].sources.selects("docs/paper.pdf")
    assert manifests["research-papers"].retrieval.final_k > manifests["default"].retrieval.final_k
    assert not manifests["notes"].sources.selects("docs/paper.pdf")
    assert not manifests["notes"].sources.selects("docs/drafts/idea.md")
    assert manifests["notes"].chunking.max_tokens < manifests["default"].chunking.max_tokens
    assert manifests["code-docs"].sources.selects("docs/api.rst")
    assert manifests["code-docs"].sources.selects("docs/pkg/module.py")
    assert not manifests["code-docs"].sources.selects("docs/_build/html/index.md")


# --- the archive ----------------------------------------------------------------------------------


def test_the_archive_freezes_every_shipped_version() -> None:
    assert archive_problems(CATALOG) == []
    for name in SHIPPED:
        info = CATALOG.get(name)
        assert CATALOG.archived_manifest_source(name, info.version) == CATALOG.manifest_source(name)
        # The installed version is the newest released one, and the first release is never dropped:
        # a KB stamped from it must stay comparable (`pnk upgrade`).
        assert CATALOG.archived_versions(name)[-1] == info.version
        assert CATALOG.archived_versions(name)[0] == "1"


@pytest.fixture
def templates_copy(tmp_path: Path) -> Path:
    root = tmp_path / "templates"
    shutil.copytree(REPO_ROOT / "templates", root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def set_version(root: Path, name: str, version: str) -> None:
    """Rewrite template `name`'s `version` under `root` (whatever it is now) to `version`."""
    meta = root / name / "template.toml"
    text, count = re.subn(r'(?m)^version = "[^"]*"$', f'version = "{version}"', meta.read_text(encoding="utf-8"))
    assert count == 1
    meta.write_text(text, encoding="utf-8")


def next_version(version: str) -> str:
    """The release after `version`: its first part plus one ("2" after "1", "3" after "2.4")."""
    return str(int(version.split(".")[0]) + 1)


def test_a_template_changed_without_a_version_bump_fails(templates_copy: Path) -> None:
    manifest = templates_copy / "research-papers" / "pinakes.toml"
    manifest.write_text(manifest.read_text().replace("final_k = 10", "final_k = 12"))
    problems = archive_problems(TemplateCatalog(templates_copy))
    assert problems == [f"{CATALOG.get('research-papers').ref}: pinakes.toml differs from its archived copy: "
                        "a released version is frozen, so bump the version and freeze it"]


def test_a_bump_without_an_archived_copy_fails_until_it_is_frozen(templates_copy: Path) -> None:
    released = CATALOG.archived_versions("notes")
    bumped = next_version(CATALOG.get("notes").version)
    set_version(templates_copy, "notes", bumped)
    catalog = TemplateCatalog(templates_copy)
    assert archive_problems(catalog) == [f"notes@{bumped} has no archived copy: freeze it (templates/README.md)"]
    freeze(templates_copy, "notes")
    assert archive_problems(catalog) == []
    assert catalog.archived_versions("notes") == [*released, bumped]


def test_editing_an_archived_version_fails(templates_copy: Path) -> None:
    archived = templates_copy / ARCHIVE_DIR / "default" / "1" / "prompts" / "synthesis.md"
    archived.write_text(archived.read_text() + "\nBe brief.\n")
    problems = archive_problems(TemplateCatalog(templates_copy))
    assert "archive/default/1/prompts/synthesis.md no longer matches its digest: an archived version was edited" \
        in problems


def test_freeze_refuses_to_change_a_released_version(templates_copy: Path) -> None:
    prompt = templates_copy / "notes" / "prompts" / "synthesis.md"
    prompt.write_text("Answer.\n")
    with pytest.raises(Exception, match="already archived with other content"):
        freeze(templates_copy, "notes")


# --- pnk init --template --------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_init_with_a_template_records_name_at_version(name: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "kb"), "--template", name, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = CATALOG.get(name).ref
    assert out["template"] == ref
    manifest = load_manifest(tmp_path / "kb" / "pinakes.toml")
    assert manifest.kb.template == ref
    assert sorted(p.name for p in (tmp_path / "kb").iterdir()) == [".gitignore", "README.md", "docs", "pinakes.toml"]
    assert (tmp_path / "kb" / "README.md").read_text(encoding="utf-8") == CATALOG.readme(name)
    assert list((tmp_path / "kb" / "docs").iterdir()) == []


def test_list_templates_names_each_with_its_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "kb"), "--list-templates"]) == 0
    out = capsys.readouterr().out
    for name in SHIPPED:
        assert CATALOG.get(name).ref in out
    assert not (tmp_path / "kb").exists()  # listing creates nothing


def test_an_unknown_template_is_refused_before_anything_is_created(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "kb"), "--template", "nonesuch"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "no template named 'nonesuch'" in err and "research-papers" in err
    assert not (tmp_path / "kb").exists()


# --- a KB from each template syncs and searches --------------------------------------------------

DOCUMENTS = {
    "default": {"docs/guide.md": "# Guide\n\nThe lighthouse keeper logs every storm in the ledger.\n"},
    "notes": {"docs/wiki/storms.md": "# Storms\n\nThe lighthouse keeper logs every storm in the ledger.\n",
              "docs/drafts/unfinished.md": "# Draft\n\nThe lighthouse keeper draft.\n"},
    "research-papers": {"docs/notes.md": "# Reading notes\n\nA survey of tidal energy.\n"},
    "code-docs": {"docs/api.rst": "Ledger API\n==========\n\nThe lighthouse keeper logs every storm.\n",
                  "docs/ledger.py": "def log_storm(ledger):\n    # the lighthouse keeper logs every storm\n"
                                    "    ledger.append('storm')\n"},
}
PDF_TEXT = ["1. Introduction", "The lighthouse keeper logs every storm in the ledger."]


@pytest.mark.parametrize("name", SHIPPED)
def test_a_kb_from_each_template_syncs_and_searches(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = tmp_path / "kb"
    assert main(["init", str(root), "--template", name]) == 0
    for relpath, text in DOCUMENTS[name].items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(text, encoding="utf-8")
    expect_pdf = name == "research-papers"
    if expect_pdf:
        pytest.importorskip("pypdfium2", reason="the [pdf] extra (pypdfium2) is not installed")
        (root / "docs/paper.pdf").write_bytes(make_pdf([PDF_TEXT]))
    capsys.readouterr()

    assert main(["-C", str(root), "sync", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    indexed = set(report["added"])
    assert "docs/drafts/unfinished.md" not in indexed  # the notes template leaves drafts out
    assert main(["-C", str(root), "search", "lighthouse keeper storm", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)["passages"]
    assert hits, f"{name}: no result"
    paths = {hit["path"] for hit in hits}
    if expect_pdf:
        assert "docs/paper.pdf" in paths
        pdf_hit = next(hit for hit in hits if hit["path"] == "docs/paper.pdf")
        assert pdf_hit["page_start"] == 1  # passages from a PDF are cited with their pages
    else:
        assert paths <= indexed
