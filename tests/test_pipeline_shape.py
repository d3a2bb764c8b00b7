"""The shape of the sync's code (#42): the stages hand each other typed, frozen values from one leaf
module, the run-wide context holds only what is run-wide, no module of the sync's packages is part
of an import cycle, however it imports (at the top, inside a function, or for types only), and none
is over 600 lines. The layer test (tests/test_layers.py) holds the packages to their order; this
holds the modules inside three of them."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pytest

from pinakes.pipeline import types
from pinakes.pipeline.run import SyncContext
from tests.conftest import REPO_ROOT

# The sync's packages, by folder: the driver, its doit adapters (mapped into the package), the stages.
PACKAGES = {"pinakes.sync": REPO_ROOT / "src" / "pinakes" / "sync", "pinakes.rules": REPO_ROOT / "rules",
            "pinakes.pipeline": REPO_ROOT / "src" / "pinakes" / "pipeline"}
MAX_MODULE_LINES = 600


def modules_of(package: str, folder: Path) -> dict[str, Path]:
    return {package if path.stem == "__init__" else f"{package}.{path.stem}": path
            for path in sorted(folder.glob("*.py"))}


def imports_within(package: str, folder: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, by any statement anywhere in it (type-only
    imports count: a cycle through them is a cycle a reader must follow)."""
    modules = modules_of(package, folder)
    found: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
            else:
                continue
            found[module] |= {target for target in targets if target in modules and target not in (module, package)}
    return found


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every set of modules that reach one another (strongly connected, more than one)."""
    reach = {node: _reachable(graph, node) for node in graph}
    seen: set[str] = set()
    found: list[list[str]] = []
    for node in sorted(graph):
        if node in seen:
            continue
        component = sorted({other for other in reach[node] if node in reach[other]} | {node})
        seen |= set(component)
        if len(component) > 1:
            found.append(component)
    return found


def _reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    stack, found = [start], set[str]()
    while stack:
        for target in graph[stack.pop()]:
            if target not in found:
                found.add(target)
                stack.append(target)
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_module_of_the_sync_is_in_an_import_cycle(package: str) -> None:
    graph = imports_within(package, PACKAGES[package])
    assert cycles(graph) == [], {module: sorted(graph[module]) for component in cycles(graph) for module in component}


def test_a_planted_cycle_through_a_type_only_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pinakes.toy.b import B\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from pinakes.toy.c import C\n", encoding="utf-8")
    (tmp_path / "c.py").write_text("def f():\n    import pinakes.toy.a\n", encoding="utf-8")
    (tmp_path / "d.py").write_text("from pinakes.toy import a\n", encoding="utf-8")
    assert cycles(imports_within("pinakes.toy", tmp_path)) == [["pinakes.toy.a", "pinakes.toy.b", "pinakes.toy.c"]]


def test_the_values_the_stages_pass_live_in_a_leaf_and_are_frozen() -> None:
    tree = ast.parse(Path(types.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(name.startswith(("pinakes.pipeline", "pinakes.rules", "pinakes.sync")) for name in imported)
    for value in (types.DocWork, types.Extracted, types.Chunked, types.Embedded, types.Failed):
        assert dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen, value  # type: ignore[attr-defined]


def test_the_run_wide_context_holds_only_what_is_run_wide() -> None:
    """What one stage hands the next is a typed value, not a field of the context every stage sees."""
    assert [field.name for field in dataclasses.fields(SyncContext)] == [
        "paths", "manifest", "options", "report", "keys", "progress", "conn", "read_only", "rebuilding", "embedder"]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_module_of_the_sync_is_over_600_lines(package: str) -> None:
    long = {module: lines for module, path in modules_of(package, PACKAGES[package]).items()
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}
