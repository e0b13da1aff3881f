"""Parsing of the command line's ``--config``, ``--option`` (key=value) and ``--crop`` items."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from neuroedge.errors import ConfigError, InputError


def config_items(items: Sequence[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they parse, else kept as strings."""
    config: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--config takes key=value, got {item!r}")
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value
    return config


def option_items(items: Sequence[str] | None) -> dict[str, str]:
    """Backend options ``key=value`` (strings, as the backends read them)."""
    options: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE, e.g. form=step")
        if key in options and options[key] != value:
            raise ConfigError(f"--option {key} is given twice: {options[key]!r} and {value!r}")
        options[key] = value
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
