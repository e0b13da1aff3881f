"""The memory a full-network GLM needs, checked before anything is trained.

``functional.fit_glm`` on every parameter builds the dense GGN sum J^T Lambda J [P, P] and
``eigh``-decomposes it (see functional.py), so memory grows as P^2, and P grows with the input
width: ``make_mlp(d, h, C)`` has P = d h + h + h h + h + h C + C parameters (a CSV of 3000
feature columns and 2 classes at h = 16: P = 48322, 130 GiB of matrices). Estimate, float64
(8 bytes an entry):

* ``GLM_MATRICES`` = 7 P x P matrices at the peak: the GGN, numpy's working copy of it for
  LAPACK and dsyevd's workspace (about 2 P^2 with eigenvectors), the eigenvectors returned,
  and two earlier full posteriors' eigenvectors the bench still holds (the other tuning's,
  and a timing repeat's previous one until the new fit replaces it);
* ``JACOBIAN_COPIES`` = 4 [n_train, C, P] Jacobians: torch's per-parameter blocks and their
  concatenation, and for classification the centred and weighted copies that form the GGN.

A dataset whose estimate exceeds ``MAX_GLM_BYTES`` (4 GiB, a share of a laptop's or CI
runner's memory) is refused with a ConfigError naming the dataset, P and the estimate.
"""

from __future__ import annotations

from collections.abc import Mapping

GLM_MATRICES = 7
JACOBIAN_COPIES = 4
MAX_GLM_BYTES = 4 * 2**30
TRAIN_FRACTION = 0.7  # data.make_split's default 70/30 split

# rows, feature columns and outputs (1 for regression, else the classes) of data.DATASETS;
# synthetic's rows are the bench's n_synthetic
SHAPES: dict[str, tuple[int | None, int, int]] = {
    "synthetic": (None, 8, 1),
    "diabetes": (442, 10, 1),
    "breast_cancer": (569, 30, 2),
    "wine": (178, 13, 3),
    "digits": (1797, 64, 10),
}


def full_parameter_count(d: int, hidden: int, outputs: int) -> int:
    """P of ``functional.make_mlp(d, hidden, outputs)``: two tanh layers and the output, with
    biases."""
    return d * hidden + hidden + hidden * hidden + hidden + hidden * outputs + outputs


def full_glm_bytes(p: int, n_train: int, outputs: int) -> tuple[int, int]:
    """(bytes of the P x P matrices, bytes of the Jacobians) at the full GLM's peak."""
    return 8 * GLM_MATRICES * p * p, 8 * JACOBIAN_COPIES * n_train * outputs * p


def check_full_glm_memory(
    entry: str, task: str, rows: int, d: int, outputs: int, hidden: Mapping[str, int]
) -> None:
    """Refuse (ConfigError) a dataset whose full GLM would exceed MAX_GLM_BYTES, naming the
    entry, the width and outputs, the parameter count P they imply and the estimate."""
    from neuroedge.errors import ConfigError

    h = int(hidden[task])
    p = full_parameter_count(d, h, outputs)
    n_train = round(rows * TRAIN_FRACTION)
    matrices, jacobians = full_glm_bytes(p, n_train, outputs)
    if matrices + jacobians <= MAX_GLM_BYTES:
        return
    raise ConfigError(
        f"datasets entry {entry!r}: {d} feature columns and {outputs} output(s) at "
        f"hidden_{task}={h} give the full network P={p:,} parameters; its dense GGN "
        f"eigendecomposition holds {GLM_MATRICES} P x P float64 matrices "
        f"({GLM_MATRICES} x {p:,}^2 x 8 bytes = {matrices / 2**30:.1f} GiB) and its "
        f"Jacobians on {n_train} training rows {jacobians / 2**30:.1f} GiB, above the "
        f"{MAX_GLM_BYTES / 2**30:.0f} GiB cap (MAX_GLM_BYTES); "
        + _lever(d, h, outputs, n_train, task)
    )


def _lever(d: int, h: int, outputs: int, n_train: int, task: str) -> str:
    """What to lower: the width when the input layer dominates P (d > h), else the hidden
    size, with the largest hidden size that fits at these columns."""
    fits = [
        k
        for k in range(1, h)
        if sum(full_glm_bytes(full_parameter_count(d, k, outputs), n_train, outputs))
        <= MAX_GLM_BYTES
    ]
    smaller = (
        f"hidden_{task} <= {fits[-1]} fits at {d} columns"
        if fits
        else f"no hidden_{task} fits at {d} columns"
    )
    if d > h:
        return (
            f"use fewer feature columns (e.g. a PCA of them), or a smaller hidden_{task} "
            f"({smaller})"
        )
    return f"use a smaller hidden_{task} ({smaller})"
