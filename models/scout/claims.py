"""The claims the ltu.scout bench reads (C1-C6, see ``experiment``), their report.md section
and the cost / accuracy plot."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.models.scout.experiment import METHODS, NAME


BIG = 256_000  # C1 reads the sizes from here up


def _c1(ratio: Mapping[str, float]) -> dict[str, Any]:
    """C1: full context reads >= 8x SCOUT's tokens at every size >= 256k; None unmeasured."""
    big = [z for z in ratio if int(z) >= BIG]
    if not big:
        return {"value": ratio, "holds": None, "reason": f"no document size >= {BIG // 1000}k"}
    return {"value": ratio, "holds": all(ratio[z] >= 8 for z in big)}


def _c6(s: Mapping[str, Any], sizes: list[str]) -> dict[str, Any]:
    """C6: on distractor questions SCOUT (E_T) beats ReAct (H_T) at every size."""
    scout = {z: s[z]["scout"]["accuracy_distractor"] for z in sizes}
    react = {z: s[z]["react"]["accuracy_distractor"] for z in sizes}
    wins = {z: scout[z] > react[z] for z in sizes}
    return {"value": scout, "react": react, "per_size": wins, "holds": all(wins.values())}


def verdict(cells: Mapping[str, Mapping[str, Any]]) -> bool | None:
    """False when any claim fails, else None when any is unmeasured, else True."""
    from neuroedge.bench.seeds import verdict as of_parts

    return of_parts([c["holds"] for c in cells.values()])


def claims(res: Mapping[str, Any]) -> dict[str, Any]:
    """C1-C6 of the module docstring, each with the figures it reads (``holds`` None, with a
    ``reason``, when the run has no figure for it)."""
    sizes = sorted(res["sizes"], key=int)
    s = {z: res["sizes"][z]["summary"] for z in sizes}
    ratio = {
        z: s[z]["full_context"]["tokens_per_question"] / s[z]["scout"]["tokens_per_question"]
        for z in sizes
    }
    growth = (
        s[sizes[-1]]["scout"]["tokens_per_question"] / s[sizes[0]]["scout"]["tokens_per_question"]
    )
    out = {
        "C1_tokens_full_over_scout": _c1(ratio),
        "C2_scout_token_growth": {"value": growth, "holds": growth <= 1.5},
        "C3_accuracy": {
            "value": {z: s[z]["scout"]["accuracy"] for z in sizes},
            "full_context_largest": s[sizes[-1]]["full_context"]["accuracy"],
            "holds": all(s[z]["scout"]["accuracy"] >= 0.9 for z in sizes)
            and s[sizes[-1]]["full_context"]["accuracy"] < 0.6,
        },
        "C4_provenance": {
            "value": min(s[z]["scout"]["provenance"] for z in sizes),
            "holds": all(s[z]["scout"]["provenance"] == 1.0 for z in sizes),
        },
        "C5_no_evaluate_two_hop": {
            "value": max(s[z]["no_evaluate"]["accuracy_two_hop"] for z in sizes),
            "holds": all(s[z]["no_evaluate"]["accuracy_two_hop"] <= 0.6 for z in sizes),
        },
        "C6_state_over_history_distractor": _c6(s, sizes),
    }
    out["holds"] = verdict(out)
    return out


def _mark(holds: bool | None) -> str:
    return {True: "holds", False: "NOT met", None: "not measured"}[holds]


def _fmt(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{int(k) // 1000}k: {v:.3g}" for k, v in value.items())
    return f"{value:.3g}"


def claim_section(doc: Mapping[str, Any]) -> list[str]:
    c = doc["claim"]
    sizes = doc["results"]["sizes"]
    lines = [f"## Claims ({doc['policy']} policy)", ""]
    lines += [
        "Documents: "
        + ", ".join(
            f"{int(k) // 1000}k = {b['tokens']} tokens in {b['lines']} lines"
            for k, b in sizes.items()
        )
        + f"; long-context window {next(iter(sizes.values()))['window_tokens']} tokens",
        "",
    ]
    for key, cell in c.items():
        if key != "holds":
            value = _fmt(cell["value"])
            if "react" in cell:
                value += f"; answered from the history: {_fmt(cell['react'])}"
            if "per_size" in cell:
                value += "; E_T above H_T: " + ", ".join(
                    f"{int(k) // 1000}k {'yes' if ok else 'no'}"
                    for k, ok in cell["per_size"].items()
                )
            if "full_context_largest" in cell:
                value += f"; full context at the largest: {cell['full_context_largest']:.3g}"
            why = f" ({cell['reason']})" if "reason" in cell else ""
            lines.append(f"- {key}: {value} -> {_mark(cell['holds'])}{why}")
    from neuroedge.bench.seeds import VERDICT_WORDS

    lines += ["", f"All: {VERDICT_WORDS[c['holds']]}.", ""]
    return lines


def scout_plot(doc: dict[str, Any], path: Path) -> Path:
    """Tokens per question and accuracy against document length, every method."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()
    res = doc["results"]["sizes"]
    sizes = sorted(res, key=int)
    x = [res[z]["tokens"] for z in sizes]
    fig, (left, right_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for method, style in zip(METHODS, ("o-", "s--", "^:", "x-."), strict=True):
        for ax, key in ((left, "tokens_per_question"), (right_ax, "accuracy")):
            ax.plot(x, [res[z]["summary"][method][key] for z in sizes], style, label=method)
    left.set(
        xscale="log",
        yscale="log",
        xlabel="document tokens (estimated)",
        ylabel="tokens read per question",
        title=f"{NAME}: cost",
    )
    right_ax.set(
        xscale="log",
        ylim=(-0.05, 1.05),
        xlabel="document tokens (estimated)",
        ylabel="accuracy",
        title=f"{doc['policy']} policy",
    )
    left.legend()
    return finish_figure(fig, path)
