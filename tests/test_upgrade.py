"""`pnk upgrade` (spec §6.1, §2.1): the template diff between the recorded and the installed version,
both rendered from the archive; a user's tuning never reported as a template change; `--apply`
all-or-nothing, backed up, and a moved budget cap confirmed on its own."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

import pinakes.upgrade.plan as plan_module
from pinakes.cli import main
from pinakes.errors import EXIT_FAILURE, EXIT_UNAVAILABLE
from pinakes.init import init_kb
from pinakes.manifest import load_manifest
from pinakes.manifest.lines import layout
from pinakes.template_catalog import RenderValues, TemplateCatalog, freeze, render
from pinakes.upgrade import plan_upgrade
from pinakes.upgrade.changes import flatten
from pinakes.upgrade.report import render_plan
from tests.conftest import REPO_ROOT
from tests.test_templates import SHIPPED, next_version

TEMPLATE = "research-papers"
# The installed version (what a new KB records) and the fixture's release after it: derived, so a
# real template release does not have to edit these tests.
RECORDED = TemplateCatalog().get(TEMPLATE).ref
NEXT = f"{TEMPLATE}@{next_version(TemplateCatalog().get(TEMPLATE).version)}"
# What the fixture's next release changes, as (old text, new text) in its pinakes.toml.
V2_EDITS = [
    ("final_k = 10 ", "final_k = 12 "),  # changed
    ("overlap = 40 ", "overlap = 48 "),  # changed
    ("# batch_size = 32\n", "batch_size = 16\n"),  # added (was only a comment)
    ("adjacent_k = 5\n", ""),  # removed
    ("# Connected KBs:", "# Other KBs this one links to:"),  # a comment: never a change
]
V2_CHANGED = {("retrieval", "final_k"), ("chunking", "overlap"), ("embedding", "batch_size"),
              ("retrieval", "adjacent_k")}


def bump(root: Path, name: str, edits: list[tuple[str, str]], version: str | None = None) -> TemplateCatalog:
    """Release `version` (default: the one after the installed one) of template `name` under `root`
    with `edits` applied, frozen in the archive."""
    version = version or next_version(TemplateCatalog(root).get(name).version)
    manifest = root / name / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    manifest.write_text(text, encoding="utf-8")
    meta = root / name / "template.toml"
    meta_text, count = re.subn(r'(?m)^version = "[^"]*"$', f'version = "{version}"', meta.read_text())
    assert count == 1
    meta.write_text(meta_text)
    freeze(root, name)
    return TemplateCatalog(root)


@pytest.fixture
def templates(tmp_path: Path) -> Path:
    root = tmp_path / "templates"
    shutil.copytree(REPO_ROOT / "templates", root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return init_kb(tmp_path / "kb", name="papers", template=TEMPLATE).root


@pytest.fixture
def v2(templates: Path, monkeypatch: pytest.MonkeyPatch) -> TemplateCatalog:
    """The fixture's next research-papers release installed (the CLI sees it too)."""
    catalog = bump(templates, TEMPLATE, V2_EDITS)
    monkeypatch.setattr(plan_module, "TemplateCatalog", lambda: catalog)
    return catalog


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def changed_keys(out: str) -> set[tuple[str, str]]:
    """The keys a printed report names in its hunk headers, [kb] template aside."""
    found: set[tuple[str, str]] = set()
    for line in out.splitlines():
        if line.startswith("@@ [") and not line.startswith("@@ [kb] template"):
            section, key = line[4:].split(" @@")[0].split("] ")
            found.add((section, key))
    return found


def test_an_unchanged_kb_prints_no_change_and_touches_nothing(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (kb / "pinakes.toml").read_bytes()
    assert main(["-C", str(kb), "upgrade"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no change")
    assert main(["-C", str(kb), "upgrade", "--apply"]) == 0
    assert (kb / "pinakes.toml").read_bytes() == before
    assert sorted(p.name for p in kb.iterdir()) == [".gitignore", "README.md", "docs", "pinakes.toml"]


def test_a_version_bump_prints_exactly_the_changed_keys(kb: Path, v2: TemplateCatalog,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    before = (kb / "pinakes.toml").read_bytes()
    assert main(["-C", str(kb), "upgrade"]) == 0
    out = capsys.readouterr().out
    assert changed_keys(out) == V2_CHANGED
    assert f"{RECORDED} (recorded) -> {NEXT} (installed)" in out
    assert "-final_k = 10 " in out and "+final_k = 12 " in out  # the user's line, its comment kept
    assert "Budget caps" not in out  # the heading appears exactly when a cap would move
    assert "migration" not in out.lower()
    assert (kb / "pinakes.toml").read_bytes() == before  # a report changes nothing

    assert main(["-C", str(kb), "upgrade", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {(c["section"], c["key"]) for c in data["changes"]} == V2_CHANGED
    assert {c["kind"] for c in data["changes"]} == {"changed", "added", "removed"}
    assert data["applicable"] is True and data["conflicts"] == 0


def test_a_value_the_user_tuned_is_not_a_template_change(kb: Path, v2: TemplateCatalog,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    manifest = kb / "pinakes.toml"
    edit(manifest, "rrf_k = 60\n", "rrf_k = 70  # tuned on our golden set\n")
    edit(manifest, 'name = "papers"', 'name = "Papers, renamed"')
    assert main(["-C", str(kb), "upgrade"]) == 0
    out = capsys.readouterr().out
    assert changed_keys(out) == V2_CHANGED
    assert "rrf_k" not in out and "renamed" not in out

    assert main(["-C", str(kb), "upgrade", "--apply"]) == 0
    text = manifest.read_text(encoding="utf-8")
    assert "rrf_k = 70  # tuned on our golden set\n" in text
    assert load_manifest(manifest).kb.name == "Papers, renamed"


def test_apply_writes_the_printed_change_and_nothing_else(kb: Path, v2: TemplateCatalog,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    manifest = kb / "pinakes.toml"
    edit(manifest, "[deep]\n", "[deep]\n# our own note, kept\n")
    original = manifest.read_bytes()
    assert main(["-C", str(kb), "upgrade", "--apply"]) == 0
    out = capsys.readouterr().out
    assert changed_keys(out) == V2_CHANGED  # the whole change is printed before it is written

    after = load_manifest(manifest)
    assert after.kb.template == NEXT
    assert (after.retrieval.final_k, after.chunking.overlap, after.embedding.batch_size) == (12, 48, 16)
    data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    assert "adjacent_k" not in data["retrieval"]
    assert "# our own note, kept\n" in manifest.read_text(encoding="utf-8")
    assert "# Connected KBs:" in manifest.read_text(encoding="utf-8")  # comments are not template changes
    backup = kb / f"pinakes.toml.{RECORDED}.bak"
    assert backup.read_bytes() == original
    # Every line not named by a hunk is byte-identical.
    old_lines = original.decode().splitlines()
    new_lines = manifest.read_text(encoding="utf-8").splitlines()
    touched = ("final_k =", "overlap =", "batch_size =", "adjacent_k =", "template =")
    assert [line for line in old_lines if not line.startswith(touched)] == \
        [line for line in new_lines if not line.startswith(touched)]

    assert main(["-C", str(kb), "upgrade"]) == 0
    assert capsys.readouterr().out.startswith("no change")


def test_apply_refuses_a_hunk_that_does_not_fit_and_leaves_the_file_byte_identical(
        kb: Path, v2: TemplateCatalog, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = kb / "pinakes.toml"
    edit(manifest, "final_k = 10 ", "final_k = 15 ")  # tuned, and the template changes it too
    before = manifest.read_bytes()
    assert main(["-C", str(kb), "upgrade"]) == 0
    out = capsys.readouterr().out
    assert "@@ [retrieval] final_k @@ does not apply: you set it yourself (yours: 15; 10 -> 12" in out
    assert main(["-C", str(kb), "upgrade", "--apply"]) == EXIT_FAILURE
    err = capsys.readouterr().err
    assert "do not apply" in err and "[retrieval] final_k" in err and "Traceback" not in err
    assert manifest.read_bytes() == before
    assert sorted(p.name for p in kb.iterdir()) == [".gitignore", "README.md", "docs", "pinakes.toml"]  # no backup


@pytest.mark.parametrize("user_edit, reason", [
    (("# batch_size = 32\n", "batch_size = 64\n"), "you set it yourself"),  # an added key the user set
    (("adjacent_k = 5\n", "adjacent_k = 3\n"), "would drop your value"),  # a removed key the user tuned
    (("overlap = 40 ", "# overlap = 40 "), "you removed it"),  # a changed key the user deleted
])
def test_every_kind_of_change_refuses_over_a_user_choice(kb: Path, v2: TemplateCatalog, user_edit: tuple[str, str],
                                                          reason: str) -> None:
    manifest = kb / "pinakes.toml"
    edit(manifest, *user_edit)
    before = manifest.read_bytes()
    plan = plan_upgrade(kb)
    assert [h.reason for h in plan.conflicts] and reason in plan.conflicts[0].reason
    assert main(["-C", str(kb), "upgrade", "--apply"]) == EXIT_FAILURE
    assert manifest.read_bytes() == before


def test_a_key_already_at_the_new_value_is_already_applied(kb: Path, v2: TemplateCatalog) -> None:
    edit(kb / "pinakes.toml", "final_k = 10 ", "final_k = 12 ")
    plan = plan_upgrade(kb)
    statuses = {(h.change.section, h.change.key): h.status for h in plan.hunks}
    assert statuses[("retrieval", "final_k")] == "already"
    assert plan.applicable
    assert main(["-C", str(kb), "upgrade", "--apply"]) == 0
    assert load_manifest(kb / "pinakes.toml").retrieval.final_k == 12


def test_a_moved_budget_cap_is_its_own_heading_and_needs_confirming(
        kb: Path, templates: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    catalog = bump(templates, TEMPLATE, [('daily_eur = "5.00"', 'daily_eur = "8.00"'),
                                         ("final_k = 10 ", "final_k = 12 ")])
    monkeypatch.setattr(plan_module, "TemplateCatalog", lambda: catalog)
    manifest = kb / "pinakes.toml"
    before = manifest.read_bytes()
    assert main(["-C", str(kb), "upgrade"]) == 0
    out = capsys.readouterr().out
    assert 'Budget caps: this upgrade moves spending limits' in out
    assert '[budget] daily_eur: "5.00" -> "8.00"' in out

    # No terminal to answer on (pytest's stdin): refused whole, the unrelated hunk included.
    assert main(["-C", str(kb), "upgrade", "--apply"]) == EXIT_FAILURE
    assert "budget caps" in capsys.readouterr().err
    assert manifest.read_bytes() == before

    assert main(["-C", str(kb), "upgrade", "--apply", "--yes"]) == 0
    after = load_manifest(manifest)
    assert str(after.budget.daily_eur) == "8.00" and after.retrieval.final_k == 12


def test_a_user_cap_the_template_does_not_move_prints_no_budget_heading(kb: Path, v2: TemplateCatalog) -> None:
    edit(kb / "pinakes.toml", 'monthly_eur = "20.00"', 'monthly_eur = "50.00"')
    plan = plan_upgrade(kb)
    assert not plan.budget_moves
    assert "Budget caps" not in render_plan(plan)


def test_a_version_never_archived_cannot_be_compared(kb: Path, templates: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    skipped = NEXT.partition("@")[2]  # a version released from somewhere else, never archived here
    catalog = bump(templates, TEMPLATE, [("final_k = 10 ", "final_k = 12 ")], version=next_version(skipped))
    monkeypatch.setattr(plan_module, "TemplateCatalog", lambda: catalog)
    manifest = kb / "pinakes.toml"
    edit(manifest, f'"{RECORDED}"', f'"{NEXT}"')  # a version whose content is unknown
    before = manifest.read_bytes()
    assert main(["-C", str(kb), "upgrade"]) == EXIT_UNAVAILABLE  # no diff is no report (issue #26)
    err = capsys.readouterr().err
    assert f"cannot compare: {NEXT} was never archived" in err and "remedy:" in err
    assert "final_k" not in err  # nothing is diffed from a reconstruction
    assert main(["-C", str(kb), "upgrade", "--apply"]) == EXIT_UNAVAILABLE
    assert manifest.read_bytes() == before


@pytest.mark.parametrize("recorded, fragment", [
    (NEXT, f"newer than the installed {RECORDED}"),
    ("lab-notebook@1", "no template named 'lab-notebook' is installed"),
])
def test_other_references_cannot_be_compared(kb: Path, recorded: str, fragment: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    edit(kb / "pinakes.toml", f'"{RECORDED}"', f'"{recorded}"')
    assert main(["-C", str(kb), "upgrade"]) == EXIT_UNAVAILABLE
    assert fragment in capsys.readouterr().err


def test_crlf_line_endings_survive_an_apply(kb: Path, v2: TemplateCatalog) -> None:
    manifest = kb / "pinakes.toml"
    manifest.write_bytes(manifest.read_bytes().replace(b"\n", b"\r\n"))
    assert main(["-C", str(kb), "upgrade", "--apply"]) == 0
    data = manifest.read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n")
    assert load_manifest(manifest).embedding.batch_size == 16


def test_a_manifest_edited_after_the_report_is_not_overwritten(kb: Path, v2: TemplateCatalog) -> None:
    from pinakes.errors import UpgradeRefusedError
    from pinakes.upgrade import apply_upgrade

    plan = plan_upgrade(kb)
    edit(kb / "pinakes.toml", "rrf_k = 60", "rrf_k = 61")
    before = (kb / "pinakes.toml").read_bytes()
    with pytest.raises(UpgradeRefusedError, match="changed since"):
        apply_upgrade(plan, budget_confirmed=True)
    assert (kb / "pinakes.toml").read_bytes() == before


# --- a real release: a KB stamped from the first archived version, upgraded to the installed one ----

FIRST = "1"  # every KB made before the first template edit records NAME@1


def stamp_from_archive(directory: Path, name: str, version: str) -> Path:
    """A KB as `pnk init --template NAME` made it when `NAME@version` was the installed version: its
    manifest rendered from that version's archived text, for the KB's own name, id and provider."""
    made = init_kb(directory, name="papers", template=name)
    source = TemplateCatalog().archived_manifest_source(name, version)
    assert source is not None, f"{name}@{version} is not archived"
    text = render(source, RenderValues(made.name, made.kb_id, made.embedding_provider), f"{name}@{version}")
    (made.root / "pinakes.toml").write_text(text, encoding="utf-8")
    return made.root


def lines_outside(text: str, keys: set[tuple[str, str]]) -> list[str]:
    """`text`'s lines, less those of the `keys` it sets."""
    file = layout(text)
    named = {index for address, span in file.keys.items() if address in keys for index in range(span.start, span.end)}
    return [line for index, line in enumerate(file.lines) if index not in named]


@pytest.mark.parametrize("name", SHIPPED)
def test_a_kb_from_the_first_release_upgrades_to_the_installed_one_keeping_the_users_edits(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog = TemplateCatalog()  # the real, installed templates and archive: no fixture release
    installed = catalog.get(name).ref
    assert f"{name}@{FIRST}" != installed, "the installed version is still the first: nothing to upgrade"
    kb = stamp_from_archive(tmp_path / "kb", name, FIRST)
    manifest = kb / "pinakes.toml"
    assert "# the only channel built" in manifest.read_text(encoding="utf-8")  # what @1 said
    # The user's own edits: a tuned value with its own comment, a renamed KB, a note of their own.
    edit(manifest, "rrf_k = 60\n", "rrf_k = 70  # tuned on our golden set\n")
    edit(manifest, 'name = "papers"', 'name = "Papers, renamed"')
    edit(manifest, "[deep]\n", "[deep]\n# our own note, kept\n")
    original = manifest.read_bytes()

    assert main(["-C", str(kb), "upgrade", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["recorded"], report["installed"]) == (f"{name}@{FIRST}", installed)
    assert report["applicable"] is True and report["conflicts"] == 0
    assert main(["-C", str(kb), "upgrade"]) == 0
    assert f"{name}@{FIRST} (recorded) -> {installed} (installed)" in capsys.readouterr().out
    assert manifest.read_bytes() == original  # a report changes nothing

    assert main(["-C", str(kb), "upgrade", "--apply"]) == 0
    capsys.readouterr()
    upgraded = manifest.read_text(encoding="utf-8")
    after = load_manifest(manifest)
    assert after.kb.template == installed
    assert (kb / f"pinakes.toml.{name}@{FIRST}.bak").read_bytes() == original
    # Every value is the installed template's, except the ones the user chose.
    expected = flatten(tomllib.loads(render(catalog.manifest_source(name), RenderValues(
        "Papers, renamed", after.kb.id, after.embedding.provider), installed)))
    expected["retrieval", "rrf_k"] = 70
    assert flatten(tomllib.loads(upgraded)) == expected
    # Every line no hunk names is the user's own, byte for byte and in order: their note, their
    # tuning comment, and the template's comments as @1 wrote them (comments are not keys,
    # docs/GUIDE.md: the reworded graph_channel comment reaches KBs stamped now, not this one).
    touched = {(hunk["section"], hunk["key"]) for hunk in report["changes"]} | {("kb", "template")}
    assert lines_outside(original.decode(), touched) == lines_outside(upgraded, touched)
    assert "rrf_k = 70  # tuned on our golden set\n" in upgraded and "# our own note, kept\n" in upgraded
    assert "# the only channel built" in upgraded

    assert main(["-C", str(kb), "upgrade"]) == 0
    assert capsys.readouterr().out.startswith("no change")


def test_upgrading_is_never_called_a_migration() -> None:
    sources = [*(REPO_ROOT / "src/pinakes/upgrade").glob("*.py"), REPO_ROOT / "src/pinakes/cli/cmd_upgrade.py",
               REPO_ROOT / "src/pinakes/template_catalog.py", REPO_ROOT / "templates/README.md"]
    for path in sources:
        text = path.read_text(encoding="utf-8").lower()
        # the package docstring says it is not one; nothing else may use the word
        assert text.count("migration") == (1 if path.name == "__init__.py" else 0), path


def test_keys_under_a_header_the_reader_cannot_name_are_never_misfiled() -> None:
    from pinakes.manifest.lines import layout

    text = '[retrieval]\nfinal_k = 8\n["odd name"]\nfinal_k = 9\n[chunking]\noverlap = 25  # kept\n'
    keys = layout(text).keys
    assert keys[("retrieval", "final_k")].value == "8"  # not the 9 under the quoted header
    assert keys[("chunking", "overlap")].suffix == "  # kept\n"


def test_a_multi_line_value_is_one_span() -> None:
    from pinakes.manifest.lines import layout

    text = '[sources]\ninclude = [\n  "*.md",  # notes\n  "*.pdf",\n]  # both\nexclude = ["a/"]\n'
    span = layout(text).keys[("sources", "include")]
    assert (span.start, span.end) == (1, 5)
    assert span.value == '[\n  "*.md",  # notes\n  "*.pdf",\n]' and span.suffix == "  # both\n"
    assert layout(text).keys[("sources", "exclude")].start == 5


def test_a_kb_made_before_its_gitignore_named_the_backups_gets_the_rule_with_its_first_backup(
        kb: Path, v2: TemplateCatalog) -> None:
    """Issue #26: `pnk upgrade --apply` left `pinakes.toml.<template>.bak`, which git then offered to
    commit. The KB's own .gitignore (here as `pnk init` wrote it before the rule) is given the rule."""
    gitignore = kb / ".gitignore"
    gitignore.write_text("*.log\n.pinakes/\n", encoding="utf-8")
    assert main(["-C", str(kb), "upgrade", "--apply"]) == 0
    assert (kb / f"pinakes.toml.{RECORDED}.bak").is_file()
    text = gitignore.read_text(encoding="utf-8")
    assert text.startswith("*.log\n.pinakes/\n") and text.splitlines().count("pinakes.toml.*.bak") == 1
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the rule is written, git's reading of it is not checked")
    import subprocess

    subprocess.run(["git", "init", "-q", str(kb)], check=True)
    ignored = subprocess.run(["git", "-C", str(kb), "check-ignore", "-q", f"pinakes.toml.{RECORDED}.bak"])
    assert ignored.returncode == 0
