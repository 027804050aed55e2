"""The recall reflex: memories appended to the message list before every model call.

:func:`recall` is the reflex itself, :class:`Budget` bounds what it injects, and
:func:`wrap` adds it (and the filing of each turn) to an OpenAI SDK client. Recall
reads an open store as :class:`RecallStore`; ``wrap`` and the filer need only a
:class:`Conversant` (:class:`TurnSink`), such as the ``Kredenc`` facade.
"""

from kredenc.recall.budget import Budget, estimate_tokens
from kredenc.recall.conversation import SESSIONS, conversation_id, file_turn
from kredenc.recall.deps import Conversant, RecallStore, TurnSink
from kredenc.recall.reflex import announce, recall, warm_up
from kredenc.recall.result import RecallItem, RecallResult
from kredenc.recall.wrap import wrap
from kredenc.retrieve.message_terms import Term, recall_terms

__all__ = [
    "SESSIONS",
    "Budget",
    "Conversant",
    "RecallItem",
    "RecallResult",
    "RecallStore",
    "Term",
    "TurnSink",
    "announce",
    "conversation_id",
    "estimate_tokens",
    "file_turn",
    "recall",
    "recall_terms",
    "warm_up",
    "wrap",
]
