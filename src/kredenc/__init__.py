"""kredenc: a local-first memory and retrieval engine for LLM agents."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from kredenc.errors import KredencError
from kredenc.records import Hit, Memory

if TYPE_CHECKING:
    from kredenc.recall.deps import Conversant

C = TypeVar("C")

__all__ = ["Hit", "Kredenc", "KredencError", "Memory", "wrap"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The facade pulls in storage and providers; import it on first use so that
    # ``import kredenc`` stays light.
    if name == "Kredenc":
        from kredenc.engine import Kredenc

        return Kredenc
    raise AttributeError(name)


def wrap(client: C, kb: Conversant | None = None, **options: Any) -> C:
    """Recall before and filing after every ``client.chat.completions.create``
    (:func:`kredenc.recall.wrap.wrap`); without ``kb`` the default store
    (``KREDENC_HOME``, else ``./.kredenc``) is opened for the life of the process."""
    from kredenc.recall.wrap import wrap as wrap_client

    if kb is None:
        from kredenc.engine import Kredenc

        kb = Kredenc.open()
    return wrap_client(client, kb, **options)
