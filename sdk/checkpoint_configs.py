"""Checks shared by the models whose build reads a checkpoint: its saved training config,
checked as a user's would be (``checked_saved_config``); and a ``train_config`` (what
``train_if_missing`` trains with) against it: once a checkpoint exists, nothing is trained,
so a ``train_config`` value other than the checkpoint's own would be ignored without a word."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from neuroedge.errors import ArtifactError, ConfigError

T = TypeVar("T")


class SettledConfig(dict):
    """A checkpoint's training config settled over every training key (``settle_saved``):
    ``unknown`` holds the keys it did not save (it predates them), None here, null in a
    report, and never compared against a ``train_config`` (``refuse_ignored_train_config``)."""

    unknown: frozenset[str] = frozenset()


def settle_saved(
    saved: Mapping[str, Any], keys: Iterable[str], certain: Mapping[str, Any] | None = None
) -> SettledConfig:
    """``saved`` (a checkpoint's training config) over the training ``keys``: a key it lacks
    took whatever default its training had then, which today's default need not be (a
    checkpoint saved before distillation existed did not train with kd_weight=0.7), so it is
    unknown: None, listed in ``unknown``. ``certain``: keys whose missing value is known (the
    training took that value however old the checkpoint), settled to it instead."""
    known = {**(certain or {}), **saved}
    unknown = [k for k in keys if k not in known]
    settled = SettledConfig({**dict.fromkeys(unknown), **known})
    settled.unknown = frozenset(unknown)
    return settled


def _plain(value: Any) -> Any:
    """``value`` with tuples made lists, at any depth (a checkpoint saves lists)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def refuse_ignored_train_config(
    asked: Iterable[str],
    wanted: Mapping[str, Any],
    saved: Mapping[str, Any],
    path: str | os.PathLike[str],
    exempt: Iterable[str] = (),
) -> None:
    """ConfigError unless each key of ``asked`` (the keys of a build's ``train_config``) has,
    in ``wanted`` (that train_config checked and settled over the training defaults), the
    value the checkpoint at ``path`` was trained with (``saved``, settled the same way).

    ``exempt``: keys that say how or where to train (a device, a thread count), not which net:
    asking for one is no contradiction. A key the checkpoint did not save (``saved.unknown``,
    ``settle_saved``) cannot be told to contradict it: not compared."""
    skip = {*exempt, *getattr(saved, "unknown", ())}
    for key in asked:
        if key in skip or _plain(wanted[key]) == _plain(saved.get(key)):
            continue
        raise ConfigError(
            f"train_config {key}={wanted[key]!r} contradicts the checkpoint {path} (trained "
            f"with {key}={saved.get(key)!r}; train_config is what train_if_missing trains "
            "with): drop it or name another checkpoint"
        )


def checked_saved_config(
    saved: Any,
    path: str | os.PathLike[str],
    check: Callable[[Mapping[str, Any]], T],
    keys: Iterable[str] = (),
) -> T:
    """``check(saved)``, a checkpoint's saved config checked as a user's would be;
    ArtifactError naming the file for a config that is no dict (``keys``: the settings one
    holds) or a value ``check`` refuses (a ValueError: ConfigError)."""
    if not isinstance(saved, Mapping):
        holds = f" ({', '.join(keys)})" if keys else ""
        raise ArtifactError(
            f"{path}: checkpoint config is a {type(saved).__name__}, expected a dict of "
            f"training settings{holds}"
        )
    try:
        return check(saved)
    except ValueError as err:  # "config k=v: ..." from a checker reads once as such here
        raise ArtifactError(
            f"{path}: checkpoint config {str(err).removeprefix('config ')}"
        ) from None
