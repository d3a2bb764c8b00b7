"""Packaging: where embed/packaged.py pins file digests, pyproject pins the exact release that ships them
(a looser range would let a new upstream release install and then refuse to load)."""

from __future__ import annotations

import tomllib

from pinakes.embed import packaged
from tests.conftest import REPO_ROOT


def test_the_packaged_model_distributions_are_pinned_exactly_as_their_digests_are() -> None:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    requirements = {requirement for extra in extras.values() for requirement in extra}
    for pinned in (packaged._GT_DIST, packaged._INT8_DIST):
        name = pinned.split("==")[0]
        named = {r for r in requirements if r.split("=")[0].split(">")[0].split("<")[0].strip() == name}
        assert named == {pinned}, f"pyproject names {named or 'nothing'} for {name}; embed/packaged.py pins {pinned}"
