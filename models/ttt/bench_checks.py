"""Up-front checks of the ``neuroedge bench ttt.linear_attention`` config.

``check_bench_config`` runs on the merged config before anything is built, timed or exported:
each refusal is a ConfigError naming the key, the value and what is expected. Sizes are bounded
so that a typo fails here and not as an allocation error: the layer by
``module.MAX_LAYER_PARAMETERS`` weights, and the masked parallel form, which holds a
``batch x heads x L x L`` score matrix, by MAX_SCORE_ENTRIES fp32 entries (4 GiB) at the largest
``lengths`` entry and at ``onnx_length`` (batch 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuroedge.config_values import int_list, integer
from neuroedge.errors import ConfigError

MAX_SCORE_ENTRIES = 2**30  # batch * heads * L * L of the parallel form: 4 GiB of fp32 scores
POSITIVE_KEYS = (
    "d_model",
    "heads",
    "head_dim",
    "batch",
    "repeats",
    "threads",
    "stream_steps",
    "onnx_length",
    "block",
)


def _variant(value: Any) -> None:
    from neuroedge.models.ttt.variants import FORMS, VARIANTS

    timed = [name for name, v in VARIANTS.items() if v.forms == FORMS]
    if value not in timed:
        raise ConfigError(
            f"config variant={value!r}: the bench times the recurrent, parallel and chunked "
            f"forms side by side; expected a variant exact in all three: {', '.join(timed)}"
        )


def _scores(key: str, value: int, rows: int, heads: int) -> None:
    entries = rows * heads * value * value
    if entries > MAX_SCORE_ENTRIES:
        raise ConfigError(
            f"config {key}={value}: the parallel form would hold {rows} x {heads} x {value} x "
            f"{value} = {entries:,} scores ({4 * entries / 2**30:.1f} GiB); at most "
            f"{MAX_SCORE_ENTRIES:,} (MAX_SCORE_ENTRIES): use shorter lengths or fewer heads"
        )


def check_bench_config(cfg: Mapping[str, Any]) -> None:
    """Every value of the merged bench config (BENCH_DEFAULTS under the user's), before any
    work; ConfigError names the key, the value and what is expected."""
    from neuroedge.models.ttt.module import check_layer_size
    from neuroedge.models.ttt.variants import get_variant

    for key in POSITIVE_KEYS:
        integer(cfg, key, 1)
    integer(cfg, "seed", 0)
    lengths = int_list(cfg, "lengths", 1)  # tokens per sequence
    _variant(cfg["variant"])
    try:
        check_layer_size(
            cfg["d_model"], cfg["heads"], cfg["head_dim"], get_variant(cfg["variant"]).kernel
        )
    except ValueError as err:
        raise ConfigError(f"config: {err}") from None
    _scores("lengths", max(lengths), cfg["batch"], cfg["heads"])
    _scores("onnx_length", cfg["onnx_length"], 1, cfg["heads"])
