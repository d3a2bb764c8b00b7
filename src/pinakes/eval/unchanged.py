"""Whether an eval artifact on disk already says what a run would write (issue #40).

`pnk eval` writes eval/outcomes.json (and `--update-baseline` eval/baseline.json) on every run, and
a KB's eval files are usually committed. The model's arithmetic is not bit-exact from run to run
(thread scheduling in the runtime moves a cosine in its 6th decimal), so a run that changed nothing
rewrote a tracked file with noise. A file is left as it is when it holds the same JSON, every number
within `FLOAT_TOLERANCE` of the new one, and everything else (keys, strings, booleans, nulls,
lengths) exactly the same; anything more than noise is written in full.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from pinakes.jsontypes import is_list, is_object

# Far above the runtime's noise (a few units of the 6th decimal the files are rounded to), far below
# what any rate, score or fit reads from them.
FLOAT_TOLERANCE = 1e-5


def already_written(path: Path, data: Mapping[str, object]) -> bool:
    """Whether the JSON at `path` is `data` up to number noise (False when it cannot be read)."""
    try:
        on_disk: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    # `data` as it would read back: tuples are lists, keys are strings
    return same_within(on_disk, json.loads(json.dumps(data)))


def same_within(old: object, new: object, tolerance: float = FLOAT_TOLERANCE) -> bool:
    """Whether two JSON values are equal, numbers (not booleans) compared within `tolerance`."""
    if isinstance(old, bool) or isinstance(new, bool):
        return old is new
    if isinstance(old, (int, float)) and isinstance(new, (int, float)):
        return math.isclose(old, new, rel_tol=0.0, abs_tol=tolerance)
    if is_object(old) and is_object(new):
        return list(old) == list(new) and all(same_within(old[key], new[key], tolerance) for key in old)
    if is_list(old) and is_list(new):
        return len(old) == len(new) and all(
            same_within(a, b, tolerance) for a, b in zip(old, new, strict=True))
    return type(old) is type(new) and old == new
