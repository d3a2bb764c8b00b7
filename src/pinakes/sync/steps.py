"""Reaching the sync steps in `rules/` from the core.

`rules/` sits at the repository's top level (so a reader finds each step by name) and is mapped to
`pinakes.rules` at build time; steps are therefore loaded by name here, which also keeps the pipeline's
order as data (`STEPS`) rather than as an import list.
"""

from __future__ import annotations

import importlib
from types import ModuleType

STEPS = ("walk", "pair", "extract", "chunk", "embed", "graph")


def step(name: str) -> ModuleType:
    return importlib.import_module(f"pinakes.rules.{name}")
