"""Up-front checks of the ``neuroedge bench ttt.linear_attention`` config.

``check_bench_config`` runs on the merged config before anything is built, timed or exported:
each refusal is a ConfigError naming the key, the value and what is expected. Sizes are bounded
so that a typo fails here and not as an allocation error: the layer by
``module.MAX_LAYER_PARAMETERS`` weights, and the masked parallel form, which holds a
``batch x heads x L x L`` score matrix, by MAX_SCORE_ENTRIES fp32 entries (4 GiB) at the largest
``lengths`` entry and at ``onnx_length`` (batch 1). ``checked_config`` also refuses a key that
only the onnxrt rows read (``ONNXRT_KEYS``) when the user gives it and onnxrt is not benchmarked
or not available (``config_values.check_backend_keys``, as every model's bench).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from neuroedge.config_values import SEED_MAX, check_backend_keys, int_list, integer
from neuroedge.errors import ConfigError

MAX_SCORE_ENTRIES = 2**30  # batch * heads * L * L of the parallel form: 4 GiB of fp32 scores
# The largest value of each count, and why (batch, onnx_length and lengths: MAX_SCORE_ENTRIES;
# d_model, heads, head_dim: module.check_sizes); 99999999999 was a 46 TiB stream input or a
# run that never ended, now refused by name before any work.
SCORED_KEYS = ("batch", "onnx_length")  # bounded by the parallel form's scores (_scores)
LIMITS: dict[str, tuple[int, str]] = {
    "repeats": (10_000, "timed calls per form and length; the default is 5"),
    "threads": (4096, "torch takes any count >= 1; the cap catches typos"),
    "stream_steps": (2**16, "tokens streamed through the step graph; the default is 256"),
    "block": (2**16, "tokens per block of the chunked form; no block is longer than a sequence"),
}

# Read only by the rows timed against onnxrt (throughput.bench_stream, bench_parallel_onnx);
# with --backend host they were accepted, written into the report and never read.
ONNXRT_KEYS: dict[str, str] = {
    "onnx_length": "the tokens of the onnxrt parallel-export row",
    "stream_steps": "the steps of the host-vs-onnxrt streaming rows",
}


def _variant(value: Any) -> None:
    from neuroedge.models.ttt.variants import FORMS, VARIANTS

    timed = [name for name, v in VARIANTS.items() if v.forms == FORMS]
    if value not in timed:
        raise ConfigError(
            f"config variant={value!r}: the bench times the recurrent, parallel and chunked "
            f"forms side by side; expected a variant exact in all three: {', '.join(timed)}"
        )


def _scores(key: str, value: int, rows: int, heads: int) -> None:
    """ConfigError when the parallel form at ``key``'s length would hold more than
    MAX_SCORE_ENTRIES scores; ``rows`` is the bench's batch for ``lengths`` and 1 for
    ``onnx_length``, so the message names batch too where it counts."""
    entries = rows * heads * value * value
    if entries > MAX_SCORE_ENTRIES:
        named = f"batch={rows}, heads={heads}" if key == "lengths" else f"heads={heads}"
        raise ConfigError(
            f"config {key}={value} with {named}: the parallel form would hold {rows} x {heads} "
            f"x {value} x {value} = {entries:,} scores ({4 * entries / 2**30:.1f} GiB); at most "
            f"{MAX_SCORE_ENTRIES:,} (MAX_SCORE_ENTRIES): use shorter {key}, "
            f"{'a smaller batch, ' if key == 'lengths' else ''}or fewer heads"
        )


def check_bench_config(cfg: Mapping[str, Any]) -> None:
    """Every value of the merged bench config (BENCH_DEFAULTS under the user's), before any
    work; ConfigError names the key, the value and what is expected."""
    from neuroedge.models.ttt.module import check_sizes
    from neuroedge.models.ttt.variants import get_variant

    for key in SCORED_KEYS:
        integer(cfg, key, 1)
    for key, (most, why) in LIMITS.items():
        integer(cfg, key, 1, most, f" ({why})")
    integer(cfg, "seed", 0, SEED_MAX, " (numpy's and torch's seed range)")
    lengths = int_list(cfg, "lengths", 1)  # tokens per sequence
    _variant(cfg["variant"])
    check_sizes(cfg, get_variant(cfg["variant"]).kernel)
    _scores("lengths", max(lengths), cfg["batch"], cfg["heads"])
    _scores("onnx_length", cfg["onnx_length"], 1, cfg["heads"])


def checked_config(given: Mapping[str, Any], backends: Sequence[str]) -> dict[str, Any]:
    """The bench config (BENCH_DEFAULTS under the user's ``given``), checked before any work:
    every value (``check_bench_config``), then the keys of a backend not run
    (``config_values.check_backend_keys``)."""
    from neuroedge.models.ttt.throughput import BENCH_DEFAULTS

    cfg = {**BENCH_DEFAULTS, **given}
    check_bench_config(cfg)
    check_backend_keys(given, backends, "onnxrt", ONNXRT_KEYS)
    return cfg
