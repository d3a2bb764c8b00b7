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
# A comment that sets pyright's mode or a rule for the whole file (anything but a line's `ignore[...]`).
FILE_LEVEL_PYRIGHT = re.compile(r"#\s*pyright\s*:(?!\s*ignore\b)")
# pyright does not read these here (enableTypeIgnoreComments = false); where it did, one silenced every rule.
TYPE_IGNORE = re.compile(r"#\s*type\s*:\s*ignore\b")
# A pyright ignore without a rule list silences every rule on its line, as the mypy-style ones did.
BARE_PYRIGHT_IGNORE = re.compile(r"#\s*pyright\s*:\s*ignore\b(?!\[)")
# A line-level `# pyright: ignore[rule]` says why, on its line or in a comment just above.
LINE_IGNORE = re.compile(r"#\s*pyright\s*:\s*ignore\[[^\]]*\](?P<rest>.*)$")


def checked_files() -> list[Path]:
    return sorted(path for root in CHECKED_ROOTS
                  for path in ((REPO_ROOT / root).rglob("*.py") if (REPO_ROOT / root).is_dir() else [REPO_ROOT / root]))


def comments(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment: a docstring or a string that shows a pragma is not one."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def lines_matching(pattern: re.Pattern[str], source: str) -> list[int]:
    return [line for line, text in comments(source) if pattern.search(text)]


def unexplained_ignores(source: str) -> list[int]:
    lines = source.splitlines()
    unexplained: list[int] = []
    for number, text in comments(source):
        if (found := LINE_IGNORE.search(text)) is None:
            continue
        reason = [word for word in found["rest"].replace("#", " ").split() if not word.startswith("noqa")]
        above = lines[number - 2].strip() if number > 1 else ""
        explained_above = above.startswith("#") and not above.startswith("# --") and len(above.split()) >= 3
        if len(reason) < 2 and not explained_above:
            unexplained.append(number)
    return unexplained


def test_pyright_is_strict_on_every_file_it_checks() -> None:
    pyright = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pyright"]
    assert pyright["typeCheckingMode"] == "strict"
    assert pyright["enableTypeIgnoreComments"] is False, "a `# type: ignore` would silence every rule on its line"
    assert "strict" not in pyright and "basic" not in str(pyright), "no list of files strict or basic apart"
    assert set(CHECKED_ROOTS) <= set(pyright["include"])
    sources = {str(path.relative_to(REPO_ROOT)): path.read_text(encoding="utf-8") for path in checked_files()}
    overrides = {name: found for name, source in sources.items()
                 if (found := lines_matching(FILE_LEVEL_PYRIGHT, source))}
    assert overrides == {}, f"these comments turn pyright's checks down for a whole file: {overrides}"
    blanket = {name: found for name, source in sources.items()
               if (found := lines_matching(TYPE_IGNORE, source) + lines_matching(BARE_PYRIGHT_IGNORE, source))}
    assert blanket == {}, ("pyright reads no `# type: ignore` here: name the rule with `# pyright: ignore[rule]` "
                           f"and say why: {blanket}")


def test_each_pyright_ignore_says_why() -> None:
    bare = {str(path.relative_to(REPO_ROOT)): lines for path in checked_files()
            if (lines := unexplained_ignores(path.read_text(encoding="utf-8")))}
    assert bare == {}, f"say on the line (or just above) why pyright cannot see it: {bare}"


def test_the_ignore_scan_wants_words_beside_or_above_the_pragma() -> None:
    source = ("a = b._c  # pyright: ignore[reportPrivateUsage]\n"
              "d = e._f  # pyright: ignore[reportPrivateUsage]  # the test pins it\n"
              "# onnxruntime ships no stubs\n"
              "import onnxruntime  # pyright: ignore[reportMissingTypeStubs]\n"
              "text = 'x  # pyright: ignore[reportPrivateUsage]'\n"
              "# -- a section --\n"
              "import a  # noqa: F401  # pyright: ignore[reportUnusedImport]\n")
    assert unexplained_ignores(source) == [1, 7]


def test_the_pragma_scans_read_comments_and_tell_a_mode_from_a_line_ignore() -> None:
    assert lines_matching(FILE_LEVEL_PYRIGHT, "# pyright: basic\nx = 1\n") == [1]
    assert lines_matching(FILE_LEVEL_PYRIGHT, "x = 1\n  #pyright: reportUnknownMemberType=false\n") == [2]
    assert lines_matching(FILE_LEVEL_PYRIGHT, "x = y._z  # pyright: ignore[reportPrivateUsage]  # why\n") == []
    assert lines_matching(FILE_LEVEL_PYRIGHT, '"""Never write `# pyright: basic` here."""\n') == []
    assert lines_matching(TYPE_IGNORE, "x = f(y)  # type: ignore[arg-type]\ny = 2  #type:ignore\n") == [1, 2]
    assert lines_matching(TYPE_IGNORE, "x = f(y)  # pyright: ignore[reportArgumentType]  # why\n") == []
    assert lines_matching(TYPE_IGNORE, 's = "# type: ignore"\n') == []
    assert lines_matching(FILE_LEVEL_PYRIGHT, "# pyright: ignore[reportPrivateUsage]\n") == []
    assert lines_matching(BARE_PYRIGHT_IGNORE, "x = y  # pyright: ignore\nz = w  # pyright: ignore[rule]  # why\n") == [1]


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
