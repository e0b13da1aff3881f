"""Captions to score: a generated audio-scene set (the notes' synthetic test) and a user's file.

**Generated set** (``scene_set``). MECAT's own references (ACAV100M clips, CC BY 3.0) are not
shipped here and nothing is downloaded, so the clips are drawn scenes: a main sound event
(source + action), a second event, a background and a place, each from a list of synonymous
phrasings. A clip has ``refs`` detailed references, each an independent realisation (its own
synonyms, template and clause order), and four systems caption it:

* ``detailed_correct``: one more independent realisation of the full scene;
* ``short_correct``: the main event only, one short realisation;
* ``detailed_wrong_source``: a full realisation whose main source and action are replaced by
  another source's (the most common captioning error: the right scene, the wrong sound);
* ``mismatched``: a detailed realisation of another clip's scene (a caption of the wrong
  clip: the notes' shuffled-mismatch row);
* ``generic``: the same sentence for every clip.

**A user's file** (``read_jsonl``): one JSON object per line,
``{"candidate": str, "references": [str, ...]}``, the same number of references per line;
no string may be empty or only whitespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SYSTEMS = ("detailed_correct", "short_correct", "detailed_wrong_source", "mismatched", "generic")
GENERIC = "A sound is heard in the background."

SOURCES = {  # source phrasings, action phrasings
    "dog": (["a dog", "a small dog", "a puppy"], ["barks repeatedly", "is barking", "yaps"]),
    "car": (["a car", "a vehicle", "an automobile"], ["drives past", "passes by", "speeds by"]),
    "baby": (["a baby", "an infant", "a toddler"], ["cries", "is crying loudly", "wails"]),
    "man": (
        ["a man", "a male voice", "an adult man"],
        ["speaks", "is talking", "says a few words"],
    ),
    "woman": (["a woman", "a female voice", "a lady"], ["speaks", "is talking", "sings softly"]),
    "bird": (["a bird", "several birds", "a songbird"], ["chirps", "is singing", "tweets"]),
    "door": (["a door", "a wooden door", "the front door"], ["slams shut", "creaks open", "bangs"]),
    "phone": (["a phone", "a mobile phone", "a telephone"], ["rings", "is ringing", "buzzes"]),
    "piano": (["a piano", "a pianist", "piano keys"], ["plays a melody", "plays chords", "plays"]),
    "guitar": (
        ["a guitar", "an acoustic guitar", "a guitarist"],
        ["strums", "is strummed", "plays"],
    ),
    "train": (["a train", "a locomotive", "a railway train"], ["rumbles past", "honks", "rattles"]),
    "siren": (["a siren", "an ambulance siren", "a police siren"], ["wails", "blares", "sounds"]),
    "cat": (["a cat", "a kitten", "a house cat"], ["meows", "is meowing", "purrs"]),
    "water": (["water", "a tap", "running water"], ["splashes", "trickles", "flows"]),
    "hammer": (["a hammer", "someone hammering", "a mallet"], ["strikes wood", "bangs", "pounds"]),
    "drum": (["a drum", "drums", "a drummer"], ["beats", "plays a rhythm", "is pounding"]),
    "engine": (["an engine", "a motor", "a motorcycle"], ["revs", "idles", "roars"]),
    "crowd": (["a crowd", "people", "an audience"], ["cheers", "applauds", "claps"]),
    "clock": (["a clock", "a wall clock", "an alarm clock"], ["ticks", "chimes", "beeps"]),
    "horse": (["a horse", "horses", "a pony"], ["gallops", "neighs", "trots"]),
}
PLACES = [
    ["on a busy street", "in city traffic", "by a busy road"],
    ["in a kitchen", "inside a home kitchen", "in a small kitchen"],
    ["in a forest", "among trees in the woods", "in a quiet forest"],
    ["in a large hall", "inside a big hall", "in an echoing hall"],
    ["at a train station", "on a railway platform", "in a station"],
    ["in an office", "inside an office room", "at a workplace"],
    ["at the beach", "by the sea", "near the shore"],
    ["in a park", "in a public park", "outdoors in a park"],
    ["in a car", "inside a vehicle", "in a moving car"],
    ["in a small room", "in a quiet room", "indoors in a room"],
]
BACKGROUNDS = [
    ["while rain falls", "with rain pattering", "as it rains"],
    ["while wind blows", "with strong wind", "as wind gusts"],
    ["while music plays", "with music in the background", "over background music"],
    ["while people chatter", "with a murmur of voices", "amid crowd chatter"],
    ["while a fan hums", "with a humming fan", "over a steady hum"],
    ["while thunder rumbles", "with distant thunder", "as thunder rolls"],
]
TEMPLATES = [  # {a}: main event, {b}: second event, {place}, {bg}
    "{A} {place} {bg}, and {b}.",
    "{A} and then {b}, {place}, {bg}.",
    "{Place}, {a} {bg}; {b}.",
    "{Bg}, {a} {place} while {b}.",
]


@dataclass(frozen=True)
class Scene:
    main: str
    second: str
    place: int
    background: int


@dataclass(frozen=True)
class CaptionSet:
    """``references[i]``: clip i's references; ``systems[name][i]``: that system's caption."""

    references: list[list[str]]
    systems: dict[str, list[str]]


def _event(rng: np.random.Generator, source: str) -> str:
    nouns, verbs = SOURCES[source]
    return f"{nouns[rng.integers(len(nouns))]} {verbs[rng.integers(len(verbs))]}"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def realise(rng: np.random.Generator, scene: Scene, main: str | None = None) -> str:
    """One detailed caption of ``scene`` (with ``main`` as the main source if given)."""
    a, b = _event(rng, main or scene.main), _event(rng, scene.second)
    place = PLACES[scene.place][rng.integers(3)]
    bg = BACKGROUNDS[scene.background][rng.integers(3)]
    text = TEMPLATES[rng.integers(len(TEMPLATES))].format(
        a=a, A=_cap(a), b=b, place=place, Place=_cap(place), bg=bg, Bg=_cap(bg)
    )
    return text


def scene_set(clips: int = 60, refs: int = 3, seed: int = 0) -> CaptionSet:
    """The generated caption set (module docstring); clips are distinct scenes."""
    if clips < 2 or refs < 1:
        raise ValueError(f"need clips >= 2 and refs >= 1, got clips={clips}, refs={refs}")
    rng = np.random.default_rng([seed, 2507])
    names = sorted(SOURCES)
    scenes: list[Scene] = []
    seen: set[Scene] = set()
    while len(scenes) < clips:
        main, second = rng.choice(len(names), 2, replace=False)
        s = Scene(
            names[main],
            names[second],
            int(rng.integers(len(PLACES))),
            int(rng.integers(len(BACKGROUNDS))),
        )
        if s not in seen:
            seen.add(s)
            scenes.append(s)
    references = [[realise(rng, s) for _ in range(refs)] for s in scenes]
    systems: dict[str, list[str]] = {name: [] for name in SYSTEMS}
    shift = int(rng.integers(1, clips))  # a derangement: every clip gets another's scene
    for i, s in enumerate(scenes):
        systems["detailed_correct"].append(realise(rng, s))
        systems["short_correct"].append(_cap(_event(rng, s.main)) + ".")
        wrong = [n for n in names if n not in (s.main, s.second)]
        systems["detailed_wrong_source"].append(realise(rng, s, wrong[rng.integers(len(wrong))]))
        systems["mismatched"].append(realise(rng, scenes[(i + shift) % clips]))
        systems["generic"].append(GENERIC)
    return CaptionSet(references, systems)


def read_jsonl(path: str | Path) -> tuple[list[str], list[list[str]]]:
    """A user's caption file (module docstring): candidates and references; ValueError naming
    the file and line of a bad row (an empty or whitespace-only caption or reference too)."""
    from neuroedge.jsonl import read_objects

    path = Path(path)
    cands: list[str] = []
    refs: list[list[str]] = []
    for no, row in read_objects(path):
        if not isinstance(row, dict) or not isinstance(row.get("candidate"), str):
            raise ValueError(f"{path}:{no}: expected an object with a string 'candidate'")
        r = row.get("references")
        if not isinstance(r, list) or not r or not all(isinstance(x, str) for x in r):
            raise ValueError(f"{path}:{no}: 'references' must be a non-empty list of strings")
        if not row["candidate"].strip():
            raise ValueError(f"{path}:{no}: 'candidate' is empty or whitespace only")
        empty = [k for k, x in enumerate(r) if not x.strip()]
        if empty:
            raise ValueError(
                f"{path}:{no}: 'references' item {empty[0]} is empty or whitespace only"
            )
        if refs and len(r) != len(refs[0]):
            raise ValueError(
                f"{path}:{no}: {len(r)} references, but the first line has {len(refs[0])}"
            )
        cands.append(row["candidate"])
        refs.append(r)
    if len(cands) < 2:
        raise ValueError(f"{path}: {len(cands)} caption lines; DATE needs >= 2 clips")
    return cands, refs
