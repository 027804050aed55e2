"""Provider records, the settings that choose one, and make_llm through the registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from kredenc import plugins
from kredenc.config import Settings, load_settings
from kredenc.errors import InvalidInput
from kredenc.providers.llm.factory import make_llm
from kredenc.providers.llm.openai import OpenAICompatLLM
from kredenc.providers.llm.records import RECORDS, ProviderRecord
from kredenc.testing.chat_server import PATH, chat_completions_route
from kredenc.testing.openai_server import LoopbackServer

EXPECTED_URLS = {
    "openai": "https://api.openai.com/v1",
    "groq": "https://api.groq.com/openai/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
}
KEY_VARIABLES = ("OPENAI_API_KEY", "GROQ_API_KEY", "OPENROUTER_API_KEY", "VLLM_API_KEY")


@pytest.fixture(autouse=True)
def _no_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*KEY_VARIABLES, "LLAMA_API_KEY", "KREDENC_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def settings(tmp_path: Path, **values: object) -> Settings:
    return load_settings(tmp_path, **values)


def test_none_is_the_default_and_makes_no_llm(tmp_path: Path) -> None:
    assert Settings().llm_provider == "none"
    assert make_llm(settings(tmp_path)) is None


@pytest.mark.parametrize("name", sorted(EXPECTED_URLS))
def test_each_record_builds_with_its_base_url(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = RECORDS[name]
    if record.key_env:
        monkeypatch.setenv(record.key_env, "sk-from-env")
    model = make_llm(settings(tmp_path, llm_provider=name, llm_model="m1"))
    assert isinstance(model, OpenAICompatLLM)
    assert model.name == name and model.model == "m1"
    assert model.url == f"{EXPECTED_URLS[name]}/chat/completions"
    assert model.json_schema is record.json_schema
    model.close()


def test_every_record_is_a_registered_builtin() -> None:
    assert set(RECORDS) | {"local"} == set(plugins.BUILTINS[plugins.LLMS])
    for name, record in RECORDS.items():
        assert plugins.load(plugins.LLMS, name) is record


def test_the_generic_record_needs_a_base_url(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="needs a base URL") as info:
        make_llm(settings(tmp_path, llm_provider="openai-compatible", llm_model="m"))
    assert "llm_base_url" in info.value.hint
    model = make_llm(
        settings(
            tmp_path,
            llm_provider="openai-compatible",
            llm_model="m",
            llm_base_url="http://10.0.0.5:9000/v1",
        )
    )
    assert isinstance(model, OpenAICompatLLM) and model.json_schema is False
    assert model.url == "http://10.0.0.5:9000/v1/chat/completions"


def test_llm_base_url_replaces_a_records_own(tmp_path: Path) -> None:
    values = {
        "llm_provider": "ollama",
        "llm_model": "qwen2.5",
        "llm_base_url": "http://box:11434/v1",
    }
    model = make_llm(settings(tmp_path, **values))
    assert isinstance(model, OpenAICompatLLM)
    assert model.url == "http://box:11434/v1/chat/completions"


def test_an_unknown_provider_is_rejected_with_the_list(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        settings(tmp_path, llm_provider="gpt")
    message = info.value.message
    assert "unknown LLM provider 'gpt'" in message
    for name in ("none", "openai", "groq", "ollama", "llamacpp", "lmstudio", "local"):
        assert name in message
    assert "\n" not in str(info.value)


def test_a_hosted_provider_without_a_key_is_refused_naming_both_places(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="'groq' needs an API key") as info:
        make_llm(settings(tmp_path, llm_provider="groq", llm_model="llama-3.1-8b-instant"))
    assert "llm_api_key" in info.value.hint and "GROQ_API_KEY" in info.value.hint


def test_the_key_comes_from_settings_before_the_records_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    record = RECORDS["openai"]
    assert record.api_key(settings(tmp_path)).get_secret_value() == "sk-env"
    chosen = settings(tmp_path, llm_api_key="sk-settings")
    assert record.api_key(chosen).get_secret_value() == "sk-settings"
    monkeypatch.setenv("KREDENC_LLM_API_KEY", "sk-kredenc")
    assert record.api_key(settings(tmp_path)).get_secret_value() == "sk-kredenc"


def test_the_key_never_shows_in_settings_or_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    chosen = settings(tmp_path, llm_provider="openai", llm_model="gpt-4o-mini")
    model = make_llm(chosen)
    assert model is not None
    for shown in (repr(chosen), str(chosen.model_dump()), repr(model), model.describe()):
        assert "sk-very-secret" not in shown
    assert isinstance(chosen.llm_api_key, SecretStr)


def test_record_prices_are_per_million_input_and_output() -> None:
    record = RECORDS["openai"]
    assert record.prices["gpt-4o-mini"] == (0.15, 0.60)
    assert all(
        len(p) == 2 and p[0] >= 0 and p[1] >= 0 for r in RECORDS.values() for p in r.prices.values()
    )


def test_a_new_record_is_a_few_lines_and_calls_a_real_server(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.route("POST", PATH, chat_completions_route(["Bonjour."]))
        record = ProviderRecord("mine", server.base_url, prices={"m": (1000.0, 1000.0)})
        model = record.from_settings(settings(tmp_path, llm_model="m", llm_timeout_s=5))
        done = model.complete([{"role": "user", "content": "Say hello in French."}])
        model.close()
        assert model.fingerprint() == f"mine:m@{server.base_url}"
    assert done.text == "Bonjour." and done.usage.cost_usd > 0


def test_llm_settings_have_their_bounds(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="llm_timeout_s"):
        settings(tmp_path, llm_timeout_s=0)
    with pytest.raises(InvalidInput, match="llm_max_tokens"):
        settings(tmp_path, llm_max_tokens=0)
    chosen = settings(tmp_path)
    assert chosen.llm_max_tokens == 1024 and chosen.llm_local_threads == 2
