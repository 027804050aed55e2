"""Adapters that put the engine's search behind other libraries' retriever interfaces.

``kredenc.integrations.langchain.KredencRetriever`` is a langchain-core ``BaseRetriever``
(the ``langchain`` extra) and ``kredenc.integrations.llamaindex.KredencRetriever`` a
llama-index-core ``BaseRetriever`` (the ``llamaindex`` extra). Both call ``search`` on a
:class:`~kredenc.Kredenc`, a :class:`~kredenc.Client` or an :class:`~kredenc.AsyncKredenc`
(see ``hits``) and hand its hits back with their provenance as metadata. Importing this
package imports neither library; each module imports its own.
"""
