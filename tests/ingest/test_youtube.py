"""YouTube loader and the speech-to-text client, against recorded servers on loopback.

The loader's ``base_url`` sends youtube-transcript-api's own requests (watch page,
innertube player API, timedtext captions) and the oEmbed title request to a
``LoopbackServer`` that answers with the fixtures; nothing reaches YouTube.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import logging
import socket
import sys
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kredenc.errors import IngestError, InvalidInput, MissingExtra, ProviderError
from kredenc.ingest.loaders.html import HtmlLoader
from kredenc.ingest.loaders.youtube import (
    YoutubeLoader,
    is_youtube_url,
    video_id,
    watch_url,
    windows,
)
from kredenc.providers.stt import OpenAITranscriber, Segment
from kredenc.testing.openai_server import LoopbackServer, Reply, Request

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ingest" / "youtube"
API_KEY = "AIzaSyAO_FJ2SlqU8Q4STEHLGCilw_Y9_11qcW8"
DEMO = "kRdNc0Demo1"  # English and German captions, English automatic ones
NO_CAPTIONS = "noCaptions1"
TITLE = "How a kitchen cupboard remembers: filing and finding"


def _query(request: Request) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(request.path).query).items()}


class RecordedYouTube:
    """Answers as YouTube did, from the fixtures; ``players`` may be overridden."""

    def __init__(self) -> None:
        self.players: dict[str, Any] = {
            path.stem.removeprefix("player_"): json.loads(path.read_text("utf-8"))
            for path in FIXTURES.glob("player_*.json")
        }

    def watch(self, request: Request) -> Reply:
        vid = _query(request).get("v", "")
        details = self.players.get(vid, {}).get("videoDetails", {})
        page = (FIXTURES / "watch.html").read_text("utf-8")
        page = page.replace("__ID__", vid).replace("__TITLE__", details.get("title", ""))
        return Reply.raw(page, content_type="text/html; charset=utf-8")

    def player(self, request: Request) -> Reply:
        if _query(request).get("key") != API_KEY:
            return Reply.error(400, "API key not valid. Please pass a valid API key.")
        payload = request.json()
        assert payload["context"]["client"]["clientName"] == "ANDROID"
        player = self.players.get(payload["videoId"], self.players["gone0000000"])
        return Reply.json(player)

    def timedtext(self, request: Request) -> Reply:
        query = _query(request)
        name = f"timedtext_{query['v']}_{query['lang']}"
        if query.get("kind") == "asr":
            name += "_asr"
        path = FIXTURES / f"{name}.xml"
        if not path.is_file():
            return Reply.raw("", 404, "text/html")
        return Reply.raw(path.read_bytes(), content_type="text/xml; charset=UTF-8")

    def oembed(self, request: Request) -> Reply:
        vid = video_id(_query(request)["url"])
        path = FIXTURES / f"oembed_{vid}.json"
        if not path.is_file():
            return Reply.raw("Not Found", 404, "text/html")
        return Reply.raw(path.read_bytes())


def stt_route(request: Request) -> Reply:
    """OpenAI's /v1/audio/transcriptions: checks the multipart form, answers verbose_json."""
    form = _multipart(request)
    if form.get("model") != "whisper-1" or "file" not in form:
        return Reply.error(400, "model and file are required", "invalid_request_error")
    if form.get("response_format") != "verbose_json":
        return Reply.json({"text": "(not verbose)"})
    return Reply.raw((FIXTURES / f"stt_verbose_{NO_CAPTIONS}.json").read_bytes())


def _multipart(request: Request) -> dict[str, Any]:
    head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + request.body)
    form: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        assert isinstance(name, str) and isinstance(payload, bytes)
        filename = part.get_filename()
        form[name] = (filename, payload) if filename else payload.decode()
    return form


@pytest.fixture
def youtube() -> Iterator[tuple[LoopbackServer, RecordedYouTube]]:
    recorded = RecordedYouTube()
    with LoopbackServer() as server:
        server.route("GET", "/watch", recorded.watch)
        server.route("POST", "/youtubei/v1/player", recorded.player)
        server.route("GET", "/api/timedtext", recorded.timedtext)
        server.route("GET", "/oembed", recorded.oembed)
        server.route("POST", "/v1/audio/transcriptions", stt_route)
        yield server, recorded


@pytest.fixture
def server(youtube: tuple[LoopbackServer, RecordedYouTube]) -> LoopbackServer:
    return youtube[0]


def _root(server: LoopbackServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def _loader(server: LoopbackServer, **options: Any) -> YoutubeLoader:
    return YoutubeLoader(base_url=_root(server), **options)


def _paths(server: LoopbackServer) -> list[str]:
    return [f"{r.method} {urlsplit(r.path).path}" for r in server.requests]


@pytest.fixture
def audio(tmp_path: Path) -> Path:
    """A short, silent WAV file (the STT server is scripted, it does not listen)."""
    path = tmp_path / f"{NO_CAPTIONS}.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\0\0" * 800)
    return path


# --- video ids and URLs ------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        DEMO,
        f"https://www.youtube.com/watch?v={DEMO}",
        f"https://youtube.com/watch?feature=shared&v={DEMO}&t=42s",
        f"http://m.youtube.com/watch?v={DEMO}",
        f"https://music.youtube.com/watch?v={DEMO}&list=RDAMVM",
        f"https://youtu.be/{DEMO}",
        f"https://youtu.be/{DEMO}?si=AbCdEf&t=10",
        f"https://www.youtube.com/shorts/{DEMO}",
        f"https://www.youtube.com/embed/{DEMO}?start=5",
        f"https://www.youtube-nocookie.com/embed/{DEMO}",
        f"https://www.youtube.com/live/{DEMO}",
        f"youtube.com/watch?v={DEMO}",
        f"  {DEMO}  ",
    ],
)
def test_video_id_from_every_form(source: str) -> None:
    assert video_id(source) == DEMO


@pytest.mark.parametrize(
    "source",
    [
        "kRdNc0Demo",  # 10 characters
        "kRdNc0Demo12",  # 12 characters
        "kRdNc0Dem!1",
        "https://www.youtube.com/watch?v=short",
        "https://www.youtube.com/playlist?list=PL0123456789",
        "https://www.youtube.com/@kredencdemos",
        "https://youtu.be/",
        f"https://vimeo.com/{DEMO}",
        f"https://www.youtube.com.evil.example/watch?v={DEMO}",
        "",
    ],
)
def test_a_bad_id_or_url_is_invalid_input(source: str) -> None:
    with pytest.raises(InvalidInput, match="YouTube") as caught:
        video_id(source)
    assert "11-character" in caught.value.hint


def test_the_loader_claims_youtube_urls_before_the_web_page_loader() -> None:
    loader = YoutubeLoader()
    assert loader.can_load(f"https://youtu.be/{DEMO}")
    assert loader.can_load("https://www.youtube.com/playlist?list=PL0")  # then refused clearly
    assert not loader.can_load("https://example.org/watch?v=kRdNc0Demo1")
    assert not loader.can_load(DEMO)  # a bare id could be a file name: load_video() takes it
    assert not loader.can_load("talk.mp4")
    assert YoutubeLoader.priority > HtmlLoader.priority
    assert is_youtube_url(f"https://www.youtube.com/shorts/{DEMO}")
    assert watch_url(DEMO, 83.9) == f"https://www.youtube.com/watch?v={DEMO}&t=83s"


# --- transcripts -------------------------------------------------------------------


def test_transcript_in_windows_that_cite_their_start(server: LoopbackServer) -> None:
    [doc] = _loader(server).load(f"https://youtu.be/{DEMO}?t=5")
    assert doc.source == f"https://www.youtube.com/watch?v={DEMO}"
    assert doc.title == TITLE
    assert doc.loader == "youtube"
    assert doc.meta == {
        "video_id": DEMO,
        "url": f"https://www.youtube.com/watch?v={DEMO}",
        "language": "en",
        "language_name": "English",
        "is_generated": False,  # a person's captions before YouTube's automatic ones
        "transcript": "youtube",
        "channel": "kredenc demos",
    }
    assert len(doc.sections) == 3
    assert all(len(s.text) <= 1000 for s in doc.sections)
    first, second, third = doc.sections
    assert first.start_s == 0.16
    assert first.text.startswith("Hi, and welcome. Today we're going to talk about cupboards.")
    assert first.meta == {
        "video_id": DEMO,
        "language": "en",
        "url": f"https://www.youtube.com/watch?v={DEMO}&t=0s",
    }
    # each window starts with a whole segment and carries that segment's start
    assert second.start_s == 70.2
    assert second.text.startswith("Words, with a full text index, and meaning")
    assert second.meta["url"].endswith("&t=70s")
    assert third.start_s == 137.2
    assert third.text.endswith("Thanks for watching, and happy filing.")
    assert "[Music]" in first.text
    assert "&#39;" not in doc.text and "&amp;" not in doc.text


def test_the_library_code_path_ran_against_the_recorded_server(server: LoopbackServer) -> None:
    _loader(server).load(f"https://www.youtube.com/watch?v={DEMO}")
    assert _paths(server) == [
        "GET /watch",
        "POST /youtubei/v1/player",
        "GET /api/timedtext",
        "GET /oembed",
    ]
    captions = _query(server.requests[2])
    assert (captions["v"], captions["lang"], captions.get("kind")) == (DEMO, "en", None)
    assert "fmt" not in captions  # the library asks for the plain XML format


def test_languages_pick_the_transcript(server: LoopbackServer) -> None:
    [doc] = _loader(server, languages=["de", "en"]).load(f"https://youtu.be/{DEMO}")
    assert doc.meta["language"] == "de"
    assert doc.sections[0].meta["language"] == "de"
    assert doc.text.startswith("Hallo und willkommen.")


def test_window_size_is_a_setting(server: LoopbackServer) -> None:
    [doc] = _loader(server, window_chars=200).load(f"https://youtu.be/{DEMO}")
    assert len(doc.sections) > 10
    assert all(len(s.text) <= 200 for s in doc.sections)
    starts = [s.start_s or 0.0 for s in doc.sections]
    assert starts == sorted(starts)


def test_windows() -> None:
    segments = [(0.0, "aaaa"), (1.5, " bb\n bb "), (3.0, ""), (4.0, "c" * 12)]
    assert windows(segments, 10) == [(0.0, "aaaa bb bb"), (4.0, "c" * 12)]
    assert windows(segments, 100) == [(0.0, "aaaa bb bb " + "c" * 12)]
    assert windows([], 10) == []


# --- no transcript -------------------------------------------------------------------


def test_no_transcript_and_no_fallback_is_a_clear_error(server: LoopbackServer) -> None:
    with pytest.raises(IngestError) as caught:
        _loader(server).load(f"https://youtu.be/{NO_CAPTIONS}")
    assert caught.value.message == (
        f"https://www.youtube.com/watch?v={NO_CAPTIONS}: no transcript available: "
        "captions are disabled for this video"
    )
    assert "speech-to-text" in caught.value.hint and "audio" in caught.value.hint


def test_no_captions_in_the_languages_asked_for_lists_those_there_are(
    server: LoopbackServer,
) -> None:
    with pytest.raises(IngestError, match=r"no captions in fr, it \(available: de, en\)"):
        _loader(server, languages=["fr", "it"]).load(f"https://youtu.be/{DEMO}")


def test_stt_fallback_with_an_audio_file(server: LoopbackServer, audio: Path) -> None:
    with OpenAITranscriber(server.base_url) as stt:
        [doc] = [_loader(server, transcriber=stt).load_video(NO_CAPTIONS, audio_path=audio)]
    assert doc.title == f"YouTube video {NO_CAPTIONS}"  # oEmbed has nothing for it
    assert doc.meta["transcript"] == "speech-to-text"
    assert doc.meta["stt_model"] == "openai:whisper-1"
    assert doc.meta["language"] == "english"
    [section] = doc.sections
    assert section.start_s == 0.0
    assert section.text.startswith("Here is a shelf I sketched last winter. Three boards")
    assert section.meta["url"] == f"https://www.youtube.com/watch?v={NO_CAPTIONS}&t=0s"
    [upload] = [r for r in server.requests if r.path == "/v1/audio/transcriptions"]
    form = _multipart(upload)
    assert form["model"] == "whisper-1"
    assert form["response_format"] == "verbose_json"
    assert form["file"] == (audio.name, audio.read_bytes())


def test_stt_fallback_windows_keep_segment_times(server: LoopbackServer, audio: Path) -> None:
    with OpenAITranscriber(server.base_url) as stt:
        doc = _loader(server, transcriber=stt, window_chars=90).load_video(
            NO_CAPTIONS, audio_path=audio
        )
    assert [s.start_s for s in doc.sections] == [0.0, 4.52, 9.1, 14.86]
    assert doc.sections[2].meta["url"].endswith("&t=9s")


def test_stt_fallback_finds_audio_by_video_id(
    server: LoopbackServer, audio: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "downloads"
    folder.mkdir()
    named = folder / f"Sketching a shelf, no captions [{NO_CAPTIONS}].m4a"  # yt-dlp's naming
    named.write_bytes(audio.read_bytes())
    (folder / f"{NO_CAPTIONS}.txt").write_text("not audio")
    with OpenAITranscriber(server.base_url) as stt:
        [doc] = _loader(server, transcriber=stt, audio_dir=folder).load(
            f"https://www.youtube.com/shorts/{NO_CAPTIONS}"
        )
    assert doc.meta["audio"] == str(named)


def test_stt_fallback_also_covers_captions_youtube_withholds(
    server: LoopbackServer, audio: Path
) -> None:
    with OpenAITranscriber(server.base_url) as stt:
        doc = _loader(server, transcriber=stt).load_video("ageLimit001", audio_path=audio)
    assert doc.meta["transcript"] == "speech-to-text"
    with pytest.raises(IngestError, match="age-restricted"):
        _loader(server).load_video("ageLimit001")


def test_a_transcriber_without_audio_says_so(server: LoopbackServer) -> None:
    with (
        OpenAITranscriber(server.base_url) as stt,
        pytest.raises(IngestError, match=f"no audio file was given or found for {NO_CAPTIONS}"),
    ):
        _loader(server, transcriber=stt).load_video(NO_CAPTIONS)


def test_audio_without_a_transcriber_says_so(server: LoopbackServer, audio: Path) -> None:
    with pytest.raises(IngestError, match="no speech-to-text endpoint is configured"):
        _loader(server).load_video(NO_CAPTIONS, audio_path=audio)


def test_a_failing_transcription_is_an_ingest_error(server: LoopbackServer, audio: Path) -> None:
    server.route(
        "POST", "/v1/audio/transcriptions", lambda r: Reply.error(500, "CUDA out of memory")
    )
    with OpenAITranscriber(server.base_url) as stt, pytest.raises(IngestError) as caught:
        _loader(server, transcriber=stt).load_video(NO_CAPTIONS, audio_path=audio)
    assert "captions are disabled" in caught.value.message
    assert "HTTP 500: CUDA out of memory" in caught.value.message
    assert "\n" not in str(caught.value)


# --- other failures ------------------------------------------------------------------


def test_an_unavailable_video(server: LoopbackServer) -> None:
    with pytest.raises(IngestError, match="the video is unavailable"):
        _loader(server).load("https://youtu.be/gone0000000")


def test_a_playlist_url_is_invalid_input(server: LoopbackServer) -> None:
    with pytest.raises(InvalidInput, match="no valid YouTube video id"):
        _loader(server).load("https://www.youtube.com/playlist?list=PL0123456789")
    assert server.requests == []


def test_requests_go_to_youtube_only(
    youtube: tuple[LoopbackServer, RecordedYouTube],
) -> None:
    # A player response whose caption URL points elsewhere (here: the cloud metadata
    # address) is refused before any connection is made.
    server, recorded = youtube
    player = recorded.players[DEMO]
    tracks = player["captions"]["playerCaptionsTracklistRenderer"]["captionTracks"]
    for track in tracks:
        track["baseUrl"] = "http://169.254.169.254/latest/meta-data/?lang=en"
    with pytest.raises(IngestError, match=r"refused to fetch http://169\.254\.169\.254/"):
        _loader(server).load(f"https://youtu.be/{DEMO}")


def test_youtube_unreachable(tmp_path: Path) -> None:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    loader = YoutubeLoader(base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(IngestError, match="cannot reach YouTube") as failed:
        loader.load(f"https://youtu.be/{DEMO}")
    # One short line with the reason the socket gave, not urllib3's 300-character
    # "HTTPConnectionPool(host=…): Max retries exceeded …" (a day-one audit).
    message = failed.value.message
    assert message == (
        f"https://www.youtube.com/watch?v={DEMO}: cannot reach YouTube "
        "(no network, or the name does not resolve): Connection refused"
    ), message
    assert failed.value.hint == "check the network connection and try again"


def test_a_slow_youtube_runs_into_the_time_limit(server: LoopbackServer) -> None:
    server.route("GET", "/watch", lambda r: Reply(200, b"", "text/html", delay=2.0))
    with pytest.raises(IngestError, match=r"YouTube did not answer within 0\.3 s"):
        _loader(server, timeout_s=0.3).load(f"https://youtu.be/{DEMO}")


def test_a_missing_title_is_a_warning_not_a_failure(
    server: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.route("GET", "/oembed", lambda r: Reply.raw("Unauthorized", 401, "text/html"))
    with caplog.at_level(logging.WARNING, logger="kredenc.ingest.loaders.youtube"):
        [doc] = _loader(server).load(f"https://youtu.be/{DEMO}")
    assert doc.title == f"YouTube video {DEMO}"
    assert "no title from YouTube's oEmbed" in caplog.text


# --- the speech-to-text client --------------------------------------------------------


def test_transcriber_parses_verbose_json(server: LoopbackServer, audio: Path) -> None:
    with OpenAITranscriber(server.base_url, api_key="sk-test", language="en") as stt:
        result = stt.transcribe(audio)
    assert result.language == "english"
    assert result.duration_s == 19.3
    assert result.segments[0] == Segment(0.0, 4.52, "Here is a shelf I sketched last winter.")
    assert len(result.segments) == 4
    assert result.text.endswith("It has worked for six years.")
    [upload] = server.requests
    assert upload.headers["authorization"] == "Bearer sk-test"
    assert _multipart(upload)["language"] == "en"
    assert "sk-test" not in repr(stt)


def test_transcriber_without_segments_gives_one(
    server: LoopbackServer, audio: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server.route("POST", "/v1/audio/transcriptions", lambda r: Reply.json({"text": " Hello. "}))
    with OpenAITranscriber(server.base_url) as stt, caplog.at_level(logging.WARNING):
        result = stt.transcribe(audio)
    assert result.segments == (Segment(0.0, 0.0, "Hello."),)
    assert "without segments" in caplog.text
    server.route(
        "POST", "/v1/audio/transcriptions", lambda r: Reply.raw("Plain.", 200, "text/plain")
    )
    with OpenAITranscriber(server.base_url) as stt:
        assert stt.transcribe(audio).segments == (Segment(0.0, 0.0, "Plain."),)


def test_transcriber_errors(server: LoopbackServer, audio: Path, tmp_path: Path) -> None:
    server.route(
        "POST",
        "/v1/audio/transcriptions",
        lambda r: Reply.error(401, "Incorrect API key provided", "invalid_request_error"),
    )
    with OpenAITranscriber(server.base_url, api_key="wrong") as stt:
        with pytest.raises(ProviderError, match="HTTP 401: Incorrect API key provided") as caught:
            stt.transcribe(audio)
        assert caught.value.hint == "check the API key"
        with pytest.raises(InvalidInput, match="no such audio file"):
            stt.transcribe(tmp_path / "missing.mp3")
    with pytest.raises(InvalidInput, match="must start with http"):
        OpenAITranscriber("127.0.0.1:8000/v1")


def test_without_the_extra_the_loader_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "youtube_transcript_api", None)  # import fails
    loader = YoutubeLoader()
    assert loader.can_load(f"https://youtu.be/{DEMO}")  # still claims the URL
    with pytest.raises(MissingExtra) as caught:
        loader.load(f"https://youtu.be/{DEMO}")
    assert caught.value.hint == "pip install 'kredenc[youtube]'"
