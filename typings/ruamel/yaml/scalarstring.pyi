# ruamel.yaml's strings that remember how they were quoted (see main.pyi for why these stubs exist).
from typing import Self

class ScalarString(str):
    def __new__(cls, value: str = "", *, anchor: str | None = None) -> Self: ...

class LiteralScalarString(ScalarString): ...  # |
class FoldedScalarString(ScalarString): ...  # >
class SingleQuotedScalarString(ScalarString): ...  # '
class DoubleQuotedScalarString(ScalarString): ...  # "
class PlainScalarString(ScalarString): ...
