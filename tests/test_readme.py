"""README's install story is true to pyproject and to what its commands reach (issue #40: it said "no
network beyond PyPI" while the test command reaches PyTorch's index, both commands shared one
`.venv` without saying so, and the install table left out `[ray]`, `[remote]` and `[dev]`)."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _commands() -> list[str]:
    """The shell commands of the README's "Two commands" section, in order."""
    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


def test_the_install_table_names_every_extra() -> None:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    rows = set(re.findall(r"^\| `pinakes-kb\[(\w+)\]` \|", README, re.M))
    assert rows == set(extras), f"extras without a row: {set(extras) - rows}; rows of no extra: {rows - set(extras)}"


def test_every_host_the_commands_reach_besides_pypi_is_said_before_them() -> None:
    commands = _commands()
    assert len(commands) == 2
    hosts = {host for command in commands for host in re.findall(r"https?://([^/\s]+)", command)}
    assert hosts == {"download.pytorch.org"}
    preface = README.split("## Two commands", 1)[1].split("```sh", 1)[0]
    assert "no network needed beyond PyPI" not in README
    for host in hosts:
        assert host in preface, f"{host} is reached by a command the preface does not warn of"


def test_the_two_commands_venv_is_one_on_purpose_and_said_so() -> None:
    venvs = [re.match(r"python3 -m venv (\S+) && \. (\S+)/bin/activate", command) for command in _commands()]
    assert all(venvs) and all(match[1] == match[2] for match in venvs if match)
    if len({match[1] for match in venvs if match}) == 1:
        assert "Both commands use one `.venv` in the checkout, deliberately" in README
