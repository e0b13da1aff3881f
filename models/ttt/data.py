"""Multi-query associative recall (MQAR), generated locally with a seed.

A sequence lists ``pairs`` distinct keys each followed by its value, then asks for every key
again in a random order: ``k1 v1 k2 v2 ... kP vP | k_s1 k_s2 ... k_sP``. At each query position
the target is the value bound to that key earlier; every other position is ignored
(``IGNORE``). Keys come from ``[0, keys)``, values from ``[keys, keys + values)``, so a model
cannot answer from the token identity alone. Chance accuracy is ``1 / values``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IGNORE = -100  # target of a position that is not scored (torch's cross_entropy ignore_index)


@dataclass(frozen=True)
class MQARTask:
    """Sizes of one MQAR task."""

    pairs: int = 16  # key-value pairs per sequence (and queries)
    keys: int = 32  # size of the key vocabulary (>= pairs)
    values: int = 32  # size of the value vocabulary

    def __post_init__(self) -> None:
        if self.pairs < 1 or self.keys < self.pairs or self.values < 1:
            raise ValueError(
                f"MQAR needs 1 <= pairs <= keys and values >= 1, got pairs="
                f"{self.pairs}, keys={self.keys}, values={self.values}"
            )

    @property
    def vocab(self) -> int:
        return self.keys + self.values

    @property
    def length(self) -> int:
        return 3 * self.pairs


def mqar_batch(task: MQARTask, batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, targets)``, both int64 of shape (batch, 3 * pairs)."""
    rng = np.random.default_rng(seed)
    p = task.pairs
    keys = np.argsort(rng.random((batch, task.keys)), axis=1)[:, :p]
    values = task.keys + rng.integers(0, task.values, size=(batch, p))
    order = np.argsort(rng.random((batch, p)), axis=1)
    tokens = np.empty((batch, 3 * p), dtype=np.int64)
    tokens[:, 0 : 2 * p : 2], tokens[:, 1 : 2 * p : 2] = keys, values
    tokens[:, 2 * p :] = np.take_along_axis(keys, order, axis=1)
    targets = np.full_like(tokens, IGNORE)
    targets[:, 2 * p :] = np.take_along_axis(values, order, axis=1)
    return tokens, targets
