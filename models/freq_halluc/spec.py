"""The registered ModelSpec of halluc.freq_attention (a HostProgram: white-box LM + detector).

``run``: sequences of the recall task (context, SEP, then ``Q k v`` turns, the model's answers
or anyone's) are teacher-forced through the trained LM; the Fourier high-frequency features of
the positions emitting each value go through the trained detector: p(hallucinated) per turn.
The LM and detector come from the checkpoint (``neuroedge train halluc.freq_attention``; the
first ``run`` without one trains it, ~30 s, and saves it at the default path).

For another model (a Hugging Face causal LM with eager attention, say), use the pieces
directly: ``functional.attention_features(outputs.attentions, context_length, positions)`` and
``detector.fit_detector`` / ``evaluate`` (README, "Using it").
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.freq_halluc.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

FEATURE = "fourier_hf"
# The registered program is the default recall task (its sizes fix the IO shapes); the bench
# may vary the task sizes, the train hook may not.
TASK_KEYS = ("keys", "values", "pairs", "queries")
TRAIN_KEYS = (
    *(k for k in BENCH_DEFAULTS if k not in ("seeds", "workers", *TASK_KEYS)),
    "checkpoint",
)
LENGTH, QUERIES = 30, 4  # RecallTask().length and .queries (lm.py imports torch)


SMOKE = {"steps": 5, "d_model": 16, "train_sequences": 40, "test_sequences": 40}


def fit(cfg: Mapping[str, Any], own: bool = True) -> dict[str, Any]:
    """Train the LM, then the Fourier-HF detector on its ``own`` answers (else on the sampled
    answers teacher-forced); score it on fresh test answers."""
    from neuroedge.models.freq_halluc import experiment as X
    from neuroedge.models.freq_halluc import lm
    from neuroedge.seeding import one_thread
    from neuroedge.models.freq_halluc.detector import evaluate, fit_detector
    from neuroedge.models.freq_halluc.functional import attention_features
    from tqdm import tqdm

    task, net = X.task_and_net(cfg)
    with one_thread():
        with tqdm(total=net["steps"], desc=f"{SPEC.name} LM", disable=not own) as bar:
            model, losses = lm.train_lm(task, net, cfg["seed"], bar.update)
        sets = [
            X.answered(model, task, cfg, cfg[key], offset + cfg["seed"], own)
            for key, offset in (("train_sequences", 10_000), ("test_sequences", 20_000))
        ]
    pos = task.value_positions() - 1
    x_tr, x_te = (
        attention_features(s["attn"], task.context_length, pos, FEATURE).reshape(
            len(s["labels"]), -1
        )
        for s in sets
    )
    det = fit_detector(x_tr, sets[0]["labels"], cfg["seed"])
    return {
        "model": model,
        "task": task,
        "net": {k: net[k] for k in ("d_model", "heads", "layers")},
        "detector": det,
        "test": evaluate(det, x_te, sets[1]["labels"]),
        "final_loss": float(np.mean(losses[-20:])),
    }


def train(config: Mapping[str, Any] | None = None, out: str | None = None) -> dict[str, Any]:
    """Train the LM and the Fourier-HF detector for ``seed``; save both (weights only)."""
    from neuroedge.checkpoints import resolve_checkpoint, save_checkpoint
    from neuroedge.models.freq_halluc.experiment import check_config

    cfg = check_config({**BENCH_DEFAULTS, **(config or {})})  # before any work
    path = resolve_checkpoint({"checkpoint": out or cfg.get("checkpoint")}, SPEC.name, check=False)
    res = fit(cfg)
    payload = {
        "state_dict": res["model"].state_dict(),
        "task": res["task"].as_dict(),
        "net": res["net"],
        "detector": res["detector"].to_payload(),
        "test": res["test"],
    }
    save_checkpoint(path, payload)
    return {"checkpoint": str(path), "final_loss": res["final_loss"], **res["test"]}


def net_sizes(net: Any) -> dict[str, int]:
    """A checkpoint's LM sizes; ValueError naming a size that is not an integer within the
    bench's bounds (torch refuses a negative one with a bare RuntimeError, deep in a layer)."""
    bounds = {"d_model": 4096, "heads": 64, "layers": 64}  # check_config's
    if not isinstance(net, dict) or set(net) != set(bounds):
        raise ValueError(f"net: expected the sizes {', '.join(bounds)}, got {net!r}")
    for key, most in bounds.items():
        value = net[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise ValueError(f"net {key}={value!r}: expected an integer in [1, {most}]")
    return dict(net)


def load(config: Mapping[str, Any]) -> tuple[Any, Any, Any, str]:
    """The LM, its task and the detector from the checkpoint, trained first if there is none
    at the default path (a checkpoint the config names must exist). ``smoke``: a tiny LM
    trained for a few steps and its detector, in memory (for plumbing tests only)."""
    from neuroedge.checkpoints import load_checkpoint, load_weights, resolve_checkpoint
    from neuroedge.errors import ArtifactError
    from neuroedge.models.freq_halluc.detector import Detector
    from neuroedge.models.freq_halluc.lm import RecallLM, RecallTask

    from neuroedge.config_values import fresh_build

    if fresh_build(config):  # with a checkpoint: refused, it would not be read
        res = fit({**BENCH_DEFAULTS, **SMOKE}, own=False)
        return res["model"], res["task"], res["detector"], "(smoke: not saved)"
    path = resolve_checkpoint(config, SPEC.name)
    if not path.is_file():
        print(f"{SPEC.name}: no checkpoint at {path}; training one (~40 s)", file=sys.stderr)
        train({}, str(path))
    payload = load_checkpoint(path, required=("state_dict", "task", "net", "detector"))
    try:
        task = RecallTask(**payload["task"])
        if task != RecallTask():
            raise ValueError(f"its task {task} is not the registered default {RecallTask()}")
        net = net_sizes(payload["net"])
        model = RecallLM(task.vocab, task.length, **net)
        det = Detector.from_payload(payload["detector"], 2 * net["layers"] * net["heads"])
    except (TypeError, ValueError, KeyError) as err:
        raise ArtifactError(f"{path}: not a {SPEC.name} checkpoint ({err})") from err
    load_weights(model, payload["state_dict"], path)
    return model.eval(), task, det, str(path)


def check_ids(ids: Any, task: Any) -> np.ndarray:
    """``ids`` [batch, task.length] int64 laid out as the task's sequences; ValueError naming
    the sequence, position, token and what belongs there."""
    arr = np.asarray(ids)
    if arr.ndim != 2 or arr.shape[1] != task.length or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"ids: expected integer token ids [batch, {task.length}] (BOS, {task.pairs} key-value "
            f"pairs, SEP, {task.queries} turns Q k v), got {arr.dtype} {list(arr.shape)}"
        )
    keys, values = (0, task.keys), (task.keys, task.keys + task.values)
    want = {
        0: ((task.bos, task.bos + 1), "BOS"),
        task.context_length: ((task.sep, task.sep + 1), "SEP"),
    }
    for i in range(task.pairs):
        want[1 + 2 * i], want[2 + 2 * i] = (keys, "a key"), (values, "a value")
    for p in task.value_positions():
        want[p - 2], want[p - 1], want[p] = (
            ((task.q, task.q + 1), "Q"),
            (keys, "a key"),
            (values, "a value"),
        )
    for p, ((lo, hi), what) in sorted(want.items()):
        bad = np.flatnonzero((arr[:, p] < lo) | (arr[:, p] >= hi))
        if bad.size:
            raise ValueError(
                f"ids sequence {bad[0]}, position {p}: token {arr[bad[0], p]} is not {what} "
                f"(ids {lo}..{hi - 1})"
            )
    return arr.astype(np.int64)


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(ids)`` -> p(hallucinated) and the detector's decision per turn [batch, queries]."""
    from neuroedge.models.freq_halluc.functional import attention_features
    from neuroedge.models.freq_halluc.lm import attention_rows

    model, task, det, path = load(config)

    def detect(ids: np.ndarray) -> dict[str, np.ndarray]:
        arr = check_ids(ids, task)
        x = attention_features(
            attention_rows(model, arr), task.context_length, task.value_positions() - 1, FEATURE
        )
        p = det.proba(x.reshape(-1, x.shape[-1])).reshape(len(arr), task.queries)
        return {"p_hallucinated": p, "hallucinated": (p >= det.threshold).astype(np.int64)}

    return HostProgram(
        detect, meta={"checkpoint": path, "feature": FEATURE, "task": task.as_dict()}
    )


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """Four default-task sequences; about half the turns ask for a key not in the context."""
    from neuroedge.models.freq_halluc.lm import RecallTask, sample_sequences

    ids, _ = sample_sequences(RecallTask(), np.random.default_rng(seed), 4, 0.5)
    return {"ids": ids}


SPEC = ModelSpec(
    name="halluc.freq_attention",
    family="ann",
    summary="hallucination detection from high-frequency attention energy (white-box LM, "
    "token level)",
    inputs=(IOSpec("ids", ("batch", LENGTH), "int64"),),
    outputs=(
        IOSpec("p_hallucinated", ("batch", QUERIES), "float64"),
        IOSpec("hallucinated", ("batch", QUERIES), "int64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "Detecting Contextual Hallucinations in LLMs with Frequency-Aware Attention",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2602.18145",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"default": 1e-9},
    train=train,
    bench="neuroedge.models.freq_halluc.experiment:bench",
    seed_sweep=True,
    config_keys={
        "build": ("checkpoint", "smoke"),
        "train": TRAIN_KEYS,
        "bench": tuple(BENCH_DEFAULTS),
    },
)
