"""Which distribution this Pinakes is, and where it was installed from.

The import package is `pinakes` and the command `pnk`, but the distribution is `pinakes-kb`: on the
package index the name `pinakes` belongs to another project, so nothing this build prints or writes
installs by that name. `installed_origin()` reads PEP 610's `direct_url.json` (which pip writes for
an install from a URL, a VCS, an archive or a directory, and not for one resolved by name from an
index) so a generated CI workflow can install exactly the Pinakes that wrote it, from where it came.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pinakes import __version__

DISTRIBUTION = "pinakes-kb"
# The project that owns `pinakes` on the package index: never ours, so a spec naming it is refused.
FOREIGN_DISTRIBUTION = "pinakes"

OriginKind = Literal["index", "vcs", "archive", "directory", "unknown"]

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_REQUIREMENT = re.compile(rf"(?P<name>{_NAME})\s*(?:\[(?P<extras>[^\]]*)\])?\s*(?P<rest>.*)")
_VERSION_CLAUSE = r"(?:===|==|~=|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
_VERSION_SPEC = re.compile(rf"{_VERSION_CLAUSE}(?:\s*,\s*{_VERSION_CLAUSE})*")
_URL_REFERENCE = re.compile(r"@\s*[A-Za-z][A-Za-z0-9+.-]*://\S+")


def normalized(name: str) -> str:
    """A distribution name as the package index compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(extras: tuple[str, ...] = (), reference: str = "") -> str:
    """`pinakes-kb[extras]` then `reference`: a version spec ("==0.1.0") or a URL (" @ git+https://...")."""
    return (f"{DISTRIBUTION}[{','.join(extras)}]" if extras else DISTRIBUTION) + reference


def pip_install(extras: tuple[str, ...] = (), option: str = "") -> str:
    """The command a remedy names to install this Pinakes again, with `extras` (and a pip `option` such
    as --force-reinstall), from where this one came: the same checkout, commit, archive or release."""
    return " ".join(part for part in ("pip install", option, installed_origin().install_argument(extras)) if part)


def pip_upgrade(floor: str | None = None) -> str:
    """The command a remedy names to move to a newer Pinakes (from the package index, by our name)."""
    return f'pip install -U "{requirement(reference=f">={floor}" if floor else "")}"'


@dataclass(frozen=True)
class Origin:
    """Where the installed distribution came from (PEP 610), reduced to what an installer needs."""

    kind: OriginKind
    version: str
    url: str | None = None  # vcs: the repository; archive: the file; directory: the folder (file: URL)
    vcs: str | None = None  # "git", "hg", ...
    commit: str | None = None
    subdirectory: str | None = None
    editable: bool = False

    @property
    def reachable_elsewhere(self) -> bool:
        """Whether another machine (a CI runner) can install from here: an index release, or a VCS
        or archive URL that is not a path on this machine."""
        if self.kind == "index":
            return True
        if self.kind in ("vcs", "archive") and self.url is not None:
            return urlsplit(self.url).scheme not in ("", "file")
        return False

    def requirement(self, extras: tuple[str, ...]) -> str | None:
        """The pip requirement for exactly this Pinakes with `extras`, or None when it has none another
        machine could resolve (see `reachable_elsewhere`)."""
        return self._pinned(extras) if self.reachable_elsewhere else None

    def _pinned(self, extras: tuple[str, ...]) -> str:
        """The requirement for exactly this Pinakes, wherever its URL resolves; by name when unknown."""
        if self.kind == "vcs" and self.url:
            fragment = f"#subdirectory={self.subdirectory}" if self.subdirectory else ""
            return requirement(extras, f" @ {self.vcs}+{self.url}@{self.commit}{fragment}")
        if self.kind == "archive" and self.url:
            return requirement(extras, f" @ {self.url}")
        if self.kind == "index":
            return requirement(extras, f"=={self.version}")
        return requirement(extras)

    def install_argument(self, extras: tuple[str, ...]) -> str:
        """What follows `pip install` to install this Pinakes again on this machine, with `extras`: a
        checkout by its path (editable again when it was), else the same commit, archive or release
        (a file: URL is fine here)."""
        folder = _local_path(self.url) if self.kind == "directory" and self.url else None
        if folder is not None:
            named = f"{folder}[{','.join(extras)}]" if extras else folder
            return f'{"-e " if self.editable else ""}"{named}"'
        return f'"{self._pinned(extras)}"'

    def describe(self) -> str:
        """Where it came from, in words, for messages and the workflow's comment."""
        if self.kind == "index":
            return f"release {self.version} of {DISTRIBUTION}, installed by name from a package index"
        if self.kind == "vcs":
            return f"{self.vcs} repository {self.url} at commit {self.commit}"
        if self.kind == "archive":
            return f"the archive {self.url}"
        if self.kind == "directory":
            folder = _local_path(self.url) or self.url
            return f"{'an editable install of ' if self.editable else ''}the directory {folder}"
        return f"a source tree on sys.path ({DISTRIBUTION} is not installed)"


def _local_path(url: str | None) -> str | None:
    from urllib.parse import unquote

    parts = urlsplit(url or "")
    return unquote(parts.path) if parts.scheme == "file" and parts.path else None


@functools.cache
def installed_origin() -> Origin:
    """Where the installed `pinakes-kb` came from, from its PEP 610 `direct_url.json`."""
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return Origin("unknown", __version__)
    text = dist.read_text("direct_url.json")
    return origin_from_direct_url(text, dist.version)


def origin_from_direct_url(text: str | None, version: str) -> Origin:
    """PEP 610's record read as an Origin; no record means the distribution was resolved by name."""
    if text is None:
        return Origin("index", version)
    try:
        record = json.loads(text)
        url = str(record["url"])
    except (ValueError, KeyError, TypeError):
        return Origin("unknown", version)
    subdirectory = record.get("subdirectory")
    if isinstance(record.get("vcs_info"), dict):
        vcs_info = record["vcs_info"]
        return Origin("vcs", version, url=url, vcs=str(vcs_info.get("vcs", "git")),
                      commit=vcs_info.get("commit_id"), subdirectory=subdirectory)
    if isinstance(record.get("dir_info"), dict):
        return Origin("directory", version, url=url, editable=bool(record["dir_info"].get("editable")))
    return Origin("archive", version, url=url, subdirectory=subdirectory)


def requirement_problem(spec: str) -> str | None:
    """Why `spec` is not a requirement for this project that pip can take as one argument (None: it is).

    It must name `pinakes-kb` (any extras), then nothing, a version spec, or `@ URL`: a spec naming
    another distribution would install someone else's code as Pinakes."""
    if not spec.strip() or "\n" in spec:
        return "it is empty or spans lines; it must be one pip requirement"
    if "${{" in spec:  # written into a workflow, it would be evaluated there
        return "it holds a GitHub Actions expression (${{ ... }}); it must be a literal pip requirement"
    match = _REQUIREMENT.fullmatch(spec.strip())
    if match is None:
        return f"{spec!r} is not a pip requirement"
    name = normalized(match["name"])
    if name == FOREIGN_DISTRIBUTION:
        return (f"{match['name']!r} on the package index is another project, not this Pinakes; "
                f"this one is {DISTRIBUTION!r}")
    if name != DISTRIBUTION:
        return f"it names {match['name']!r}; it must install {DISTRIBUTION!r}"
    rest = match["rest"].strip()
    if rest and not (_VERSION_SPEC.fullmatch(rest) or _URL_REFERENCE.fullmatch(rest)):
        return f"{rest!r} after the name is neither a version spec (==0.1.0) nor a URL (@ git+https://...)"
    return None
