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
    for pinned in (packaged._GT_DIST, packaged._INT8_DIST):  # pyright: ignore[reportPrivateUsage]  # the test pins them
        name = pinned.split("==")[0]
        named = {r for r in requirements if r.split("=")[0].split(">")[0].split("<")[0].strip() == name}
        assert named == {pinned}, f"pyproject names {named or 'nothing'} for {name}; embed/packaged.py pins {pinned}"


def test_the_readme_takes_torch_from_pytorchs_cpu_index() -> None:
    """From PyPI alone, pip on Linux installs torch's multi-gigabyte CUDA build; README's test command
    names PyTorch's CPU wheel index, as an extra index (PyPI stays in reach for everything else), and
    takes only torch from it."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    torch_installs = [line for line in readme.splitlines() if '"torch==' in line]
    assert torch_installs, "README's test command no longer installs torch first"
    for line in torch_installs:
        step = next(part for part in line.split("&&") if '"torch==' in part)
        assert "--extra-index-url https://download.pytorch.org/whl/cpu" in step, step
        assert "--no-deps" in step, step
