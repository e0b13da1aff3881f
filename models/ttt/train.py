"""Train the reduction ladder on MQAR on the CPU, and run the paper's anomaly probes.

``ladder(config, out)`` trains one small causal LM per variant (baseline, V1..V6) with the
same seed, data stream and budget, then on the trained baseline: (i) more inner TTT steps at
test time (1, 2, 4, 8), (ii) a model trained with gradient *ascent* in the inner loop, and
(iii) a model trained with q replaced by k. It writes ``ladder.json`` (config and results),
``ladder.md`` (the table) and ``ladder.png`` into ``out``.

Each model trains in the fastest form exact for its variant (recurrent for baseline and V1,
chunked otherwise): the forms are equal (tests), so the choice only changes the wall time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.models.ttt.data import IGNORE, MQARTask, mqar_batch
from neuroedge.models.ttt.variants import LADDER, ORDERS, get_variant

# Sized for a shared 2-core CPU: the slowest variant (baseline) takes ~0.8 s per step there.
DEFAULTS: dict[str, Any] = {
    "pairs": 8,
    "keys": 16,
    "values": 16,
    "d_model": 32,
    "layers": 2,
    "heads": 2,
    "head_dim": 16,
    "chunk": 4,
    "order": "apply_then_update",
    "window": 4,
    "steps": 300,
    "batch": 32,
    "lr": 3e-3,
    "seed": 0,
    "eval_batch": 256,
    "inner_steps": [1, 2, 4, 8],
    "threads": 1,
}
EVAL_SEED = 10**9  # evaluation sequences never appear in training (training seeds < 1e9)
# The largest value of each size the ladder reads, and why: far above the CPU-sized defaults,
# so a typo is refused by name before any training (99999999999 was an allocation error of
# terabytes, or a run of years). d_model, heads and head_dim: module.check_sizes.
LIMITS: dict[str, tuple[int, str]] = {
    "pairs": (4096, "a sequence is 3 * pairs tokens, and the recurrent forms loop over them"),
    "keys": (8192, "every sequence draws batch x keys numbers; the vocabulary is keys + values"),
    "values": (8192, "the vocabulary, keys + values, sizes the embedding and the output layer"),
    "layers": (64, "each layer is a TTT block; the default is 2"),
    "window": (3 * 4096, "the sliding window spans at most the longest sequence, 3 * pairs"),
    "steps": (10**6, "optimizer steps per model; the default 300 takes minutes on a CPU"),
    "batch": (8192, "sequences per step; each draws keys numbers"),
    "eval_batch": (8192, "held-out sequences, scored in one forward pass"),
    "threads": (4096, "torch takes any count >= 1; the cap catches typos"),
}


def check_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Every value ``ladder`` reads, before any training: ConfigError naming the key and value
    (``steps=2.5`` ran 2 steps, ``steps=0`` wrote an untrained ladder). ``update_then_apply``
    is refused with ``chunk > 1``: it is causal only token by token."""
    from neuroedge.config_values import choice, int_list, integer, number
    from neuroedge.errors import ConfigError

    from neuroedge.models.ttt.module import check_sizes

    out = dict(cfg)
    for key, (most, why) in LIMITS.items():
        out[key] = integer(cfg, key, 1, most, f" ({why})")
    check_sizes(cfg)
    tokens = 3 * out["pairs"]  # the chunked form pads the sequence to whole chunks
    out["chunk"] = integer(cfg, "chunk", 1, tokens, f" (at most the sequence, 3 * pairs={tokens})")
    out["seed"] = integer(cfg, "seed", 0, EVAL_SEED - 1)
    out["lr"] = number(cfg, "lr", 0, 10, open_low=True)
    out["order"] = choice(cfg, "order", ORDERS)
    if out["order"] == "update_then_apply" and out["chunk"] != 1:
        raise ConfigError(
            f"config order='update_then_apply' with chunk={out['chunk']}: the ladder trains "
            "a causal LM, and updating on a chunk before applying lets each token read fast "
            "weights written by the later tokens of its chunk (it sees the future); use "
            "order='apply_then_update' (the causal order for any chunk) or chunk=1"
        )
    out["inner_steps"] = int_list(cfg, "inner_steps", 1, 1000)
    return out


def task_of(cfg: Mapping[str, Any]) -> MQARTask:
    return MQARTask(int(cfg["pairs"]), int(cfg["keys"]), int(cfg["values"]))


def make_model(cfg: Mapping[str, Any], variant: Any, q_as_k: bool = False) -> Any:
    from neuroedge.models.ttt.module import TTTLanguageModel

    return TTTLanguageModel(
        task_of(cfg).vocab,
        int(cfg["d_model"]),
        int(cfg["layers"]),
        int(cfg["heads"]),
        int(cfg["head_dim"]),
        variant,
        int(cfg["chunk"]),
        str(cfg["order"]),
        int(cfg["window"]),
        q_as_k=q_as_k,
    )


def evaluate(
    model: Any, cfg: Mapping[str, Any], inner_steps: int = 1, form: str | None = None
) -> dict[str, float]:
    """Cross-entropy and accuracy at the query positions of held-out sequences."""
    import torch

    tokens, targets = mqar_batch(task_of(cfg), int(cfg["eval_batch"]), EVAL_SEED + int(cfg["seed"]))
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens), form, inner_steps)
    tgt = torch.from_numpy(targets)
    loss = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), tgt.flatten(), ignore_index=IGNORE
    )
    scored = tgt != IGNORE
    acc = (logits.argmax(-1)[scored] == tgt[scored]).float().mean()
    return {"loss": float(loss), "accuracy": float(acc)}


def train_one(
    cfg: Mapping[str, Any],
    variant: Any,
    q_as_k: bool = False,
    progress: bool = True,
    label: str | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Train one LM; returns the model and ``{variant, loss, accuracy, seconds, ...}``.
    TrainingDiverged naming lr when the loss read every 20 steps (and at the last step) is NaN
    or infinite, before a NaN model's loss and accuracy are tabled."""
    import torch
    from neuroedge.divergence import check_loss
    from neuroedge.seeding import seeded, torch_threads
    from tqdm import tqdm

    variant = get_variant(variant)
    # one thread (cfg threads): fastest per core on a shared box; the caller's count and
    # random state come back after the training
    with torch_threads(int(cfg["threads"])), seeded(int(cfg["seed"])):
        model = make_model(cfg, variant, q_as_k)
        opt = torch.optim.AdamW(model.parameters(), lr=float(cfg["lr"]), weight_decay=0.01)
        steps = int(cfg["steps"])
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, float(cfg["lr"]), total_steps=steps, pct_start=0.1
        )
        task, start = task_of(cfg), time.perf_counter()
        bar = tqdm(range(steps), desc=f"train {label or variant.name}", disable=not progress)
        for step in bar:
            model.train()
            tokens, targets = mqar_batch(task, int(cfg["batch"]), int(cfg["seed"]) * 10**6 + step)
            logits = model(torch.from_numpy(tokens))
            loss = torch.nn.functional.cross_entropy(
                logits.flatten(0, 1), torch.from_numpy(targets).flatten(), ignore_index=IGNORE
            )
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            if step % 20 == 0 or step == steps - 1:  # read every 20 steps, and the last
                where = f"ttt.linear_attention training ({label or variant.name}) step {step + 1}"
                bar.set_postfix(loss=f"{check_loss(loss, where, ('lr',)):.3f}")
        seconds = time.perf_counter() - start
        result = {
            "variant": label or variant.name,
            "form": model.blocks[0].ttt.default_form(),
            "seconds": seconds,
            **evaluate(model, cfg),
        }
    return model, result


def ladder(
    config: Mapping[str, Any] | None = None, out: str | Path | None = None, progress: bool = True
) -> dict[str, Any]:
    """Train every ladder variant and the probes; write the tables into ``out``."""
    from neuroedge.seeding import torch_threads

    cfg = check_config({**DEFAULTS, **(config or {})})
    # the probes evaluate on the training's thread count too; the caller's comes back after
    with torch_threads(int(cfg["threads"])):
        rows, probes = [], {}
        baseline = None
        for name in LADDER:
            model, row = train_one(cfg, name, progress=progress)
            rows.append(row)
            if name == "baseline":
                baseline = model
        probes["inner_steps"] = [
            {"inner_steps": n, **evaluate(baseline, cfg, inner_steps=n, form="recurrent")}
            for n in cfg["inner_steps"]
        ]
        ascent = replace(LADDER["baseline"], name="baseline_ascent", ascent=True)
        probes["gradient_ascent"] = train_one(cfg, ascent, progress=progress)[1]
        probes["q_as_k"] = train_one(
            cfg, "baseline", q_as_k=True, progress=progress, label="baseline_q_as_k"
        )[1]
    result = {
        "config": cfg,
        "chance_accuracy": 1.0 / int(cfg["values"]),
        "ladder": rows,
        "probes": probes,
    }
    if out is not None:
        write_ladder(result, Path(out))
    return result


def ladder_markdown(result: Mapping[str, Any]) -> str:
    lines = ["| variant | trained form | eval loss | accuracy | train s |", "|---|---|---|---|---|"]
    for r in result["ladder"]:
        lines.append(
            f"| {r['variant']} | {r['form']} | {r['loss']:.3f} | {r['accuracy']:.3f} "
            f"| {r['seconds']:.0f} |"
        )
    lines += [
        "",
        f"Chance accuracy: {result['chance_accuracy']:.3f}.",
        "",
        "Anomaly probes (on the trained baseline):",
        "",
        "| probe | eval loss | accuracy |",
        "|---|---|---|",
    ]
    for p in result["probes"]["inner_steps"]:
        lines.append(
            f"| inner steps = {p['inner_steps']} at test time | {p['loss']:.3f} "
            f"| {p['accuracy']:.3f} |"
        )
    for key in ("gradient_ascent", "q_as_k"):
        p = result["probes"][key]
        lines.append(f"| {p['variant']} (trained so) | {p['loss']:.3f} | {p['accuracy']:.3f} |")
    return "\n".join(lines)


def write_ladder(result: Mapping[str, Any], out: Path) -> None:
    from neuroedge.bench.report import pyplot

    plt = pyplot()
    from neuroedge.atomic import write_text
    from neuroedge.bench.report import save_figure

    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "ladder.json", json.dumps(result, indent=2) + "\n")
    write_text(
        out / "ladder.md", "# TTT reduction ladder on MQAR\n\n" + ladder_markdown(result) + "\n"
    )
    names = [r["variant"] for r in result["ladder"]]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.5))
    a1.bar(names, [r["accuracy"] for r in result["ladder"]])
    a1.axhline(result["chance_accuracy"], color="k", ls="--", label="chance")
    a1.set_ylabel("MQAR query accuracy")
    a1.legend()
    steps = [p["inner_steps"] for p in result["probes"]["inner_steps"]]
    a2.plot(steps, [p["accuracy"] for p in result["probes"]["inner_steps"]], "o-")
    a2.set_xscale("log", base=2)
    a2.set_xlabel("inner TTT steps at test time (trained with 1)")
    a2.set_ylabel("baseline accuracy")
    save_figure(fig, out / "ladder.png")
    plt.close(fig)


def summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers the CLI prints: accuracy per variant and per probe."""
    acc = {r["variant"]: round(r["accuracy"], 4) for r in result["ladder"]}
    acc.update(
        {
            f"inner_steps={p['inner_steps']}": round(p["accuracy"], 4)
            for p in result["probes"]["inner_steps"]
        }
    )
    for key in ("gradient_ascent", "q_as_k"):
        acc[result["probes"][key]["variant"]] = round(result["probes"][key]["accuracy"], 4)
    return {
        "accuracy": acc,
        "chance": result["chance_accuracy"],
        "mean_train_seconds": float(np.mean([r["seconds"] for r in result["ladder"]])),
    }
