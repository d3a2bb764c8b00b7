"""The distribution is `pinakes-kb`: `pinakes` on the package index is another project, so no file
this project ships or writes installs by that name, and every remedy that installs something names
this Pinakes from where it came (PEP 610's record of the installed distribution)."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from pinakes.distribution import (
    DISTRIBUTION,
    Origin,
    installed_origin,
    origin_from_direct_url,
    pip_install,
    pip_upgrade,
)
from tests.conftest import REPO_ROOT

# `pip install ... pinakes` / `pinakes[x]` / "pinakes==..." with the bare name: someone else's code.
FOREIGN_INSTALL = re.compile(r"\bpipx? install\b[^\n`]*?(?<![\w./-])pinakes(?![\w-])(?!/)")
# What the project ships and says; this file's own examples are not installs.
SKIPPED = {"tests/test_distribution.py"}
SUFFIXES = {".md", ".py", ".toml", ".yaml", ".yml", ".txt", ".cfg", ""}


def scanned_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return [REPO_ROOT / name for name in listed.stdout.splitlines()
            if name not in SKIPPED and Path(name).suffix in SUFFIXES and (REPO_ROOT / name).is_file()]


def foreign_installs(text: str) -> list[tuple[int, str]]:
    return [(text[:match.start()].count("\n") + 1, match[0]) for match in FOREIGN_INSTALL.finditer(text)
            if not text[max(0, match.start() - 7):match.start()].rstrip("`\n ").endswith("never")]


def test_pyproject_names_our_distribution_and_its_own_extras_by_it() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION == "pinakes-kb"
    assert project["scripts"] == {"pnk": "pinakes.cli:main"}
    self_references = [r for extra in project["optional-dependencies"].values() for r in extra
                       if r.startswith("pinakes")]
    assert self_references and all(r.startswith("pinakes-kb[") for r in self_references), self_references


def test_nothing_installs_the_other_projects_pinakes() -> None:
    found = [f"{path.relative_to(REPO_ROOT)}:{line}: {words}" for path in scanned_files()
             for line, words in foreign_installs(path.read_text(encoding="utf-8", errors="replace"))]
    assert not found, "\n".join(found)


def test_the_check_sees_a_foreign_install() -> None:
    for line in ('pip install "pinakes[pdf]"', "pipx install pinakes", "pip install -U pinakes",
                 'pip install --force-reinstall "pinakes"', "pip install 'pinakes>=0.2'"):
        match = FOREIGN_INSTALL.search(line)
        assert match is not None, line
        assert foreign_installs(line) == [(1, match[0])], line
    for line in ('pip install "pinakes-kb[pdf]"', 'pip install -e ".[light]"', "pip install -e /src/pinakes",
                 'pip install -e "/work/pinakes[pdf]"', "never `pip install pinakes`: another project"):
        assert not foreign_installs(line), line


RECORDS = [
    (None, '"pinakes-kb[pdf]==0.1.0"'),
    (json.dumps({"url": "https://git.example.org/p.git", "vcs_info": {"vcs": "git", "commit_id": "abc"}}),
     '"pinakes-kb[pdf] @ git+https://git.example.org/p.git@abc"'),
    (json.dumps({"url": "file:///srv/clone", "vcs_info": {"vcs": "git", "commit_id": "abc"}}),
     '"pinakes-kb[pdf] @ git+file:///srv/clone@abc"'),  # fine on this machine, unlike in CI
    (json.dumps({"url": "file:///tmp/pinakes_kb-0.1.0-py3-none-any.whl", "archive_info": {}}),
     '"pinakes-kb[pdf] @ file:///tmp/pinakes_kb-0.1.0-py3-none-any.whl"'),
    (json.dumps({"url": "file:///home/me/pinakes", "dir_info": {"editable": True}}), '-e "/home/me/pinakes[pdf]"'),
    (json.dumps({"url": "file:///home/me/pinakes", "dir_info": {}}), '"/home/me/pinakes[pdf]"'),
]


@pytest.mark.parametrize(("record", "argument"), RECORDS)
def test_a_remedy_installs_again_from_where_this_pinakes_came(record: str | None, argument: str) -> None:
    assert origin_from_direct_url(record, "0.1.0").install_argument(("pdf",)) == argument


def test_remedies_name_this_installation() -> None:
    origin = installed_origin()  # the test run's own: an editable checkout, a wheel or a release
    assert pip_install(("light",)) == f"pip install {origin.install_argument(('light',))}"
    assert pip_install(option="--force-reinstall").startswith("pip install --force-reinstall ")
    assert pip_upgrade("0.2.0") == 'pip install -U "pinakes-kb>=0.2.0"'
    assert Origin("unknown", "0.1.0").install_argument(()) == '"pinakes-kb"'
