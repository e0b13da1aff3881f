"""The causal.cadre benchmark.

Rows: ``identity`` (max |J_g - B| on random linear-additive SEMs), ``cadre`` and ``beta-vae``
trained at the same budget on the synthetic generator (MCC; CaDRe's observed-graph SHD, F1,
TPR, reported as measured whatever they are), and a side-by-side encoder latency. With
``series=PATH`` the model is trained on a user's CSV/NetCDF series and its graph is reported;
``time_column=NAME`` names a CSV series' time column (dates or numbers), which is then checked
for even spacing and not modelled as a variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from neuroedge.models.cadre import train as TR
from neuroedge.models.cadre.data import CausalSeries, generate
from neuroedge.models.cadre.spec import DOMAINS, DX, DZ, LENGTH, SPEC, identity_check
from neuroedge.types import Measurement, Report

COLUMNS = ("max_abs_err", "mcc", "shd", "f1", "tpr", "skeleton_f1", "latency_p50_ms")


def _user_series(config: Mapping[str, Any]) -> tuple[CausalSeries, int, list[str]]:
    from neuroedge.models.cadre.data import read_csv_series, read_netcdf_series, windows

    path = str(config["series"])
    if path.endswith((".nc", ".nc4")):
        values, names = read_netcdf_series(path)
    else:
        values, names = read_csv_series(path, time_column=config.get("time_column"))
    _check_variables(path, values, names)
    period = config.get("period")  # None or an integer >= 1 (train.check_config)
    x, domain = windows(values, LENGTH, period)
    empty_z = np.zeros((len(x), LENGTH, DZ), dtype=np.float32)
    return CausalSeries(x, empty_z, domain, np.zeros((x.shape[-1],) * 2)), period or 1, names


def _check_variables(path: str, values: np.ndarray, names: list[str]) -> None:
    """InputError unless the series has a variable and every one varies with a finite spread:
    a constant column (or one whose spread overflows) standardises to all zeros, and the
    model would fit a graph to nothing."""
    from neuroedge.errors import InputError

    if values.ndim != 2 or values.shape[1] == 0:
        raise InputError(f"{path}: no variable columns (only a time column?)")
    if len(values) < LENGTH:
        raise InputError(f"{path}: {len(values)} time steps; the model's windows need {LENGTH}")
    with np.errstate(over="ignore", invalid="ignore"):
        spread = values.std(0)
    bad = [n for n, s in zip(names, spread) if not (np.isfinite(s) and s > 0)]
    if bad:
        raise InputError(
            f"{path}: columns {bad} are constant or their spread is not finite (values too "
            "large for float64 arithmetic): they carry no signal; drop or rescale them"
        )


def bench(
    out_dir: str, backends: list[str], config: Mapping[str, Any], history: str | None = None
) -> dict[str, Any]:
    from neuroedge.bench.report import write_report

    cfg = TR.check_config({**TR.DEFAULTS, "steps": 600, "n": 3000, **config})  # before any work
    torch.set_num_threads(1)  # tiny MLPs: extra threads only contend on a shared 2-core box
    rows = [_identity_row()]
    doc = _series_document(cfg, rows) if "series" in cfg else _synthetic_document(cfg, rows)
    doc["columns"] = COLUMNS
    sections = [
        (
            f"Graph threshold |J_g| > {cfg['threshold']}; budget {cfg['steps']} Adam "
            f"steps of batch {cfg['batch']} for both models."
        )
    ]
    write_report(
        doc, out_dir, columns=COLUMNS, sections=sections, plots=[graph_plot], history=history
    )
    return doc


def _identity_row() -> Report:
    """The ``identity`` row: max |J_g - B| on random linear-additive SEMs."""
    return Report(
        SPEC.name,
        "host",
        "identity",
        metrics={"max_abs_err": Measurement(identity_check(), "abs", "measured")},
        notes=("J_g = I - D_m J_m^-1 against B on 20 random linear-additive SEMs",),
    )


def _series_document(cfg: Mapping[str, Any], rows: list[Report]) -> dict[str, Any]:
    """Train on the user's ``series`` file; the document carries its graph and variables."""
    from neuroedge.bench.report import build_document

    data, domains, names = _user_series(cfg)
    fit = TR.fit(_cadre(data, domains, cfg), data, cfg, "CaDRe")
    graph = TR.estimated_graph(fit.model, data)
    return build_document(
        SPEC.name, rows, config=_jsonable(cfg), graph=graph.tolist(), variables=names
    )


def _synthetic_document(cfg: Mapping[str, Any], rows: list[Report]) -> dict[str, Any]:
    """CaDRe vs beta-VAE on the synthetic generator: rows, graphs, losses and latency."""
    from neuroedge.bench.report import build_document

    data = generate(
        n=int(cfg["n"]), length=LENGTH, dx=DX, dz=DZ, domains=DOMAINS, seed=int(cfg["seed"])
    )
    result = TR.compare(data, DOMAINS, cfg)
    rows = _with_latency([*rows, *_model_rows(result)], result["model"], data)
    return build_document(
        SPEC.name,
        rows,
        config=_jsonable(cfg),
        graph=result["graph"].tolist(),
        true_graph=data.graph.tolist(),
        losses={
            "cadre": result["losses_cadre"][::10],
            "beta_vae": result["losses_beta_vae"][::10],
        },
    )


def _model_rows(result: Mapping[str, Any]) -> list[Report]:
    """The ``cadre`` row (MCC and graph scores) and the ``beta-vae`` row (MCC)."""
    sc = result["scores"]
    return [
        Report(
            SPEC.name,
            "host",
            "cadre",
            metrics={
                "mcc": Measurement(result["mcc_cadre"], "correlation"),
                "shd": Measurement(sc.shd, "edges", "counted"),
                "f1": Measurement(sc.f1, "fraction"),
                "tpr": Measurement(sc.tpr, "fraction"),
                "fdr": Measurement(sc.fdr, "fraction"),
                "skeleton_f1": Measurement(sc.skeleton_f1, "fraction"),
            },
        ),
        Report(
            SPEC.name,
            "host",
            "beta-vae",
            metrics={"mcc": Measurement(result["mcc_beta_vae"], "correlation")},
        ),
    ]


def _cadre(data: CausalSeries, domains: int, cfg: Mapping[str, Any]) -> torch.nn.Module:
    return TR.new_cadre(data.x.shape[-1], DZ, domains, cfg)


def _jsonable(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cfg.items() if isinstance(v, (int, float, str, bool))}


def _with_latency(rows: list[Report], model: Any, data: CausalSeries) -> list[Report]:
    """Latency of graph extraction (J_g for 32 windows) on the host, 30 repeats."""
    from neuroedge.bench.latency import measure_latency
    from neuroedge.models.cadre import functional as F

    x = torch.as_tensor(data.x[:32])

    def extract() -> Any:
        z, s = model.posterior_means(x)
        return F.jacobian_graph(model.decoder_jacobian(z.detach(), s.detach()))

    lat = measure_latency(extract, repeats=30, batch=32)
    return [r.with_metrics(**lat.metrics()) if r.variant == "cadre" else r for r in rows]


def graph_plot(doc: dict[str, Any], path: Path) -> Path:
    """Estimated mean J_g beside the true B (when known), as heat maps."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    mats = [("estimated J_g (mean)", np.array(doc["graph"]))]
    if "true_graph" in doc:
        mats.append(("true B", np.array(doc["true_graph"])))
    fig, axes = plt.subplots(1, len(mats), figsize=(4.2 * len(mats), 3.6), squeeze=False)
    for ax, (title, mat) in zip(axes[0], mats):
        lim = max(float(np.abs(mat).max()), 1e-6)
        im = ax.imshow(mat, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set_title(title)
        ax.set_xlabel("cause x_j")
        ax.set_ylabel("effect x_i")
        fig.colorbar(im, ax=ax)
    return finish_figure(fig, path)
