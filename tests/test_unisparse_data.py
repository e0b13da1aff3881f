"""snn.unisparse data: CIFAR-10 from a user folder, with clear errors; nothing downloaded."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from neuroedge.models.unisparse.data import CIFAR_FILES, load_cifar10, load_digits


def _write_batch(path: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    blob = {
        b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
        b"labels": [int(v) for v in rng.integers(0, 10, n)],
    }
    path.write_bytes(pickle.dumps(blob))


@pytest.fixture
def cifar_dir(tmp_path: Path) -> Path:
    for i, name in enumerate(CIFAR_FILES):
        _write_batch(tmp_path / name, 20, i)
    return tmp_path


def test_cifar_folder_loads_normalised_images(cifar_dir: Path) -> None:
    split = load_cifar10(cifar_dir)
    assert split.x_train.shape == (100, 3, 32, 32) and split.x_test.shape == (20, 3, 32, 32)
    assert split.x_train.dtype == np.float32 and split.y_train.dtype == np.int64
    assert abs(float(split.x_train.mean())) < 0.5


def test_missing_cifar_folder_names_expected_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="data_batch_1.*test_batch"):
        load_cifar10(tmp_path / "nowhere")


def test_missing_cifar_batch_is_named(cifar_dir: Path) -> None:
    (cifar_dir / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="lacks data_batch_3;"):
        load_cifar10(cifar_dir)


def test_truncated_cifar_batch_names_the_file(cifar_dir: Path) -> None:
    path = cifar_dir / "test_batch"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="test_batch: not a CIFAR-10 python batch"):
        load_cifar10(cifar_dir)


def test_cifar_batch_with_a_corrupt_dtype_string_names_the_file(cifar_dir: Path) -> None:
    path = cifar_dir / "test_batch"
    raw = bytearray(path.read_bytes())
    at = raw.index(b"\x8c\x02u1")  # the pickled dtype('u1') of b"data"
    raw[at + 2 : at + 4] = b",1"  # numpy parses ',1' and raised SyntaxError
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="test_batch: not a CIFAR-10 .*dtype string that does"):
        load_cifar10(cifar_dir)


def test_wrong_cifar_layout_is_refused(cifar_dir: Path) -> None:
    (cifar_dir / "data_batch_2").write_bytes(
        pickle.dumps({b"data": np.zeros((4, 10), np.uint8), b"labels": [0, 1, 2, 3]})
    )
    with pytest.raises(ValueError, match=r"data_batch_2: b'data' must be uint8 \(N, 3072\)"):
        load_cifar10(cifar_dir)


def test_cifar_pickle_with_code_is_refused(cifar_dir: Path) -> None:
    class Exploit:
        def __reduce__(self) -> tuple:
            return (print, ("pwned",))

    (cifar_dir / "data_batch_1").write_bytes(pickle.dumps(Exploit()))
    with pytest.raises(ValueError, match="refusing to load builtins.print"):
        load_cifar10(cifar_dir)


def test_digits_split_is_real_and_stratified() -> None:
    split = load_digits()
    assert split.x_train.shape[1:] == (1, 8, 8) and len(split.y_test) == 360
    assert set(np.unique(split.y_test)) == set(range(10))
