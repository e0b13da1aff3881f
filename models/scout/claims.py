"""The claims the ltu.scout bench reads (C1-C6, see ``experiment``), their report.md section
and the cost / accuracy plot.

C2 and C3's full-context part name the notes' sizes (host_llm_papers.md 1.4): C2 is
tokens_SCOUT(1M) / tokens_SCOUT(64k) <= 1.5, read only when the run has both sizes (else not
measured, ``holds`` None with a reason: a single size gave a vacuous 1.0, 256k and 1M read
1M / 256k); C3 needs SCOUT accuracy >= 0.9 at every size and full context below 0.6 at 1M
(no 1M size: that part is not measured, so C3 is None unless SCOUT already fails it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.models.scout.experiment import METHODS, NAME


BIG = 256_000  # C1 reads the sizes from here up
SMALL, LARGE = "64000", "1000000"  # C2 compares these two sizes; C3's full context reads LARGE


def _size_names(*sizes: str) -> str:
    """``64k and 1M``: sizes in tokens, as the claims name them."""
    return " and ".join(
        f"{int(z) // 1_000_000}M" if int(z) % 1_000_000 == 0 else f"{int(z) // 1000}k"
        for z in sizes
    )


def _c2(s: Mapping[str, Any]) -> dict[str, Any]:
    """C2: SCOUT's tokens per question at 1M at most 1.5x those at 64k; None without both."""
    if SMALL not in s or LARGE not in s:
        why = f"needs document sizes {_size_names(SMALL, LARGE)}; the run has {_size_names(*s)}"
        return {"value": None, "holds": None, "reason": why}
    growth = s[LARGE]["scout"]["tokens_per_question"] / s[SMALL]["scout"]["tokens_per_question"]
    return {"value": growth, "holds": growth <= 1.5}


def _c3(s: Mapping[str, Any]) -> dict[str, Any]:
    """C3: SCOUT accuracy >= 0.9 at every size, full context below 0.6 at 1M (None without
    1M, unless SCOUT already fails)."""
    accurate = all(x["scout"]["accuracy"] >= 0.9 for x in s.values())
    out: dict[str, Any] = {"value": {z: x["scout"]["accuracy"] for z, x in s.items()}}
    if LARGE not in s:
        out["full_context_1m"] = None
        out["holds"] = False if not accurate else None
        if accurate:
            out["reason"] = f"full context is read at 1M; the run has {_size_names(*s)}"
        return out
    out["full_context_1m"] = s[LARGE]["full_context"]["accuracy"]
    out["holds"] = accurate and out["full_context_1m"] < 0.6
    return out


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
    s = {str(int(z)): res["sizes"][z]["summary"] for z in sorted(res["sizes"], key=int)}
    sizes = list(s)
    ratio = {
        z: s[z]["full_context"]["tokens_per_question"] / s[z]["scout"]["tokens_per_question"]
        for z in sizes
    }
    out = {
        "C1_tokens_full_over_scout": _c1(ratio),
        "C2_scout_token_growth": _c2(s),
        "C3_accuracy": _c3(s),
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
    if value is None:
        return "-"
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
            if cell.get("full_context_1m") is not None:
                value += f"; full context at 1M: {cell['full_context_1m']:.3g}"
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
