"""Parsing of the command line's ``--config``, ``--option`` (key=value) and ``--crop`` items."""

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
