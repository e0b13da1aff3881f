"""Bad user data refused with typed errors naming the problem, before any work: JSON Lines
bytes and directories, uq.last_layer datasets (empty list, directories, overflowing columns),
caption.date empty strings, CSV separators and underscores, Prefix-RFT advantages' inputs and
PBE task strings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.errors import ConfigError
from neuroedge.jsonl import read_objects
from neuroedge.models.mecat.data import read_jsonl
from neuroedge.models.prefix_rft import functional as PF
from neuroedge.models.prm_pbe import spec as PBE
from neuroedge.models.self_distill.data import read_numeric_csv
from neuroedge.models.uq_last_layer import data as UQ
from neuroedge.models.uq_last_layer import experiment
from neuroedge.models.uq_last_layer.seed_claim import claim_over_seeds

# --- sdk/jsonl.py ---------------------------------------------------------------------------


def test_jsonl_bytes_that_are_not_utf8_are_named_by_file_line_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "caf\xe9"}\n')  # latin-1 e-acute at byte 19
    with pytest.raises(ValueError, match=r"h\.jsonl:2: byte b'\\xe9' at byte offset 19 is not"):
        read_objects(path)
    path.write_bytes(b"\xff{}\n")  # the audit's file: the first byte
    with pytest.raises(ValueError, match=r"h\.jsonl:1: byte b'\\xff' at byte offset 0 .* UTF-8"):
        read_objects(path)


def test_jsonl_offsets_count_a_byte_order_mark_which_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n[2]\n')
    assert read_objects(path) == [(1, {"a": 1}), (3, [2])]
    path.write_bytes(b"\xef\xbb\xbf{}\n\xff\n")
    with pytest.raises(ValueError, match=r"bom\.jsonl:2: byte b'\\xff' at byte offset 6"):
        read_objects(path)


def test_jsonl_directory_is_named_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory, not a JSON Lines file"):
        read_objects(tmp_path)
    with pytest.raises(ValueError, match="no such file"):
        read_objects(tmp_path / "missing.jsonl")


# --- models/mecat/data.py -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"candidate": "", "references": ["a dog barks"]}, ":2: 'candidate' is empty"),
        ({"candidate": " \t", "references": ["a dog barks"]}, ":2: 'candidate' is empty or"),
        ({"candidate": "a dog", "references": ["a dog", ""]}, ":2: 'references' item 1 is empty"),
        ({"candidate": "a dog", "references": ["\n "]}, ":2: 'references' item 0 is empty or"),
    ],
)
def test_caption_file_refuses_empty_strings(tmp_path: Path, row: dict, message: str) -> None:
    good = {"candidate": "a dog barks", "references": ["a puppy yaps"]}
    path = tmp_path / "caps.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=message):
        read_jsonl(path)


# --- models/self_distill/data.py ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "0.1;0.2\n",
            r"line 1 column 0 \(0-based\): '0.1;0.2' is numbers separated by ';'; .* com",
        ),
        ("0.1\t0.2\n", r"line 1 column 0 \(0-based\): '0.1\\t0.2' is numbers separated by a tab"),
        ("0.1 0.2 0.3\n", r"line 1 column 0 \(0-based\): .* is numbers separated by spaces"),
        (
            "a;b\n1;2\n",
            r"line 2 column 0 \(0-based\): '1;2' is not a number \(numbers separated by",
        ),
        ("1_0,2\n", r"line 1 column 0 \(0-based\): '1_0' is not a plain number .*no underscores"),
        ("a,b\n1,2_5\n", r"line 2 column 1 \(0-based\): '2_5' is not a plain number"),
        (
            "1,\u0661\n",
            r"line 1 column 1 \(0-based\): '\u0661' is not a plain number",
        ),  # Arabic-Indic 1
    ],
)
def test_csv_other_separators_and_underscores_are_named(tmp_path, text, message) -> None:
    path = tmp_path / "v.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        read_numeric_csv(path)


def test_csv_header_and_plain_numbers_still_load(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("name one,x;y\n1.5, -2e3\n+.25,7\n")
    assert read_numeric_csv(path).tolist() == [[1.5, -2000.0], [0.25, 7.0]]


# --- models/uq_last_layer -------------------------------------------------------------------


def _no_training(monkeypatch) -> list:
    trained: list = []
    monkeypatch.setattr(experiment, "compare_dataset", lambda name, cfg: trained.append(name))
    return trained


def test_uq_empty_datasets_list_is_refused_before_work(tmp_path, monkeypatch) -> None:
    trained = _no_training(monkeypatch)
    with pytest.raises(ConfigError, match=r"datasets=\[\]: expected at least one entry"):
        experiment.bench(str(tmp_path / "out"), config={"datasets": [], "rmt_sizes": []})
    assert trained == [] and not (tmp_path / "out").exists()


def test_uq_claim_does_not_hold_over_no_datasets() -> None:
    claim = claim_over_seeds({0: []})
    assert claim["holds"] is False
    assert not any(t["holds"] for t in claim["tunings"].values())


@pytest.mark.parametrize("suffix", [":classification", ":regression", ""])
def test_uq_dataset_entry_naming_a_directory_says_so(tmp_path, suffix) -> None:
    for folder in (tmp_path / "edir", tmp_path / "d.csv"):
        folder.mkdir()
        with pytest.raises(ConfigError, match=rf"{folder} is a directory, not a CSV file"):
            UQ.check_datasets([f"{folder}{suffix}"])
        folder.rmdir()


def _write(path: Path, x: np.ndarray, y: np.ndarray) -> Path:
    path.write_text("a,b,y\n" + "".join(f"{a!r},{b!r},{t!r}\n" for (a, b), t in zip(x, y)))
    return path


def test_uq_features_that_overflow_are_refused_naming_file_and_column(
    tmp_path, monkeypatch
) -> None:
    n = 20
    y = np.arange(n) % 2.0
    x = np.column_stack([np.ones(n), np.where(y > 0, 1e308, -1e308)])  # std overflows
    path = _write(tmp_path / "huge.csv", x, y)
    with pytest.raises(ValueError, match=rf"dataset {path}: feature column 1: values too large"):
        UQ.load_csv_split(path, "classification")
    x[:, 1] = 1e308  # a constant column whose mean overflows
    _write(path, x, y)
    trained = _no_training(monkeypatch)
    with pytest.raises(ValueError, match="feature column 1: values too large to standardise"):
        config = {"datasets": [f"{path}:classification"], "rmt_sizes": []}
        experiment.bench(str(tmp_path / "out"), config=config)
    assert trained == []
    with pytest.raises(ValueError, match="the regression target .* too large to standardise"):
        UQ.make_split(np.ones((n, 1)), np.where(y > 0, 1e308, -1e308), "regression", "t", 0)


def test_uq_standardisation_of_normal_data_is_unchanged() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((30, 3)) * [1.0, 50.0, 1e-4] + [0.0, 7.0, 1.0]
    y = rng.standard_normal(30)
    split = UQ.make_split(x, y, "regression", "toy", seed=5)
    tr = np.random.default_rng(5).permutation(30)[:21]
    sd = x[tr].std(0)
    sd = np.maximum(sd, 0.1 * np.median(sd))
    np.testing.assert_array_equal(split.x_train, ((x - x[tr].mean(0)) / sd)[tr])
    np.testing.assert_array_equal(split.y_train, ((y - y[tr].mean()) / y[tr].std())[tr])


# --- models/prefix_rft/functional.py --------------------------------------------------------


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    entropy = torch.rand(2, 4, 7, generator=torch.Generator().manual_seed(0))
    return r, entropy, torch.tensor([5, 2])


def test_prefix_advantages_default_mask_ratio_is_the_readmes_08() -> None:
    r, entropy, lens = _batch()
    adv, prefix = PF.prefix_advantages(r, entropy, lens)
    want, want_prefix = PF.prefix_advantages(r, entropy, lens, 0.8)
    assert torch.equal(adv, want) and torch.equal(prefix, want_prefix)


def test_prefix_advantages_take_numpy_arrays() -> None:
    r, entropy, lens = _batch()
    adv, prefix = PF.prefix_advantages(r.numpy(), entropy.numpy(), lens.numpy(), 0.5)
    want, want_prefix = PF.prefix_advantages(r, entropy, lens, 0.5)
    assert torch.equal(adv, want) and torch.equal(prefix, want_prefix)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"entropy": torch.rand(2, 6, 7)},
            r"entropy: expected .* = \[2, 4, T\] .* got \[2, 6, 7\]",
        ),
        ({"r": torch.ones(2)}, r"rewards: expected \[prompts >= 1, rollouts >= 2\].* got \[2\]"),
        ({"r": torch.ones(2, 1), "entropy": torch.ones(2, 1, 7)}, r"rollouts >= 2.*\[2, 1\]"),
        ({"r": torch.tensor([[1.0, float("nan"), 0, 1], [0] * 4])}, "rewards: 1 value.* NaN"),
        ({"entropy": torch.full((2, 4, 7), float("inf"))}, "entropy: 56 value.* NaN or inf"),
        ({"prefix_len": torch.tensor([8, 2])}, r"prompt 0 has prefix length 8, .* 0\.\.7"),
        ({"prefix_len": torch.tensor([5, -1])}, r"prompt 1 has prefix length -1"),
        ({"prefix_len": torch.tensor([5])}, r"prefix_len: expected \[prompts\] = \[2\], got \[1\]"),
        ({"prefix_len": torch.tensor([5.0, 2.0])}, "expected integer lengths, got dtype"),
        ({"mask_ratio": 2}, r"mask_ratio=2: expected a number in \[0, 1\]"),
        ({"mask_ratio": float("nan")}, r"mask_ratio=nan"),
        ({"mask_ratio": True}, r"mask_ratio=True"),
        ({"r": "1,0"}, "rewards: expected a torch tensor or numpy array, got str"),
    ],
)
def test_prefix_advantages_refuse_bad_inputs_naming_them(change, message) -> None:
    r, entropy, lens = _batch()
    args = {"r": r, "entropy": entropy, "prefix_len": lens, "mask_ratio": 0.8, **change}
    with pytest.raises(ValueError, match=message):
        PF.prefix_advantages(**args)


# --- models/prm_pbe/spec.py -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("strings", "message"),
    [
        ([[1, 2, 3, 4]], "task 0, example 0: expected a string, got the int 1"),
        ([["a"] * 4, ["a", "b", None, "d"]], "task 1, example 2: expected a string, got the None"),
        ([["ab", "cd", "ef"]], "task 0: 3 examples, a task has exactly 4"),
        ([["a"] * 5], "task 0: 5 examples, a task has exactly 4"),
        (["abcd"], "task 0: expected a list of 4 strings, got the str 'abcd'"),
        ("abcd", "expected a list of tasks, each a list of 4 strings, got the str"),
        ([["a", "b", "c", "d\u00e9"]], "task 0, example 3, position 1: .* not an ASCII"),
    ],
)
def test_pbe_codes_refuse_bad_tasks_naming_task_and_example(strings, message) -> None:
    with pytest.raises(ValueError, match=message):
        PBE.codes(strings)


def test_pbe_codes_take_tuples_and_numpy_string_arrays() -> None:
    want = PBE.codes([["ab", "", "a b", "F"]])
    assert np.array_equal(PBE.codes((("ab", "", "a b", "F"),)), want)
    assert np.array_equal(PBE.codes(np.array([["ab", "", "a b", "F"]])), want)
