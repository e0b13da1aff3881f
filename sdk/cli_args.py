"""Parsing of the command line's ``--config``, ``--option`` (key=value), ``--crop`` and
``--backend`` items."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from neuroedge.errors import ConfigError, InputError
from neuroedge.paths import refuse_empty


def add_config_option(parser: Any, help: str = "model config (repeatable)") -> None:
    """``--config KEY=VALUE ...`` on ``parser``: ``extend``, so a second --config adds its
    items (a plain store kept only the last group, silently); read with ``config_items``."""
    parser.add_argument(
        "--config", action="extend", nargs="+", metavar="KEY=VALUE", default=None, help=help
    )


def add_config_options(sub: Any) -> None:
    """``--config KEY=VALUE ...`` (``add_config_option``) on the subcommands of ``sub`` that
    build or run a model."""
    for action in sub.choices.values():
        if action.prog.split()[-1] in ("train", "export", "bench", "run"):
            add_config_option(action)


def _pairs(items: Sequence[str] | None, flag: str, example: str) -> dict[str, str]:
    """``key=value`` items as ``{key: value text}``; a key given twice with two values is
    refused (the last one would win silently, e.g. ``--config seed=1 --config seed=2``)."""
    pairs: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE, e.g. {example}")
        if key in pairs and pairs[key] != value:
            raise ConfigError(f"{flag} {key} is given twice: {pairs[key]!r} and {value!r}")
        pairs[key] = value
    return pairs


def config_items(items: Sequence[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they parse, else kept as strings."""
    config: dict[str, Any] = {}
    for key, value in _pairs(items, "--config", "smoke=true").items():
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value
    return config


def option_items(items: Sequence[str] | None) -> dict[str, str]:
    """Backend options ``key=value`` (strings, as the backends read them); an empty value is
    refused by name (``path=$OUT`` with OUT unset would otherwise be read as ".")."""
    options = _pairs(items, "--option", "form=step")
    for key, value in options.items():
        refuse_empty(
            value,
            f"--option {key}",
            "give one, or leave the option out for the backend's default",
            ConfigError,
            "path" if key.endswith("path") else "value",
        )
    return options


def crop_items(text: str) -> tuple[int, int, int]:
    """``"X0,Y0,SIDE"`` -> (x0, y0, side); InputError naming the text otherwise."""
    parts = [p.strip() for p in text.split(",")]
    try:
        x0, y0, side = (int(p) for p in parts)
    except ValueError:
        raise InputError(
            f"--crop {text!r}: expected X0,Y0,SIDE (three integers, pixels of the recording)"
        ) from None
    if x0 < 0 or y0 < 0 or side < 1:
        raise InputError(f"--crop {text!r}: expected X0, Y0 >= 0 and SIDE >= 1")
    return x0, y0, side


def backend_items(asked: Sequence[str] | None, repeats: int | None) -> list[str]:
    """The --backend names (comma lists allowed; default host,onnxrt), each a registered
    backend, checked before any work; --repeats, when given, >= 1."""
    from neuroedge.errors import NeuroedgeError, UnknownNameError
    from neuroedge.registry import backend_table

    asked = asked or ["host,onnxrt"]
    backends = [b.strip() for arg in asked for b in arg.split(",") if b.strip()]
    if not backends:
        raise NeuroedgeError(f"--backend {asked}: no backend named")
    for name in backends:
        if name not in backend_table():
            raise UnknownNameError("backend", name, list(backend_table()))
    if repeats is not None and repeats < 1:
        raise NeuroedgeError(f"--repeats {repeats}: must be >= 1")
    return backends


def bench_backends(spec: Any, asked: list[str], explicit: bool) -> list[str]:
    """The backends a model's own benchmark runs: the default ones it measures, or every one
    asked for (``explicit``), refusing any it does not measure (it would leave them out of the
    report)."""
    from neuroedge.errors import NeuroedgeError

    if not explicit:
        return [b for b in asked if b in spec.bench_backends]
    other = [b for b in asked if b not in spec.bench_backends]
    if other:
        raise NeuroedgeError(
            f"{spec.name}'s benchmark measures the backends "
            f"{', '.join(spec.bench_backends)}; not {', '.join(other)}"
        )
    return asked
