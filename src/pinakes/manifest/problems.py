"""How the manifest loader reports: every problem is collected, each naming its dotted key, what is
wrong and what to do, and all of them are raised together as one InvalidManifestError, so a user
fixes a broken manifest in one pass rather than one error per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import ManifestError


@dataclass(frozen=True)
class ManifestProblem:
    key: str | None  # dotted key (`retrieval.final_k`); None for a whole-file problem
    problem: str
    remedy: str

    def render(self) -> str:
        return f"{self.key}: {self.problem}" if self.key else self.problem


class InvalidManifestError(ManifestError):
    """pinakes.toml is invalid; `problems` lists every problem found (section by section)."""

    def __init__(self, path: Path, problems: Sequence[ManifestProblem]):
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            only = self.problems[0]
            super().__init__(only.render(), remedy=only.remedy, path=path)
        else:
            lines = [f"{len(self.problems)} problems:"]
            for problem in self.problems:
                lines.append(f"  - {problem.render()}\n    fix: {problem.remedy}")
            super().__init__("\n".join(lines), remedy="fix each problem listed above", path=path)


class Problems:
    def __init__(self) -> None:
        self.items: list[ManifestProblem] = []

    def add(self, key: str | None, problem: str, remedy: str) -> None:
        self.items.append(ManifestProblem(key, problem, remedy))

    def __bool__(self) -> bool:
        return bool(self.items)
