"""Config value checks for the models' run, train and bench hooks.

``ModelSpec.check_config`` refuses unknown key names; these refuse bad values of known keys
before any work: each raises ConfigError naming the key, the value given and what is expected,
and never converts silently (2.5 is not an integer, true is not a count, NaN is not a number).
``check_keys`` is ``ModelSpec.check_config``'s body; the ``field_*`` checks are the core
records' (``neuroedge.types``), which raise TypeError naming the field and the value.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from neuroedge.errors import ConfigError


def integer(
    cfg: Mapping[str, Any],
    key: str,
    least: int | None = None,
    most: int | None = None,
    hint: str = "",
) -> int:
    """``cfg[key]`` as an int in [least, most] (bounds optional); ``hint`` ends the message."""
    value = cfg[key]
    if not _fits(value, least, most):
        raise ConfigError(f"{key}={value!r}: expected an integer{_range(least, most)}{hint}")
    return int(value)


def number(
    cfg: Mapping[str, Any],
    key: str,
    low: float | None = None,
    high: float | None = None,
    open_low: bool = False,
) -> float:
    """``cfg[key]`` as a finite float in [low, high] (``open_low``: (low, high])."""
    value = cfg[key]
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and _finite(value)
    if ok and low is not None:
        ok = value > low if open_low else value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        if low is not None and high is not None:
            want = f" in {'(' if open_low else '['}{low:g}, {high:g}]"
        elif low is not None:
            want = f" {'>' if open_low else '>='} {low:g}"
        else:
            want = "" if high is None else f" <= {high:g}"
        raise ConfigError(f"{key}={value!r}: expected a finite number{want}")
    return float(value)


def int_list(
    cfg: Mapping[str, Any], key: str, least: int | None = None, most: int | None = None
) -> list[int]:
    """``cfg[key]`` as a non-empty list of ints in [least, most]."""
    value = cfg[key]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{key}={value!r}: expected a non-empty list of integers")
    bad = [v for v in value if not _fits(v, least, most)]
    if bad:
        raise ConfigError(f"{key}={value!r}: {bad} are not integers{_range(least, most)}")
    return [int(v) for v in value]


def number_list(
    cfg: Mapping[str, Any],
    key: str,
    low: float | None = None,
    open_low: bool = False,
    high: float | None = None,
) -> list[float]:
    """``cfg[key]`` as a non-empty list of finite numbers above ``low`` (up to ``high``)."""
    value = cfg[key]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{key}={value!r}: expected a non-empty list of numbers")
    return [number({key: v}, key, low, high, open_low=open_low) for v in value]


def choice(cfg: Mapping[str, Any], key: str, choices: Sequence[str]) -> str:
    """``cfg[key]``, one of ``choices``."""
    value = cfg[key]
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{key}={value!r}: expected one of {', '.join(choices)}")
    return value


def flag(cfg: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """``cfg[key]`` (``default`` when absent) as a bool: only true or false (numpy's bool too),
    since the string "no" from ``--config smoke=no`` would otherwise count as true."""
    import numpy as np

    value = cfg.get(key, default)
    if isinstance(value, np.bool_):  # numpy's bool: a mask's entry, np.bool_(True)
        return bool(value)
    if not isinstance(value, bool):
        hint = ""
        if isinstance(value, str) and value.lower() in ("true", "false"):
            # the same text comes from --config smoke=True (JSON wants lowercase) and from
            # Python's config={"smoke": "True"}: name the spelling of each
            word = value.lower()
            hint = (
                f" (on the command line {key}={word}, lowercase as in JSON; from Python the "
                f"bool {word.capitalize()}, not the string {value!r})"
            )
        raise ConfigError(f"{key}={value!r}: expected true or false{hint}")
    return value


def mapping(cfg: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``cfg[key]`` (an empty dict when absent or None) as a dict: a JSON object of keys."""
    value = cfg.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}={value!r}: expected a mapping of keys to values (a JSON object)")
    return dict(value)


def train_config(model: str, config: Any, keys: Iterable[str]) -> dict[str, Any]:
    """A build's or bench's ``train_config`` (None: empty) as a dict of ``keys`` only:
    ConfigError for a value that is no mapping or a key training does not read (it would be
    ignored without a word)."""
    config, keys = mapping({"train_config": config}, "train_config"), list(keys)
    unknown = sorted(set(config) - set(keys))
    if unknown:
        raise ConfigError(
            f"{model} training does not read {', '.join(map(repr, unknown))}; its keys: "
            f"{', '.join(keys)}"
        )
    return config


# the largest seed a config takes: numpy's seed range (0..2**32-1), torch's too; every model's
# seed keys are bounded by it (2**64 overflowed inside torch, a traceback instead of the key)
SEED_MAX = 2**32 - 1
# the largest Adam / AdamW step size a model's lr keys take: far past any useful rate (the
# models' defaults are 1e-3 to 5e-2), below where a float32 step overflowed (lr=1e300: NaN
# weights, or a traceback out of AdamW)
MAX_LR = 10.0

# the switches every model's build reads the same way
FLAGS = ("smoke", "untrained", "train_if_missing")
USE_WORDS = {"build": "build", "train": "training", "bench": "benchmark"}
# the build keys that say which trained weights to take (a file, or what to train): a build
# with ``smoke`` or ``untrained`` reads neither
WEIGHT_KEYS = ("checkpoint", "train_config")


def fresh_build(config: Mapping[str, Any]) -> bool:
    """Whether a build with ``config`` makes an untrained net (``smoke`` or ``untrained``
    true); ConfigError when it also gives a ``checkpoint`` or ``train_config`` (not None):
    neither would be read, and the net would be untrained without a word."""
    for switch in ("smoke", "untrained"):
        if not flag(config, switch):
            continue
        for key in WEIGHT_KEYS:
            if config.get(key) is not None:
                raise ConfigError(
                    f"{switch}=true builds an untrained net, so {key}={config[key]!r} would "
                    "not be read: drop one of them"
                )
        return True
    return False


def layered(
    config: Mapping[str, Any],
    defaults: Mapping[str, Any],
    smoke: Mapping[str, Any],
    variants: Sequence[str] = (),
    default: str = "",
    unread: Mapping[str, tuple[Sequence[str], str]] | None = None,
) -> tuple[str | None, bool, dict[str, Any]]:
    """A build's variant, ``smoke`` switch and merged config before the model's own value
    checks: ``defaults``, then ``smoke``'s values under the keys the user did not give (when
    ``smoke`` is true: a smoke build never overrides a size the user gave), then the user's keys
    (``smoke`` and ``variant`` left out). With ``variants``, the ``variant`` (``default``, else
    the first, when not given) is checked as one of them, and a key given that it never reads
    (``unread``: variant -> the keys and why) is a ConfigError naming key, value and variant,
    before any training; without ``variants``, the variant is None and a ``variant`` key stays
    in the config for the model's own check to refuse."""
    on = flag(config, "smoke")
    given = {k: v for k, v in config.items() if k not in ("smoke", "variant")}
    variant = None
    if variants:
        variant = choice({"variant": default or variants[0], **config}, "variant", variants)
        keys, why = (unread or {}).get(variant, ((), ""))
        named = [k for k in keys if k in given]
        if named:
            raise ConfigError(
                f"{named[0]}={given[named[0]]!r} has no effect with variant={variant} ({why}): "
                "drop it, or pick another variant"
            )
    elif "variant" in config:
        given["variant"] = config["variant"]  # a model without variants: its check refuses it
    return variant, on, {**defaults, **(smoke if on else {}), **given}


def check_keys(
    model: str, config: Mapping[str, Any] | None, valid: set[str] | None, use: str
) -> None:
    """ConfigError for a key of ``config`` that is no string (a Python caller's
    ``{1: 2}``), for a switch of ``FLAGS`` that is not true or false, and, where ``valid`` is
    not None, for each key ``use`` of ``model`` does not read, with the nearest valid one; and
    for a ``config`` that is no mapping (a string "smoke=true" iterates into letters)."""
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError(
            f"{model}: config={config!r} ({type(config).__name__}) is not a mapping of keys to "
            "values; give a dict, e.g. {'smoke': True}"
        )
    for key in config or ():
        if not isinstance(key, str):
            raise ConfigError(
                f"{model}: config key {key!r} ({type(key).__name__}) is not a string; "
                "config keys are names, e.g. {'smoke': True}"
            )
    for key in FLAGS:
        if config and key in config:
            flag(config, key)  # "no" would be truthy: an untrained model run silently
    if not config or valid is None:
        return
    unknown = [k for k in config if k not in valid]
    if unknown:
        import difflib

        hints = [
            f"{k!r}"
            + (
                f" (did you mean {near[0]!r}?)"
                if (near := difflib.get_close_matches(k, valid, 1))
                else ""
            )
            for k in unknown
        ]
        raise ConfigError(
            f"{model}'s {USE_WORDS[use]} does not read the config key"
            f"{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
            f"its keys: {', '.join(sorted(valid)) or 'none'}"
        )


def field_names(value: Any, what: str, kind: type | tuple[type, ...] = str) -> tuple[Any, ...]:
    """``value`` as a tuple of ``kind`` items: a list, set or other iterable converts (a frozen
    record must hash and never change under its holder; a set of names in sorted order, so
    tables list them the same way every run); a bare str is refused, as it would iterate into
    letters, and so is a mapping."""
    from collections.abc import Iterable, Mapping

    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        items = tuple(value)
        if all(isinstance(v, kind) for v in items):
            if isinstance(value, (set, frozenset)) and all(isinstance(v, str) for v in items):
                items = tuple(sorted(items))
            return items
    want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    raise TypeError(f"{what} must be a tuple of {want} values, got {value!r}")


def field_real(value: Any, what: str) -> float | int:
    """A real number (numpy scalars too, as Python numbers; NaN passes, as it always has);
    a bool or a numeric string is refused: neither is a quantity."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a real number, got {type(value).__name__} {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def field_bool(value: Any, what: str) -> None:
    if not isinstance(value, bool):  # "no" or 0 from a plugin would read as a verdict
        raise TypeError(f"{what} must be True or False, got {type(value).__name__} {value!r}")


def field_strs(record: Any, *names: str) -> None:
    for name in names:
        if not isinstance(getattr(record, name), str):
            what = f"{type(record).__name__} {name}"
            raise TypeError(f"{what} must be a str, got {getattr(record, name)!r}")


def set_fields(record: Any, **values: Any) -> None:
    for name, value in values.items():  # frozen: the normalised value replaces the given one
        object.__setattr__(record, name, value)


def _finite(value: numbers.Real) -> bool:
    """``math.isfinite``, false for an int too large for a float (10**400 from JSON raised
    OverflowError, a traceback instead of the key's message)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _fits(value: Any, least: int | None, most: int | None) -> bool:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return False
    return (least is None or value >= least) and (most is None or value <= most)


def _range(least: int | None, most: int | None) -> str:
    if least is not None and most is not None:
        return f" in {least}..{most}"
    if least is not None:
        return f" >= {least}"
    return "" if most is None else f" <= {most}"


def check_repeats(repeats: Any) -> int:
    """``repeats`` as an int >= 1 (numpy integers too), else InputError before any build: 0
    timed nothing yet reported a latency, and "3" or 2.5 failed deep inside a backend."""
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) or repeats < 1:
        from neuroedge.errors import InputError

        raise InputError(
            f"repeats={repeats!r}: expected an integer >= 1 (the timed calls after the warm-up)"
        )
    return int(repeats)


def backend_plan(backend: str, backends: Sequence[str]) -> tuple[bool, str | None]:
    """Whether ``backend``'s rows of a bench are measured, read before any work: ``(True,
    None)`` when it is among ``backends`` and its probe passes; ``(False, None)`` when it was not
    asked for; ``(False, reason)`` when asked for but not available here (the probe's reason)."""
    if backend not in backends:
        return False, None
    from neuroedge.registry import get_backend, probed

    availability = probed(get_backend(backend))
    return (True, None) if availability.ok else (False, availability.reason)


def check_backend_keys(
    given: Mapping[str, Any], backends: Sequence[str], backend: str, keys: Mapping[str, str]
) -> None:
    """ConfigError for a key of the user's config (``given``, not the merged one) that only
    ``backend``'s rows read (``keys``: each key and what it sets) when those rows are not
    measured (``backend_plan``): ``backend`` not among ``backends``, or not available here, where
    its rows would be skipped and the key accepted, written into the report, unread."""
    named = [k for k in keys if k in given]
    if not named:
        return
    measured, reason = backend_plan(backend, backends)
    if measured:
        return
    if reason is None:
        why = f"not among this run's backends ({', '.join(backends)}): add --backend host,{backend}"
    else:
        why = (
            f"not available here ({reason}), so its rows would be skipped: make it available "
            "(neuroedge doctor)"
        )
    key = named[0]
    raise ConfigError(
        f"config {key}={given[key]!r} ({keys[key]}) is read only with the {backend} backend, "
        f"which is {why}, or leave {key} out"
    )


def check_seed_keys(user: Mapping[str, Any]) -> None:
    """ConfigError when the user's config (not merged with defaults) gives both ``seed`` and
    ``seeds`` (``bench.seeds.seed_list`` read the seeds while report.json recorded the seed)."""
    if "seed" in user and "seeds" in user:
        raise ConfigError(
            f"seed={user['seed']!r} and seeds={user['seeds']!r}: give one (seed=S runs one "
            "seed, seeds=[...] several)"
        )


EXAMPLE_SPLITS = ("test", "train")  # a dataset model's examples: test data, or training data


def check_split(split: Any) -> str:
    """``split`` of a dataset model's ``example``; ValueError naming it unless one of
    ``EXAMPLE_SPLITS`` (training digits calibrate int8 graphs, never scored test digits)."""
    if split not in EXAMPLE_SPLITS:
        raise ValueError(f"example split={split!r}: expected one of {', '.join(EXAMPLE_SPLITS)}")
    return str(split)
