"""YouTube loader: a video's transcript, in windows that cite their start time.

A video is named by its 11-character id or by a ``youtube.com/watch?v=``,
``youtu.be/``, ``youtube.com/shorts/``, ``/embed/`` or ``/live/`` URL. The transcript
comes through youtube-transcript-api (captions in the first of ``languages`` the video
has, a person's captions before YouTube's automatic ones); its segments are merged
into windows of about ``window_chars`` characters, each a section with the start
time of its first segment and a ``url`` with ``&t=<seconds>s`` in its meta, so a
citation can point at the moment. The title comes from YouTube's oEmbed endpoint.

When the video has no transcript (captions disabled, none in the languages asked
for, or YouTube will not hand them out: age gate, sign-in, blocked address), its
audio can be transcribed instead: a :class:`~kredenc.providers.stt.Transcriber`
(any OpenAI-compatible ``/audio/transcriptions`` endpoint) and a local audio file,
given to :meth:`YoutubeLoader.load_video` or found in ``audio_dir`` by the video id
(``<id>.m4a``, or yt-dlp's default ``<title> [<id>].webm``).

Every request to YouTube goes through one ``requests`` session whose adapter sets a
time limit (the library sets none), refuses hosts other than YouTube's, and, when
``base_url`` is given, sends the requests there instead (a mirror, or a recorded
server on loopback in tests): the library's own code path runs unchanged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, urlencode, urlsplit
from xml.etree.ElementTree import ParseError

from kredenc.config import Settings
from kredenc.errors import IngestError, InvalidInput, KredencError, MissingExtra
from kredenc.ingest.document import LoadedDocument, Section
from kredenc.ingest.loaders.base import Loader, is_url
from kredenc.providers.stt import Transcriber

# youtube-transcript-api (and requests under it) is the optional 'youtube' extra: it
# is imported when a video is loaded, so that without it the loader still claims
# YouTube URLs and says what to install, rather than vanishing from the registry
# and leaving the URLs to the web page loader.
if TYPE_CHECKING:
    import requests
    from youtube_transcript_api import CouldNotRetrieveTranscript, FetchedTranscript

logger = logging.getLogger(__name__)

YOUTUBE = "https://www.youtube.com"
DEFAULT_WINDOW_CHARS = 1000
DEFAULT_TIMEOUT_S = 20.0
AUDIO_SUFFIXES = frozenset(
    {".m4a", ".mp3", ".webm", ".opus", ".ogg", ".oga", ".wav", ".flac", ".aac", ".mp4", ".mkv"}
)

_ID = re.compile(r"[A-Za-z0-9_-]{11}")
_HOSTS = frozenset(
    {
        "youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com",
        "youtu.be", "www.youtu.be", "youtube-nocookie.com", "www.youtube-nocookie.com",
    }
)  # fmt: skip
# Hosts the library's requests may go to (the watch page, the player API, captions).
_FETCH_HOSTS = frozenset({"www.youtube.com", "youtube.com", "m.youtube.com"})
_PATH_FORMS = ("shorts", "embed", "live", "v", "e")
_ID_HINT = (
    "give an 11-character video id (dQw4w9WgXcQ) or a youtube.com/watch?v=…, youtu.be/…, "
    "youtube.com/shorts/… or youtube.com/embed/… URL"
)
_FALLBACK_HINT = (
    "to transcribe the audio instead, configure a speech-to-text endpoint and give the "
    "video's audio file (audio_path, or audio_dir with a file named after the video id)"
)


def video_id(source: str) -> str:
    """The 11-character id of the video that ``source`` names (an id or a URL).

    Raises :class:`~kredenc.errors.InvalidInput` for anything else.
    """
    text = source.strip()
    if _ID.fullmatch(text):
        return text
    parts = urlsplit(text if "://" in text else f"https://{text}")
    host = (parts.hostname or "").lower()
    if host not in _HOSTS:
        raise InvalidInput(f"{source}: not a YouTube video id or URL", _ID_HINT)
    segments = [s for s in parts.path.split("/") if s]
    candidate = ""
    if host.endswith("youtu.be"):
        candidate = segments[0] if segments else ""
    elif segments[:1] == ["watch"]:
        candidate = (parse_qs(parts.query).get("v") or [""])[0]
    elif len(segments) >= 2 and segments[0] in _PATH_FORMS:
        candidate = segments[1]
    if not _ID.fullmatch(candidate):
        raise InvalidInput(f"{source}: no valid YouTube video id in the URL", _ID_HINT)
    return candidate


def watch_url(vid: str, start_s: float | None = None) -> str:
    """The canonical watch URL of a video, at ``start_s`` seconds when given."""
    url = f"{YOUTUBE}/watch?v={vid}"
    return url if start_s is None else f"{url}&t={int(start_s)}s"


def is_youtube_url(source: str) -> bool:
    """Whether ``source`` is a URL on one of YouTube's hosts."""
    if not is_url(source):
        return False
    return (urlsplit(source).hostname or "").lower() in _HOSTS


class _NoTranscript(Exception):
    """The video exists, but its captions cannot be had (the fallback's cue)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class YoutubeLoader(Loader):
    """Reads a YouTube video's transcript; asked before the generic web page loader."""

    name: ClassVar[str] = "youtube"
    suffixes: ClassVar[tuple[str, ...]] = ()
    priority: ClassVar[int] = 10

    @classmethod
    def from_settings(cls, settings: Settings) -> YoutubeLoader:
        """A loader with the languages and speech-to-text fallback of ``settings``."""
        transcriber = None
        if settings.stt_url:
            from kredenc.providers.stt import OpenAITranscriber

            transcriber = OpenAITranscriber(
                settings.stt_url, settings.stt_model, api_key=settings.stt_api_key
            )
        return cls(
            languages=settings.youtube_languages,
            transcriber=transcriber,
            audio_dir=settings.youtube_audio_dir,
        )

    def __init__(
        self,
        *,
        languages: Sequence[str] = ("en",),
        window_chars: int = DEFAULT_WINDOW_CHARS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transcriber: Transcriber | None = None,
        audio_dir: str | Path | None = None,
        base_url: str | None = None,
    ) -> None:
        if isinstance(languages, str) or not languages:
            raise InvalidInput("languages must be a non-empty list of codes", "e.g. ['en', 'de']")
        if window_chars < 1 or timeout_s <= 0:
            raise InvalidInput("window_chars and timeout_s must be positive")
        self.languages = tuple(languages)
        self.window_chars = window_chars
        self.timeout_s = timeout_s
        self.transcriber = transcriber
        self.audio_dir = Path(audio_dir) if audio_dir is not None else None
        self.base_url = base_url.rstrip("/") if base_url else None

    def can_load(self, source: str) -> bool:
        return is_youtube_url(source)

    def load(self, source: str) -> list[LoadedDocument]:
        return [self.load_video(source)]

    def load_video(self, video: str, *, audio_path: str | Path | None = None) -> LoadedDocument:
        """Read one video (an id or a URL); ``audio_path`` is its audio, for the fallback."""
        vid = video_id(video)
        url = watch_url(vid)
        _require_extra()
        with _session(self.timeout_s, self.base_url) as session:
            try:
                fetched = self._fetch(session, vid, url)
            except _NoTranscript as exc:
                logger.info("%s: no transcript: %s", url, exc.reason)
                return self._from_audio(session, vid, url, exc.reason, audio_path)
            title, author = self._oembed(session, url)
        segments = [(s.start, s.text) for s in fetched.snippets]
        meta = {
            "video_id": vid,
            "url": url,
            "language": fetched.language_code,
            "language_name": fetched.language,
            "is_generated": fetched.is_generated,
            "transcript": "youtube",
        }
        if author:
            meta["channel"] = author
        return self._document(vid, url, title, fetched.language_code, segments, meta)

    # --- YouTube -----------------------------------------------------------------

    def _fetch(self, session: requests.Session, vid: str, url: str) -> FetchedTranscript:
        """The transcript; raises _NoTranscript when the video has none for us."""
        import requests
        import youtube_transcript_api as yta

        api = yta.YouTubeTranscriptApi(http_client=session)
        try:
            listing = api.list(vid)
            try:
                transcript = listing.find_transcript(self.languages)
            except yta.NoTranscriptFound:
                available = ", ".join(sorted({t.language_code for t in listing})) or "none"
                wanted = ", ".join(self.languages)
                raise _NoTranscript(f"no captions in {wanted} (available: {available})") from None
            return transcript.fetch()
        except requests.Timeout as exc:
            raise IngestError(
                f"{url}: YouTube did not answer within {self.timeout_s:g} s",
                "try again later, or raise the time limit",
            ) from exc
        except requests.RequestException as exc:
            raise IngestError(
                f"{url}: cannot reach YouTube{_network_reason(exc)}",
                "check the network connection and try again",
            ) from exc
        except (yta.VideoUnavailable, yta.InvalidVideoId) as exc:
            raise IngestError(
                f"{url}: the video is unavailable (removed, private or never existed)",
                "check the video id",
            ) from exc
        except yta.TranscriptsDisabled as exc:
            raise _NoTranscript("captions are disabled for this video") from exc
        except yta.AgeRestricted as exc:
            raise _NoTranscript("the video is age-restricted; YouTube asks for a sign-in") from exc
        except yta.RequestBlocked as exc:
            raise _NoTranscript("YouTube is blocking requests from this address") from exc
        except yta.PoTokenRequired as exc:
            raise _NoTranscript("YouTube asks for a proof-of-origin token") from exc
        except yta.CouldNotRetrieveTranscript as exc:
            raise IngestError(
                f"{url}: YouTube did not hand out the transcript: {_cause(exc)}",
                "try again later; if it persists, update youtube-transcript-api",
            ) from exc
        except (KeyError, IndexError, TypeError) as exc:
            raise IngestError(
                f"{url}: YouTube answered in a shape the transcript library does not know "
                f"({type(exc).__name__}: {exc})",
                "update youtube-transcript-api",
            ) from exc
        except (ParseError, ValueError) as exc:  # defusedxml's refusals are ValueErrors
            raise IngestError(
                f"{url}: YouTube sent a transcript that cannot be read ({exc})",
                "try again later; if it persists, update youtube-transcript-api",
            ) from exc

    def _oembed(self, session: requests.Session, url: str) -> tuple[str, str]:
        """The video's title and channel, or empty strings (with a warning)."""
        import requests

        query = urlencode({"url": url, "format": "json"})
        try:
            response = session.get(f"{YOUTUBE}/oembed?{query}")
            response.raise_for_status()
            body: Any = response.json()
        except (requests.RequestException, ValueError) as exc:
            logger.warning("%s: no title from YouTube's oEmbed: %s", url, _one_line(str(exc)))
            return "", ""
        if not isinstance(body, Mapping):
            return "", ""
        title, author = body.get("title"), body.get("author_name")
        return (
            title.strip() if isinstance(title, str) else "",
            author.strip() if isinstance(author, str) else "",
        )

    # --- the speech-to-text fallback ----------------------------------------------

    def _from_audio(
        self,
        session: requests.Session,
        vid: str,
        url: str,
        reason: str,
        audio_path: str | Path | None,
    ) -> LoadedDocument:
        audio = Path(audio_path) if audio_path is not None else self._find_audio(vid)
        if self.transcriber is None or audio is None:
            detail = ""
            if audio is not None:
                detail = "; an audio file was given, but no speech-to-text endpoint is configured"
            elif self.transcriber is not None:
                detail = f"; no audio file was given or found for {vid}"
            raise IngestError(f"{url}: no transcript available: {reason}{detail}", _FALLBACK_HINT)
        logger.info("%s: transcribing %s instead (%s)", url, audio, reason)
        try:
            transcription = self.transcriber.transcribe(audio)
        except KredencError as exc:
            raise IngestError(
                f"{url}: no transcript available ({reason}), and transcribing {audio} failed: "
                f"{exc.message}",
                exc.hint,
            ) from exc
        title, author = self._oembed(session, url)
        language = transcription.language or ""
        meta: dict[str, Any] = {
            "video_id": vid,
            "url": url,
            "language": language,
            "transcript": "speech-to-text",
            "stt_model": self.transcriber.model_id,
            "audio": str(audio),
        }
        if author:
            meta["channel"] = author
        segments = [(s.start_s, s.text) for s in transcription.segments]
        return self._document(vid, url, title, language, segments, meta)

    def _find_audio(self, vid: str) -> Path | None:
        """``<id>.<ext>`` or yt-dlp's ``<title> [<id>].<ext>`` in ``audio_dir``."""
        if self.audio_dir is None or not self.audio_dir.is_dir():
            return None
        for path in sorted(self.audio_dir.iterdir()):
            if path.suffix.lower() not in AUDIO_SUFFIXES or not path.is_file():
                continue
            if path.stem == vid or path.stem.endswith(f"[{vid}]"):
                return path
        return None

    # --- the document ------------------------------------------------------------

    def _document(
        self,
        vid: str,
        url: str,
        title: str,
        language: str,
        segments: Iterable[tuple[float, str]],
        meta: dict[str, Any],
    ) -> LoadedDocument:
        sections = [
            Section(
                text=text,
                start_s=start,
                meta={"video_id": vid, "language": language, "url": watch_url(vid, start)},
            )
            for start, text in windows(segments, self.window_chars)
        ]
        if not sections:
            raise IngestError(f"{url}: the transcript is empty", "the video may have no speech")
        return LoadedDocument(
            source=url,
            title=title or f"YouTube video {vid}",
            loader=self.name,
            sections=sections,
            meta=meta,
        )


def windows(segments: Iterable[tuple[float, str]], limit: int) -> list[tuple[float, str]]:
    """Merge timed segments into ``(start_s, text)`` windows of about ``limit`` characters.

    A window closes before the segment that would take it past ``limit``; a single
    segment longer than ``limit`` is a window of its own.
    """
    out: list[tuple[float, str]] = []
    start: float | None = None
    parts: list[str] = []
    size = 0
    for segment_start, segment_text in segments:
        text = " ".join(segment_text.split())
        if not text:
            continue
        if parts and size + 1 + len(text) > limit:
            assert start is not None
            out.append((start, " ".join(parts)))
            parts, size = [], 0
        if not parts:
            start = segment_start
            size = len(text)
        else:
            size += 1 + len(text)
        parts.append(text)
    if parts:
        assert start is not None
        out.append((start, " ".join(parts)))
    return out


def _require_extra() -> None:
    try:
        import requests  # noqa: F401
        import youtube_transcript_api  # noqa: F401
    except ImportError as exc:
        raise MissingExtra("Loading YouTube transcripts", "youtube") from exc


def _session(timeout_s: float, base_url: str | None) -> requests.Session:
    """A session whose adapter puts a time limit on every request (the library sets
    none), refuses hosts other than YouTube's, and sends the requests to ``base_url``
    instead when one is given."""
    import requests
    from requests.adapters import HTTPAdapter

    class YouTubeAdapter(HTTPAdapter):
        def send(
            self,
            request: requests.PreparedRequest,
            stream: bool = False,
            timeout: float | tuple[float, float] | tuple[float, None] | None = None,
            verify: bool | str = True,
            cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
            proxies: Mapping[str, str] | None = None,
        ) -> requests.Response:
            url = request.url or ""
            parts = urlsplit(url)
            if parts.scheme != "https" or (parts.hostname or "") not in _FETCH_HOSTS:
                raise requests.exceptions.InvalidURL(f"refused to fetch {url}: not a YouTube URL")
            if base_url is not None:
                request.url = base_url + url[len(f"https://{parts.netloc}") :]
            return super().send(
                request,
                stream=stream,
                timeout=timeout_s if timeout is None else timeout,
                verify=verify,
                cert=cert,
                proxies=proxies,
            )

    session = requests.Session()
    adapter = YouTubeAdapter()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    # A mirror or loopback server is reached directly, never through a proxy from
    # the environment.
    session.trust_env = base_url is None
    return session


def _cause(exc: CouldNotRetrieveTranscript) -> str:
    """The library's cause, first sentence, one line (its messages run to paragraphs)."""
    first = _one_line(str(exc.cause)).split(". ")[0].rstrip(".")
    return first or type(exc).__name__


def _network_reason(exc: BaseException) -> str:
    """What follows "cannot reach YouTube" for a requests error: for a connection that
    failed, the first socket error's own words ("Connection refused", "Name or service
    not known") found through urllib3's wrappers, whose text runs to hundreds of
    characters; else the error's own message (a fetch refused by the guard)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        err = todo.pop(0)
        if id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, OSError) and err.strerror:
            why = _one_line(err.strerror)
            return f" (no network, or the name does not resolve): {why}"
        nested = [*err.args, getattr(err, "reason", None), err.__cause__, err.__context__]
        todo.extend(e for e in nested if isinstance(e, BaseException))
    return f": {_one_line(str(exc))}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


__all__ = ["YoutubeLoader", "is_youtube_url", "video_id", "watch_url", "windows"]
