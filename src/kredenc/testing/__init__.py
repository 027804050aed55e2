"""Test support shipped with kredenc: fakes at our own seams and conformance suites.

``ScriptedLLM`` (:mod:`.llm`) is the scripted model for unit tests; the scripted
OpenAI-compatible server is :mod:`.openai_server` with the chat routes of
:mod:`.chat_server` (``chat_completions_route``).
"""

from kredenc.testing.chat_server import chat_completions_route
from kredenc.testing.llm import ScriptedLLM

__all__ = ["ScriptedLLM", "chat_completions_route"]
