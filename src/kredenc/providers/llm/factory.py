"""The LLM the settings name: ``make_llm(settings)``, through the plugin registry."""

from __future__ import annotations

from kredenc import plugins
from kredenc.config import Settings
from kredenc.providers.llm.base import LLM

NONE = "none"


def make_llm(settings: Settings) -> LLM | None:
    """The ``llm_provider`` plugin (group ``kredenc.llms``) built from ``settings``, or
    None for ``"none"`` (the default: the loop runs its deterministic roles). An
    unknown name is InvalidInput listing the known ones; a provider that cannot start
    (no model, no key, a missing extra) raises its own one-line error."""
    if settings.llm_provider == NONE:
        return None
    return plugins.build(plugins.LLMS, settings.llm_provider, settings, LLM)


__all__ = ["NONE", "make_llm"]
