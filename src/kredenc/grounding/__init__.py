"""Grounding: does a text follow from a context? The judge and its support check.

Below ``memory`` (its contradictions job uses the support check) and above
``ingest`` and ``retrieve``; it needs only the embedder for meaning.
"""
