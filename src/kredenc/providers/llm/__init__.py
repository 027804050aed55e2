"""Chat-completion providers: the :class:`~kredenc.providers.llm.base.LLM` seam.

``make_llm(settings)`` (:mod:`.factory`) builds the one the settings name; the
OpenAI-compatible ones are records (:mod:`.records`) over one class (:mod:`.openai`),
the local one (:mod:`.local`) is the ``kredenc[local]`` extra. See docs/llm.md.
"""
