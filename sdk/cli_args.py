"""Parsing of the command line's ``--config key=value`` and ``--option key=value`` items."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from neuroedge.errors import ConfigError


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
