# ruamel.yaml's reader error (see main.pyi for why these stubs exist).
from ruamel.yaml.error import YAMLError

class ReaderError(YAMLError):
    name: object
    position: int  # 0-based offset of the refused character
    character: int | str  # a code point, or the text (a byte that does not decode: bytes)
    encoding: str
    reason: str
