"""Device placement without a GPU: every exportable model through gpu_check's host-CUDA code
on torch's "meta" device, under a dispatch mode that refuses, as CUDA does, any op meeting a
CPU tensor (a CPU 0-dim scalar and CPU indices of ``aten::index``/``index_put`` into a device
tensor allowed, as on CUDA; the meta kernels alone miss some, e.g. a CPU ``src`` of ``scatter``,
a CPU index of ``index_select``, a CPU generator): a tensor made on the CPU mid-forward or a
state left there fails here as it fails on a GPU. The training-path forwards
(``forward_sequence``, ttt's helpers) are checked the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from neuroedge.bench.gpu_check import device_steps, host_cuda_runner
from neuroedge.registry import get_backend, get_model, model_names
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

EXPORTABLE = [n for n in model_names() if "onnx" in get_model(n).exportable]
META = "meta"
COPIES = {"aten::_to_copy", "aten::copy_", "aten::lift_fresh", "aten::_copy_from"}
INDEX = "aten::index"  # exact schema name: index_select, index_add etc. get no exemption
INDEX_PUTS = {"aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}


def mixed_indexing(name: str, args: Any, kwargs: dict[str, Any]) -> bool:
    """CUDA's rule for ``aten::index`` and ``index_put``: indices on the CPU or on self's
    device; the values put on self's device unless a CPU 0-dim tensor (a scalar)."""
    self, indices = args[0], [t for t in args[1] if t is not None]
    values = [args[2] if len(args) > 2 else kwargs["values"]] if name in INDEX_PUTS else []
    device = self.device.type
    return any(t.device.type not in {"cpu", device} for t in indices) or any(
        v.device.type != device and (v.device.type != "cpu" or v.dim() > 0) for v in values
    )


class CudaLikeDevices(TorchDispatchMode):
    """Raise where CUDA raises: an op (not a copy) mixing META tensors with CPU tensors, or a
    generator of another device than the op's."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = func._schema.name
        leaves = tree_flatten((args, kwargs))[0]
        tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
        if name == INDEX or name in INDEX_PUTS:  # CPU indices may index a device tensor
            mixed = mixed_indexing(name, args, kwargs)
        else:
            kinds = {t.device.type for t in tensors if t.device.type != "cpu" or t.dim() > 0}
            mixed = name not in COPIES and {"cpu", META} <= kinds
        if mixed:
            shapes = [(tuple(t.shape), t.device.type) for t in tensors]
            raise RuntimeError(f"{name} mixes CPU and device tensors: {shapes}")
        device = tensors[0].device if tensors else torch.device(kwargs.get("device") or "cpu")
        for gen in (g for g in leaves if isinstance(g, torch.Generator)):
            if gen.device.type != device.type:
                raise RuntimeError(
                    f"{name}: Expected a '{device.type}' device type for generator but found "
                    f"'{gen.device.type}'"
                )
        return func(*args, **kwargs)


def _on_meta(n: int = 4) -> torch.Tensor:
    return torch.zeros(n, device=META)


def _cpu_generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


REFUSED_AS_ON_CUDA: dict[str, Callable[[], Any]] = {
    "add_cpu": lambda: _on_meta() + torch.zeros(4),
    "gather_cpu_index": lambda: _on_meta().gather(0, torch.tensor([0, 1])),
    "index_select_cpu_index": lambda: _on_meta().index_select(0, torch.tensor([0, 1])),
    "index_put_cpu_values": lambda: _on_meta().index_put((torch.tensor([0, 1]),), torch.ones(2)),
    "setitem_cpu_values": lambda: _on_meta().__setitem__(torch.tensor([0, 1]), torch.ones(2)),
    "device_index_into_cpu": lambda: torch.zeros(4)[torch.tensor([0, 1], device=META)],
    "rand_cpu_generator": lambda: torch.rand(3, generator=_cpu_generator(), device=META),
    "bernoulli_cpu_generator": lambda: _on_meta().bernoulli_(0.5, generator=_cpu_generator()),
    "randperm_cpu_generator": lambda: torch.randperm(4, generator=_cpu_generator(), device=META),
}
ALLOWED_AS_ON_CUDA: dict[str, Callable[[], Any]] = {
    "add_cpu_scalar": lambda: _on_meta() + torch.tensor(1.0),
    "getitem_cpu_index": lambda: _on_meta()[torch.tensor([0, 1])],
    "getitem_cpu_mask": lambda: _on_meta()[torch.tensor([True, False, True, False])],
    "index_put_device_values": lambda: _on_meta().index_put(
        (torch.tensor([0, 1]),), torch.ones(2, device=META)
    ),
    "index_put_cpu_scalar": lambda: _on_meta().index_put_((torch.tensor([0]),), torch.tensor(1.0)),
    "setitem_mask_scalar": lambda: _on_meta().__setitem__(torch.tensor([True] * 4), 2.0),
    "slice_copy_from_cpu": lambda: _on_meta().__setitem__(slice(0, 2), torch.ones(2)),
    "rand_cpu_with_cpu_generator": lambda: torch.rand(3, generator=_cpu_generator()),
}


@pytest.mark.parametrize("name", REFUSED_AS_ON_CUDA)
def test_the_mode_refuses_what_cuda_refuses(name: str) -> None:
    with CudaLikeDevices(), pytest.raises(RuntimeError, match="device"):
        REFUSED_AS_ON_CUDA[name]()


@pytest.mark.parametrize("name", ALLOWED_AS_ON_CUDA)
def test_the_mode_allows_what_cuda_allows(name: str) -> None:
    with CudaLikeDevices():
        ALLOWED_AS_ON_CUDA[name]()


def built(name: str, **config: Any) -> tuple[Any, Any, dict[str, Any]]:
    spec = get_model(name)
    cfg = {"smoke": True, **config}
    program = spec.build(dict(cfg))
    return spec, program, spec.built_example(0, program, {**spec.default_config, **cfg})


def on_meta(program: Any, example: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Shapes of the outputs and final states gpu_check's host-cuda route makes on "meta"."""
    with CudaLikeDevices():
        ys, final = device_steps(program, META)(example)
    assert all(t.device.type == META for t in (*ys, *final))
    shapes = {n: tuple(y.shape) for n, y in zip(program.output_names, ys)}
    shapes.update({f"{n}_final": tuple(s.shape) for n, s in zip(program.state_names, final)})
    return shapes


@pytest.fixture
def tf32_on() -> Iterator[None]:
    """TF32 allowed for cuBLAS and cuDNN during the test (what gpu_check must turn off), then
    both flags restored (pytest's monkeypatch cannot restore torch's cuBLAS flag object)."""
    flags = (torch.backends.cudnn, torch.backends.cuda.matmul)
    saved = [flag.allow_tf32 for flag in flags]
    for flag in flags:
        flag.allow_tf32 = True
    yield
    for flag, value in zip(flags, saved):
        flag.allow_tf32 = value


def test_the_exportable_models_are_all_here() -> None:
    expected = {
        "snn.lif_convnet",
        "snn.unisparse",
        "event.bivision",
        "ttt.linear_attention",
        "vla.specprune",
    }
    assert expected <= set(EXPORTABLE)


@pytest.mark.parametrize("name", EXPORTABLE)
def test_host_cuda_route_keeps_every_tensor_on_the_device(name: str, tf32_on: None) -> None:
    spec, program, example = built(name)
    host = get_backend("host")
    reference = host.run(host.compile(program, spec), example)
    shapes = on_meta(program, example)
    assert shapes == {n: np.shape(reference[n]) for n in shapes}
    # fp32 parity reference: TF32 off for cuBLAS and cuDNN
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32


def test_host_cuda_runner_returns_host_arrays_of_the_reference(tf32_on: None) -> None:
    spec, program, example = built("snn.lif_convnet")
    host = get_backend("host")
    reference = host.run(host.compile(program, spec), example)
    got = host_cuda_runner(program, device="cpu")(example)
    assert set(got) == set(reference)
    for name, value in reference.items():
        np.testing.assert_allclose(got[name], value, atol=spec.tolerance_for("host-cuda"))


@pytest.mark.parametrize("method", ["unpruned", "specprune", "fastv", "random"])
@pytest.mark.parametrize("mode", ["coarse", "fine"])
def test_specprune_prunes_on_the_device_in_every_method(method: str, mode: str) -> None:
    _, program, example = built("vla.specprune", method=method, mode=mode)
    assert on_meta(program, example)["scores"] == (1, program.module.n_visual)


def test_specprune_without_local_tokens_on_the_device() -> None:
    _, program, example = built("vla.specprune", method="specprune")
    policy = program.module
    policy.configure("specprune", policy.budget, k_local=0)  # per_view_top's empty mask
    assert on_meta(program, example)["scores"] == (1, policy.n_visual)


def _lif() -> tuple[torch.Tensor, ...]:
    from neuroedge.models.lif_convnet.module import LIFConvNet

    return (LIFConvNet().to(META).forward_sequence(torch.zeros(2, 3, 1, 8, 8, device=META)),)


def _unisparse(folded: bool) -> tuple[torch.Tensor, ...]:
    from neuroedge.models.unisparse.module import MINI, SpikingResNet, fold

    net = fold(SpikingResNet(MINI)) if folded else SpikingResNet(MINI)
    logits, maps = net.to(META).forward_sequence(torch.zeros(2, 3, 1, 8, 8, device=META))
    return logits, *maps


def _ttt(which: str) -> tuple[torch.Tensor, ...]:
    from neuroedge.models.ttt.module import SlidingWindowAttention, chunk_means

    if which == "chunk_means":
        return (chunk_means(torch.zeros(2, 10, 4, device=META), 4),)
    return (SlidingWindowAttention(8, 2, 3).to(META)(torch.zeros(1, 5, 8, device=META)),)


def _bivision(neuron: str) -> tuple[torch.Tensor, ...]:
    from neuroedge.models.bivision.module import BiSNet

    net = BiSNet(size=16, neuron=neuron).to(META)
    return net.forward_sequence(torch.zeros(2, 3, 2, 16, 16, device=META))


def _momentum_masks() -> tuple[torch.Tensor, ...]:
    from neuroedge.models.ttt.forms import momentum_masks

    alpha = torch.full((2, 4), 0.9, device=META)
    return momentum_masks(alpha, 4, "update_then_apply", torch.float32)


def _rank_confidence() -> tuple[torch.Tensor, ...]:
    from neuroedge.models.specprune.functional import rank_confidence_score

    return (rank_confidence_score(torch.zeros(2, 7, device=META)),)


@pytest.mark.parametrize(
    "forward, shape",
    [
        (_lif, (3, 10)),  # (T, batch, C, H, W) -> time-mean logits
        (lambda: _unisparse(folded=False), (3, 10)),
        (lambda: _unisparse(folded=True), (3, 10)),
        (lambda: _ttt("chunk_means"), (2, 3, 4)),
        (lambda: _ttt("sliding_window"), (1, 5, 8)),
        (_rank_confidence, (2, 7)),
        (lambda: _bivision("statnf"), (3, 2)),
        (lambda: _bivision("lif"), (3, 2)),
        (_momentum_masks, (2, 4, 5)),  # (..., chunks, chunks + 1)
    ],
    ids=[
        "lif_convnet",
        "unisparse",
        "unisparse_folded",
        "chunk_means",
        "swa",
        "rank_score",
        "bivision_statnf",
        "bivision_lif",
        "momentum_masks",
    ],
)
def test_training_forwards_run_on_the_input_device(forward: Any, shape: tuple[int, ...]) -> None:
    with CudaLikeDevices():
        out = forward()
    assert tuple(out[0].shape) == shape and {t.device.type for t in out} == {META}


def test_initial_states_default_to_the_cpu_and_follow_a_device() -> None:
    from neuroedge.models.lif_convnet.module import LIFConvNet
    from neuroedge.models.unisparse.module import MINI, SpikingResNet

    for net in (LIFConvNet(), SpikingResNet(MINI)):
        assert {s.device.type for s in net.init_state(2)} == {"cpu"}
        assert {s.device.type for s in net.init_state(2, META)} == {META}
