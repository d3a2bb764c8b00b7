"""The shape of the sync's code (#42): the stages hand each other typed, frozen values from one leaf
module, the run-wide context holds only what is run-wide, and no module of the sync's packages is
over 600 lines. The layer test (tests/test_layers.py) holds the packages to their order and every
package's modules free of import cycles, however they import (at the top, inside a function, or for
types only)."""

from __future__ import annotations

import ast
import dataclasses
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
