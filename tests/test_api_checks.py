"""The Python verbs check their arguments before any work; seeded builds are thread-safe;
an empty $NEUROEDGE_HOME is refused; the verb packages describe the verb."""

from __future__ import annotations

import inspect
import threading
import time

import numpy as np
import pytest

import neuroedge as ne
from neuroedge.errors import ConfigError, ExportRefused, InputError


@pytest.mark.parametrize("repeats", [0, -1, "3", 2.5, True, None])
def test_deploy_refuses_bad_repeats_before_anything_else(repeats: object) -> None:
    # an unknown model would be the next error: repeats is checked first, before any build
    with pytest.raises(InputError, match=rf"repeats={repeats!r}: expected an integer >= 1"):
        ne.deploy("snn.no_such_model", "null", repeats=repeats)  # type: ignore[arg-type]


def test_profile_and_the_null_backend_refuse_bad_repeats() -> None:
    from neuroedge.backends.null import NullBackend

    artifact, report = ne.deploy("snn.lif_convnet", "null", {"smoke": True}, repeats=np.int64(2))
    assert report.metrics["latency_p50_ms"].how == "estimated"
    with pytest.raises(InputError, match=r"repeats=0: expected an integer >= 1"):
        ne.profile(artifact, repeats=0)
    example = artifact.spec.example_for(0, artifact.meta["build_config"])
    with pytest.raises(InputError, match=r"repeats='3': expected an integer >= 1"):
        NullBackend().profile(artifact, example, "3")  # type: ignore[arg-type]


def test_config_keys_from_python_must_be_strings() -> None:
    with pytest.raises(ConfigError, match=r"config key 1 \(int\) is not a string"):
        ne.deploy("snn.lif_convnet", "null", config={1: 2})  # type: ignore[dict-item]


def test_an_unknown_export_target_lists_the_valid_targets() -> None:
    with pytest.raises(ExportRefused, match=r"unknown export target 'trt'; valid: onnx, nir, "):
        ne.export("snn.lif_convnet", target="trt")


def test_export_verb_keeps_its_signature_and_doc_after_the_package_import() -> None:
    import neuroedge.export.onnx  # noqa: F401  (binds the package as neuroedge.export)
    import neuroedge.models.lif_convnet.spec  # noqa: F401
    from neuroedge import api

    assert inspect.signature(ne.export) == inspect.signature(api.export)
    assert inspect.signature(ne.models) == inspect.signature(api.models)
    assert "Export ``name`` to ``target``" in ne.export.__doc__
    assert "Exports: ONNX" in ne.export.__doc__  # the package's own text follows


def test_an_empty_neuroedge_home_is_refused(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from neuroedge.cli import main
    from neuroedge.paths import artifact_dir

    monkeypatch.setenv("NEUROEDGE_HOME", "")
    with pytest.raises(ConfigError, match=r"NEUROEDGE_HOME='': an empty path \(an unset shell"):
        artifact_dir("snn.lif_convnet", "onnxrt")  # was ./artifacts, in the current folder
    args = ["run", "snn.lif_convnet", "--backend", "onnxrt", "--config", "smoke=true"]
    assert main(args) == 2
    assert "NEUROEDGE_HOME='': an empty path" in capsys.readouterr().err


def test_run_prints_a_report_without_a_latency(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from neuroedge.backends.null import NullBackend
    from neuroedge.cli import main
    from neuroedge.types import Report

    # a plugin backend's report need not time anything
    monkeypatch.setattr(NullBackend, "profile", lambda self, art, x, n=50: Report("m", "null"))
    assert main(["run", "snn.lif_convnet", "--backend", "null", "--config", "smoke=true"]) == 0
    assert "latency" not in capsys.readouterr().out


def _race(seeded_body) -> list[bool]:
    """Two threads, each running ``seeded_body(seed)`` 10 times with its own seed, against
    the value one thread alone gets: True where they agree."""
    alone = {seed: seeded_body(seed) for seed in (0, 1)}
    agree: list[bool] = []

    def job(seed: int) -> None:
        for _ in range(10):
            agree.append(bool(np.array_equal(seeded_body(seed), alone[seed])))

    threads = [threading.Thread(target=job, args=(seed,)) for seed in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return agree


def test_seeded_draws_are_not_interleaved_between_threads() -> None:
    import torch

    from neuroedge.seeding import seeded

    def draws(seed: int) -> np.ndarray:
        with seeded(seed):
            first = torch.rand(3)
            time.sleep(0.002)  # another thread gets the GIL here (a build's slow step)
            return torch.cat([first, torch.rand(3)]).numpy()

    agree = _race(draws)
    assert all(agree), f"{agree.count(False)} of {len(agree)} concurrent draws differ"


def test_concurrent_model_builds_give_the_sequential_weights() -> None:
    import torch

    spec = ne.model("ttt.linear_attention")

    def weights(seed: int) -> np.ndarray:
        module = spec.build({**spec.default_config, "smoke": True, "seed": seed}).module
        floats = [t.flatten() for t in module.state_dict().values() if t.is_floating_point()]
        return torch.cat(floats).numpy()

    assert all(_race(weights))


@pytest.mark.parametrize("key", ["d_model", "heads", "head_dim", "seed"])
def test_ttt_sizes_may_be_numpy_integers(key: str) -> None:
    # before: "ValueError: TTT layer d_model must be a positive integer, got 16"
    value = {"d_model": 16, "heads": 2, "head_dim": 8, "seed": 3}[key]
    spec = ne.model("ttt.linear_attention")
    program = spec.build({**spec.default_config, key: np.int64(value)})
    assert type(program.meta["config"][key]) is int and program.meta["config"][key] == value
    _, report = ne.deploy("ttt.linear_attention", config={key: np.int64(value)}, repeats=1)
    assert report.backend == "host"


def test_seeded_restores_the_cuda_generators_too_once_cuda_is_in_use(monkeypatch) -> None:
    """A GPU user's CUDA generators come back as they were (fork_rng was told no devices, so
    torch.manual_seed reseeded them for good); without CUDA in use none is read."""
    import torch
    from neuroedge.seeding import seeded

    forked: list[list[int]] = []
    real = torch.random.fork_rng

    def fork(devices=None, **kw):
        forked.append(list(devices))
        return real(devices=[], **kw)  # this machine has no CUDA device to save

    monkeypatch.setattr(torch.random, "fork_rng", fork)
    with seeded(0):
        pass
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with seeded(0):
        pass
    assert forked == [[], [0, 1]]
