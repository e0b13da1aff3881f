"""Process-wide state of the caller left as it was: root-logger handlers (int8 quantizers,
Lava), environment variables (MuJoCo's GL platform, the Hugging Face hub's offline switch),
transformers' verbosity, torch's generator (the local chat model) and the umask (atomic
writes)."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest


@contextlib.contextmanager
def bare_root() -> Iterator[logging.Logger]:
    """The root logger as a fresh process has it: no handler and level WARNING (pytest's
    capture handlers put back afterwards), so a ``logging.basicConfig()`` inside would act."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    root.setLevel(logging.WARNING)
    try:
        yield root
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def _tiny_matmul(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.eye(4, dtype=np.float32) * 0.5, "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_int8_quantizers_leave_no_handler_on_the_root_logger(tmp_path) -> None:
    """ONNX Runtime's quantizers call the module-level logging.warning, whose basicConfig()
    used to leave a stderr handler behind: the caller's own basicConfig then did nothing."""
    pytest.importorskip("onnxruntime.quantization")
    from neuroedge.export.tensorrt import quantize_int8
    from neuroedge.models.mecat.deploy import quantize_int8 as quantize_dynamic_int8

    src = _tiny_matmul(tmp_path / "tiny.onnx")
    feeds = [{"x": np.ones((1, 4), dtype=np.float32)}]
    with bare_root() as root:
        quantize_int8(src, tmp_path / "static8.onnx", feeds)
        assert root.handlers == [] and root.level == logging.WARNING
        quantize_dynamic_int8(src, tmp_path / "dynamic8.onnx")
        assert root.handlers == [] and root.level == logging.WARNING
    assert (tmp_path / "static8.onnx").is_file() and (tmp_path / "dynamic8.onnx").is_file()


def _tiny_lif_graph():
    import nir

    return nir.NIRGraph(
        nodes={
            "x": nir.Input({"input": np.array([3])}),
            "fc": nir.Affine(np.full((3, 3), 0.8), np.zeros(3)),
            "a": nir.LIF(
                tau=np.full(3, 2e-3),
                r=np.ones(3),
                v_leak=np.zeros(3),
                v_threshold=np.ones(3),
                v_reset=np.zeros(3),
            ),
            "spikes": nir.Output({"output": np.array([3])}),
        },
        edges=[("x", "fc"), ("fc", "a"), ("a", "spikes")],
        metadata={"dt": 1e-3},
    )


@pytest.mark.loihi
def test_lava_runs_leave_the_loggers_handlers_and_lavas_registries_as_they_were(
    require, monkeypatch
) -> None:
    """Lava adds a root handler per process it makes (and one to its compiler's logger per
    compile): present while it builds and runs, gone afterwards, call after call; and the
    processes it registers are forgotten once the networks are stopped."""
    require("lava")
    from lava.magma.core.process.process import ProcessServer
    from lava.magma.core.process.variable import VarServer
    from neuroedge.backends import lava_processes as lava_mod
    from neuroedge.registry import get_backend
    from neuroedge.types import IOSpec, ModelSpec, NIRProgram

    root, compiler = logging.getLogger(), logging.getLogger("lava.magma.compiler.compiler")
    before = (list(root.handlers), list(compiler.handlers))
    registered = len(ProcessServer().processes), len(VarServer().vars)
    during: list[int] = []
    build = lava_mod.build_processes

    def counting_build(*args, **kwargs):
        net = build(*args, **kwargs)
        during.append(len(root.handlers))
        return net

    monkeypatch.setattr(lava_mod, "build_processes", counting_build)
    graph = _tiny_lif_graph()
    spec = ModelSpec(
        "snn.tiny",
        "snn",
        "one LIF population",
        (IOSpec("input", ("T", "batch", 3)),),
        (IOSpec("output", ("T", "batch", 3)),),
        build=lambda cfg: NIRProgram(graph, 1e-3),
        example=lambda s: {},
    )
    lava = get_backend("lava")
    art = lava.compile(NIRProgram(graph, 1e-3), spec, {"variant": "floating_pt"})
    xs = np.ones((4, 1, 3), dtype=np.float32)
    try:
        for batch in (1, 2):  # two networks built, the first one run twice
            lava.run(art, {"input": np.repeat(xs, batch, axis=1)})
            lava.run(art, {"input": np.repeat(xs, batch, axis=1)})
            assert (list(root.handlers), list(compiler.handlers)) == before
    finally:
        art.handle.close()
    assert len(during) == 2 and min(during) > len(before[0])  # Lava's errors show in the run
    # Lava's servers keep every process and Var made, with its runtime and shared memory,
    # unless told to forget them (+1.4-1.8 MB a deploy for the interpreter's life)
    assert (len(ProcessServer().processes), len(VarServer().vars)) == registered


def test_listing_the_models_leaves_mujoco_gl_unset() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    code = "import os, neuroedge as ne; ne.models(); print(os.environ.get('MUJOCO_GL'))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "None"


def test_the_first_environment_picks_egl_before_mujoco_loads(monkeypatch) -> None:
    from neuroedge.models.specprune import sim

    monkeypatch.setenv("MUJOCO_GL", "x")  # so that its absence is what comes back after
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.setitem(sys.modules, "mujoco", object())  # already loaded: too late to choose
    sim._choose_gl()
    assert "MUJOCO_GL" not in os.environ
    monkeypatch.delitem(sys.modules, "mujoco")
    sim._choose_gl()
    assert os.environ["MUJOCO_GL"] == "egl"
    monkeypatch.setenv("MUJOCO_GL", "osmesa")  # the user's choice stands
    sim._choose_gl()
    assert os.environ["MUJOCO_GL"] == "osmesa"


def test_a_failed_local_model_load_leaves_hub_and_verbosity_alone(monkeypatch, tmp_path) -> None:
    pytest.importorskip("transformers")
    from neuroedge.models.scout.chat import ChatError
    from neuroedge.models.scout.local import LocalChat
    from transformers.utils import logging as hf_logging

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_info()
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    try:
        with pytest.raises(ChatError, match="junk.gguf: not a loadable causal LM"):
            LocalChat(junk)
        assert hf_logging.get_verbosity() == logging.INFO
    finally:
        hf_logging.set_verbosity(verbosity)
    assert "HF_HUB_OFFLINE" not in os.environ


class _Tok:
    eos_token_id = 0

    def apply_chat_template(self, messages, add_generation_prompt, return_tensors):
        import torch

        return torch.tensor([[5, 6, 7]])

    def decode(self, ids, skip_special_tokens):
        return " ".join(str(int(i)) for i in ids)


class _Model:
    class config:  # noqa: N801 (as transformers names it)
        max_position_embeddings = 64

    def generate(self, ids, attention_mask, pad_token_id, do_sample, max_new_tokens, **kw):
        import torch

        new = torch.randint(1, 1000, (1, max_new_tokens)) if do_sample else ids[:, :1]
        return torch.cat([ids, new.expand(1, max_new_tokens)], dim=1)


def test_sampled_local_chat_keeps_the_callers_torch_generator(monkeypatch, tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from neuroedge.models.scout import local

    path = tmp_path / "fake.gguf"
    path.write_bytes(b"")
    monkeypatch.setitem(local._CACHE, str(path.resolve()), (_Tok(), _Model()))
    chat = local.LocalChat(path)
    msgs = [{"role": "user", "content": "hi"}]
    draws, replies = [], []
    for caller_seed in (1234, 99):
        torch.manual_seed(caller_seed)
        replies.append(chat.chat(msgs, temperature=0.7, max_tokens=4, seed=5))
        draws.append(float(torch.rand(1)))
    assert replies[0] == replies[1]  # the sample still follows ``seed``
    for caller_seed, draw in zip((1234, 99), draws, strict=True):
        torch.manual_seed(caller_seed)
        assert draw == float(torch.rand(1))  # the caller's stream, not reseeded


def test_atomic_writes_follow_the_umask_of_now(tmp_path, monkeypatch) -> None:
    from neuroedge import atomic

    old = os.umask(0o077)  # a caller that tightens its umask after importing neuroedge
    try:
        path = atomic.write_text(tmp_path / "private.txt", "x")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        os.umask(0o002)
        assert stat.S_IMODE(atomic.write_text(tmp_path / "shared.txt", "x").stat().st_mode) == 0o664
        monkeypatch.setattr(atomic, "_PROC_STATUS", str(tmp_path / "no-proc"))
        fallback = atomic.write_text(tmp_path / "fallback.txt", "x")  # no /proc: import-time
        assert stat.S_IMODE(fallback.stat().st_mode) == 0o666 & ~atomic._UMASK
    finally:
        os.umask(old)
