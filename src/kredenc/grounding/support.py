"""Sentence-level support: does each sentence of an answer follow from the contexts?

Each answer sentence is checked three ways against the contexts' sentences and
windows of :data:`WINDOW` adjacent sentences (the *units*):

* **words**: the share of the sentence's content words (stemmed keys, see
  :mod:`kredenc.grounding.words`) found in the contexts, each word weighted by its
  inverse document frequency over the units, so a missing rare word ("Mumbai",
  "hydrogen") costs more than a missing common one. Words of the question count as
  found: restating the question is not a claim. Words that only talk about the
  answering itself ("based on the passages", "I hope this helps") are not content.
* **meaning**: the best cosine between the sentence's embedding and a unit's, read
  through a ramp from :attr:`SupportParams.cos_low` (0) to :attr:`cos_high` (1).
* **facts**: every number, date and name (a capitalised word) of the sentence must
  occur in the contexts, and *with the same relation*: in a unit that also holds
  another of the sentence's content words ("1987" next to the same event, not in an
  unrelated passage). A negation between the sentence and its best unit, on the same
  words, is a polarity mismatch.

Also read: the share of the sentence's adjacent word pairs found in a context or the
question (*bigrams*, stopwords kept: "born in" is a relation), the largest share of its
words in one unit (*local*), and the summed IDF of its words found nowhere (*missing
mass*). ``support = w_words * words + w_local * local + w_bigrams * bigrams +
(1 - the three) * meaning - penalties``, squeezed below :data:`FLOOR` instead of
clipped (:func:`soft_floor`); the sentence is supported when ``support >= threshold``,
unless a rule says otherwise: a **substitution** (a number or name the contexts lack,
where the unit holding the rest of the sentence has another one: "31.2 BLEU" against
"28.4 BLEU"), or an **all-novel** sentence (content words, none of them in the contexts
or the question). A statement prefixed with ``[OUTSIDE KNOWLEDGE]`` is never supported.

What is no fact for these checks: a citation's number ("passage 2", "step 4", see
:data:`CITES`), a number the question holds, a range whose parts the contexts hold
("6-8" against "6 to 8"), a one-letter capital ("350 F", "vitamin D"), the first word
of a sentence, a list item or a clause after a colon (unless the sentence is a
fragment, or, outside a list item, a capitalised word follows: "Queens County");
a lead-in sentence ending with ":" trips no rule. Each was read off RAGTruth's
rule-flagged right answers (docs/benchmarks.md, "The judge").

Pure: the result is a function of the texts and :class:`SupportParams` alone (and the
embedding model's vectors), so callers may cache it. The defaults and their
provenance are in :mod:`kredenc.grounding.judge` and docs/benchmarks.md ("The judge").
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kredenc.grounding.base import OUTSIDE_KNOWLEDGE, SentenceSupport
from kredenc.grounding.sentences import split
from kredenc.grounding.words import NEGATIONS, STOPWORDS, key, tokens

__all__ = [
    "CITES",
    "FLOOR",
    "META_WORDS",
    "NOT_CONTENT",
    "WINDOW",
    "Contexts",
    "EmbedFn",
    "Evidence",
    "SentenceFacts",
    "SupportParams",
    "check_sentences",
    "content_keys",
    "gather",
    "gather_sentences",
    "score",
    "supports",
]

F32 = npt.NDArray[np.float32]
EmbedFn = Callable[[Sequence[str]], F32]

WINDOW = 2
#: A sentence of at most this many words is a fragment ("Mumbai, India."): its first
#: capitalised word is a name.
FRAGMENT_WORDS = 4
#: A number or name the context lacks is a substitution (the sentence is unsupported)
#: when the unit holding at least this share of the sentence's other words that the
#: contexts have (two at least) has another number or name.
SWAP_LOCAL = 0.5
#: Below this support, :func:`soft_floor` squeezes instead of clipping.
FLOOR = 0.2
#: The weight of a unit's cosine against its word share when a sentence's best unit
#: (its evidence) is picked: ``local + MEANING_PICK * cosine``.
MEANING_PICK = 0.5

# Words about the answering, not about the world: never content.
META_WORDS = frozenset(
    """according additionally also answer answers based believe context contexts could
    does describe described detail details document documents explain feel free find
    found further given glad happy help helps hope however information know let like
    mention mentioned mentions might note noted overall passage passages please
    provide provided provides question questions regarding say says see specific
    specifically state stated states sure text therefore thus understand unfortunately
    us well would yes
    unable impossible determine determined clarify clarification anything else here
    here's i'd i'll i'm i've let's that's there's brief briefly summary summarize infer
    inferred conclude necessary assist assistance luck welcome thank thanks hello hi""".split()  # noqa: SIM905
)
_EXTRA_STOP = frozenset(
    """about above after again against all any because before below between both
    during each few further how into more most nor off once only other over own same
    some such through too under until up what when where which while who whom why
    one ones something someone many much lot lots way ways etc
    if need needs without additional best good luck""".split()  # noqa: SIM905
)
NOT_CONTENT = STOPWORDS | _EXTRA_STOP | META_WORDS | NEGATIONS
#: Words whose following number cites the material, not the world ("passage 2").
CITES = frozenset(
    """passage passages step steps option options source sources document documents
    paragraph paragraphs article reference references""".split()  # noqa: SIM905
)
_LIST_MARKER = re.compile(r"^\s*(?:\(?\d{1,3}[.)]|[-*•])\s+")
_NAME = re.compile(r"(?<![\w'])[A-Z][\w'’.-]*")


@dataclass(frozen=True)
class SupportParams:
    """The support check's weights (their provenance: :mod:`kredenc.grounding.judge`)."""

    w_words: float = 0.0
    w_local: float = 0.0
    w_bigrams: float = 1.0
    mass_penalty: float = 0.03
    cos_low: float = 0.2
    cos_high: float = 0.8
    number_penalty: float = 0.5
    name_penalty: float = 0.3
    relation_penalty: float = 0.1
    polarity_penalty: float = 0.0
    threshold: float = 0.1125

    @property
    def meaning(self) -> float:
        """The meaning's weight: what the three word weights leave of 1."""
        return 1.0 - self.w_words - self.w_local - self.w_bigrams

    def weighs_meaning(self) -> bool:
        """Whether the embedding cosine enters the support at all."""
        return abs(self.meaning) > 1e-9


def _number(tok: str) -> str:
    out = tok.replace(",", "")
    if re.fullmatch(r"\d+\.0+", out):
        out = out.split(".")[0]
    return out


def _numbers(toks: Sequence[str]) -> list[str]:
    """The numbers among ``toks``, a range or date also as its parts ("1844-1846");
    a citation's number ("passage 2", "step 4") is no fact and left out."""
    out: list[str] = []
    for i, t in enumerate(toks):
        if not t[:1].isdigit() or (i and toks[i - 1] in CITES):
            continue
        out.append(_number(t))
        parts = re.split(r"[-/:]", t)
        if len(parts) > 1:
            out.extend(_number(p) for p in parts if p)
    return out


def content_keys(text: str) -> list[str]:
    """The matching keys of ``text``'s content words, in order (numbers included)."""
    return [key(t) for t in tokens(text) if t not in NOT_CONTENT and (len(t) > 1 or t.isdigit())]


def _names(sentence: str, *, first: bool = False, listed: bool = False) -> list[str]:
    """Capitalised words that are not the sentence's first word nor common words."""
    out: list[str] = []
    matches = list(_NAME.finditer(sentence))
    fragment = len(tokens(sentence)) <= FRAGMENT_WORDS
    listed = listed or bool(_LIST_MARKER.match(sentence))
    for m in matches:
        word = m.group().rstrip(".'’-").lower()
        if word.endswith(("'s", "’s")):
            word = word[:-2]
        if len(word) < 2 or word in NOT_CONTENT or not word.isalpha():
            continue  # a unit or a label ("350 F", "vitamin D", "column B") is no name
        before = sentence[: m.start()].rstrip(" \"'“‘([-*•0123456789.)")
        # A sentence's first word, or a clause's after a colon, is capitalised anyway:
        # a name only in a fragment ("Mumbai"), when the caller says so (contexts), or
        # when a capitalised word follows it ("Queens County is ...") outside a list
        # item, whose first word is mostly a verb ("1. Open Print Manager").
        at_start = not before or before.endswith(":")
        follows = (
            not listed
            and m is matches[0]
            and len(matches) > 1
            and matches[1].start() - m.end() <= 1
        )
        if at_start and not (first or fragment or follows):
            continue
        out.append(key(word))
    return out


def _has_parts(number: str, present: frozenset[str]) -> bool:
    """Whether ``number`` is a range or date whose every part is in ``present``."""
    parts = [_number(p) for p in re.split(r"[-/:]", number) if p]
    return len(parts) > 1 and all(p in present for p in parts)


def _bigrams(text: str) -> frozenset[tuple[str, str]]:
    """Adjacent word pairs of ``text`` by matching key (stopwords kept: "born in")."""
    ks = [key(t) for t in tokens(_LIST_MARKER.sub("", text, count=1)) if len(t) > 1 or t.isdigit()]
    return frozenset(itertools.pairwise(ks))


def _negated(toks: Sequence[str]) -> int:
    return sum(1 for t in toks if t in NEGATIONS)


@dataclass(frozen=True)
class SentenceFacts:
    """What the check reads from one sentence."""

    keys: tuple[str, ...]
    numbers: tuple[str, ...]
    names: tuple[str, ...]
    negations: int

    @classmethod
    def of(cls, text: str) -> SentenceFacts:
        listed = bool(_LIST_MARKER.match(text))
        text = _LIST_MARKER.sub("", text, count=1)
        toks = tokens(text)
        keys = tuple(dict.fromkeys(content_keys(text)))
        numbers = tuple(dict.fromkeys(_numbers(toks)))
        names = tuple(dict.fromkeys(_names(text, listed=listed)))
        return cls(keys, numbers, names, _negated(toks))


class Contexts:
    """The contexts cut into units (sentences and windows), with their word statistics
    and (when an embed function is given) their vectors."""

    def __init__(
        self, contexts: Sequence[str], embed: EmbedFn | None = None, *, lazy: bool = False
    ) -> None:
        self.contexts = list(contexts)
        units: list[tuple[int, str]] = []
        windows: list[tuple[int, str]] = []
        for ci, text in enumerate(self.contexts):
            sents = [s.text for s in split(text)]
            units.extend((ci, s) for s in sents)
            for i in range(len(sents) - WINDOW + 1):
                windows.append((ci, " ".join(sents[i : i + WINDOW])))
        #: Units [0, sentences) are single sentences (the relation checks use those).
        self.sentences = len(units)
        units += windows
        self.units = units
        self.unit_keys = [frozenset(content_keys(t)) for _, t in units]
        self.unit_numbers = [frozenset(_numbers(tokens(u))) for _, u in units]
        self.unit_negations = [_negated(tokens(u)) for _, u in units]
        self.unit_names = [frozenset(_names(u, first=True)) for _, u in units]
        df: dict[str, int] = {}
        for ks in self.unit_keys:
            for k in ks:
                df[k] = df.get(k, 0) + 1
        self.df = df
        self.n = max(1, len(units))
        self.all_keys = frozenset(df)
        self.bigrams: frozenset[tuple[str, str]] = frozenset().union(
            *(_bigrams(t) for t in self.contexts)
        )
        self.all_numbers = frozenset().union(*self.unit_numbers) if units else frozenset()
        self.embed = embed
        #: Every unit's vector; with ``lazy`` None until :meth:`all_vectors` (or
        #: :meth:`unit_vectors` embeds only the units asked for).
        self.vectors: F32 | None = None
        self._some: dict[int, F32] = {}
        if embed is not None and units and not lazy:
            self.vectors = np.asarray(embed([u for _, u in units]), dtype=np.float32)

    @property
    def embeds(self) -> bool:
        """Vectors can be had: an embed function and at least one unit."""
        return self.embed is not None and bool(self.units)

    def unit_vectors(self, wanted: Sequence[int]) -> F32:
        """The vectors of the units ``wanted``; those not embedded yet are embedded in
        one call and kept."""
        if self.vectors is not None:
            return self.vectors[list(wanted)]
        assert self.embed is not None, "Contexts without an embed function has no vectors"
        missing = [i for i in dict.fromkeys(wanted) if i not in self._some]
        if missing:
            got = np.asarray(self.embed([self.units[i][1] for i in missing]), dtype=np.float32)
            self._some.update(zip(missing, got, strict=True))
        return np.stack([self._some[i] for i in wanted]).astype(np.float32, copy=False)

    def all_vectors(self) -> F32:
        """Every unit's vector (embedding what a lazy instance has not yet)."""
        if self.vectors is None:
            self.vectors = self.unit_vectors(range(len(self.units)))
        return self.vectors

    def idf(self, k: str) -> float:
        return math.log((self.n + 1) / (self.df.get(k, 0) + 0.5))


def _ramp(x: float, low: float, high: float) -> float:
    if high <= low:
        return 1.0 if x >= high else 0.0
    return min(1.0, max(0.0, (x - low) / (high - low)))


@dataclass(frozen=True)
class Evidence:
    """The raw findings for one sentence, before the weights of :class:`SupportParams`.

    ``words``: weighted share of content words found anywhere; ``local``: the largest
    weighted share found in one unit; ``bigrams``: the share of the sentence's word
    pairs (stopwords included) found in a context or the question; ``missing_mass``:
    the summed IDF of content words found nowhere (the question included);
    ``cosine``: best unit cosine (None without an embedder); the counts: numbers/names
    missing from the contexts or present only away from the sentence's other words,
    and a polarity mismatch.
    """

    text: str
    start: int
    marked: bool = False  # [OUTSIDE KNOWLEDGE], or no context at all: never supported
    words: float = 0.0
    local: float = 0.0
    bigrams: float = 1.0
    missing_mass: float = 0.0
    cosine: float | None = None
    missing_numbers: int = 0
    loose_numbers: int = 0
    missing_names: int = 0
    loose_names: int = 0
    swapped: int = 0
    novel: bool = False  # content words, none of them in the contexts nor the question
    polarity: int = 0
    context: int | None = None
    evidence: str = ""
    notes: tuple[str, ...] = ()


#: :func:`unit_shares`: the keys, their weights, the weights' sum, each unit's share.
Shares = tuple[list[str], dict[str, float], float, npt.NDArray[np.float64]]


def unit_shares(facts: SentenceFacts, ctx: Contexts) -> Shares:
    """The sentence's content keys (numbers left out), their IDF weights, the weights'
    sum, and per unit the weighted share of those keys it holds (*local*)."""
    keys = [k for k in facts.keys if not k[:1].isdigit()]
    weights = {k: ctx.idf(k) for k in keys}
    total = sum(weights.values())
    local = np.array(
        [sum(weights[k] for k in keys if k in uk) / total if total else 0.0 for uk in ctx.unit_keys]
    )
    return keys, weights, total, local


def gather(
    text: str,
    start: int,
    facts: SentenceFacts,
    ctx: Contexts,
    known: frozenset[str],
    cosines: F32 | None,
    known_pairs: frozenset[tuple[str, str]] = frozenset(),
    shares: Shares | None = None,
) -> Evidence:
    """What the contexts say about one sentence (see the module doc); ``shares``:
    :func:`unit_shares` of it, when the caller has them."""
    if text.lstrip().upper().startswith(OUTSIDE_KNOWLEDGE):
        return Evidence(text, start, marked=True, notes=("marked outside knowledge",))
    if not ctx.units:
        return Evidence(text, start, marked=True, notes=("no context",))
    keys, weights, total, local = shares if shares is not None else unit_shares(facts, ctx)
    found = sum(w for k, w in weights.items() if k in ctx.all_keys or k in known)
    words = found / total if total else 1.0
    # The best unit: the one sharing most of the sentence's weighted words, then meaning.
    cosine: float | None = None
    if cosines is not None:
        cosine = float(np.nanmax(cosines)) if not np.isnan(cosines).all() else None
        best = int(np.argmax(np.where(np.isnan(cosines), -np.inf, local + MEANING_PICK * cosines)))
    else:
        best = int(np.argmax(local))
    notes: list[str] = []
    counts = {"missing_numbers": 0, "loose_numbers": 0, "missing_names": 0, "loose_names": 0}
    sentence_keys = set(keys)
    # A number the question holds is asked about, not claimed; a range whose ends the
    # contexts hold ("6-8" from "6 to 8") is theirs.
    numbers = [n for n in facts.numbers if n not in known and not _has_parts(n, ctx.all_numbers)]
    for number in numbers:
        if number not in ctx.all_numbers:
            counts["missing_numbers"] += 1
            notes.append(f"number {number} not in the context")
        elif sentence_keys and not any(
            number in nums and (uk & sentence_keys)
            for nums, uk in zip(
                ctx.unit_numbers[: ctx.sentences], ctx.unit_keys[: ctx.sentences], strict=True
            )
        ):
            counts["loose_numbers"] += 1
            notes.append(f"number {number} is in the context but not with the same words")
    for name in facts.names:
        if name in known:
            continue
        if name not in ctx.all_keys:
            counts["missing_names"] += 1
            notes.append(f"name {name!r} not in the context")
        else:
            others = sentence_keys - {name}
            if others and not any(
                name in uk and (uk & others) for uk in ctx.unit_keys[: ctx.sentences]
            ):
                counts["loose_names"] += 1
                notes.append(f"name {name!r} is in the context but not with the same words")
    # A substitution: a number or name the context lacks where the unit that holds the
    # rest of the sentence has another one ("28.4 BLEU" in the context, "31.2" here).
    # The frame: the unit holding most of the sentence's words that the contexts have
    # (at least two of them), whatever is missing; a fragment ("The RMSProp optimizer.")
    # is read with its question's words (one is enough).
    rest = [k for k in keys if k in ctx.all_keys]
    fragment = len(tokens(text)) <= FRAGMENT_WORDS
    frame_weights = {k: weights[k] for k in rest}
    if fragment:  # the question's words count half: the answer's own words lead
        asked = sorted(k for k in known if k in ctx.all_keys and k not in frame_weights)
        frame_weights.update({k: 0.5 * ctx.idf(k) for k in asked})
        rest += asked
    rest_total = sum(frame_weights.values())
    rest_local = [
        sum(frame_weights[k] for k in rest if k in uk) / rest_total if rest_total else 0.0
        for uk in ctx.unit_keys
    ]
    frame = int(np.argmax(rest_local)) if rest_local else 0
    swapped = 0
    lead_in = text.rstrip().endswith(":")  # "The steps are:" introduces, claims nothing
    if not lead_in and len(rest) >= (1 if fragment else 2) and rest_local[frame] >= SWAP_LOCAL:
        others_n = ctx.unit_numbers[frame] - set(facts.numbers)
        others_m = ctx.unit_names[frame] - set(facts.keys) - known
        for number in numbers:
            # Any other number of the frame: tried, the same slot only (both years, or
            # a shared word beside them) lost 6 HaluEval swaps and saved no RAGTruth one.
            if number not in ctx.all_numbers and others_n:
                swapped += 1
                notes.append(f"number {number} where the context says {min(others_n)}")
        for name in facts.names:
            if name not in ctx.all_keys and name not in known and others_m:
                swapped += 1
                notes.append(f"name {name!r} where the context names {min(others_m)!r}")
    pairs = _bigrams(text)
    # A one-word sentence has no pair: its word coverage stands in.
    found_pairs = sum(1 for b in pairs if b in ctx.bigrams or b in known_pairs)
    bigrams = found_pairs / len(pairs) if pairs else words
    novel = bool(total) and found == 0 and not lead_in
    polarity = int(local[best] >= 0.6 and (facts.negations % 2) != (ctx.unit_negations[best] % 2))
    if polarity:
        notes.append("negation differs from the context")
    missing = [k for k in keys if k not in ctx.all_keys and k not in known]
    missing_mass = sum(weights[k] for k in missing)
    if missing:
        shown = ", ".join(sorted(missing, key=lambda k: -weights[k])[:3])
        notes.append(f"words not in the context: {shown}")
    ci: int | None
    ci, unit = ctx.units[best]
    if local[best] == 0 and (cosine is None or cosine < 0.3):
        ci, unit = None, ""
    return Evidence(
        text,
        start,
        words=words,
        local=float(local.max()),
        bigrams=bigrams,
        missing_mass=missing_mass,
        cosine=cosine,
        polarity=polarity,
        swapped=swapped,
        novel=novel,
        context=ci,
        evidence=unit,
        notes=tuple(notes),
        missing_numbers=counts["missing_numbers"],
        loose_numbers=counts["loose_numbers"],
        missing_names=counts["missing_names"],
        loose_names=counts["loose_names"],
    )


def soft_floor(raw: float) -> float:
    """``raw`` clipped to at most 1; below :data:`FLOOR` squeezed into (0, FLOOR) by
    ``FLOOR / (1 + FLOOR - raw)`` instead of clipped at 0, so two sentences with
    different amounts of missing material keep their order (no ties at 0)."""
    if raw >= FLOOR:
        return min(1.0, raw)
    return FLOOR / (1.0 + FLOOR - raw)


def score(ev: Evidence, params: SupportParams) -> SentenceSupport:
    """The sentence's support under ``params``."""
    end = ev.start + len(ev.text)
    if ev.marked:
        return SentenceSupport(ev.text, ev.start, end, 0.0, False, None, "", ev.notes[0])
    meaning = 1.0 if ev.cosine is None else _ramp(ev.cosine, params.cos_low, params.cos_high)
    penalty = (
        params.number_penalty * ev.missing_numbers
        + params.name_penalty * ev.missing_names
        + params.relation_penalty * (ev.loose_numbers + ev.loose_names)
        + params.polarity_penalty * ev.polarity
    )
    w_meaning = params.meaning
    support = (
        params.w_words * ev.words
        + params.w_local * ev.local
        + params.w_bigrams * ev.bigrams
        + w_meaning * meaning
        - penalty
        - params.mass_penalty * ev.missing_mass
    )
    support = soft_floor(support)
    # A substituted fact, or nothing of it in the context: unsupported whatever the
    # support (which keeps ranking answers: the confidence is left as it is).
    supported = support >= params.threshold and not (ev.swapped or ev.novel)
    reason = "" if supported else ("; ".join(ev.notes) or "too little of it is in the context")
    return SentenceSupport(
        ev.text, ev.start, end, round(support, 4), supported, ev.context, ev.evidence, reason
    )


def gather_sentences(
    answer: str,
    contexts: Contexts,
    *,
    question: str = "",
    embed: EmbedFn | None = None,
    meaning: bool = True,
) -> list[tuple[Evidence, SentenceFacts]]:
    """Each sentence of ``answer`` with what the contexts say about it.

    ``meaning`` False: the sentence's cosines serve only to pick its best unit (the
    meaning weight is 0, :meth:`SupportParams.weighs_meaning`), so only the units that
    can still be picked are compared and embedded (:func:`_deciding_cosines`); the pick
    is the same, and :attr:`Evidence.cosine` is then the best cosine among the units
    compared."""
    sentences = split(answer)
    known = frozenset(content_keys(question)) | frozenset(_names(question))
    pairs = _bigrams(question)
    facts = [SentenceFacts.of(s.text) for s in sentences]
    shares = [unit_shares(f, contexts) for f in facts] if contexts.units else None
    cos: F32 | None = None
    if embed is not None and contexts.embeds and sentences:
        vecs = np.asarray(embed([s.text for s in sentences]), dtype=np.float32)
        if meaning:
            cos = vecs @ contexts.all_vectors().T
        else:
            assert shares is not None  # contexts.embeds: there are units
            cos = _deciding_cosines(vecs, [sh[3] for sh in shares], contexts)
    out = []
    for i, s in enumerate(sentences):
        row = cos[i] if cos is not None else None
        mine = shares[i] if shares is not None else None
        ev = gather(s.text, s.start, facts[i], contexts, known, row, pairs, mine)
        out.append((ev, facts[i]))
    return out


def _deciding_cosines(vecs: F32, locals_: Sequence[npt.NDArray[np.float64]], ctx: Contexts) -> F32:
    """Each sentence's cosine to the units that can still be its best unit, NaN for the
    others, embedding only those units (a lazy :class:`Contexts`).

    The best unit maximises ``local + MEANING_PICK * cosine``. With the sentence's
    top-*local* unit's cosine ``c0`` known, a unit whose ``local + MEANING_PICK`` (a
    cosine is at most 1) falls below ``local0 + MEANING_PICK * c0`` cannot win, so its
    vector is never needed: the pick is the one every cosine would give. A sentence
    sharing no word with any unit is picked by meaning alone, and one whose pick has no
    word in common with it also reads the best cosine of all (the evidence-or-none
    rule): those get every cosine."""
    n = len(ctx.units)
    cos = np.full((len(locals_), n), np.nan, dtype=np.float32)
    tops = [int(np.argmax(loc)) for loc in locals_]
    first = ctx.unit_vectors(sorted(set(tops)))
    where = {u: j for j, u in enumerate(sorted(set(tops)))}
    wanted: list[set[int]] = []
    for i, (loc, top) in enumerate(zip(locals_, tops, strict=True)):
        c0 = float(vecs[i] @ first[where[top]])
        cos[i, top] = c0
        if loc[top] <= 0:
            wanted.append(set(range(n)))
            continue
        bound = loc[top] + MEANING_PICK * c0
        slack = MEANING_PICK * (1 + 1e-4)  # a unit vector's cosine may round above 1
        wanted.append({int(u) for u in np.flatnonzero(loc + slack >= bound)})
    _fill(cos, vecs, wanted, ctx)
    # A pick with no word of the sentence: the evidence-or-none rule reads the best
    # cosine of all units, so that sentence gets them all.
    again: list[set[int]] = []
    for i, loc in enumerate(locals_):
        row = cos[i]
        best = int(np.argmax(np.where(np.isnan(row), -np.inf, loc + MEANING_PICK * row)))
        again.append(set(range(n)) if loc[best] == 0 else set())
    _fill(cos, vecs, again, ctx)
    return cos


def _fill(cos: F32, vecs: F32, wanted: Sequence[set[int]], ctx: Contexts) -> None:
    """Set ``cos[i, u]`` for each unit ``u`` wanted by sentence ``i`` that is not set yet,
    embedding those units in one call."""
    todo = sorted({u for i, us in enumerate(wanted) for u in us if np.isnan(cos[i, u])})
    if not todo:
        return
    got = ctx.unit_vectors(todo)
    col = {u: j for j, u in enumerate(todo)}
    for i, us in enumerate(wanted):
        for u in us:
            if np.isnan(cos[i, u]):
                cos[i, u] = float(vecs[i] @ got[col[u]])


def check_sentences(
    answer: str,
    contexts: Contexts,
    *,
    question: str = "",
    embed: EmbedFn | None = None,
    params: SupportParams | None = None,
) -> list[tuple[SentenceSupport, SentenceFacts]]:
    """Each sentence of ``answer`` with its support and the facts read from it."""
    p = params or SupportParams()
    gathered = gather_sentences(answer, contexts, question=question, embed=embed)
    return [(score(ev, p), facts) for ev, facts in gathered]


def supports(
    claim: str,
    evidence: str | Sequence[str],
    *,
    embed: EmbedFn | None = None,
    params: SupportParams | None = None,
) -> SentenceSupport:
    """How far ``evidence`` supports ``claim`` (its weakest sentence decides).

    Without ``embed`` only words and facts count (meaning is taken as met).
    """
    ctx = Contexts([evidence] if isinstance(evidence, str) else evidence, embed)
    checked = check_sentences(claim, ctx, embed=embed, params=params)
    if not checked:
        return SentenceSupport(claim, 0, len(claim), 0.0, False, None, "", "empty claim")
    return min((s for s, _ in checked), key=lambda s: s.support)
