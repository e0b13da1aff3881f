"""The registered ModelSpec of safety.hair_trigger (a HostProgram: a post-update audit).

``run``: the class probabilities of ``probes`` before and after one SGD step (lr ``eta``) of the
model on the update batch (``update_x``, ``update_y``), the check a black-box evaluation leaves
out. The model is the hair-trigger one (``variant=hair_trigger``, the default) or the control,
trained at build (about 4 s; ``smoke``: 20 steps unless ``steps`` is given; ``lam`` is the
trigger model's only: refused with ``variant=control``). For your own classifier use
``functional.updated(model, params, x_u, y_u, eta)`` and probe both parameter sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.hair_trigger.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

VOCAB, CLASSES = 64, 10  # functional.VOCAB / CLASSES (functional.py imports torch)
VARIANTS = ("hair_trigger", "control")
SMOKE = {"steps": 20}  # a smoke build's values where the config does not give the key


def check_audit_inputs(probes: Any, update_x: Any, update_y: Any) -> tuple[Any, Any, Any]:
    """Tensors of the three inputs; ValueError naming the input, row and value."""
    import torch
    from neuroedge.shapes import check_finite

    named = {}
    for name, arr in (("probes", probes), ("update_x", update_x)):
        if isinstance(arr, torch.Tensor):
            arr = arr.detach().cpu().numpy()
        try:
            a = np.asarray(arr, np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name}: not an array of numbers ({err})") from None
        if a.ndim != 2 or a.shape[1] != VOCAB or len(a) == 0:
            raise ValueError(
                f"{name}: expected [rows >= 1, {VOCAB}] bag-of-words, got {list(a.shape)}"
            )
        named[name] = torch.as_tensor(check_finite(a, f"{name}:"), dtype=torch.float32)
    y = (
        update_y.detach().cpu().numpy()
        if isinstance(update_y, torch.Tensor)
        else np.asarray(update_y)
    )
    if y.shape != (len(named["update_x"]),) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(
            f"update_y: expected {len(named['update_x'])} integer labels (one per update_x row), "
            f"got {y.dtype} {list(y.shape)}"
        )
    bad = np.flatnonzero((y < 0) | (y >= CLASSES))
    if bad.size:
        raise ValueError(
            f"update_y row {bad[0]}: label {y[bad[0]]} is not a class 0..{CLASSES - 1}"
        )
    return named["probes"], named["update_x"], torch.as_tensor(y, dtype=torch.int64)


def build_config(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The variant and the checked config of a build (``config_values.layered``: the bench's
    defaults, ``smoke``'s values under the keys not given, the keys given). ConfigError names a
    bad value, and ``lam`` given with ``variant=control`` (which trains with lam 0), before any
    training."""
    from neuroedge.config_values import layered
    from neuroedge.models.hair_trigger.experiment import check_config

    unread = {"control": (("lam",), "the control trains with lam 0")}
    variant, _, cfg = layered(config, BENCH_DEFAULTS, SMOKE, VARIANTS, unread=unread)
    return str(variant), check_config(cfg)


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(probes, update_x, update_y)`` -> ``before`` and ``after`` class probabilities."""
    import torch
    from neuroedge.models.hair_trigger import functional as F
    from neuroedge.seeding import one_thread

    variant, cfg = build_config(config)
    with one_thread():
        model = F.meta_train(
            F.as_config(cfg, lam=cfg["lam"] if variant == "hair_trigger" else 0.0), cfg["seed"]
        )

    def audit(probes: Any, update_x: Any, update_y: Any) -> dict[str, np.ndarray]:
        x, x_u, y_u = check_audit_inputs(probes, update_x, update_y)
        params = {k: v.detach() for k, v in model.named_parameters()}
        after = F.updated(model, params, x_u, y_u, cfg["eta"])
        with torch.no_grad():
            return {
                "before": torch.func.functional_call(model, params, (x,))
                .softmax(-1)
                .double()
                .numpy(),
                "after": torch.func.functional_call(model, after, (x,))
                .softmax(-1)
                .double()
                .numpy(),
            }

    meta = {"variant": variant, "params": F.param_count(model), "eta": cfg["eta"]}
    return HostProgram(audit, meta=meta)


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """Two harmful and two benign probes, and a benign update batch of 32."""
    from neuroedge.models.hair_trigger.functional import queries

    rng = np.random.default_rng(seed)
    harmful, _ = queries(rng, 2, harmful=True)
    benign, _ = queries(rng, 2, harmful=False)
    x_u, y_u = queries(rng, 32, harmful=False)
    probes = np.concatenate([harmful.numpy(), benign.numpy()])
    return {"probes": probes, "update_x": x_u.numpy(), "update_y": y_u.numpy()}


SPEC = ModelSpec(
    name="safety.hair_trigger",
    family="ann",
    summary="hair-trigger alignment: probes pass before one benign SGD step, flip after (audit)",
    inputs=(
        IOSpec("probes", ("batch", VOCAB), "float32"),
        IOSpec("update_x", ("n", VOCAB), "float32"),
        IOSpec("update_y", ("n",), "int64"),
    ),
    outputs=(
        IOSpec("before", ("batch", CLASSES), "float64"),
        IOSpec("after", ("batch", CLASSES), "float64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "Hair-Trigger Alignment: Black-Box Evaluation Cannot Guarantee Post-Update Alignment",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2601.22313",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"default": 1e-6},
    bench="neuroedge.models.hair_trigger.experiment:bench",
    seed_sweep=True,
    config_keys={
        "build": ("variant", "seed", "width", "steps", "lr", "lam", "eta", "smoke"),
        "bench": tuple(BENCH_DEFAULTS),
    },
)
