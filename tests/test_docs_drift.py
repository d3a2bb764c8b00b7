"""The docs the code is the truth for (docs/generate.py): they match the code, and drift is caught.

A flag, command, manifest key or MCP argument planted in the code must fail the check and be named
in its output; the terminal's width must not change what is generated.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import cast

import pytest

from pinakes.cli import build_parser
from pinakes.errors import PinakesError
from pinakes.serve.specs import TOOL_SPECS

REPO_ROOT = Path(__file__).resolve().parent.parent
GENERATOR = REPO_ROOT / "docs" / "generate.py"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pinakes_docs_generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _load_generator()


def _pages() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in (REPO_ROOT / "docs").glob("*.md")}


def test_the_committed_docs_match_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "23")  # argparse wraps help by COLUMNS; the generator must not
    stale = generate.check()
    assert not stale, "docs drifted from the code; run `python docs/generate.py`:\n" + "\n".join(stale)


def test_the_check_passes_from_the_command_line_at_any_width() -> None:
    for columns in ("30", "400"):
        env = {**os.environ, "COLUMNS": columns}
        result = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True,
                                env=env, cwd=REPO_ROOT, timeout=120)
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", list(generate.commands(build_parser())))
def test_a_planted_flag_fails_the_check_and_is_named(command: str) -> None:
    before = _pages()
    parser = build_parser()
    subparser = generate.commands(parser)[command][0]
    subparser.add_argument("--planted-flag", metavar="SEED", help="planted by the drift test")

    stale = generate.check(parser=parser)

    assert stale
    report = "\n".join(stale)
    assert re.search(r"^\+\| `--planted-flag` \| `SEED` \|.*planted by the drift test", report, re.M), report
    assert re.search(rf"^\+pnk {re.escape(command)} .*\[--planted-flag SEED\]", report, re.M), report
    assert _pages() == before  # --check writes nothing


def test_a_command_the_docs_lack_gets_a_section() -> None:
    parser = build_parser()
    subparsers = generate._subparsers(parser)
    planted = subparsers.add_parser("planted", help="planted by the drift test",
                                    description="A command the docs have never heard of.")
    planted.add_argument("--seed", type=int, default=7, help="the seed")

    report = "\n".join(generate.check(parser=parser))

    assert "+## `pnk planted`" in report
    assert "+A command the docs have never heard of." in report
    assert "+| `--seed` | `SEED` | `7` | the seed |" in report
    assert "+| [`pnk planted`](#pnk-planted) | planted by the drift test |" in report


def test_a_documented_command_the_parser_lacks_is_reported(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for path, text in _pages().items():
        (docs / path.name).write_text(text, encoding="utf-8")
    cli = docs / "CLI.md"
    cli.write_text(cli.read_text(encoding="utf-8") + "\n## `pnk gone`\n\n<!-- generated: cli pnk gone -->\n"
                   "<!-- end generated -->\n", encoding="utf-8")

    problems = generate.check(tmp_path)

    assert any("`pnk gone`" in problem and "remove its section" in problem for problem in problems)


def test_a_planted_tool_argument_fails_the_check() -> None:
    search = TOOL_SPECS[0]
    properties = cast(dict[str, object], search.input_schema["properties"])
    schema = {**search.input_schema, "properties": {
        **properties,
        "planted": {"type": "string", "maxLength": 9, "description": "Planted by the drift test."},
    }}
    specs = (dataclasses.replace(search, input_schema=schema), *TOOL_SPECS[1:])

    report = "\n".join(generate.check(tool_specs=specs))

    assert "+| `planted` | string |  | at most 9 characters | Planted by the drift test. |" in report


def test_a_new_manifest_key_gets_a_row_with_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.manifest import sections

    @dataclasses.dataclass(frozen=True)
    class DeepWithSeed:
        max_rounds: int = 3
        planted_seed: int = 11

    real = generate.manifest_sections

    def planted() -> dict[str, type]:
        return {**real(), "deep": DeepWithSeed}

    monkeypatch.setattr(generate, "manifest_sections", planted)
    monkeypatch.setitem(sections.SECTION_KEYS, "deep", ("max_rounds", "planted_seed"))

    report = "\n".join(generate.check())

    # The hand-written columns of the existing row are kept; the new row's are left to fill in.
    assert "+| `planted_seed` | integer | `11` |  |  |" in report
    assert "-| `max_rounds` |" not in report


def test_the_reader_defaults_are_the_dataclass_defaults() -> None:
    """The generated Default column is read from the dataclasses; the readers repeat each default,
    so the two must agree or the docs would state a default the loader does not apply."""
    from pinakes.manifest import parse_manifest

    manifest = parse_manifest(
        '[kb]\nname = "n"\nid = "01M8P05RX7E8691VQVZ35N5HS3"\n[sources]\nroots = ["docs"]\n'
        '[embedding]\nprovider = "fastembed"\nmodel = "m"\ndim = 3\n',
        path=Path("/kb/pinakes.toml"),
    )
    checked = 0
    for section, cls in generate.manifest_sections().items():
        value = getattr(manifest, section) if "." not in section else None
        if value is None or isinstance(value, tuple):  # optional tables: absent here
            continue
        assert type(value) is cls
        for field in dataclasses.fields(cls):
            if field.default is not dataclasses.MISSING:
                assert getattr(value, field.name) == field.default, f"{section}.{field.name}"
                checked += 1
    assert checked > 20


def test_the_error_table_reads_exit_codes_and_homes_right() -> None:
    rows = {name: (base, relpath, code) for name, base, relpath, code, _ in generate.error_classes()}
    assert "PinakesError" in rows and "LockBusy" not in rows and "FitError" not in rows
    for name, (_, relpath, code) in rows.items():
        module = importlib.import_module(relpath.removeprefix("src/").removesuffix(".py").replace("/", "."))
        cls = getattr(module, name)
        assert issubclass(cls, PinakesError)
        assert cls.__module__ == module.__name__, f"{name} is listed in {relpath}, defined in {cls.__module__}"
        assert cls.exit_code == code, name


def test_every_path_the_architecture_page_names_exists() -> None:
    text = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    tokens = re.findall(r"`([^`\s]+)`", text)
    # A bare file name (`walk.py`, `pinakes.toml`) must exist somewhere in the repository.
    everywhere = {path.name for top in ("src", "tests", "bench", "docs", "templates")
                  for path in (REPO_ROOT / top).rglob("*")} | {path.name for path in REPO_ROOT.iterdir()}
    missing: list[str] = []
    for token in (token.split("(")[0] for token in tokens):
        if re.fullmatch(r"(src|rules|tests|templates|bench|docs)/[\w./-]+", token):
            if not (REPO_ROOT / token.rstrip("/")).exists():
                missing.append(token)
        elif re.fullmatch(r"[\w-]+\.(py|toml|md|yaml|json)", token):
            if token not in everywhere:
                missing.append(token)
        elif re.fullmatch(r"pinakes(\.\w+)+", token) and not _resolves(token):
            missing.append(token)
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(target, part):
                return False
            target = getattr(target, part)
        return True
    return False


def modules_missing_from(page: str, package_root: Path) -> list[str]:
    """Modules under `package_root` (`src/pinakes`) that the page does not name: by path
    (`src/pinakes/search/core.py`, or `search/core.py`; a top-level module's is its name, `kb.py`),
    or as `core.py` in the row whose first column is its package's folder (`src/pinakes/search/`).
    `__init__.py` and `__main__.py` are their package, named by its row."""
    named = set(re.findall(r"`([^`\s]+)`", page))
    rows: list[tuple[set[str], set[str]]] = []
    for line in page.splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 2:
            rows.append((set(re.findall(r"`([^`\s]+)`", cells[1])), set(re.findall(r"`([^`\s]+)`", line))))
    prefix = f"src/{package_root.name}/"
    missing: list[str] = []
    for path in sorted(package_root.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py") or "__pycache__" in path.parts:
            continue
        relative = path.relative_to(package_root).as_posix()
        folder = relative.rpartition("/")[0]
        if {prefix + relative, relative} & named:
            continue
        if folder and any(prefix + folder + "/" in first and path.name in cells for first, cells in rows):
            continue
        missing.append(prefix + relative)
    return missing


def test_the_architecture_page_names_every_module() -> None:
    page = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = modules_missing_from(page, REPO_ROOT / "src" / "pinakes")
    assert missing == [], f"docs/architecture.md does not name these modules (add each to its package's row): {missing}"


def test_a_module_the_architecture_page_lacks_is_named(tmp_path: Path) -> None:
    root = tmp_path / "src" / "pinakes"
    for name in ("__init__.py", "errors.py", "kb.py", "wording.py", "search/__init__.py", "search/core.py",
                 "search/bm25.py", "index/schema.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).touch()
    page = ("| Path | What |\n|---|---|\n| `src/pinakes/search/` | `core.py` (the searcher) |\n"
            "| `src/pinakes/errors.py` | errors; the KB lives in `kb.py` |\n\n"
            "`bm25.py` is named outside its package's row; `src/pinakes/index/schema.py` by path.\n")
    assert modules_missing_from(page, root) == ["src/pinakes/search/bm25.py", "src/pinakes/wording.py"]
