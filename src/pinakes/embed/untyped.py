"""The third-party objects the model layer holds whose libraries give pyright nothing usable to check,
each named once, here, with what it stands for. Every other annotation in `embed` is a real type.

fastembed and onnxruntime ship no type information; sentence-transformers' models take and give
unions pyright cannot narrow (`encode` has eight overloads over partly unknown input types); Ray's annotations leave its handles partly
unknown (`ray.wait` and `ray.kill` take lists of Unknown, and an actor class's proxy is not the
`ActorHandle` its own functions expect); the `openai` module is typed, but only
embed/provider_openai.py may import it (.paid-path-allowlist), so the modules it hands it to hold it
as this name.
"""

from __future__ import annotations

from typing import Any, TypeAlias

FastembedModel: TypeAlias = Any  # fastembed's TextEmbedding or TextCrossEncoder (no type information)
OnnxObject: TypeAlias = Any  # an onnxruntime InferenceSession or its SessionOptions (no type information)
SentenceTransformersModel: TypeAlias = Any  # sentence-transformers' SentenceTransformer or CrossEncoder
RayModule: TypeAlias = Any  # the `ray` module, imported once a cluster run connects
RayActor: TypeAlias = Any  # a Ray actor handle: one EmbedWorker on one node
RayRef: TypeAlias = Any  # a Ray object ref: one batch's vectors, or a worker's start report
OpenAIModule: TypeAlias = Any  # the `openai` module, handed over by provider_openai.py
