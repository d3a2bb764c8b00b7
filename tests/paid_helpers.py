"""Shared setup of the paid-sync tests: a KB wired to the local Messages-API server, and `pnk sync`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.init import init_kb
from tests.fake_anthropic import FakeAnthropic
from tests.fakes import FakeEmbedder, substitute_embedder


def paid_kb(root: Path, monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic, *, key: str, name: str) -> Path:
    """A fresh KB at `root` whose syncs embed with the fake embedder and whose paid calls reach
    `server` with `key` (set where Pinakes reads it: PINAKES_ANTHROPIC_API_KEY)."""
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    monkeypatch.setenv("PINAKES_ANTHROPIC_API_KEY", key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    init_kb(root, name=name)
    return root


def sync(kb: Path, *argv: str) -> int:
    return main(["-C", str(kb), "sync", *argv])
