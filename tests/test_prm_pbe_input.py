"""pbe.prm_rl: bad input is refused with a typed error naming the problem; the registered
synthesiser answers the example and codes round-trip."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.prm_pbe import experiment as X
from neuroedge.models.prm_pbe import spec as S


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def tasks_of(*args, **kwargs):
        pytest.fail("tasks were drawn: the bad value was not refused before any work")

    monkeypatch.setattr(X, "tasks_of", tasks_of)


def test_codes_round_trip_and_pad_with_zeros() -> None:
    strings = [["ab", "", "a b#", "F" * 24]]
    a = S.codes(strings)
    assert a.shape == (1, 4, 24) and a.dtype == np.uint8 and a[0, 0, 2] == 0
    assert S.strings_of("inputs", a) == strings
    assert S.strings_of("inputs", a.astype(np.int64).tolist()) == strings


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.zeros((4, 24), np.uint8), r"inputs: expected \[tasks >= 1, 4, 24\] .* got \[4, 24\]"),
        (np.zeros((1, 3, 24), np.uint8), r"got \[1, 3, 24\]"),
        (np.zeros((0, 4, 24), np.uint8), r"got \[0, 4, 24\]"),
        (np.zeros((1, 4, 24)), "expected integer character codes, got dtype float64"),
        (S.codes([["ab", "ab", "aZb", "ab"]]), r"task 0, example 2, position 1: code 90 is not"),
        (S.codes([["ab", "ab", "ab", "ab"], ["a", "b", "c", "d!"]]), "task 1, example 3, pos"),
    ],
)
def test_bad_codes_are_refused_naming_task_example_and_position(bad, message) -> None:
    with pytest.raises(ValueError, match=message):
        S.strings_of("inputs", bad)


def test_characters_after_the_padding_are_refused() -> None:
    a = S.codes([["ab", "ab", "ab", "ab"]])
    a[0, 1, 5] = ord("a")
    with pytest.raises(ValueError, match="task 0, example 1: characters after the 0 padding"):
        S.strings_of("outputs", a)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("updates", 2.5, "updates=2.5: expected an integer in 3..1000000"),
        ("tree_k", 1, "tree_k=1"),
        ("tau", 0, "tau=0"),
        ("beta", -1, "beta=-1"),
        ("gae_lambda", 1.5, "gae_lambda=1.5"),
        ("kl", float("nan"), "kl=nan"),
        ("tree_tasks", 5000, r"tree_tasks \(5000\) exceeds train_tasks \(2000\)"),
        ("seeds", [0, -2], "seed=-2"),
    ],
)
def test_bad_bench_config_is_refused_before_any_work(
    tmp_path, no_work, key, value, message
) -> None:
    with pytest.raises(ConfigError, match=message):
        X.bench(str(tmp_path), config={key: value})
    assert not list(tmp_path.iterdir())


def test_bad_build_config_is_refused_before_any_work(no_work) -> None:
    import neuroedge as ne

    spec = ne.model("pbe.prm_rl")
    with pytest.raises(ConfigError, match="variant"):
        spec.build({"variant": "dpo"})
    with pytest.raises(ConfigError, match="smoke"):
        spec.build({"smoke": "no"})
    with pytest.raises(ConfigError, match="updates=0"):
        spec.build({"updates": 0})


def test_the_registered_synthesiser_answers_and_checks_its_programs() -> None:
    import neuroedge as ne
    from neuroedge.models.prm_pbe import dsl

    program = ne.model("pbe.prm_rl").build({"smoke": True})
    ex = S.example(0)
    out = program.fn(**ex)
    assert out["program"].shape == (4, 5) and out["program"].dtype == np.int64
    xs, ys = S.strings_of("inputs", ex["inputs"]), S.strings_of("outputs", ex["outputs"])
    for prog, solved, x, y in zip(out["program"], out["solved"], xs, ys, strict=True):
        assert (prog == dsl.END).any()
        assert solved == float([dsl.execute(prog, s) for s in x] == y)
    with pytest.raises(ValueError, match="inputs has 4 tasks but outputs has 1"):
        program.fn(ex["inputs"], ex["outputs"][:1])


def test_codes_refuse_a_string_longer_than_the_dsl_holds() -> None:
    with pytest.raises(ValueError, match="task 1, example 2: 25 characters, the DSL's strings"):
        S.codes([["a"] * 4, ["a", "b", "c" * 25, "d"]])  # was cut to 24 without a word
    assert S.strings_of("inputs", S.codes([["c" * 24] * 4]))[0][0] == "c" * 24


class Stop(Exception):
    pass


def test_smoke_keeps_the_sizes_the_user_gives(monkeypatch) -> None:
    seen = {}

    def tasks_of(cfg):
        seen.update(cfg)
        raise Stop  # before any work

    monkeypatch.setattr(X, "tasks_of", tasks_of)
    with pytest.raises(Stop):
        S.build({"smoke": True, "train_tasks": 50, "sft_epochs": 2, "updates": 7})
    assert (seen["train_tasks"], seen["sft_epochs"], seen["updates"]) == (50, 2, 7)
    assert seen["tree_tasks"] == 5 and seen["prm_steps"] == 2  # smoke's, not build keys
    with pytest.raises(Stop):
        S.build({"smoke": True})
    assert (seen["train_tasks"], seen["sft_epochs"], seen["updates"]) == (20, 1, 3)


@pytest.mark.parametrize(
    ("items", "msg"),
    [
        (["smoke=true", "updates=2"], "updates=2: expected an integer in 3..1000000"),
        (["smoke=true", "train_tasks=9"], "train_tasks=9: expected an integer in 10..100000"),
        (["variant=sft", "updates=500"], "updates=500 has no effect with variant=sft"),
        (["variant=sft", "kl=0.5"], "kl=0.5 has no effect with variant=sft"),
        (["variant=sft", "smoke=true", "beta=2"], "beta=2 has no effect with variant=sft"),
        (["variant=outcome", "beta=0.3"], "beta=0.3 has no effect with variant=outcome"),
        (["variant=outcome_curriculum", "beta=0"], "beta=0 has no effect with variant=outcome_"),
    ],
)
def test_cli_run_refuses_a_key_the_build_would_ignore_or_a_bad_smoke_value(
    no_work, capsys, items, msg
) -> None:
    from neuroedge.cli import main

    assert main(["run", "pbe.prm_rl", "--config", *items]) == 2
    assert f"neuroedge: error: {msg}" in capsys.readouterr().err


def test_the_variants_that_read_a_key_still_take_it(monkeypatch) -> None:
    monkeypatch.setattr(X, "tasks_of", lambda cfg: (_ for _ in ()).throw(Stop))
    for config in ({"variant": "prm", "beta": 0.3}, {"variant": "outcome", "kl": 0.1}):
        with pytest.raises(Stop):
            S.build({**config, "smoke": True, "updates": 3})
