"""A generated Python repository with a history of fixed bugs and open issues to repair.

The repository is ``MODULES`` modules (one domain noun each, ``orders.py``, ``sensors.py``...)
with one function of every bug ``FAMILIES`` member in each, and one test per function in
``tests/test_<module>.py``. Every function is written in ``ast.unparse``'s canonical form, so
a repair that rewrites one function changes only that function's lines.

Each issue text is a context sentence about the module's domain (shared words across the
module's issues, as reports from one team are) followed by the symptom, in one of several
wordings. A seed draws ``targets`` functions (balanced over the families) that carry their
bug: the open issues. Every other function carries a *historical* issue: the same kind of
bug, fixed in the past, kept as (issue text, buggy function, fixed function, the failing
run of its test). Historical issues in a target's module share its words but never its
family (one function per family per module), so a retriever that follows topical words
finds exemplars that look alike and have another root cause: the misleading exemplars
ConRAD's guardian must refuse.

Two families share a symptom and differ in their fix: ``off_by_one`` (a slice bound) and
``inclusive_filter`` (a comparison in a filter) both return one item too few, so a guardian
that judges by the symptom alone lets some wrong exemplars through.

Tests assert ``got == want, (got, want)`` (``(got, want, earlier)`` where a stale earlier
result matters): the runner reads the symptom from that message (``sandbox.diagnose``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MODULES = {  # noun: the team's domain word, shared by the module's issues
    "order": "checkout",
    "invoice": "billing",
    "sensor": "telemetry",
    "track": "playlist",
    "route": "navigation",
    "charger": "charging",
    "camera": "vision",
    "shipment": "freight",
    "ticket": "helpdesk",
    "meter": "utility",
}
CONTEXTS = (  # the reporter's setting: topical words a retriever will match across families
    "Our {d} service handles {m} records for the {d} team.",
    "In the {d} pipeline we call the {m} helpers on every {m} batch.",
    "We were testing the {d} dashboard with {m} data from production.",
    "The nightly {d} job processes {m} entries.",
)
UNITS = (  # (from, to, factor, operator): value {op} factor converts
    ("ms", "s", 1000, "/"),
    ("g", "kg", 1000, "/"),
    ("cm", "m", 100, "/"),
    ("s", "ms", 1000, "*"),
    ("m", "cm", 100, "*"),
    ("kg", "g", 1000, "*"),
)
FALLBACKS = ("''", "'unknown'", "'n/a'", "'-'")


@dataclass(frozen=True)
class Function:
    """One function of the repository, correct and with its family's bug."""

    module: str  # the module's noun; the file is f"{module}s.py"
    name: str
    family: str  # a key of FAMILIES
    fixed: str  # the source of the correct function
    buggy: str  # the source with the bug
    test: str  # the source of its test function
    issue: str  # the issue text a user would file for the buggy version

    @property
    def path(self) -> str:
        return f"{self.module}s.py"

    @property
    def test_path(self) -> str:
        return f"tests/test_{self.module}s.py"

    @property
    def test_id(self) -> str:
        return f"{self.test_path}::test_{self.name}"


@dataclass(frozen=True)
class Corpus:
    """The repository and its issues for one seed."""

    seed: int
    functions: tuple[Function, ...]
    targets: tuple[str, ...]  # names of the functions whose bug is open
    history: tuple[str, ...] = field(default=())  # names whose bug was fixed in the past

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"no function {name!r} in the corpus")

    def files(self, buggy: tuple[str, ...] = ()) -> dict[str, str]:
        """Relative path -> text of the repository with the functions in ``buggy`` broken."""
        out: dict[str, list[str]] = {}
        for f in self.functions:
            src = f.buggy if f.name in buggy else f.fixed
            out.setdefault(f.path, []).append(src)
            out.setdefault(f.test_path, [f"from {f.module}s import *\n"]).append(f.test)
        return {p: "\n\n".join(parts) for p, parts in out.items()}


@dataclass(frozen=True)
class Family:
    """A bug family as templates (``str.format`` fields: ``m`` the module noun and the
    family's drawn ``values``); the bug replaces ``bug[0]`` of the fixed source by ``bug[1]``."""

    name: str
    fixed: str
    bug: tuple[str, str]
    test: str
    issues: tuple[str, ...]  # wordings of the symptom; one is drawn
    values: Callable[[random.Random], dict[str, Any]]  # the family's random draws


def _take_values(r: random.Random) -> dict[str, Any]:
    k = r.randrange(2, 5)
    items = r.sample(range(10, 99), k + 2)
    return {"k": k, "k1": k - 1, "items": items, "want": items[:k]}


def _filter_values(r: random.Random) -> dict[str, Any]:
    limit = r.randrange(20, 80)
    items = sorted(r.sample(range(limit - 15, limit), 3)) + [limit, limit + 7]
    return {"limit": limit, "items": items, "want": items[:4]}


def _unit_values(r: random.Random) -> dict[str, Any]:
    a, b, factor, op = r.choice(UNITS)
    value = r.randrange(2, 9) * factor + r.randrange(1, 9) * factor // 10
    right = value / factor if op == "/" else value * factor
    wrong = value / (factor // 10) if op == "/" else value * (factor // 10)
    return {
        "a": a,
        "b": b,
        "factor": factor,
        "f10": factor // 10,
        "op": op,
        "value": value,
        "right": right,
        "wrong": f"{wrong:g}",
        "right_g": f"{right:g}",
    }


def _key_values(r: random.Random) -> dict[str, Any]:
    return {"a": r.randrange(2, 9), "b1": r.randrange(2, 9), "b2": r.randrange(10, 19)}


FAMILIES: dict[str, Family] = {
    "off_by_one": Family(
        "take_{m}s",
        'def take_{m}s(items, count):\n    """Return the first count {m}s of items, in order."""'
        "\n    picked = list(items)\n    return picked[:count]",
        ("[:count]", "[:count - 1]"),
        "def test_take_{m}s():\n    got = take_{m}s({items}, {k})\n    want = {want}\n"
        "    assert got == want, (got, want)",
        (
            "Asking take_{m}s for {k} {m}s returns only {k1}; the last requested {m} is dropped.",
            "We get fewer {m}s than we ask for.",
            "The {m} listing gives one {m} too few: I take {k} and get {k1} back.",
        ),
        _take_values,
    ),
    "inclusive_filter": Family(
        "{m}s_up_to",
        'def {m}s_up_to(items, limit):\n    """Return the {m}s whose value is at most limit '
        '(limit included)."""\n    return [x for x in items if x <= limit]',
        ("x <= limit", "x < limit"),
        "def test_{m}s_up_to():\n    got = {m}s_up_to({items}, {limit})\n    want = {want}\n"
        "    assert got == want, (got, want)",
        (
            "{m}s_up_to returns one {m} too few: the {m} equal to the limit {limit} is missing.",
            "Some {m}s vanish from the filtered list.",
            "Filtering {m}s up to {limit} drops the last {m}; I get 3 {m}s, expected 4.",
        ),
        _filter_values,
    ),
    "none_guard": Family(
        "{m}_label",
        'def {m}_label(label, fallback={fallback}):\n    """Normalise a {m} label; a missing '
        'label (None) gives the fallback."""\n    if label is None:\n        return fallback\n'
        "    return label.strip().lower()",
        ("    if label is None:\n        return fallback\n", ""),
        "def test_{m}_label():\n    got = {m}_label(None)\n    want = {fallback}\n"
        "    assert got == want, (got, want)\n    assert {m}_label('  Big ') == 'big'",
        (
            "{m}_label crashes with AttributeError when the {m} label is None.",
            "A {m} without a label (None) raises instead of getting the fallback label.",
            "Empty {m} labels break the export.",
        ),
        lambda r: {"fallback": r.choice(FALLBACKS)},
    ),
    "precedence": Family(
        "{m}_options",
        'def {m}_options(explicit, defaults):\n    """The {m} options: explicit values win over '
        'the defaults."""\n    merged = {{**defaults, **explicit}}\n    return merged',
        ("{{**defaults, **explicit}}", "{{**explicit, **defaults}}"),
        "def test_{m}_options():\n    got = {m}_options({{'{key}': {mine}}}, {{'{key}': 0, "
        "'debug': False}})\n    want = {{'{key}': {mine}, 'debug': False}}\n"
        "    assert got == want, (got, want)",
        (
            "The {m} option '{key}' I set explicitly is overridden by the default.",
            "{m}_options ignores my explicit '{key}' and keeps the default value 0.",
            "Settings for {m}s seem to be ignored.",
        ),
        lambda r: {"key": r.choice(("mode", "level", "size")), "mine": r.randrange(1, 9)},
    ),
    "unit_factor": Family(
        "{m}_{a}_to_{b}",
        'def {m}_{a}_to_{b}(value):\n    """Convert a {m} reading from {a} to {b}."""\n'
        "    return value {op} {factor}",
        ("{op} {factor}", "{op} {f10}"),
        "def test_{m}_{a}_to_{b}():\n    got = {m}_{a}_to_{b}({value})\n    want = {right!r}\n"
        "    assert abs(got - want) < 1e-09, (got, want)",
        (
            "Converting {value} {a} of {m} data gives {wrong} {b}, expected {right_g}.",
            "The {m} reading in {b} is off: {value} {a} should be {right_g} {b}.",
            "The converted {m} values are wrong by a factor of ten.",
        ),
        _unit_values,
    ),
    "stale_key": Family(
        "lookup_{m}",
        'def lookup_{m}(store, region, year):\n    """The {m} record for (region, year), computed '
        'once per key."""\n    key = (region, year)\n    if key not in store:\n'
        "        store[key] = f'{{region}}-{{year}}'\n    return store[key]",
        ("key = (region, year)", "key = (region,)"),
        "def test_lookup_{m}():\n    store = {{}}\n    earlier = lookup_{m}(store, {a}, {b1})\n"
        "    got = lookup_{m}(store, {a}, {b2})\n    want = '{a}-{b2}'\n"
        "    assert got == want, (got, want, earlier)",
        (
            "lookup_{m} returns a stale {m} record when only the year changes.",
            "The cached {m} lookup gives last year's record for a new year.",
            "After changing the year, the {m} shown does not update.",
        ),
        _key_values,
    ),
    "boundary": Family(
        "{m}_within_limit",
        'def {m}_within_limit(value, limit):\n    """True when a {m} value is within the limit '
        '(the limit itself allowed)."""\n    return value <= limit',
        ("value <= limit", "value < limit"),
        "def test_{m}_within_limit():\n    got = {m}_within_limit({limit}, {limit})\n"
        "    want = True\n    assert got == want, (got, want)\n"
        "    assert not {m}_within_limit({limit1}, {limit})",
        (
            "A {m} value exactly at the limit {limit} is rejected by {m}_within_limit.",
            "{m}_within_limit({limit}, {limit}) is False; the limit should be allowed.",
            "The {m} check is too strict at the edge.",
        ),
        lambda r: {"limit": (x := r.randrange(10, 90)), "limit1": x + 1},
    ),
}


def instantiate(family: Family, m: str, r: random.Random) -> tuple[str, str, str, str, str]:
    """(name, fixed, buggy, test, issue) of ``family`` in module ``m``, drawing from ``r``."""
    v = {"m": m, **family.values(r)}
    fixed = family.fixed.format(**v)
    old, new = (x.format(**v) for x in family.bug)
    if old not in fixed:
        raise ValueError(f"{family.name}: bug fragment {old!r} not in the fixed source")
    issue = r.choice(family.issues).format(**v)
    return family.name.format(**v), fixed, fixed.replace(old, new), family.test.format(**v), issue


def generate(seed: int, targets: int = 20) -> Corpus:
    """The repository of ``MODULES`` x ``FAMILIES`` functions; ``targets`` open issues,
    spread over the families as evenly as possible; every other function is history."""
    n = len(MODULES) * len(FAMILIES)
    if not 1 <= targets <= n - len(FAMILIES):
        raise ValueError(f"targets must be in [1, {n - len(FAMILIES)}], got {targets}")
    r = random.Random(seed)
    functions = []
    for m in MODULES:
        for family, spec in FAMILIES.items():
            name, fixed, buggy, test, issue = instantiate(spec, m, r)
            context = r.choice(CONTEXTS).format(d=MODULES[m], m=m)
            functions.append(Function(m, name, family, fixed, buggy, test, f"{context} {issue}"))
    by_family: dict[str, list[Function]] = {}
    for f in functions:
        by_family.setdefault(f.family, []).append(f)
    for group in by_family.values():
        r.shuffle(group)
    chosen: list[str] = []
    while len(chosen) < targets:  # round robin over the families
        for group in by_family.values():
            if group and len(chosen) < targets:
                chosen.append(group.pop().name)
    history = tuple(f.name for f in functions if f.name not in chosen)
    return Corpus(seed, tuple(functions), tuple(chosen), history)
