"""`pnk init`: what it creates, what it refuses, and what it does to an existing .gitignore."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pinakes.init as init_module
from pinakes.cli import main
from pinakes.errors import EXIT_CONFIG, FilesystemError, UsageError
from pinakes.init import init_kb
from pinakes.manifest import load_manifest
from pinakes.template_catalog import TemplateCatalog

GITIGNORE_LINE = ".pinakes/"


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for a directory)."""
    return {
        str(path.relative_to(root)): (path.read_bytes() if path.is_file() else None)
        for path in sorted(root.rglob("*"))
    }


def test_init_creates_a_kb_that_loads(tmp_path: Path) -> None:
    root = tmp_path / "new" / "research"
    result = init_kb(root, name="Research notes")

    assert result.root == root.resolve()
    assert sorted(snapshot(root)) == [".gitignore", "README.md", "docs", "pinakes.toml"]
    assert (root / "docs").is_dir()
    assert GITIGNORE_LINE in (root / ".gitignore").read_text().splitlines()
    assert result.gitignore == "created"

    manifest = load_manifest(root / "pinakes.toml")
    assert manifest.kb.id == result.kb_id
    assert manifest.kb.name == result.name == "Research notes"
    assert manifest.kb.template == TemplateCatalog().get("default").ref == result.template
    assert manifest.sources.roots == ("docs",)
    assert manifest.embedding.provider == result.embedding_provider
    assert manifest.retrieval.confidence is None
    assert manifest.retrieval.rerank is False


def test_each_kb_gets_its_own_ulid_and_the_directory_name_by_default(tmp_path: Path) -> None:
    first = init_kb(tmp_path / "alpha", name=None)
    second = init_kb(tmp_path / "beta", name=None)
    assert (first.name, second.name) == ("alpha", "beta")
    assert first.kb_id != second.kb_id
    assert len(first.kb_id) == 26


def test_refuses_an_existing_kb_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "pinakes.toml").write_bytes(b'[kb]\nname = "mine"  # hand-edited\n')
    (root / ".gitignore").write_bytes(b"*.log")
    before = snapshot(root)

    with pytest.raises(UsageError, match="already a Pinakes KB") as excinfo:
        init_kb(root, name="other")

    assert excinfo.value.path == root / "pinakes.toml"
    # Byte-identical, and nothing added: no docs/, no .gitignore line, no temp file.
    assert snapshot(root) == before


def test_refuses_a_kb_inside_another_kb_naming_the_outer_one(tmp_path: Path) -> None:
    outer = init_kb(tmp_path / "outer", name="outer").root
    before = snapshot(outer)
    with pytest.raises(UsageError, match="inside this KB") as excinfo:
        init_kb(outer / "docs" / "inner", name="inner")
    assert excinfo.value.path == outer / "pinakes.toml"
    assert snapshot(outer) == before


def test_a_concurrent_init_that_wins_the_race_is_not_overwritten(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulate another init creating pinakes.toml between the refusal check and the write.
    root = tmp_path / "kb"
    root.mkdir()
    (root / "pinakes.toml").write_bytes(b"# the other init's manifest\n")

    def accept(root: Path) -> None:
        return None

    monkeypatch.setattr(init_module, "_refuse_unsuitable", accept)
    with pytest.raises(UsageError, match="already a Pinakes KB"):
        init_kb(root, name="late")
    assert (root / "pinakes.toml").read_bytes() == b"# the other init's manifest\n"
    assert [path.name for path in root.iterdir() if path.name.endswith(".tmp")] == []


def test_the_manifest_is_written_last(tmp_path: Path) -> None:
    # docs exists as a file: creating docs/ fails, and no manifest may be left behind, so a
    # re-run after fixing the problem is not refused as "already a KB".
    root = tmp_path / "kb"
    root.mkdir()
    (root / "docs").write_text("not a directory")
    with pytest.raises(FilesystemError):
        init_kb(root, name="kb")
    assert not (root / "pinakes.toml").exists()
    (root / "docs").unlink()
    assert init_kb(root, name="kb").name == "kb"


def test_refuses_a_file_as_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        init_kb(target, name="x")


@pytest.mark.parametrize("name", ["", "   ", "tab\there", "bell\x07"])
def test_refuses_an_unusable_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError):
        init_kb(tmp_path / "kb", name=name)
    assert not (tmp_path / "kb").exists()


# -- .gitignore ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("existing", "expected_prefix"), [
    (b"*.log\n", b"*.log\n\n"),  # a blank line separates our block from the user's lines
    (b"*.log", b"*.log\n\n"),  # a missing final newline is added before appending
    (b"", b""),
    (b"*.log\r\nbuild/\r\n", b"*.log\r\nbuild/\r\n\r\n"),  # CRLF files stay CRLF
])
def test_gitignore_is_appended_to_keeping_what_was_there(tmp_path: Path, existing: bytes,
                                                         expected_prefix: bytes) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / ".gitignore").write_bytes(existing)
    result = init_kb(root, name="kb")
    content = (root / ".gitignore").read_bytes()
    assert result.gitignore == "appended"
    assert content.startswith(expected_prefix)
    lines = content.decode().splitlines()
    assert lines.count(GITIGNORE_LINE) == 1
    if b"\r\n" in existing:
        assert content.count(b"\n") == content.count(b"\r\n")


@pytest.mark.parametrize("covering_line", [".pinakes/", ".pinakes", "/.pinakes/", "  /.pinakes  "])
def test_gitignore_already_covering_pinakes_is_left_byte_identical(tmp_path: Path, covering_line: str) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    original = f"node_modules/\n{covering_line}\n/pinakes.toml.*.bak\n*.pyc".encode()
    (root / ".gitignore").write_bytes(original)
    result = init_kb(root, name="kb")
    assert result.gitignore == "unchanged"
    assert (root / ".gitignore").read_bytes() == original


def test_gitignore_covering_pinakes_gains_only_the_backup_rule(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    original = b"node_modules/\n.pinakes/\n"
    (root / ".gitignore").write_bytes(original)
    assert init_kb(root, name="kb").gitignore == "appended"
    content = (root / ".gitignore").read_bytes()
    assert content.startswith(original + b"\n")
    lines = content.decode().splitlines()
    assert lines.count(".pinakes/") == 1 and lines.count("pinakes.toml.*.bak") == 1


def test_the_gitignore_init_writes_keeps_manifest_backups_out_of_git(tmp_path: Path) -> None:
    import shutil
    import subprocess

    root = init_kb(tmp_path / "kb", name="kb").root
    if shutil.which("git") is None:
        pytest.skip("git is not installed: cannot ask git what the .gitignore ignores")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name in ("pinakes.toml.default@1.bak", "pinakes.toml.default@1.2.bak", ".pinakes/index.db"):
        assert subprocess.run(["git", "-C", str(root), "check-ignore", "-q", name]).returncode == 0, name
    assert subprocess.run(["git", "-C", str(root), "check-ignore", "-q", "pinakes.toml"]).returncode == 1


def test_init_copies_the_templates_readme_and_keeps_one_already_there(tmp_path: Path) -> None:
    fresh = init_kb(tmp_path / "fresh", name="fresh", template="notes")
    assert fresh.readme == "created"
    assert (fresh.root / "README.md").read_text(encoding="utf-8") == TemplateCatalog().readme("notes")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_bytes(b"# My repository\n")
    assert init_kb(mine, name="mine").readme == "kept"
    assert (mine / "README.md").read_bytes() == b"# My repository\n"


def test_gitignore_with_other_encodings_keeps_its_bytes(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    original = b"caf\xe9/\n"  # Latin-1: not UTF-8, and must survive untouched
    (root / ".gitignore").write_bytes(original)
    init_kb(root, name="kb")
    assert (root / ".gitignore").read_bytes().startswith(original)


# -- the embedding provider ---------------------------------------------------------------------


@pytest.mark.parametrize(("installed", "provider", "is_installed"), [
    ({"sentence_transformers", "fastembed"}, "fastembed", True),
    ({"fastembed"}, "fastembed", True),
    ({"sentence_transformers"}, "sentence-transformers", True),
    (set[str](), "fastembed", False),
])
def test_provider_follows_what_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            installed: set[str], provider: str, is_installed: bool) -> None:

    def find_spec(name: str) -> object | None:
        return object() if name in installed else None

    monkeypatch.setattr(init_module, "find_spec", find_spec)
    result = init_kb(tmp_path / "kb", name="kb")
    assert (result.embedding_provider, result.embedding_provider_installed) == (provider, is_installed)
    manifest = load_manifest(result.root / "pinakes.toml")
    assert manifest.embedding.provider == manifest.rerank.provider == provider


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_init_exits_zero_and_says_what_it_made(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "kb"
    assert main(["init", str(target), "--name", "x"]) == 0
    out = capsys.readouterr().out
    kb_id = load_manifest(target / "pinakes.toml").kb.id
    assert f"created KB 'x' ({kb_id}) in {target.resolve()}" in out
    assert "pnk sync" in out


def test_cli_init_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "kb"
    assert main(["init", str(target), "--name", "x", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is True
    assert payload["root"] == str(target.resolve())
    assert payload["id"] == load_manifest(target / "pinakes.toml").kb.id
    assert payload["gitignore"] == "created"


def test_cli_refusal_exits_nonzero_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "kb"
    assert main(["init", str(target), "--name", "x"]) == 0
    capsys.readouterr()
    before = (target / "pinakes.toml").read_bytes()

    assert main(["init", str(target), "--name", "y"]) == EXIT_CONFIG
    captured = capsys.readouterr()
    assert "pnk: error:" in captured.err
    assert "already a Pinakes KB" in captured.err
    assert "remedy:" in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert (target / "pinakes.toml").read_bytes() == before

    assert main(["init", str(target), "--json"]) == EXIT_CONFIG
    payload = json.loads(capsys.readouterr().out)
    assert payload["ok"] is False and payload["error"] == "UsageError"
