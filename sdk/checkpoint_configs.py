"""Checks shared by the models whose build reads a checkpoint and takes a ``train_config``
(what ``train_if_missing`` trains with): once a checkpoint exists, nothing is trained, so a
``train_config`` value other than the checkpoint's own would be ignored without a word."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from neuroedge.errors import ConfigError


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
    asking for one is no contradiction."""
    skip = set(exempt)
    for key in asked:
        if key in skip or _plain(wanted[key]) == _plain(saved.get(key)):
            continue
        raise ConfigError(
            f"train_config {key}={wanted[key]!r} contradicts the checkpoint {path} (trained "
            f"with {key}={saved.get(key)!r}; train_config is what train_if_missing trains "
            "with): drop it or name another checkpoint"
        )
