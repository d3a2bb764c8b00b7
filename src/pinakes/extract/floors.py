"""The two floors of the free PDF path, fitted from tests/pdf-corpus and shipped as package data.

`floors.toml` holds the running-head threshold T (`layout.strip_running_heads`) and the text-yield
floor (non-whitespace characters a page's native text layer must reach to count as a text page),
each with what it was fitted on. Both enter the pypdfium2 extractor's fingerprint, so a re-fit
re-extracts every PDF through the cache. They cost nothing to apply, so a missing or damaged file
is an error at the first use, never a silent default: a guessed floor is what §7.1 forbids.
Re-fit with `python tests/pdf-corpus/evaluate.py --fit --write-floors`.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import FloorsMissingError

FLOORS_FILE = "floors.toml"


@dataclass(frozen=True, slots=True)
class Floors:
    running_head_threshold: float  # T: a zone segment recurring on >= T of nearby pages is a head
    text_yield_floor: float  # a page with fewer non-whitespace native characters has no usable text
    fitted_on: str

    def fingerprint_values(self) -> dict[str, float]:
        return {"running_head_threshold": self.running_head_threshold,
                "text_yield_floor": self.text_yield_floor}


def floors_path() -> Path:
    # Beside this module, as the wheel installs it (importlib.resources costs every sync ~4 ms).
    return Path(__file__).with_name(FLOORS_FILE)


@functools.lru_cache(maxsize=4)
def load_floors(path: Path | None = None) -> Floors:
    """The shipped floors; FloorsMissingError (naming the file and the remedy) when absent or damaged."""
    path = path if path is not None else floors_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FloorsMissingError("the fitted PDF floors are missing", remedy=_floors_remedy(), path=path) from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise FloorsMissingError(f"the fitted PDF floors cannot be read ({exc})", remedy=_floors_remedy(), path=path) from exc
    try:
        threshold = float(data["running_head"]["threshold"])
        floor = float(data["text_yield"]["floor"])
        fitted_on = str(data["fitted_on"])
    except (KeyError, TypeError, ValueError) as exc:
        raise FloorsMissingError(f"the fitted PDF floors lack a value ({exc})", remedy=_floors_remedy(), path=path) from exc
    if not (0.0 < threshold <= 1.0 and floor > 0.0):
        raise FloorsMissingError(f"the fitted PDF floors are out of range (T={threshold}, yield floor={floor})",
                                 remedy=_floors_remedy(), path=path)
    return Floors(threshold, floor, fitted_on)


def _floors_remedy() -> str:
    # Built only on failure: naming the install command reads the distribution's metadata, which
    # every sync would otherwise pay for on its way past the floors.
    from pinakes.distribution import pip_install

    reinstall = pip_install(option="--force-reinstall")
    return (f"reinstall Pinakes ({reinstall}: the wheel ships extract/floors.toml); in a checkout, "
            "re-fit it with `python tests/pdf-corpus/evaluate.py --fit --write-floors`")
