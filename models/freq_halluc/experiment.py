"""The halluc.freq_attention benchmark: token-level hallucination detection from attention.

Per seed: train the recall LM (lm.py) until it has learnt recall (the mean loss of 50 steps
below ``stop_loss``; at most ``steps``), let it answer ``train_sequences`` and ``test_sequences``
fresh contexts (half the queried keys absent), label each generated value (hallucinated iff its
pair is not in the context), take each feature set of functional.py from one teacher-forced
forward, fit the detector (detector.py) on the training tokens and score the test tokens.

Rows per seed: one per feature set (AUROC, macro-F1, accuracy, extraction time per token and
its ratio to the LM's own forward on the same sequences, timed side by side), ``lm`` (the
hallucination rate, the accuracy on present keys, the final loss, the steps and time of
training) and ``energy`` (mean context high-frequency energy of hallucinated and grounded
tokens: the paper's finding is that hallucinated tokens carry more; the sign is measured, not
assumed).

The claim, read over seeds (the notes' small-scale assertions, research/host_llm_papers.md
section 2.4), every part in every seed: Fourier high-frequency AUROC >= 0.80, above the
Lookback-Lens ratio's, with a hallucination rate in [0.3, 0.7].
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.seeds import row_value
from neuroedge.types import Measurement, Report

NAME = "halluc.freq_attention"
DEFAULTS: dict[str, Any] = {
    "seeds": [0, 1, 2],
    "seed": 0,
    "workers": 2,
    "keys": 32,
    "values": 32,
    "pairs": 8,
    "queries": 4,
    "d_model": 64,
    "heads": 4,
    "layers": 2,
    "steps": 3000,
    "stop_loss": 0.005,
    "batch": 64,
    "lr": 2e-3,
    "train_sequences": 600,
    "test_sequences": 600,
    "absent_fraction": 0.5,
    "temperature": 1.0,
}
AUROC_BOUND, RATE_RANGE = 0.80, (0.3, 0.7)


def check_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Every value the bench and the training read, checked before any work (ConfigError)."""
    from neuroedge.config_values import integer, number

    out = dict(cfg)
    for key, least, most in (
        ("keys", 2, 10_000),
        ("values", 2, 10_000),
        ("pairs", 1, 1_000),
        ("queries", 1, 1_000),
        ("d_model", 1, 4096),
        ("heads", 1, 64),
        ("layers", 1, 64),
        ("steps", 1, 10**7),
        ("batch", 1, 10**5),
        ("train_sequences", 10, 10**6),
        ("test_sequences", 10, 10**6),
        ("seed", 0, 2**31 - 1),
    ):
        out[key] = integer(cfg, key, least, most)
    out["lr"] = number(cfg, "lr", 0, 1, open_low=True)
    out["stop_loss"] = number(cfg, "stop_loss", 0)
    out["absent_fraction"] = number(cfg, "absent_fraction", 0, 1, open_low=True)
    if out["absent_fraction"] >= 1:
        from neuroedge.errors import ConfigError

        raise ConfigError(
            f"absent_fraction={cfg['absent_fraction']!r}: expected a fraction in (0, 1) (the "
            "detector needs grounded and hallucinated answers)"
        )
    out["temperature"] = number(cfg, "temperature", 0, 100)
    from neuroedge.models.freq_halluc.detector import MIN_ROWS

    if out["train_sequences"] * out["queries"] < MIN_ROWS:
        from neuroedge.errors import ConfigError

        raise ConfigError(
            f"train_sequences={out['train_sequences']} x queries={out['queries']} = "
            f"{out['train_sequences'] * out['queries']} training tokens; the detector fit needs "
            f"at least {MIN_ROWS}"
        )
    task_and_net(out)  # pairs < keys, d_model a multiple of heads
    return out


def task_and_net(cfg: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    from neuroedge.errors import ConfigError
    from neuroedge.models.freq_halluc.lm import RecallTask

    try:
        task = RecallTask(cfg["keys"], cfg["values"], cfg["pairs"], cfg["queries"])
    except ValueError as err:
        raise ConfigError(str(err)) from err
    if cfg["d_model"] % cfg["heads"]:
        raise ConfigError(f"d_model={cfg['d_model']} is not a multiple of heads={cfg['heads']}")
    keys = ("d_model", "heads", "layers", "steps", "batch", "lr", "stop_loss")
    return task, {k: cfg[k] for k in keys}


def answered(
    model: Any, task: Any, cfg: Mapping[str, Any], n: int, seed: int, own: bool = True
) -> dict[str, Any]:
    """``n`` fresh contexts answered by ``model`` (``own``; else the sampled answers are
    teacher-forced as they are, as a dataset's responses are): ids, labels, presence,
    attention rows."""
    from neuroedge.models.freq_halluc import lm

    rng = np.random.default_rng(seed)
    ids, present = lm.sample_sequences(task, rng, n, cfg["absent_fraction"])
    if own:
        ids = lm.generate(model, task, ids, cfg["temperature"], seed)
    return {
        "ids": ids,
        "labels": lm.unsupported(task, ids).reshape(-1),
        "present": present.reshape(-1),
        "attn": lm.attention_rows(model, ids),
    }


def timed(fn: Any, repeats: int = 3) -> tuple[Any, float]:
    """``fn()`` and its fastest wall time over ``repeats`` calls (seconds)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def feature_rows(model: Any, task: Any, train: dict, test: dict, seed: int) -> tuple[list, dict]:
    """One row per feature set; the ROC curves of the test tokens for the plot."""
    from neuroedge.models.freq_halluc import lm
    from neuroedge.models.freq_halluc.detector import evaluate, fit_detector
    from neuroedge.models.freq_halluc.functional import FEATURES, attention_features
    from sklearn.metrics import roc_curve

    pos = task.value_positions() - 1
    _, forward_s = timed(lambda: lm.attention_rows(model, test["ids"]))
    tokens = test["labels"].size
    rows, roc = [], {}
    for feature in FEATURES:
        x_tr = attention_features(train["attn"], task.context_length, pos, feature)
        x_te, extract_s = timed(
            lambda f=feature: attention_features(test["attn"], task.context_length, pos, f)
        )
        x_tr, x_te = x_tr.reshape(-1, x_tr.shape[-1]), x_te.reshape(-1, x_te.shape[-1])
        det = fit_detector(x_tr, train["labels"], seed)
        scores = evaluate(det, x_te, test["labels"])
        fpr, tpr, _ = roc_curve(test["labels"], det.proba(x_te))
        roc[feature] = {"fpr": fpr.tolist(), "tpr": tpr.tolist()}
        metrics = {k: Measurement(v, "fraction") for k, v in scores.items()}
        metrics["extract_us_per_token"] = Measurement(1e6 * extract_s / tokens, "us")
        metrics["extract_vs_forward"] = Measurement(extract_s / forward_s, "ratio")
        rows.append(Report(NAME, "host", feature, metrics=metrics))
    return rows, roc


def energy_row(task: Any, test: dict) -> tuple[Report, dict]:
    """Mean context high-frequency energy of hallucinated vs grounded test tokens."""
    from neuroedge.models.freq_halluc.functional import attention_features

    x = attention_features(test["attn"], task.context_length, task.value_positions() - 1)
    ctx = x.reshape(-1, x.shape[-1])[:, : x.shape[-1] // 2]
    bad, good = ctx[test["labels"]], ctx[~test["labels"]]
    per_head = {"hallucinated": bad.mean(0).tolist(), "grounded": good.mean(0).tolist()}
    row = Report(
        NAME,
        "host",
        "energy",
        metrics={
            "ctx_hf_hallucinated": Measurement(float(bad.mean()), "L2 energy"),
            "ctx_hf_grounded": Measurement(float(good.mean()), "L2 energy"),
        },
    )
    return row, per_head


def run_seed(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Train, answer, label and detect for ``cfg["seed"]`` (module level: a worker's job)."""
    from neuroedge.models.freq_halluc import lm
    from neuroedge.seeding import one_thread
    from tqdm import tqdm

    task, net = task_and_net(cfg)
    seed = cfg["seed"]
    bar = tqdm(total=net["steps"], desc=f"{NAME} LM seed {seed}", disable=not cfg["progress"])
    with bar, one_thread():  # the bar closed however it ends (else redrawn after a stop line)
        t0 = time.perf_counter()
        model, losses = lm.train_lm(task, net, seed, bar.update)
        train_s = time.perf_counter() - t0
        bar.close()
        train = answered(model, task, cfg, cfg["train_sequences"], 10_000 + seed)
        test = answered(model, task, cfg, cfg["test_sequences"], 20_000 + seed)
        rows, roc = feature_rows(model, task, train, test, seed)
    energy, per_head = energy_row(task, test)
    grounded = test["present"] & ~test["labels"]
    lm_row = Report(
        NAME,
        "host",
        "lm",
        metrics={
            "hallucination_rate": Measurement(float(test["labels"].mean()), "fraction"),
            "present_key_accuracy": Measurement(
                float(grounded.sum() / max(test["present"].sum(), 1)), "fraction"
            ),
            "final_loss": Measurement(float(np.mean(losses[-20:])), "nats"),
            "train_steps": Measurement(len(losses), "steps", "counted"),
            "train_s": Measurement(train_s, "s"),
        },
    )
    return {"rows": [*rows, lm_row, energy], "roc": roc, "energy_per_head": per_head}


def claim_over_seeds(per_seed: Mapping[int, dict[str, Any]]) -> dict[str, Any]:
    """The claim read over seeds (see the module docstring), with every seed's figures."""
    from neuroedge.bench.seeds import paired_difference

    rows = {s: r["rows"] for s, r in per_seed.items()}
    hf = [row_value(r, "fourier_hf", "auroc") for r in rows.values()]
    lookback = [row_value(r, "lookback", "auroc") for r in rows.values()]
    rate = [row_value(r, "lm", "hallucination_rate") for r in rows.values()]
    diff, se = paired_difference(hf, lookback)
    sign = [
        row_value(r, "energy", "ctx_hf_hallucinated") - row_value(r, "energy", "ctx_hf_grounded")
        for r in rows.values()
    ]
    parts = {
        "auroc_hf_ge_bound_every_seed": bool(all(a >= AUROC_BOUND for a in hf)),
        "hf_above_lookback_every_seed": bool(all(a > b for a, b in zip(hf, lookback))),
        "rate_in_range_every_seed": bool(all(RATE_RANGE[0] <= x <= RATE_RANGE[1] for x in rate)),
    }
    return {
        "seeds": list(rows),
        "auroc_hf": hf,
        "auroc_lookback": lookback,
        "auroc_hf_minus_lookback": diff,
        "auroc_hf_minus_lookback_se": se,
        "hallucination_rate": rate,
        "ctx_hf_energy_hallucinated_minus_grounded": sign,
        "parts": parts,
        "holds": all(parts.values()),
    }


def claim_section(claim: Mapping[str, Any]) -> list[str]:
    """report.md lines: the claim's parts and every seed's figures."""
    verdict = "holds" if claim["holds"] else "not met"
    lines = [
        f"## Claim over seeds {claim['seeds']}: {verdict}",
        "",
        f"- Fourier high-frequency AUROC >= {AUROC_BOUND} in every seed (lowest "
        f"{min(claim['auroc_hf']):.3f}, mean {np.mean(claim['auroc_hf']):.3f}): "
        f"{claim['parts']['auroc_hf_ge_bound_every_seed']}",
        f"- above the Lookback-Lens ratio in every seed: "
        f"{claim['parts']['hf_above_lookback_every_seed']} (mean difference "
        f"{claim['auroc_hf_minus_lookback']:+.3f} +- {claim['auroc_hf_minus_lookback_se']:.3f})",
        f"- hallucination rate in {list(RATE_RANGE)} in every seed: "
        f"{claim['parts']['rate_in_range_every_seed']}",
        "",
        "| seed | AUROC fourier_hf | AUROC lookback | hallucination rate | "
        "ctx HF energy, hallucinated - grounded |",
        "|---|---|---|---|---|",
    ]
    for i, seed in enumerate(claim["seeds"]):
        lines.append(
            f"| {seed} | {claim['auroc_hf'][i]:.3f} | {claim['auroc_lookback'][i]:.3f} | "
            f"{claim['hallucination_rate'][i]:.3f} | "
            f"{claim['ctx_hf_energy_hallucinated_minus_grounded'][i]:+.4f} |"
        )
    lines += [
        "",
        "The paper finds more high-frequency energy on hallucinated tokens; the last column "
        "gives the sign measured here (reported, not part of the claim).",
    ]
    return lines


def detection_plot(doc: dict[str, Any], path: Path) -> Path:
    """ROC curves of every feature set (first seed) and per-head context HF energy."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()
    first = doc["results"][str(doc["claim"]["seeds"][0])]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    for feature, curve in first["roc"].items():
        auroc = metric_of(doc, feature)
        ax.plot(curve["fpr"], curve["tpr"], label=f"{feature} (AUROC {auroc:.3f})")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate (hallucinated)")
    ax.legend(fontsize=8)
    ax.set_title(f"test tokens, seed {doc['claim']['seeds'][0]}")
    heads = np.arange(len(first["energy_per_head"]["grounded"]))
    for shift, label in ((-0.2, "hallucinated"), (0.2, "grounded")):
        bx.bar(heads + shift, first["energy_per_head"][label], width=0.4, label=label)
    heads_per_layer = doc["config"]["heads"]
    bx.set_xticks(heads, [f"L{i // heads_per_layer}H{i % heads_per_layer}" for i in heads])
    bx.set_xlabel("layer, head")
    bx.set_ylabel("context high-frequency energy")
    bx.legend(fontsize=8)
    fig.suptitle(f"{NAME}: frequency-aware attention features")
    return finish_figure(fig, path)


def metric_of(doc: Mapping[str, Any], variant: str) -> float:
    """The AUROC of ``variant`` in the document's first seed."""
    seed = doc["claim"]["seeds"][0]
    rows = doc["results"][str(seed)]["rows"]
    return next(r["metrics"]["auroc"]["value"] for r in rows if r["variant"] == variant)


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
) -> dict[str, Any]:
    """Every seed (``workers`` processes at a time); report.json/report.md/detection.png."""
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.bench.seeds import run_over_seeds, seed_rows

    cfg, seeds, per_seed = run_over_seeds(NAME, config or {}, DEFAULTS, check_config, run_seed)
    rows = (
        per_seed[seeds[0]]["rows"]
        if len(seeds) == 1
        else seed_rows({s: r["rows"] for s, r in per_seed.items()}, ("auroc",))
    )
    claim = claim_over_seeds(per_seed)
    results = {
        str(s): {**r, "rows": [row.to_json() for row in r["rows"]]} for s, r in per_seed.items()
    }
    columns = [
        "auroc",
        "auroc_sd",
        "macro_f1",
        "accuracy",
        "extract_us_per_token",
        "extract_vs_forward",
        "hallucination_rate",
        "present_key_accuracy",
        "final_loss",
        "train_steps",
        "ctx_hf_hallucinated",
        "ctx_hf_grounded",
    ]
    doc = build_document(NAME, rows, config=cfg, columns=columns, claim=claim, results=results)
    write_report(
        doc,
        out_dir,
        columns=columns,
        sections=claim_section(claim),
        plots=[detection_plot],
        history=history,
    )
    return doc
