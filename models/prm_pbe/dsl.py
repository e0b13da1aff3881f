"""The string-transform DSL of the PRM-PBE toy (research/host_llm_papers.md section 3.3): ops,
a pure-Python interpreter (no ``exec``), task generation and the vectorised string encoding.

Ops (``OPS``, 31 plus ``END``): upper, lower, reverse, dup, first_word, take(k) and drop(k)
for k in 1..3, append(c) and prepend(c) for c in ``SYMBOLS``, replace(a, b) for distinct a, b
in ``REPLACE``. Strings are cut to ``MAX_LEN`` characters after every op. Inputs are 4-8
characters of ``LETTERS`` and spaces. A task is a random program of 1-4 ops and 4 inputs with
its outputs; tasks whose outputs equal their inputs, or that have an empty output, are
redrawn, as are programs in which an op leaves every example unchanged (so a task's length is
the number of ops it needs at most, not padding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

LETTERS = "abcdefABCDEF"
SYMBOLS = "#*+@"
REPLACE = "ab #"
CHARS = LETTERS + " " + SYMBOLS  # encoded as 1..len(CHARS); 0 pads
MAX_LEN = 24
EXAMPLES = 4
MAX_OPS = 4


def _first_word(s: str) -> str:
    return s.split(" ", 1)[0]


def _ops() -> list[tuple[str, Callable[[str], str]]]:
    ops: list[tuple[str, Callable[[str], str]]] = [
        ("upper", str.upper),
        ("lower", str.lower),
        ("reverse", lambda s: s[::-1]),
        ("dup", lambda s: s + s),
        ("first_word", _first_word),
    ]
    for k in (1, 2, 3):
        ops.append((f"take({k})", lambda s, k=k: s[:k]))
        ops.append((f"drop({k})", lambda s, k=k: s[k:]))
    for c in SYMBOLS:
        ops.append((f"append({c!r})", lambda s, c=c: s + c))
        ops.append((f"prepend({c!r})", lambda s, c=c: c + s))
    for a in REPLACE:
        for b in REPLACE:
            if a != b:
                ops.append((f"replace({a!r},{b!r})", lambda s, a=a, b=b: s.replace(a, b)))
    return ops


OPS = _ops()
END = len(OPS)  # the op id that ends a program
N_ACTIONS = END + 1
OP_NAMES = [name for name, _ in OPS] + ["END"]


def apply(op: int, s: str) -> str:
    """``s`` after op ``op`` (END leaves it), cut to MAX_LEN."""
    return s if op == END else OPS[op][1](s)[:MAX_LEN]


def execute(program: Sequence[int], s: str) -> str:
    for op in program:
        if op == END:
            break
        s = apply(op, s)
    return s


@dataclass(frozen=True)
class Task:
    program: tuple[int, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def length(self) -> int:
        return len(self.program)


def random_input(rng: np.random.Generator) -> str:
    n = int(rng.integers(4, 9))
    chars = rng.choice(list(LETTERS + " "), n, p=[0.9 / len(LETTERS)] * len(LETTERS) + [0.1])
    return "".join(chars)


def random_task(rng: np.random.Generator, length: int) -> Task:
    """A task whose program has ``length`` ops, every one of them changing some example."""
    while True:
        inputs = tuple(random_input(rng) for _ in range(EXAMPLES))
        program = tuple(int(op) for op in rng.integers(0, END, length))
        states, useful = list(inputs), True
        for op in program:
            nxt = [apply(op, s) for s in states]
            useful &= nxt != states
            states = nxt
        if useful and all(states) and tuple(states) != inputs:
            return Task(program, inputs, tuple(states))


def make_tasks(rng: np.random.Generator, length: int, n: int, exclude: set = frozenset()) -> list:
    """``n`` distinct tasks of one length, none with inputs and outputs in ``exclude``."""
    out, seen = [], set(exclude)
    while len(out) < n:
        task = random_task(rng, length)
        key = (task.inputs, task.outputs)
        if key not in seen:
            seen.add(key)
            out.append(task)
    return out


_TABLE = np.zeros(256, np.int64)
for _i, _c in enumerate(CHARS):
    _TABLE[ord(_c)] = _i + 1


def encode(strings: Sequence[str]) -> np.ndarray:
    """Character ids [n, MAX_LEN] (0 pads) of strings of CHARS."""
    raw = np.array([s.encode("ascii") for s in strings], dtype=f"S{MAX_LEN}")
    return _TABLE[raw.view(np.uint8).reshape(len(strings), MAX_LEN)]


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def distance(states: Sequence[str], targets: Sequence[str]) -> float:
    """Mean edit distance of the states to their targets, each over the longer length (0..1):
    the partial-execution feedback the policy and the PRM see."""
    pairs = zip(states, targets, strict=True)
    return float(np.mean([edit_distance(s, t) / max(len(s), len(t), 1) for s, t in pairs]))
