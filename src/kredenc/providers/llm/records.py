"""LLM providers as declarative records: where the server is, which variable holds its
key, whether it enforces a JSON Schema, and what it costs. The wire format is
:class:`~kredenc.providers.llm.openai.OpenAICompatLLM`'s, the same for all of them.

A record is a plugin of the ``kredenc.llms`` group (it builds itself from the
settings), so a new OpenAI-compatible provider is a few lines and an entry point::

    TOGETHER = ProviderRecord(
        "together", "https://api.together.xyz/v1", key_env="TOGETHER_API_KEY",
        json_schema=True, prices={"meta-llama/Llama-3.3-70B-Instruct-Turbo": (0.88, 0.88)},
    )

    [project.entry-points."kredenc.llms"]
    together = "mypackage:TOGETHER"

Prices are USD per million input and output tokens, as the providers listed them in
2025 (change them here when they change; a model not listed costs 0.0). The key is
``llm_api_key`` (``KREDENC_LLM_API_KEY``) when set, else the record's ``key_env``
variable, which :func:`kredenc.config.env_secret` reads (no other module reads the
environment); neither is ever logged or shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import SecretStr

from kredenc.config import Settings, env_secret
from kredenc.errors import InvalidInput
from kredenc.providers.llm.openai import OpenAICompatLLM


@dataclass(frozen=True)
class ProviderRecord:
    """One OpenAI-compatible provider. ``base_url`` empty: it must come from
    ``llm_base_url``. ``needs_key``: a call without a key is refused before it is sent."""

    name: str
    base_url: str
    key_env: str = ""
    json_schema: bool = True
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    needs_key: bool = False

    def api_key(self, settings: Settings) -> SecretStr:
        """``llm_api_key`` if set, else the ``key_env`` variable, else an empty secret."""
        if settings.llm_api_key.get_secret_value():
            return settings.llm_api_key
        return env_secret(self.key_env) if self.key_env else SecretStr("")

    def url(self, settings: Settings) -> str:
        """``llm_base_url`` if set, else the record's own."""
        url = settings.llm_base_url or self.base_url
        if not url:
            raise InvalidInput(
                f"LLM provider {self.name!r} needs a base URL",
                "set llm_base_url (KREDENC_LLM_BASE_URL), e.g. http://127.0.0.1:8000/v1",
            )
        return url

    def from_settings(self, settings: Settings) -> OpenAICompatLLM:
        """The provider as ``llm_model``, ``llm_base_url``, the key, ``llm_timeout_s``
        and ``llm_max_tokens`` make it."""
        key = self.api_key(settings)
        if self.needs_key and not key.get_secret_value():
            where = f" or {self.key_env}" if self.key_env else ""
            raise InvalidInput(
                f"LLM provider {self.name!r} needs an API key",
                f"set llm_api_key (KREDENC_LLM_API_KEY){where}",
            )
        return OpenAICompatLLM(
            self.url(settings),
            settings.llm_model,
            name=self.name,
            api_key=key,
            json_schema=self.json_schema,
            prices=self.prices,
            timeout=settings.llm_timeout_s,
            max_tokens=settings.llm_max_tokens,
        )


OPENAI = ProviderRecord(
    "openai",
    "https://api.openai.com/v1",
    key_env="OPENAI_API_KEY",
    needs_key=True,
    prices={
        "gpt-4o-mini": (0.15, 0.60),
        "gpt-4o": (2.50, 10.00),
        "gpt-4.1": (2.00, 8.00),
        "gpt-4.1-mini": (0.40, 1.60),
        "gpt-4.1-nano": (0.10, 0.40),
    },
)
GROQ = ProviderRecord(
    "groq",
    "https://api.groq.com/openai/v1",
    key_env="GROQ_API_KEY",
    needs_key=True,
    # json_schema only on a few of its models: ask for json_object, check here.
    json_schema=False,
    prices={
        "llama-3.1-8b-instant": (0.05, 0.08),
        "llama-3.3-70b-versatile": (0.59, 0.79),
    },
)
OPENROUTER = ProviderRecord(
    "openrouter",
    "https://openrouter.ai/api/v1",
    key_env="OPENROUTER_API_KEY",
    needs_key=True,
    prices={
        "openai/gpt-4o-mini": (0.15, 0.60),
        "meta-llama/llama-3.1-8b-instruct": (0.02, 0.03),
    },
)
# Local servers: no key needed (one is sent if set), no price.
OLLAMA = ProviderRecord("ollama", "http://127.0.0.1:11434/v1")
VLLM = ProviderRecord("vllm", "http://127.0.0.1:8000/v1", key_env="VLLM_API_KEY")
LLAMACPP = ProviderRecord("llamacpp", "http://127.0.0.1:8080/v1", key_env="LLAMA_API_KEY")
LMSTUDIO = ProviderRecord("lmstudio", "http://127.0.0.1:1234/v1")
# Any other server: its URL from llm_base_url; JSON mode only, the schema checked here.
OPENAI_COMPATIBLE = ProviderRecord("openai-compatible", "", json_schema=False)

RECORDS: dict[str, ProviderRecord] = {
    r.name: r
    for r in (OPENAI, GROQ, OPENROUTER, OLLAMA, VLLM, LLAMACPP, LMSTUDIO, OPENAI_COMPATIBLE)
}

__all__ = [
    "GROQ",
    "LLAMACPP",
    "LMSTUDIO",
    "OLLAMA",
    "OPENAI",
    "OPENAI_COMPATIBLE",
    "OPENROUTER",
    "RECORDS",
    "VLLM",
    "ProviderRecord",
]
