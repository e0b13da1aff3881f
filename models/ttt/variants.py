"""The TTT layer's switches and the paper's six-step reduction ladder (Liu et al. 2026, Table 2).

A TTT-KVB layer keeps fast weights ``f(x) = phi(x; W0, W2) W1`` with the SwiGLU kernel
``phi(x) = silu(x W0) * (x W2)`` and trains them at test time on the dot-product binding loss
``L = -sum_i eta_i <f(k_i), v_i>``. The ladder removes one ingredient per step:

=========  ======================================================  ===================
variant    what changes (cumulative)                               parallel forms
=========  ======================================================  ===================
baseline   LaCT: W0, W1, W2 all updated, weight norm, per-token    recurrent only
           lr, momentum, Muon
v1         only W1 updated (phi becomes a static kernel)           recurrent only
v2         no weight renormalisation                               chunked
v3         SwiGLU kernel -> identity (q^ = q, k^ = k)              chunked
v4         per-token lr eta_t -> constant (absorbed into v)        chunked
v5         no momentum (v^ = eta v)                                chunked
v6         no Muon: exactly linear attention o = q (W + sum k^T v)  chunked and masked
=========  ======================================================  ===================

``la_momentum`` (not a ladder rung) is linear attention that keeps per-token lr and momentum
but no Muon: the smallest variant whose masked parallel form has the momentum mask C.
``chunked`` here is the prefix-scan form; ``masked`` the fully parallel one. Muon is a
non-linear function of each chunk's momentum buffer, so with it only the prefix scan holds;
weight norm or a dynamic kernel makes the update depend on the state, so only the recurrence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

KERNELS = ("swiglu", "linear")
ORDERS = ("update_then_apply", "apply_then_update")
FORMS = ("recurrent", "parallel", "chunked")


@dataclass(frozen=True)
class TTTVariant:
    """Which ingredients of a TTT-KVB layer are on."""

    name: str
    dynamic_kernel: bool  # W0 and W2 are fast weights too (else phi is a static kernel)
    weight_norm: bool  # renormalise each fast weight's columns to their initial l2 norm
    kernel: str  # "swiglu" or "linear" (phi(x) = x)
    per_token_lr: bool  # eta_t = softplus(w x_t + b) per token and head, else constant
    momentum: bool  # M_c = G_c + alpha_c M_{c-1}, alpha_c = sigmoid(w mean(x_c) + b)
    muon: bool  # apply 5 Newton-Schulz iterations to each chunk's update
    ascent: bool = False  # gradient ascent on L (the sign flips; an anomaly probe)

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(
                f"variant {self.name!r}: kernel {self.kernel!r} is not one of {KERNELS}"
            )
        if self.dynamic_kernel and self.kernel != "swiglu":
            raise ValueError(f"variant {self.name!r}: a dynamic kernel needs kernel='swiglu'")

    @property
    def forms(self) -> tuple[str, ...]:
        """The forms that compute this variant exactly (the recurrence always does)."""
        if self.dynamic_kernel or self.weight_norm:
            return ("recurrent",)
        if self.muon:
            return ("recurrent", "chunked")
        return FORMS

    def supports(self, form: str) -> str | None:
        """None if ``form`` computes this variant exactly, else the reason it does not."""
        if form not in FORMS:
            return f"form {form!r} is not one of {FORMS}"
        if form in self.forms:
            return None
        if self.dynamic_kernel:
            return (
                f"variant {self.name!r} updates the kernel weights W0, W2: the update "
                "depends on the state, only the recurrent form is exact"
            )
        if self.weight_norm:
            return (
                f"variant {self.name!r} renormalises the fast weights after each update: "
                "not associative, only the recurrent form is exact"
            )
        return (
            f"variant {self.name!r} orthogonalises each chunk's update with Muon, which is "
            "not linear: use the chunked (prefix-scan) form"
        )


BASELINE = TTTVariant(
    "baseline",
    dynamic_kernel=True,
    weight_norm=True,
    kernel="swiglu",
    per_token_lr=True,
    momentum=True,
    muon=True,
)


def _ladder() -> dict[str, TTTVariant]:
    steps = [
        ("v1", {"dynamic_kernel": False}),
        ("v2", {"weight_norm": False}),
        ("v3", {"kernel": "linear"}),
        ("v4", {"per_token_lr": False}),
        ("v5", {"momentum": False}),
        ("v6", {"muon": False}),
    ]
    table, current = {"baseline": BASELINE}, BASELINE
    for name, change in steps:
        current = replace(current, name=name, **change)
        table[name] = current
    return table


LADDER: dict[str, TTTVariant] = _ladder()
VARIANTS: dict[str, TTTVariant] = {
    **LADDER,
    "la_momentum": replace(LADDER["v6"], name="la_momentum", per_token_lr=True, momentum=True),
}


def get_variant(name: str | TTTVariant) -> TTTVariant:
    """The variant called ``name`` (a TTTVariant passes through); unknown names list the valid."""
    if isinstance(name, TTTVariant):
        return name
    if name not in VARIANTS:
        raise ValueError(f"unknown TTT variant {name!r}; valid: {', '.join(VARIANTS)}")
    return VARIANTS[name]
