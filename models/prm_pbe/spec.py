"""The registered ModelSpec of pbe.prm_rl (a HostProgram: a program synthesiser trained at build).

``run``: for each task (4 input strings and their 4 wanted outputs, as ASCII codes padded with
0 to ``MAX_LEN``: ``codes(strings)``), the greedy program of the policy, as op ids ending in
END (``dsl.OP_NAMES`` names them), and whether it reproduces all 4 examples. The policy is the
SFT warm start after ``updates`` PPO updates of ``variant`` (``prm_curriculum`` by default;
``outcome``, ``prm``, ``outcome_curriculum``, or ``sft`` for the warm start alone), trained at
build (about 2 min; ``smoke``: seconds, untrained in effect, its sizes under the keys not
given). A key the variant never reads is refused: ``updates``, ``kl`` and ``beta`` with ``sft``
(no PPO), ``beta`` (the PRM's weight) with ``outcome`` and ``outcome_curriculum``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from neuroedge.models.prm_pbe.dsl import CHARS, EXAMPLES, MAX_LEN, MAX_OPS
from neuroedge.models.prm_pbe.experiment import ARMS
from neuroedge.models.prm_pbe.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

VARIANTS = (*ARMS, "sft")
BUILD_KEYS = ("variant", "seed", "train_tasks", "sft_epochs", "updates", "beta", "kl", "smoke")
# a smoke build's values where the config does not give the key (tree_tasks: 5 under smoke)
SMOKE = {
    "train_tasks": 20,
    "test_tasks": 2,
    "sft_epochs": 1,
    "prm_steps": 2,
    "updates": 3,
    "tasks_per_update": 4,
}
# the build keys a variant never reads, refused when given
NO_PRM = "no PRM, whose step scores beta weighs"
UNREAD = {
    "sft": (("updates", "kl", "beta"), "the SFT warm start alone: no PPO, " + NO_PRM),
    "outcome": (("beta",), NO_PRM),
    "outcome_curriculum": (("beta",), NO_PRM),
}


def _is_list(value: Any) -> bool:
    """A list, tuple or numpy array (of at least one dimension), not a string."""
    if isinstance(value, np.ndarray):
        return value.ndim >= 1
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def codes(strings: Sequence[Sequence[str]]) -> np.ndarray:
    """uint8 ASCII codes [tasks, EXAMPLES, MAX_LEN], 0-padded, of ``strings[task][example]``;
    ValueError naming the task (and example) of a task that is not a list of exactly EXAMPLES
    strings, an item that is not a string or not ASCII, or a string longer than MAX_LEN (never
    cut)."""
    if not _is_list(strings):
        raise ValueError(
            f"expected a list of tasks, each a list of {EXAMPLES} strings, got the "
            f"{type(strings).__name__} {strings!r}"
        )
    out = np.zeros((len(strings), EXAMPLES, MAX_LEN), np.uint8)
    for i, task in enumerate(strings):
        if not _is_list(task):
            raise ValueError(
                f"task {i}: expected a list of {EXAMPLES} strings, got the "
                f"{type(task).__name__} {task!r}"
            )
        if len(task) != EXAMPLES:
            raise ValueError(
                f"task {i}: {len(task)} examples, a task has exactly {EXAMPLES} (strings)"
            )
        for j, s in enumerate(task):
            if not isinstance(s, str):
                raise ValueError(
                    f"task {i}, example {j}: expected a string, got the {type(s).__name__} {s!r}"
                )
            if not s.isascii():
                k = next(k for k, c in enumerate(s) if not c.isascii())
                raise ValueError(
                    f"task {i}, example {j}, position {k}: {s[k]!r} is not an ASCII character"
                )
            raw = s.encode("ascii")
            if len(raw) > MAX_LEN:
                raise ValueError(
                    f"task {i}, example {j}: {len(raw)} characters, the DSL's strings hold at "
                    f"most {MAX_LEN}"
                )
            out[i, j, : len(raw)] = np.frombuffer(raw, np.uint8)
    return out


def strings_of(name: str, a: Any) -> list[list[str]]:
    """``a`` [tasks, EXAMPLES, MAX_LEN] codes back to strings; ValueError naming the task,
    example and character that is not in the DSL's alphabet."""
    import torch

    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.ndim != 3 or a.shape[1:] != (EXAMPLES, MAX_LEN) or len(a) == 0:
        raise ValueError(
            f"{name}: expected [tasks >= 1, {EXAMPLES}, {MAX_LEN}] character codes, "
            f"got {list(a.shape)}"
        )
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name}: expected integer character codes, got dtype {a.dtype}")
    allowed = {0, *(ord(c) for c in CHARS)}
    out = []
    for i, task in enumerate(a):
        row = []
        for j, s in enumerate(task):
            bad = [k for k, c in enumerate(s) if int(c) not in allowed]
            if bad:
                raise ValueError(
                    f"{name} task {i}, example {j}, position {bad[0]}: code {int(s[bad[0]])} "
                    f"is not a character of the DSL ({CHARS!r}) or 0 padding"
                )
            text = bytes(int(c) for c in s).split(b"\0", 1)[0].decode("ascii")
            if any(int(c) for c in s[len(text) :]):
                raise ValueError(f"{name} task {i}, example {j}: characters after the 0 padding")
            row.append(text)
        out.append(row)
    return out


def build_config(config: Mapping[str, Any]) -> tuple[str, bool, dict[str, Any]]:
    """The variant, ``smoke`` and the checked config of a build (``config_values.layered``:
    the bench's defaults, ``smoke``'s values under the keys not given, the keys given).
    ConfigError names a bad value, and a key given that the variant never reads (``UNREAD``),
    before any training."""
    from neuroedge.config_values import layered
    from neuroedge.models.prm_pbe import experiment as X

    variant, smoke, cfg = layered(
        config, BENCH_DEFAULTS, SMOKE, VARIANTS, default="prm_curriculum", unread=UNREAD
    )
    # tree_tasks is a bench key, not a build key: it follows train_tasks here, so a build with
    # fewer training tasks than the default tree tasks is not refused over a key it cannot set
    cfg = X.check_config({**cfg, "tree_tasks": X.TREE_TASKS_LEAST})
    cfg["tree_tasks"] = 5 if smoke else min(BENCH_DEFAULTS["tree_tasks"], cfg["train_tasks"])
    return str(variant), smoke, cfg


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(inputs, outputs)`` -> ``program`` [tasks, MAX_OPS + 1] and ``solved`` [tasks]."""
    from neuroedge.models.prm_pbe import dsl
    from neuroedge.models.prm_pbe import experiment as X
    from neuroedge.models.prm_pbe.policy import Nodes, Policy, root_nodes, rollout, sft
    from neuroedge.seeding import one_thread, seeded

    variant, smoke, cfg = build_config(config)
    train, _ = X.tasks_of(cfg)
    with one_thread(), seeded(cfg["seed"]):
        policy = Policy(cfg["hidden"])
        sft(policy, train[1], cfg, cfg["seed"])
        prm, prm_note = None, "none (the variant uses no PRM)"
        if variant.startswith("prm"):
            prm, prm_note = X.build_prm(policy, train, cfg, smoke)
        if variant != "sft":
            policy = X.run_arm(variant, policy, prm, train, cfg, None)

    def synthesise(inputs: Any, outputs: Any) -> dict[str, np.ndarray]:
        xs, ys = strings_of("inputs", inputs), strings_of("outputs", outputs)
        if len(xs) != len(ys):
            raise ValueError(f"inputs has {len(xs)} tasks but outputs has {len(ys)}")
        tasks = [dsl.Task((), tuple(x), tuple(y)) for x, y in zip(xs, ys, strict=True)]
        nodes: Nodes = root_nodes(tasks)
        traj = rollout(policy, nodes, greedy=True)
        program = np.full((len(tasks), MAX_OPS + 1), dsl.END, np.int64)
        for step, (rows, act) in enumerate(zip(traj.rows, traj.actions, strict=True)):
            program[rows, step] = act.numpy()
        return {"program": program, "solved": traj.success.astype(np.float64)}

    meta = {
        "variant": variant,
        "params": sum(p.numel() for p in policy.parameters()),
        "prm": prm_note,
    }
    return HostProgram(synthesise, meta=meta)


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """Four fresh tasks, one of each program length."""
    from neuroedge.models.prm_pbe import dsl

    rng = np.random.default_rng([seed, 9])
    tasks = [dsl.random_task(rng, n) for n in (1, 2, 3, 4)]
    return {
        "inputs": codes([t.inputs for t in tasks]),
        "outputs": codes([t.outputs for t in tasks]),
    }


SPEC = ModelSpec(
    name="pbe.prm_rl",
    family="ann",
    summary="PRM-PBE: PPO with a preference-trained process reward model, programming by example",
    inputs=(
        IOSpec("inputs", ("tasks", EXAMPLES, MAX_LEN), "uint8"),
        IOSpec("outputs", ("tasks", EXAMPLES, MAX_LEN), "uint8"),
    ),
    outputs=(
        IOSpec("program", ("tasks", MAX_OPS + 1), "int64"),
        IOSpec("solved", ("tasks",), "float64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "Process Reward Model for Reinforcement Learning in Programming-by-Example (PRM-PBE)",
        "ICML 2026",
        2026,
        "https://icml.cc/virtual/2026/poster/64522",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"default": 0.0},
    bench="neuroedge.models.prm_pbe.experiment:bench",
    seed_sweep=True,
    config_keys={"build": BUILD_KEYS, "bench": tuple(BENCH_DEFAULTS)},
)
