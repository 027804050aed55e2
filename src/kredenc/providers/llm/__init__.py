"""Chat-completion providers: the :class:`~kredenc.providers.llm.base.LLM` seam."""
