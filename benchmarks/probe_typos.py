"""Probe: what one typo in a question costs retrieval, on every dev set.

Real questions hold misspelt words (HotpotQA-200 has "sydeney", "reknowned",
"reserach"; a LongMemEval question asks about a "buisiness milestone"), and a word no
document holds matches nothing on the lexical leg. This probe measures the gap; it
changes nothing in the engine.

Each set is filed as ``kredenc eval`` files it (the sessions of ``bench_feedback.py``:
one store per set, the shared eval embedding cache, the eval's depth and its graph hop
on the multihop sets). Every question is searched as written and with one typo in one
of its content words (at least 5 letters, not a stopword; the word and the place drawn
by a generator seeded with the question's id, so every run makes the same typos):
``swap`` exchanges two neighbouring letters inside the word, ``drop`` leaves one out.
A question without such a word is searched as written in every variant (counted).

Headline metrics as ``bench_feedback.py``; the paired delta per question against the
question as written, with its 95 % bootstrap interval. ``--modes`` searches each leg
alone too (``lexical``, ``dense``: which leg a typo costs).

    cd benchmarks && PYTHONPATH=../src:. python probe_typos.py [--data ../../shared/data] \\
        [--sets scifact,locomo,...] [--modes hybrid,lexical,dense] [--limit N]

Prints a table; writes benchmarks/results/typos.json.
"""

from __future__ import annotations

import contextlib
import functools
import random
import re
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from _common import print_table, write_results
from bench_feedback import Session, dev_sets_parser, mean_ci, specs

VARIANTS = ("swap", "drop")
_WORD = re.compile(r"[A-Za-z]{5,}")


def typo(question: str, qid: str, variant: str) -> str:
    """``question`` with one typo (``variant``) in one content word, or as written when
    it has none; the same for the same ``qid`` in every run."""
    from kredenc.retrieve.terms import STOPWORDS_EN

    words = [m for m in _WORD.finditer(question) if m.group().lower() not in STOPWORDS_EN]
    if not words:
        return question
    rng = random.Random(f"{qid}:{variant}")
    m = rng.choice(words)
    w = m.group()
    # Inside the word (its first and last letters kept); a swap of two equal letters
    # would change nothing, so a swap takes two that differ.
    places = [i for i in range(1, len(w) - 2) if variant == "drop" or w[i] != w[i + 1]]
    i = rng.choice(places or [1])
    swapped = w[:i] + w[i + 1] + w[i] + w[i + 2 :]
    bad = swapped if variant == "swap" and places else w[:i] + w[i + 1 :]
    return question[: m.start()] + bad + question[m.end() :]


def measure(s: Session, mode: str) -> dict[str, Any]:
    """Per variant, each question's headline metrics in ``mode``, and how many questions
    changed."""
    spec = s.spec
    per: dict[str, list[dict[str, float]]] = {"as written": [], **{v: [] for v in VARIANTS}}
    changed = dict.fromkeys(VARIANTS, 0)
    examples: dict[str, list[str]] = {v: [] for v in VARIANTS}
    for qid, text, ns, chunked in s.questions:
        params = s.params(chunked, None, mode=mode)
        ids, _ = s.search(text, ns, params)
        per["as written"].append(spec.metrics(qid, ids))
        for v in VARIANTS:
            bad = typo(text, qid, v)
            if bad != text:
                changed[v] += 1
                if len(examples[v]) < 3:
                    examples[v].append(bad)
            ids, _ = s.search(bad, ns, params)
            per[v].append(spec.metrics(qid, ids))
    return {"per": per, "changed": changed, "examples": examples}


def summarise(spec: Any, got: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One set's JSON entry and table rows for one mode's measurement."""
    per = got["per"]
    entry: dict[str, Any] = {
        "questions": len(per["as written"]),
        "changed": got["changed"],
        "examples": got["examples"],
    }
    rows: list[dict[str, Any]] = []
    for metric in spec.primary:
        clean = [m[metric] for m in per["as written"]]
        mean, lo, hi = mean_ci(clean)
        entry[metric] = {"as written": [round(mean, 4), round(lo, 4), round(hi, 4)]}
        row = {"metric": metric, "as written": f"{mean:.3f} [{lo:.3f}, {hi:.3f}]"}
        for v in VARIANTS:
            vals = [m[metric] for m in per[v]]
            d = [b - a for a, b in zip(clean, vals, strict=True)]
            dm, dlo, dhi = mean_ci(d)
            worse = sum(x < -1e-9 for x in d)
            better = sum(x > 1e-9 for x in d)
            mean_v = sum(vals) / len(vals)
            entry[metric][v] = {
                "mean": round(mean_v, 4),
                "delta": [round(dm, 4), round(dlo, 4), round(dhi, 4)],
                "better_worse": [better, worse],
            }
            row[v] = f"{mean_v:.3f} ({dm:+.3f} [{dlo:+.3f}, {dhi:+.3f}]; {better}/{worse})"
        rows.append(row)
    return entry, rows


#: The two arms ``--spelling`` pairs: (spelling on?, the shortest word corrected (None:
#: ``spelling.SHORTEST``, 4), English words never looked up? (a probe, not adopted)).
Arm = tuple[bool, int | None, bool]
ARMS: tuple[Arm, ...] = ((False, None, False), (True, None, False))


@functools.cache
def english_words() -> frozenset[str]:
    """Lower-case words of 4+ ASCII letters that the shipped MiniLM tokenizer holds
    whole (its WordPiece vocabulary: about 20,000 common English words and names)."""
    from importlib import resources

    ref = resources.files("kredenc.providers.embed").joinpath("data", "minilm-vocab.txt")
    lines = ref.read_text(encoding="utf-8").split("\n")
    return frozenset(
        w for w in lines if len(w) >= 4 and w.isascii() and w.isalpha() and w.islower()
    )


@contextlib.contextmanager
def english_kept(index: Any, on: bool) -> Iterator[None]:
    """``index.corrections`` never given an English word (:func:`english_words`) while
    ``on``: the guard ``--english`` measures."""
    if not on:
        yield
        return
    real = index.corrections
    words = english_words()
    index.corrections = lambda ns, ws, f: real(ns, [w for w in ws if w not in words], f)
    try:
        yield
    finally:
        del index.corrections  # the bound method again


def measure_spelling(s: Session, mode: str, arms: tuple[Arm, ...] = ARMS) -> dict[str, Any]:
    """Per variant (as written included), each question's headline metrics in the two
    ``arms`` (the ``spelling`` setting off and on), and the corrections made."""
    from kredenc.storage.index import spelling

    default = spelling.SHORTEST
    per: dict[str, dict[bool, list[dict[str, float]]]] = {
        v: {False: [], True: []} for v in ("as written", *VARIANTS)
    }
    fixed: dict[str, list[str]] = {v: [] for v in per}
    for qid, text, ns, chunked in s.questions:
        for v in per:
            asked = text if v == "as written" else typo(text, qid, v)
            for arm, (on, shortest, english) in enumerate(arms):
                spelling.SHORTEST = default if shortest is None else shortest
                params = s.params(chunked, None, mode=mode, spelling=on)
                with english_kept(s.kb.store.index, english):
                    ids, _ = s.search(asked, ns, params)
                per[v][bool(arm)].append(s.spec.metrics(qid, ids))
            spelling.SHORTEST = default
            with english_kept(s.kb.store.index, arms[-1][2]):
                found = s.corrections(asked, ns)
            if found:
                fixed[v].append(", ".join(f"{a}->{b}" for a, b in found.items()))
    return {"per": per, "fixed": fixed}


def summarise_spelling(
    spec: Any, got: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One set's JSON entry and table rows: each variant off, on, and on - off paired."""
    entry: dict[str, Any] = {
        v: {"corrected": len(f), "examples": f[:5]} for v, f in got["fixed"].items()
    }
    rows: list[dict[str, Any]] = []
    for metric in spec.primary:
        for v, by in got["per"].items():
            off = [m[metric] for m in by[False]]
            on = [m[metric] for m in by[True]]
            d = [b - a for a, b in zip(off, on, strict=True)]
            dm, dlo, dhi = mean_ci(d)
            better = sum(x > 1e-9 for x in d)
            worse = sum(x < -1e-9 for x in d)
            mean_off, mean_on = sum(off) / len(off), sum(on) / len(on)
            entry[v][metric] = {
                "off": round(mean_off, 4),
                "on": round(mean_on, 4),
                "delta": [round(dm, 4), round(dlo, 4), round(dhi, 4)],
                "better_worse": [better, worse],
            }
            rows.append(
                {
                    "metric": metric,
                    "question": v,
                    "corrected": len(got["fixed"][v]),
                    "off": f"{mean_off:.3f}",
                    "on": f"{mean_on:.3f}",
                    "on - off": f"{dm:+.3f} [{dlo:+.3f}, {dhi:+.3f}]; {better}/{worse}",
                }
            )
    return entry, rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = dev_sets_parser(__doc__ or "")
    parser.add_argument("--modes", default="hybrid", help="Search modes, comma-separated.")
    parser.add_argument(
        "--spelling",
        action="store_true",
        help="Measure the 'spelling' setting instead: every question, as written and "
        "typo'd, searched with it off and on (writes results/typos-spelling.json).",
    )
    parser.add_argument(
        "--english",
        action="store_true",
        help="With --spelling: spelling on both ways, every unheld word looked up "
        "('off', the default) against English words never (a probe, not adopted; "
        "writes results/typos-english.json).",
    )
    parser.add_argument(
        "--shortest",
        action="store_true",
        help="With --spelling: spelling on both ways, the shortest word corrected 5 "
        "letters ('off', before 2026-12-06) against 4, by a letter added (writes "
        "results/typos-shortest.json).",
    )
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    made = specs(args.data)
    if args.spelling:
        title = "The spelling setting, off and on (on - off [95 % CI]; better/worse)"
        arms = ARMS
        if args.shortest:  # 5+ against 4+
            arms = ((True, 5, False), (True, None, False))
        elif args.english:
            arms = ((True, None, False), (True, None, True))
        measure_ = functools.partial(measure_spelling, arms=arms)
        return run(args, made, modes, (measure_, summarise_spelling), title)
    title = "One typo per question (delta [95 % CI]; better/worse questions)"
    return run(args, made, modes, (measure, summarise), title)


def run(args: Any, made: dict[str, Any], modes: list[str], how: Any, title: str) -> int:
    """Each set filed in its own store and measured per mode (``how``: the measure and
    the summary); prints the table, writes results/typos[-spelling].json."""
    measure_, summarise_ = how
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"variants": VARIANTS, "modes": modes, "sets": {}}
    for name in args.sets.split(","):
        spec = made[name]()
        with tempfile.TemporaryDirectory(prefix=f"kredenc-typos-{name}-") as home:
            s = Session(spec, home, args.limit)
            try:
                s.file()
                got = {mode: measure_(s, mode) for mode in modes}
            finally:
                s.kb.close()
        out["sets"][name] = {}
        for mode in modes:
            entry, set_rows = summarise_(spec, got[mode])
            out["sets"][name][mode] = entry
            rows += [{"set": name, "mode": mode, **row} for row in set_rows]
    print_table(title, rows)
    name = "typos-spelling" if args.spelling else "typos"
    if args.spelling and (args.shortest or args.english):
        name = "typos-shortest" if args.shortest else "typos-english"
    write_results(name, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
