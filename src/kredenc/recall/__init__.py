"""The recall reflex: memories appended to the message list before every model call.

:func:`recall` is the reflex itself, :class:`Budget` bounds what it injects, and
:func:`wrap` adds it (and the filing of each turn) to an OpenAI SDK client.
"""

from kredenc.recall.budget import Budget, estimate_tokens
from kredenc.recall.conversation import SESSIONS, conversation_id, file_turn
from kredenc.recall.reflex import RecallItem, RecallResult, announce, recall, warm_up
from kredenc.recall.terms import Term, recall_terms
from kredenc.recall.wrap import wrap

__all__ = [
    "SESSIONS",
    "Budget",
    "RecallItem",
    "RecallResult",
    "Term",
    "announce",
    "conversation_id",
    "estimate_tokens",
    "file_turn",
    "recall",
    "recall_terms",
    "warm_up",
    "wrap",
]
