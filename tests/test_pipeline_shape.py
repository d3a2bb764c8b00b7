"""The shape of the sync's code (#42): the stages hand each other typed, frozen values from one leaf
module, and the run-wide context holds only what is run-wide. No module (of these packages or any
other) is over 600 lines: tests/test_code_budgets.py. The layer test (tests/test_layers.py) holds the
packages to their order and every package's modules free of import cycles, however they import (at
the top, inside a function, or for types only)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any, cast

from pinakes.pipeline import types
from pinakes.pipeline.run import SyncContext


def test_the_values_the_stages_pass_live_in_a_leaf_and_are_frozen() -> None:
    tree = ast.parse(Path(types.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(name.startswith(("pinakes.pipeline", "pinakes.rules", "pinakes.sync")) for name in imported)
    for value in (types.DocWork, types.Extracted, types.Chunked, types.Embedded, types.Failed):
        # cast: __dataclass_params__, dataclasses' own record of the decorator's arguments, is not in the stubs
        assert dataclasses.is_dataclass(value) and cast(Any, value).__dataclass_params__.frozen, value


def test_the_run_wide_context_holds_only_what_is_run_wide() -> None:
    """What one stage hands the next is a typed value, not a field of the context every stage sees."""
    assert [field.name for field in dataclasses.fields(SyncContext)] == [
        "paths", "manifest", "options", "report", "keys", "progress", "conn", "read_only", "rebuilding", "embedder",
        "chunk_ahead"]  # a run-wide process, like the model: the worker chunking ahead of the writer
