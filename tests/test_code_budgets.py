"""The code's size and typing budgets (#42), over every module of `src/` and `rules/`:

- no module is over 600 lines (split a long one by concern, as search/core.py was);
- `Any` appears on at most 40 lines, imports aside, and each of those lines carries a comment that
  names the untyped thing it stands for (a third-party object pyright cannot see into, mostly:
  embed/untyped.py holds most of them);
- pyright runs strict on every file it checks — `src/`, `rules/`, `dodo.py`, `tests/` and `bench/`
  (pyproject.toml) — and no file turns a check down with a file-level `# pyright:` comment, so a new
  module is strict the day it is written.

The `Any` scan reads the AST: a docstring or a comment that says "Any" is prose, not a type, and
`from typing import Any` is not a use. A string annotation (`"dict[str, Any]"`, `cast("Any", x)`)
is read as the expression it holds, so quoting a type does not hide it.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.conftest import REPO_ROOT

CODE_ROOTS = (REPO_ROOT / "src", REPO_ROOT / "rules")
MAX_MODULE_LINES = 600
MAX_ANY_LINES = 40
PRAGMAS = ("type:", "pyright:", "noqa")  # a comment that only silences a checker says nothing


def modules() -> list[Path]:
    return sorted(path for root in CODE_ROOTS for path in root.rglob("*.py"))


def _mentions_any(node: ast.AST) -> bool:
    return any((isinstance(child, ast.Name) and child.id == "Any")
               or (isinstance(child, ast.Attribute) and child.attr == "Any") for child in ast.walk(node))


def _quoted_types(tree: ast.AST) -> Iterator[ast.Constant]:
    """String constants that pyright reads as types: annotations, and `cast`'s first argument."""
    for node in ast.walk(tree):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.AnnAssign | ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations.append(node.returns)
        elif (isinstance(node, ast.Call) and node.args
              and ((isinstance(node.func, ast.Name) and node.func.id == "cast")
                   or (isinstance(node.func, ast.Attribute) and node.func.attr == "cast"))):
            annotations.append(node.args[0])
        for annotation in annotations:
            for child in ast.walk(annotation) if annotation is not None else ():
                if isinstance(child, ast.Constant) and isinstance(child.value, str):
                    yield child


def any_lines(source: str) -> set[int]:
    """The lines on which `Any` is used as a type (imports, docstrings and comments aside)."""
    tree = ast.parse(source)
    lines = {node.lineno for node in ast.walk(tree)
             if (isinstance(node, ast.Name) and node.id == "Any")
             or (isinstance(node, ast.Attribute) and node.attr == "Any")}
    for constant in _quoted_types(tree):
        try:
            quoted = ast.parse(str(constant.value), mode="eval")  # a string: _quoted_types yields no other
        except SyntaxError:
            continue
        if _mentions_any(quoted):
            lines.add(constant.lineno)
    return lines


def comments_by_line(source: str) -> dict[int, str]:
    """Each line's comment text, without its `#`; pragma-only comments (`# type: ignore`) left out."""
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#").strip()
            if text and not text.startswith(PRAGMAS):
                comments[token.start[0]] = text
    return comments


def uncommented_any(source: str) -> list[int]:
    comments = comments_by_line(source)
    return sorted(line for line in any_lines(source) if len(comments.get(line, "").split()) < 3)


def test_no_module_is_over_600_lines() -> None:
    long = {str(path.relative_to(REPO_ROOT)): lines for path in modules()
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"split these by concern into well-named modules: {long}"


def test_any_stays_within_its_budget_and_each_one_says_what_it_stands_for(
        record_property: Callable[[str, object], None]) -> None:
    used: dict[str, set[int]] = {}
    bare: dict[str, list[int]] = {}
    for path in modules():
        source = path.read_text(encoding="utf-8")
        name = str(path.relative_to(REPO_ROOT))
        if lines := any_lines(source):
            used[name] = lines
        if missing := uncommented_any(source):
            bare[name] = missing
    total = sum(len(lines) for lines in used.values())
    record_property("any_lines", total)
    assert bare == {}, ("each `Any` needs a comment on its line naming the untyped object it stands for "
                        f"(or a type in its place): {bare}")
    assert total <= MAX_ANY_LINES, f"{total} lines use Any (budget {MAX_ANY_LINES}): {sorted(used)}"


CHECKED_ROOTS = ("src", "rules", "dodo.py", "tests", "bench")
# A comment alone on its line that sets pyright's mode or a rule for the whole file.
FILE_LEVEL_PYRIGHT = re.compile(r"^\s*#\s*pyright\s*:(?!\s*ignore\b)", re.MULTILINE)


def test_pyright_is_strict_on_every_file_it_checks() -> None:
    pyright = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pyright"]
    assert pyright["typeCheckingMode"] == "strict"
    assert "strict" not in pyright and "basic" not in str(pyright), "no list of files strict or basic apart"
    assert set(CHECKED_ROOTS) <= set(pyright["include"])
    overrides = {str(path.relative_to(REPO_ROOT)) for root in CHECKED_ROOTS
                 for path in ((REPO_ROOT / root).rglob("*.py") if (REPO_ROOT / root).is_dir() else [REPO_ROOT / root])
                 if FILE_LEVEL_PYRIGHT.search(path.read_text(encoding="utf-8"))}
    assert overrides == set(), f"these files turn pyright's checks down for the whole file: {sorted(overrides)}"


def test_the_file_level_scan_tells_a_mode_comment_from_a_line_ignore() -> None:
    assert FILE_LEVEL_PYRIGHT.search("# pyright: basic\nx = 1\n")
    assert FILE_LEVEL_PYRIGHT.search("  #pyright: reportUnknownMemberType=false\n")
    assert not FILE_LEVEL_PYRIGHT.search("x = y._z  # pyright: ignore[reportPrivateUsage]  # why\n")
    assert not FILE_LEVEL_PYRIGHT.search("# pyright: ignore[reportPrivateUsage]\n")


# -- the scanner itself ------------------------------------------------------------------------

PLANTED = '''"""Any docstring that says Any is prose."""
from typing import Any, cast
import typing

# Any in a comment is prose too
x: Any = 1  # a fastembed TextEmbedding
y: dict[str, Any] = {}
z: "list[Any]" = []
w = cast("Any", x)  # pyright: ignore[reportUnknownVariableType]
v: typing.Any = None  # ok
def f(a: int) -> str:
    return "Any"
'''


def test_the_scan_counts_uses_not_prose_imports_or_strings_that_are_not_types() -> None:
    assert any_lines(PLANTED) == {6, 7, 8, 9, 10}


def test_the_scan_wants_a_comment_of_some_words_not_a_pragma_on_each_line() -> None:
    assert uncommented_any(PLANTED) == [7, 8, 9, 10]  # line 10's "ok" says nothing
