"""Settings: defaults < kredenc.toml in the store < KREDENC_* environment < arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from kredenc.config import DEFAULT_HOME, Settings, load_settings, resolve_home
from kredenc.engine import Kredenc
from kredenc.errors import InvalidInput
from kredenc.testing.embedders import HashEmbedder

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No KREDENC_* variable of the machine running the tests leaks in."""
    import os

    for key in [k for k in os.environ if k.startswith("KREDENC_")]:
        monkeypatch.delenv(key)


def write_toml(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "kredenc.toml").write_text(text)


def test_defaults(tmp_path: Path) -> None:
    s = load_settings(tmp_path)
    assert s.home == tmp_path
    assert (s.namespace, s.durability, s.embed_provider) == ("default", "append", "minilm")
    assert (s.rrf_k, s.weight_dense, s.weight_lexical, s.leg_k) == (60, 0.4, 0.6, 50)
    assert s.fusion == "minmax"
    assert s.embed_api_key.get_secret_value() == ""


def test_precedence_defaults_toml_env_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_toml(tmp_path, 'rrf_k = 10\nleg_k = 11\ndurability = "batch"\nnamespace = "toml"\n')
    s = load_settings(tmp_path)
    assert (s.rrf_k, s.leg_k, s.durability, s.namespace, s.weight_dense) == (
        10, 11, "batch", "toml", 0.4,
    )  # fmt: skip

    monkeypatch.setenv("KREDENC_RRF_K", "20")
    monkeypatch.setenv("KREDENC_DURABILITY", "none")
    s = load_settings(tmp_path)
    assert (s.rrf_k, s.leg_k, s.durability, s.namespace) == (20, 11, "none", "toml")

    s = load_settings(tmp_path, rrf_k=30, namespace="arg")
    assert (s.rrf_k, s.leg_k, s.durability, s.namespace) == (30, 11, "none", "arg")

    # An argument given as None means "not given": the lower layers still count.
    s = load_settings(tmp_path, rrf_k=None, namespace=None)
    assert (s.rrf_k, s.namespace) == (20, "toml")


def test_kredenc_open_passes_settings_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "s"
    write_toml(home, 'durability = "none"\nrrf_k = 7\n')
    monkeypatch.setenv("KREDENC_NAMESPACE", "env-ns")
    monkeypatch.setenv("KREDENC_LEG_K", "9")
    with Kredenc.open(home, embedder=HashEmbedder(), leg_k=12) as kb:
        s = kb.settings
        assert (s.durability, s.rrf_k, s.leg_k) == ("none", 7, 12)
        assert kb.namespace == "env-ns"
        assert kb.stats()["namespace"] == "env-ns"
    with Kredenc.open(home, "arg-ns", embedder=HashEmbedder()) as kb:
        assert kb.namespace == "arg-ns"


def test_kredenc_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_home(None) == DEFAULT_HOME
    monkeypatch.setenv("KREDENC_HOME", str(tmp_path / "from-env"))
    assert resolve_home(None) == tmp_path / "from-env"
    assert resolve_home("") == tmp_path / "from-env"
    assert resolve_home(tmp_path / "arg") == tmp_path / "arg"  # an argument wins
    assert load_settings().home == tmp_path / "from-env"
    # The store's own kredenc.toml is read from the KREDENC_HOME directory.
    write_toml(tmp_path / "from-env", "rrf_k = 13\n")
    assert load_settings().rrf_k == 13
    with Kredenc.open(embedder=HashEmbedder(), durability="none") as kb:
        kb.remember("filed under KREDENC_HOME")
        assert kb.home == tmp_path / "from-env"
    assert (tmp_path / "from-env" / "store.json").is_file()


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('durability = "sometimes"\n', "durability"),
        ('embed_provider = "bert"\n', "embed_provider"),
        ("rrf_k = 0\n", "rrf_k"),
        ('leg_k = "many"\n', "leg_k"),
        ("weight_dense = -1\n", "weight_dense"),
        ("ann_dtype = 'f64'\n", "ann_dtype"),
        ("no_such_setting = 1\n", "no_such_setting"),
    ],
)
def test_invalid_toml_values_name_the_key(tmp_path: Path, toml: str, key: str) -> None:
    write_toml(tmp_path, toml)
    with pytest.raises(InvalidInput, match=f"invalid setting {key}:") as info:
        load_settings(tmp_path)
    assert "kredenc.toml" in info.value.hint


def test_invalid_toml_value_opens_nothing(tmp_path: Path) -> None:
    home = tmp_path / "s"
    write_toml(home, 'durability = "sometimes"\n')
    with pytest.raises(InvalidInput, match="durability"):
        Kredenc.open(home, embedder=HashEmbedder())
    assert sorted(p.name for p in home.iterdir()) == ["kredenc.toml"]


def test_malformed_toml_is_invalid_input(tmp_path: Path) -> None:
    write_toml(tmp_path, "durability = \n")
    with pytest.raises(InvalidInput, match="not valid TOML") as info:
        load_settings(tmp_path)
    assert "kredenc.toml" in info.value.message and "kredenc.toml" in info.value.hint


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("KREDENC_RRF_K", "abc"),
        ("KREDENC_DURABILITY", "always"),
        ("KREDENC_EMBED_THREADS", "0"),
        ("KREDENC_MAX_TEXT_CHARS", "-5"),
    ],
)
def test_invalid_env_values_name_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str, value: str
) -> None:
    monkeypatch.setenv(env, value)
    key = env.removeprefix("KREDENC_").lower()
    with pytest.raises(InvalidInput, match=f"invalid setting {key}:"):
        load_settings(tmp_path)


def test_invalid_arguments_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="invalid setting leg_k:"):
        load_settings(tmp_path, leg_k=0)
    with pytest.raises(InvalidInput, match="invalid setting bogus:"):
        Kredenc.open(tmp_path / "s", embedder=HashEmbedder(), bogus=1)
    with pytest.raises(InvalidInput, match="weight_dense \\+ weight_lexical must be positive"):
        load_settings(tmp_path, weight_dense=0, weight_lexical=0)
    assert not (tmp_path / "s").exists()


def test_api_key_is_never_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KREDENC_EMBED_API_KEY", SECRET)
    from_env = load_settings(tmp_path)
    write_toml(tmp_path / "t", f'embed_api_key = "{SECRET}"\n')
    from_toml = load_settings(tmp_path / "t")
    from_arg = load_settings(tmp_path, embed_api_key=SECRET)
    for s in (from_env, from_toml, from_arg):
        assert s.embed_api_key.get_secret_value() == SECRET
        for shown in (
            repr(s),
            str(s),
            s.model_dump_json(),
            str(s.model_dump()),
            repr(s.embed_api_key),
        ):
            assert SECRET not in shown
        assert "**********" in s.model_dump_json()


def test_every_setting_has_a_description() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description, name


def test_home_in_the_store_toml_is_refused(tmp_path: Path) -> None:
    # The file lives inside the store directory, so it cannot choose that directory: a
    # `home` there would be silently ignored. Refused, with the ways that do work.
    home = tmp_path / "s"
    elsewhere = tmp_path / "elsewhere"
    write_toml(home, f'home = "{elsewhere}"\nleg_k = 12\n')
    with pytest.raises(InvalidInput, match="cannot set home") as info:
        load_settings(home)
    assert str(home / "kredenc.toml") in info.value.message
    assert "--store" in info.value.hint and "KREDENC_HOME" in info.value.hint
    with pytest.raises(InvalidInput, match="cannot set home"):
        Kredenc.open(home, embedder=HashEmbedder())
    assert sorted(p.name for p in home.iterdir()) == ["kredenc.toml"]
    assert not elsewhere.exists()


def test_a_redis_url_that_is_not_redis_is_one_line_without_the_secret(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="must start with redis://") as caught:
        load_settings(tmp_path, opcache_redis_url="http://:hunter2@cache.internal/0")
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)
    ok = load_settings(tmp_path, opcache_redis_url="redis://:hunter2@127.0.0.1:6379/0")
    assert "hunter2" not in repr(ok) and "hunter2" not in ok.model_dump_json()


def test_spelling_is_on_with_either_backend_unless_turned_off(tmp_path: Path) -> None:
    """Search and recall correct misspelt words by default on both backends (the
    PostgreSQL lookup reads its ``terms`` table: a few ms, docs/benchmarks.md)."""
    from kredenc.recall.reflex import _plan
    from kredenc.retrieve.query import search_params

    class _Store:
        def __init__(self, settings: Settings) -> None:
            self.settings = settings

    dsn = "host=127.0.0.1 dbname=kredenc"
    for settings in (
        load_settings(tmp_path),
        load_settings(tmp_path, backend="postgres", postgres_dsn=dsn),
    ):
        assert settings.spelling and settings.recall_spelling
        assert search_params(settings).spelling
        assert _plan(_Store(settings), None, None, None, None).params.spelling  # type: ignore[arg-type]
    off = load_settings(
        tmp_path, backend="postgres", postgres_dsn=dsn, spelling=False, recall_spelling=False
    )
    assert not search_params(off).spelling
    assert not _plan(_Store(off), None, None, None, None).params.spelling  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "value", "expected"),
    [
        ("KREDENC_FETCH_ALLOW_HOSTS", "wiki.internal", "a JSON list, e.g. '[\"wiki.internal\"]'"),
        ("KREDENC_RECALL_TYPES", "memory,turn", 'a JSON list, e.g. \'["memory", "turn"]\''),
        ("KREDENC_SCHEDULER_INTERVALS", "garbage", "a JSON object, e.g. '{\"episodes\": 300}'"),
    ],
)
def test_list_and_dict_settings_in_plain_text_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str, value: str, expected: str
) -> None:
    """A list or dict setting in the environment is JSON; plain text is a usage error
    naming the setting, its variable and the form it takes (not pydantic's
    SettingsError, which the CLI shows as an internal error)."""
    monkeypatch.setenv(env, value)
    key = env.removeprefix("KREDENC_").lower()
    for opening in (
        lambda: load_settings(tmp_path),
        lambda: Kredenc.open(tmp_path / "s", embedder=HashEmbedder()),
    ):
        with pytest.raises(InvalidInput) as info:
            opening()
        assert info.value.message == f"invalid setting {key} ({env}): expected {expected}"
        assert "\n" not in str(info.value)
    assert not (tmp_path / "s").exists()
    monkeypatch.setenv(env, '["wiki.internal"]' if "INTERVALS" not in env else '{"decay": 60}')
    load_settings(tmp_path)


@pytest.mark.parametrize(
    ("env", "value", "key"),
    [
        ("KREDENC_LOCK_TTL_S", "inf", "lock_ttl_s"),
        ("KREDENC_SCHEDULER_THROTTLE_S", "inf", "scheduler_throttle_s"),
        ("KREDENC_FETCH_TIMEOUT_S", "Infinity", "fetch_timeout_s"),
        ("KREDENC_FEEDBACK_ALPHA", "nan", "feedback_alpha"),
        ("KREDENC_SCHEDULER_INTERVALS", '{"decay": 1e400}', "scheduler_intervals.decay"),
        ("KREDENC_SCHEDULER_INTERVALS", '{"decay": Infinity}', "scheduler_intervals.decay"),
    ],
)
def test_float_settings_are_finite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str, value: str, key: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(InvalidInput, match=rf"^invalid setting {key}: .*finite"):
        load_settings(tmp_path)


def test_float_settings_are_finite_in_toml_and_arguments(tmp_path: Path) -> None:
    write_toml(tmp_path, "lock_ttl_s = inf\n")
    with pytest.raises(InvalidInput, match=r"^invalid setting lock_ttl_s: .*finite"):
        load_settings(tmp_path)
    write_toml(tmp_path, "[scheduler_intervals]\ndecay = nan\n")
    with pytest.raises(InvalidInput, match=r"^invalid setting scheduler_intervals.decay: .*finite"):
        load_settings(tmp_path)
    (tmp_path / "kredenc.toml").unlink()
    with pytest.raises(InvalidInput, match=r"^invalid setting llm_timeout_s: .*finite"):
        load_settings(tmp_path, llm_timeout_s=float("inf"))


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("lock_ttl_s", 1e12),  # Redis's PX and the renewal thread's wait overflow
        ("scheduler_throttle_s", 1e12),  # past threading.TIMEOUT_MAX
        ("fetch_timeout_s", 1e300),
        ("ingest_timeout_s", 1e300),
        ("llm_timeout_s", 1e300),
        ("web_search_timeout_s", 1e300),
    ],
)
def test_seconds_settings_have_a_ceiling(tmp_path: Path, setting: str, value: float) -> None:
    """A finite but absurd number of seconds overflows a clock or a socket far from the
    setting: each time setting has a ceiling (a day for a TTL, a throttle, a timeout)."""
    with pytest.raises(InvalidInput, match=rf"^invalid setting {setting}: .*less than or equal"):
        load_settings(tmp_path, **{setting: value})
    load_settings(tmp_path, **{setting: 86_400})


def test_scheduler_intervals_have_a_ceiling(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"^invalid setting scheduler_intervals: .*decay"):
        load_settings(tmp_path, scheduler_intervals={"decay": 1e12})
    load_settings(tmp_path, scheduler_intervals={"decay": 365 * 86_400})


REDIS_URL_SETTINGS = ("redis_url", "opcache_redis_url", "jobs_redis_url")


@pytest.mark.parametrize("setting", REDIS_URL_SETTINGS)
@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("redis://127.0.0.1:notaport/0", "port"),
        ("redis://:hunter2@127.0.0.1:99999/0", "port"),
        ("redis://127.0.0.1:0/0", "port"),
        ("redis://alice:hunter2/0", "port"),  # the @ forgotten: the password is the "port"
        ("redis://127.0.0.1:6379/abc", "database"),
        ("redis://:hunter2@127.0.0.1:6379/-1", "database"),
        ("redis://127.0.0.1:6379/0?db=x", "database"),
        ("redis:///", "host"),
        ("rediss://:hunter2@:6379/0", "host"),
        ("unix://", "socket"),
    ],
)
def test_a_redis_url_that_does_not_parse_is_one_line_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, url: str, what: str
) -> None:
    """Checked when the settings load, not at the first use (an internal ValueError
    from redis-py then, a silent db 0 for /abc, 'waiting for jobs on redis:///:6379')."""
    monkeypatch.setenv(f"KREDENC_{setting.upper()}", url)
    with pytest.raises(InvalidInput, match=rf"^invalid setting {setting}: ") as info:
        load_settings(tmp_path)
    shown = str(info.value)
    assert what in info.value.message and "\n" not in shown
    assert "hunter2" not in shown and "alice" not in shown and "Value error" not in shown


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://127.0.0.1",
        "redis://127.0.0.1/",
        "rediss://alice:hunter2@cache.internal:6380/15",
        "redis://[::1]:6379/2",
        "redis://127.0.0.1:6379/?db=3",
        "unix:///run/redis/redis.sock",
        "unix:///run/redis/redis.sock?db=1",
    ],
)
def test_redis_urls_that_parse_are_accepted(tmp_path: Path, url: str) -> None:
    for setting in REDIS_URL_SETTINGS:
        assert getattr(load_settings(tmp_path, **{setting: url}), setting).get_secret_value() == url
