"""kredenc: a local-first memory and retrieval engine for LLM agents."""

from kredenc.errors import KredencError
from kredenc.records import Hit, Memory

__all__ = ["Hit", "Kredenc", "KredencError", "Memory", "wrap"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The facade pulls in storage and providers; import it on first use so that
    # ``import kredenc`` stays light.
    if name == "Kredenc":
        from kredenc.engine import Kredenc

        return Kredenc
    if name == "wrap":
        from kredenc.recall.wrap import wrap

        return wrap
    raise AttributeError(name)
