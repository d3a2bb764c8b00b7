"""A remote model's identity, from the vectors its endpoint returns for a fixed probe set.

A remote model has no weights file to digest, and a server may swap the model behind the same name.
The probe vectors tell models apart, but not to the bit: a server's float noise (another batch shape,
another GPU kernel, a non-deterministic reduction) moves every component a little on every request,
and any digest of the vectors, rounded or not, flips with it (rounding is a step function: a
component near a rounding edge crosses it on noise of any size). So the identity has two parts:

- the *fingerprint* (`probe:` + sha256 of the probe vectors rounded to `FINGERPRINT_DECIMALS`) is the
  `weights_sha256` of the identity: the name the index meta and every vector's content key
  (pipeline/vector_reuse.py) know the model by. It is computed when an index is first built with the
  model, and from then on *adopted* from the index whenever the model still answers as recorded, so
  it never moves with noise;
- the *probe vectors* are recorded in the index meta (`PROBE_META_KEY`) and decide whether the model
  answering now is the recorded one: each probe's cosine with its recorded vector must be at least
  `MIN_PROBE_COSINE`, compared afresh against the recorded vectors every time (never against the
  last answer, so noise cannot accumulate into drift).

An index built before the probe vectors were recorded has only the fingerprint: it is compared by
equality (the old rule) until a sync finds it unchanged and records the vectors beside it.
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from pinakes.embed.base import Embedder, ModelIdentity

# Fixed forever: changing a probe changes every remote index's fingerprint (a rebuild for all).
PROBE_TEXTS = (
    "Pinakes embedding fingerprint probe.",
    "The quick brown fox jumps over the lazy dog.",
    "Ἀρχὴ δὲ λέγεται ἥμισυ παντός: the beginning is half of the whole.",
    "SELECT id FROM chunks WHERE doc_id = 42 ORDER BY ordinal;",
)
FINGERPRINT_DECIMALS = 3
PROBE_META_KEY = "embedding_probe"
_ENCODING = "f32le:"  # little-endian float32 rows, base64: what the meta value starts with
# The least cosine every probe must keep with its recorded vector for the model to be the recorded
# one (bench/bench_probe_tolerance.py, docs/perf/embedding.md, 2026-12-06). Noise of standard
# deviation s on each component of a unit vector of d components costs 1 - cos ~ s^2 d / 2: the
# worst of 200 draws at s = 1e-3 was 0.99942 at d = 1024 and 0.99780 at d = 4096, so noise up to
# 1e-3 a component passes at every width up to 4,096 with room to spare, and 1e-5 (already more
# than servers show) leaves the cosine at 1.000000. Another model is far outside: the same MiniLM
# weights pooled from [CLS] instead of the mean gave 0.44-0.62, the test stub's other seed 0.00
# (an unrelated model's space shares no axes). The same weights in int8 gave 0.9994: a server
# moving to a quantised build of the same model is not a model swap, its vectors stand in for the
# recorded ones as well as noisy ones do.
MIN_PROBE_COSINE = 0.995


def fingerprint_of(vectors: np.ndarray) -> str:
    """The probe vectors' fingerprint: rounded, hashed (an index's `embedding_sha256`)."""
    import numpy as np

    rounded = np.round(vectors.astype(np.float64), FINGERPRINT_DECIMALS) + 0.0  # +0.0: no "-0.0"
    digest = hashlib.sha256(f"{FINGERPRINT_DECIMALS}:".encode())
    for row in rounded:
        digest.update((",".join(f"{value:.{FINGERPRINT_DECIMALS}f}" for value in row) + "\n").encode())
    return "probe:" + digest.hexdigest()


def encode_probe(vectors: np.ndarray) -> str:
    """The probe vectors as one meta value (exact: float32 bits, base64)."""
    import numpy as np

    return _ENCODING + base64.b64encode(np.ascontiguousarray(vectors, dtype="<f4").tobytes()).decode("ascii")


def decode_probe(value: str | None, dim: int) -> np.ndarray | None:
    """The recorded probe vectors, or None when there are none of this width (an older index, or a
    value that is not one `encode_probe` wrote)."""
    import numpy as np

    if not value or not value.startswith(_ENCODING) or dim < 1:
        return None
    try:
        raw = base64.b64decode(value[len(_ENCODING):], validate=True)
    except ValueError:
        return None
    if len(raw) != len(PROBE_TEXTS) * dim * 4:
        return None
    return np.frombuffer(raw, dtype="<f4").reshape(len(PROBE_TEXTS), dim).astype(np.float32)


def probe_agreement(answered: np.ndarray, recorded: np.ndarray) -> float:
    """The least cosine between a probe's vector now and its recorded one (1.0: the same vectors)."""
    import numpy as np

    if answered.shape != recorded.shape:
        return -1.0
    a = answered.astype(np.float64)
    b = recorded.astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    cosines = np.einsum("ij,ij->i", a, b) / np.where(norms > 0, norms, 1.0)
    return float(np.where(norms > 0, cosines, 0.0).min())


def same_model(answered: np.ndarray, recorded: np.ndarray) -> bool:
    return probe_agreement(answered, recorded) >= MIN_PROBE_COSINE


@runtime_checkable
class ProbedModel(Protocol):
    """A model identified by its probe vectors (the remote provider's `RemoteEmbedder`)."""

    identity: ModelIdentity
    agreed_with: str | None  # the index's recorded probe value it adopted last
    disagreed_with: str | None  # the one a search last found it differs from

    def adopt(self, fingerprint: str, recorded: np.ndarray, recorded_value: str) -> float: ...

    def begin_search(self) -> bool: ...

    def reprobe(self) -> None: ...


def probed(embedder: object) -> ProbedModel | None:
    return embedder if isinstance(embedder, ProbedModel) else None


def probe_meta(embedder: object) -> dict[str, str]:
    """The index meta row recording a remote model's probe vectors; none for a local model."""
    vectors = getattr(probed(embedder), "probe_vectors", None)
    return {PROBE_META_KEY: encode_probe(vectors)} if vectors is not None else {}


def model_meta(embedder: Embedder) -> dict[str, str]:
    """Every meta row saying which model the index's vectors came from: the identity and, for a
    remote model, the probe vectors that identity stands for. Written together wherever they are
    written (with a sync's first vectors, and at its end), so an index is never left with the
    fingerprint but without the evidence a later sync compares by cosine."""
    from pinakes.embed.base import identity_meta

    return {**identity_meta(embedder.identity), **probe_meta(embedder)}
