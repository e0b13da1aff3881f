"""Generated long documents with planted facts and their questions (a RULER-style needle set).

Each document is filler paragraphs (one line each, two to three sentences drawn from templates
that name agents, cities, handlers and office routine) with the facts of ``questions``
sentences planted inside random lines at uniformly drawn positions:

* single hop: "The vault code of agent ZETA-17 is 4821." asked as "What is the vault code of
  agent ZETA-17?";
* two hops: the same attribute sentence plus "Agent ZETA-17 is stationed in Lisbon." (or
  "... reports to handler Maria Okafor."), asked as "What is the vault code of the agent
  stationed in Lisbon?"; each city and handler is the bridge of at most one question (cities
  and handlers alternate in blocks of four questions);
* distractors (half the questions): "Agent ZETA-17's former vault code 1111 was revoked and is
  no longer valid.", planted before or after the true statement with equal chance.

Values are drawn without replacement across the document: no two questions share a value (a
gold or a revoked one), so a wrong agent's value is never the right answer; an attribute whose
values are used up is not drawn.

The filler names the same agents, cities and handlers in unrelated sentences, and uses the
attribute words ("code", "channel", "sign") in other senses, so a lexical search for one term
returns many lines that are not the answer.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from neuroedge.models.scout.document import estimate_tokens

CODENAMES = (
    "ALPHA BRAVO DELTA ECHO FOXTROT GOLF HOTEL INDIA JULIET KILO LIMA MIKE NOVEMBER OSCAR "
    "PAPA QUEBEC ROMEO SIERRA TANGO UNIFORM VICTOR WHISKEY XRAY YANKEE ZETA OMEGA SIGMA"
).split()
CITIES = (
    "Lisbon Oslo Nairobi Quito Hanoi Tbilisi Dakar Lima Riga Tunis Accra Porto Bergen Cusco "
    "Minsk Perth Split Tallinn Vilnius Zagreb Ghent Lyon Turin Graz Malmo Bremen Leipzig "
    "Krakow Gdansk Brno Seville Bilbao Utrecht Aarhus Tampere Lucerne Salzburg Bologna"
).split()
FIRST = "Maria Tomas Aiko Kwame Lena Ravi Sofia Emil Nadia Omar Ines Pavel Yara Jonas".split()
LAST = "Okafor Lindqvist Moreau Tanaka Petrov Haddad Novak Castillo Berg Mensah Duarte".split()
SIGNS = "KESTREL ORCHID GRANITE LANTERN MERIDIAN SPARROW TIMBER VELVET COBALT HARBOR".split()
ATTRIBUTES = {  # every value an attribute can take, in draw order
    "vault code": tuple(str(n) for n in range(1000, 10000)),
    "radio channel": tuple(str(n) for n in range(10, 100)),
    "call sign": tuple(f"{s}-{k}" for s in SIGNS for k in range(2, 10)),
}
# The shape of a value of each kind (whole tokens, case-insensitive): numbers (vault codes,
# radio channels; a digit run joined to a letter, digit or hyphen is part of another token,
# as in ZETA-17 or L12) and call signs (a SIGNS word, a hyphen, a number).
NUMBER = r"(?<![\w-])\d+(?:[.,]\d+)*(?![\w-])"
CALL_SIGN = rf"(?<![\w-])(?:{'|'.join(SIGNS)})-\d+(?![\w-])"
FILLER = (
    "Agent {agent} reviewed the {noun} ledger in {city} before the {time} briefing.",
    "The {noun} office in {city} logged {num} routine {plural} on {day}.",
    "Handler {handler} asked for a summary of the {noun} audit from {city}.",
    "Field notes mention a {adj} {noun} near the central station in {city}.",
    "The dress code for the {time} meeting in {city} was relaxed again.",
    "A maintenance crew replaced the {noun} on channel {num} of the {city} relay.",
    "Agent {agent} signed the {noun} register and left {city} by train.",
    "Weather reports from {city} predicted {adj} conditions for {day}.",
    "The archive in {city} catalogued {num} {plural} from the {adj} period.",
    "Handler {handler} approved {num} travel requests for the {city} team.",
)
NOUNS = "supply transport archive courier budget inventory signal logistics vehicle".split()
PLURALS = "reports parcels requests memos permits invoices inspections".split()
ADJS = "quiet unusual routine damp busy ordinary late early windy".split()
TIMES = "morning noon evening night".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()


@dataclass(frozen=True)
class Question:
    question: str
    answer: str
    hops: int
    distractor: bool
    fact_lines: tuple[int, ...]  # 1-based lines holding the planted statements
    revoked: str = ""  # the distractor's revoked value ("" without a distractor)


@dataclass(frozen=True)
class Corpus:
    text: str
    questions: tuple[Question, ...]
    tokens: int  # estimate_tokens(text)


def _agents(rng: random.Random, n: int) -> list[str]:
    pool = [f"{c}-{k}" for c in CODENAMES for k in range(10, 100)]
    return rng.sample(pool, n)


def _filler_line(rng: random.Random, agents: list[str], handlers: list[str]) -> str:
    def one() -> str:
        return rng.choice(FILLER).format(
            agent=rng.choice(agents),
            noun=rng.choice(NOUNS),
            city=rng.choice(CITIES),
            time=rng.choice(TIMES),
            num=rng.randrange(2, 100),
            plural=rng.choice(PLURALS),
            day=rng.choice(DAYS),
            handler=rng.choice(handlers),
            adj=rng.choice(ADJS),
        )

    return " ".join(one() for _ in range(rng.choice((2, 3))))


def value_shape(value: str) -> str | None:
    """The regex of the values of ``value``'s kind (``NUMBER`` or ``CALL_SIGN``), None when
    ``value`` has neither shape."""
    for shape in (NUMBER, CALL_SIGN):
        if re.fullmatch(shape, value, re.I):
            return shape
    return None


def _draw(rng: random.Random, attr: str, used: set[str]) -> str:
    """A value of ``attr`` not in ``used`` (uniform over the rest), added to ``used``."""
    value = rng.choice([v for v in ATTRIBUTES[attr] if v not in used])
    used.add(value)
    return value


def _facts(
    rng: random.Random, agent: str, hops: int, bridge: str, distractor: bool, used: set[str]
):
    """(question, answer, revoked, statements) for one agent; values drawn without
    replacement from ``used`` (no two questions share a value, gold or revoked)."""
    attr = rng.choice([a for a, pool in ATTRIBUTES.items() if len(set(pool) - used) > distractor])
    value = _draw(rng, attr, used)
    statements = [f"The {attr} of agent {agent} is {value}."]
    old = ""
    if distractor:
        old = _draw(rng, attr, used)
        fake = f"Agent {agent}'s former {attr} {old} was revoked and is no longer valid."
        statements.insert(rng.randrange(2), fake)
    if hops == 1:
        return f"What is the {attr} of agent {agent}?", value, old, statements
    if bridge in CITIES:
        statements.append(f"Agent {agent} is stationed in {bridge}.")
        return f"What is the {attr} of the agent stationed in {bridge}?", value, old, statements
    statements.append(f"Agent {agent} reports to handler {bridge}.")
    return f"What is the {attr} of the agent who reports to {bridge}?", value, old, statements


TOKENS_PER_QUESTION = 200  # 3 planted lines per question; filler lines are <= 63 tokens + 1


def generate(tokens: int, n_questions: int, seed: int) -> Corpus:
    """About ``tokens`` estimated tokens of filler with ``n_questions`` planted questions (half
    two-hop, half with a distractor), their statements in order of their draw."""
    if not 1 <= n_questions <= 2 * len(CITIES):
        raise ValueError(f"n_questions={n_questions}: expected 1..{2 * len(CITIES)}")
    if tokens < TOKENS_PER_QUESTION * n_questions:  # 3 fact lines each, a filler line <= 64
        raise ValueError(
            f"tokens={tokens}: too few for {n_questions} questions (>= {TOKENS_PER_QUESTION} each)"
        )
    rng = random.Random(seed)
    agents = _agents(rng, n_questions + 40)
    handlers = [f"{f} {sur}" for f in FIRST for sur in LAST]
    cities, people = iter(rng.sample(CITIES, len(CITIES))), iter(rng.sample(handlers, 99))
    lines, used = [], 0
    while used < tokens:
        lines.append(_filler_line(rng, agents, handlers))
        used += estimate_tokens(lines[-1]) + 1
    picks = iter(rng.sample(range(len(lines)), 3 * n_questions))
    questions, taken = [], set()
    for q in range(n_questions):
        hops, distractor = 1 + q % 2, (q // 2) % 2 == 1
        bridge = "" if hops == 1 else next(cities if q // 4 % 2 == 0 else people)
        question, answer, old, statements = _facts(rng, agents[q], hops, bridge, distractor, taken)
        where = sorted(next(picks) for _ in statements)
        if rng.random() < 0.5:
            where = where[::-1]
        for line_no, sentence in zip(where, statements, strict=True):
            parts = lines[line_no].split(". ")
            parts.insert(rng.randrange(len(parts) + 1), sentence.rstrip("."))
            lines[line_no] = ". ".join(p.rstrip(".") for p in parts) + "."
        fact_lines = tuple(w + 1 for w in where)
        questions.append(Question(question, answer, hops, distractor, fact_lines, old))
    text = "\n".join(lines)
    return Corpus(text, tuple(questions), estimate_tokens(text))
