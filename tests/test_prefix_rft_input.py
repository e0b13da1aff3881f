"""rl.prefix_rft: bad input is refused with a typed error naming the problem.

Only one test trains (a ``smoke`` build, 5 + 3 steps); every refused config must be refused
before any training, which ``no_training`` proves by making ``Policy`` fail the test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.errors import ConfigError
from neuroedge.models.prefix_rft import experiment as X
from neuroedge.models.prefix_rft import functional as F
from neuroedge.models.prefix_rft import spec as S


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    def policy(*args, **kwargs):
        pytest.fail("a policy was built: the bad value was not refused before training")

    monkeypatch.setattr(F, "Policy", policy)


def test_valid_prompts_come_back_as_int64_tensors() -> None:
    p = S.example(0)["prompts"]
    assert p.shape == (8, 6) and p.dtype == np.int64
    out = S.check_prompts(p.astype(np.uint8))
    assert out.dtype == torch.int64 and np.array_equal(out.numpy(), p)
    assert torch.equal(S.check_prompts(p.tolist()), out)
    assert torch.equal(S.check_prompts(torch.as_tensor(p)), out)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.zeros(6, np.int64), r"prompts: expected \[rows >= 1, 6\] digits, got \[6\]"),
        (np.zeros((2, 5), np.int64), r"got \[2, 5\]"),
        (np.zeros((0, 6), np.int64), r"got \[0, 6\]"),
        (np.zeros((2, 6)), "expected integer digits 0..5, got dtype float64"),
        (np.array([[0, 1, 2, 3, 4, 5], [0, 1, 2, 6, 4, 5]]), r"row 1, position 3: 6 is not"),
        (np.array([[0, 1, 2, 3, 4, -1]]), r"row 0, position 5: -1 is not a digit 0..5"),
        ([[0, 1, 2], [3, 4]], "prompts"),
    ],
)
def test_bad_prompts_are_refused_naming_row_and_position(bad, message) -> None:
    with pytest.raises(ValueError, match=message):
        S.check_prompts(bad)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("rollouts", 1, "rollouts=1: expected an integer in 2..1024"),
        ("steps", 0, "steps=0"),
        ("steps", 2.5, "steps=2.5"),
        ("prompts", True, "prompts=True"),
        ("lr", 0, "lr=0"),
        ("mask_ratio", 1.5, "mask_ratio=1.5"),
        ("high", float("nan"), "high=nan"),
        ("low_init", 0.99, r"low_init \(0.99\) and low_target \(0.0\) must not exceed high"),
        ("early_steps", 500, r"early_steps \(500\) exceeds steps \(200\)"),
        ("zero_base", "no", "zero_base"),
        ("seeds", [0, -1], "seed=-1"),
    ],
)
def test_bad_bench_config_is_refused_before_training(
    tmp_path, no_training, key, value, message
) -> None:
    with pytest.raises((ConfigError, ValueError), match=message):
        X.bench(str(tmp_path), config={key: value})
    assert not list(tmp_path.iterdir())


def test_bad_build_config_is_refused_before_training(no_training) -> None:
    import neuroedge as ne

    spec = ne.model("rl.prefix_rft")
    with pytest.raises(ConfigError, match="variant"):
        spec.build({"variant": "grpo"})
    with pytest.raises(ConfigError, match="smoke"):
        spec.build({"smoke": "no"})
    with pytest.raises(ConfigError, match="hidden=0"):
        spec.build({"hidden": 0})


def test_the_registered_policy_answers_and_refuses_bad_prompts() -> None:
    import neuroedge as ne

    program = ne.model("rl.prefix_rft").build({"smoke": True})
    out = program.fn(**S.example(1))
    assert out["answers"].shape == (8, 7) and out["answers"].dtype == np.int64
    assert set(np.unique(out["reward"])) <= {0.0, 1.0}
    assert program.meta["variant"] == "prefix_rft" and program.meta["params"] > 10_000
    with pytest.raises(ValueError, match="row 0, position 0: 9"):
        program.fn(np.array([[9, 0, 0, 0, 0, 0]]))
