"""The built wheel is the product: it installs into a fresh venv and works without the checkout.

templates/ and rules/ (the sync's doit adapters) sit outside src/ and reach the package only through
pyproject's package-dir mapping, so this is the test that notices when a build stops carrying either
(or the packages under src/ the sync runs, such as the walk).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from pinakes import __version__
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.heavy

# Packaged folders in the repository, and where the wheel must put them.
MAPPED_FOLDERS = {"templates": "pinakes/templates", "rules": "pinakes/rules"}
# What the build needs from the tree; the rest (tests, .venv, .git) would only slow the copy.
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "src", "templates", "rules")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")


def run(argv: list[str | Path], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    completed = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd,
                               timeout=300)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, f"{' '.join(map(str, argv))} exited {completed.returncode}:\n{output}"
    return output


def copy_build_inputs(destination: Path) -> Path:
    """What a build of this checkout reads, copied to `destination` (so setuptools' build/ and egg-info
    stay out of the checkout)."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in BUILD_INPUTS:
        origin = REPO_ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, destination / name, ignore=JUNK, symlinks=True)
        elif origin.exists():
            shutil.copy2(origin, destination / name)
    return destination


def fresh_venv(venv: Path, *install: str | Path) -> Path:
    """A venv holding only what `pip install *install` (offline) puts there, then made to see this
    environment's third-party packages (tests never touch the network, so pip in it runs with no
    index): a .pth line is appended after the venv's own site-packages, and .pth files inside the
    listed folder are not processed, so the current venv's editable-install hook stays inert. The
    line is written after the install, or pip would find this checkout's Pinakes already there."""
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    if install:
        run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps",
             "--no-index", *install])
    own_site = Path(run([venv / "bin" / "python", "-c",
                         "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    parent_sites = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (own_site / "zz_parent_environment.pth").write_text("".join(f"{site}\n" for site in parent_sites))
    return venv


def isolated_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would leak the checkout or this venv into a child."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", PIP_NO_INDEX="1", **extra)
    return env


def packaged_files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = copy_build_inputs(tmp_path_factory.mktemp("source"))
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", dist, source])
    (built,) = dist.glob("pinakes_kb-*.whl")  # the distribution's name: pinakes-kb, never pinakes
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv holding the wheel, installed by its name as from an index (the wheel's folder is
    the only place pip may look), seeing this environment's third-party packages but not src/."""
    venv = fresh_venv(tmp_path_factory.mktemp("venv"), "--find-links", wheel.parent, "pinakes-kb")
    return venv, isolated_env()


def test_wheel_carries_rules_and_templates(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, packaged in MAPPED_FOLDERS.items():
        expected = {f"{packaged}/{name}" for name in packaged_files(REPO_ROOT / folder)}
        assert f"{packaged}/__init__.py" in expected
        assert expected <= names, f"missing from the wheel: {sorted(expected - names)}"
    assert {"pinakes/rules/walk.py", "pinakes/rules/reverse_scan.py", "pinakes/sources/walk.py"} <= names
    assert not any(name.startswith(("tests/", "src/", "rules/")) for name in names)
    # the offline model's tokenizer files, which the [light] backend reads from the package, and
    # WordNet's relations table with its licence, which search's related_share reads
    shipped = {f"pinakes/data/{folder}/{path.name}" for folder in ("minilm", "wordnet")
               for path in (REPO_ROOT / "src/pinakes/data" / folder).iterdir()}
    assert {"pinakes/data/wordnet/relations.npz", "pinakes/data/wordnet/NOTICE"} <= shipped
    assert shipped <= names, f"missing from the wheel: {sorted(shipped - names)}"


def test_installed_wheel_runs_without_the_checkout(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    venv, env = installed
    bin_dir = venv / "bin"

    help_text = run([bin_dir / "pnk", "--help"], env=env, cwd=tmp_path)
    run([bin_dir / "pnk", "init", tmp_path / "kb", "--name", "t"], env=env, cwd=tmp_path)
    where = run([bin_dir / "python", "-c",
                 "import pinakes, pinakes.rules, pinakes.templates\n"
                 "for m in (pinakes, pinakes.rules, pinakes.templates): print(m.__file__)"],
                env=env, cwd=tmp_path).split()

    origin = run([bin_dir / "python", "-c", "from pinakes.distribution import installed_origin\n"
                  "print(installed_origin().requirement(('light',)))"], env=env, cwd=tmp_path).strip()

    assert "usage: pnk" in help_text
    # installed by name, so a workflow it writes installs the same release by name (never `pinakes`)
    assert origin == f"pinakes-kb[light]=={__version__}"
    assert (tmp_path / "kb" / "pinakes.toml").is_file()
    assert len(where) == 3
    for module_file in map(Path, where):
        assert module_file.resolve().is_relative_to(venv.resolve()), f"imported from {module_file}"
        assert not module_file.resolve().is_relative_to(REPO_ROOT.resolve())
