"""Readers on corrupt bytes found by fuzzing: every one raises the project's typed error (or a
ValueError naming the file) and none lets tokenize, zlib, zipfile, MemoryError or
RecursionError escape; event headers are read without reading the whole file."""

from __future__ import annotations

import io
import json
import struct
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from neuroedge.errors import ArtifactError, InputError
from neuroedge.events import EventFormatError, SensorSize
from neuroedge.events.codecs import CODECS
from neuroedge.events.datasets import BOX_DTYPE, read_boxes


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _unclosed_header(array: np.ndarray) -> bytes:
    """.npy bytes whose header dict lost its closing brace (numpy: tokenize.TokenError)."""
    raw = bytearray(_npy(array))
    raw[raw.index(b"}")] = ord(" ")
    return bytes(raw)


def _huge_shape(array: np.ndarray) -> bytes:
    """.npy bytes whose header declares 5e10 rows (numpy allocates them: MemoryError)."""
    raw = _npy(array)
    length = int.from_bytes(raw[8:10], "little")
    head = raw[10 : 10 + length].replace(b"(3,", b"(50000000000,").rstrip(b"\n ")
    head += b" " * (length - len(head) - 1) + b"\n"
    return raw[:10] + head + raw[10 + length :]


def _nir_input(path: Path) -> np.ndarray:
    from neuroedge.nir_check import _nir_input_array

    return _nir_input_array("g.nir", path, (2,), 2, 1, 0.3, 0)


@pytest.mark.parametrize("corrupt", [_unclosed_header, _huge_shape])
def test_corrupt_npy_headers_are_named_by_every_npy_reader(tmp_path, corrupt) -> None:
    from neuroedge.arrays import load_inputs
    from neuroedge.models.envy_free.spec import SPEC

    want = "does not parse" if corrupt is _unclosed_header else r"declares shape \(50000000000"
    boxes = tmp_path / "b_bbox.npy"
    boxes.write_bytes(corrupt(np.zeros(3, BOX_DTYPE)))
    with pytest.raises(EventFormatError, match=f"b_bbox.npy: byte offset 0: .*{want}"):
        read_boxes(boxes)
    arrays = tmp_path / "in.npy"
    arrays.write_bytes(corrupt(np.zeros((3, 1, 2))))
    with pytest.raises(InputError, match=f"in.npy: not a readable .npy file .*{want}"):
        load_inputs(arrays, SPEC)
    with pytest.raises(ValueError, match=f"in.npy: not a numeric .npy array .*{want}"):
        _nir_input(arrays)


def test_npy_readers_refuse_an_npz_and_a_cut_array(tmp_path) -> None:
    with open(tmp_path / "b_bbox.npy", "wb") as fh:  # an archive named .npy
        np.savez(fh, a=np.zeros(3, BOX_DTYPE))
    with pytest.raises(EventFormatError, match=r"an .npz archive of \['a'\]"):
        read_boxes(tmp_path / "b_bbox.npy")  # was: AttributeError ('NpzFile' has no dtype)
    (tmp_path / "cut.npy").write_bytes(_npy(np.zeros((3, 1, 2)))[:-8])
    with pytest.raises(ValueError, match="40 bytes follow the header"):
        _nir_input(tmp_path / "cut.npy")


def _npz(x: np.ndarray, compressed: bool) -> bytearray:
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, query_means=x)
    return bytearray(buffer.getvalue())


def test_corrupt_npz_members_are_input_errors(tmp_path) -> None:
    from neuroedge.arrays import load_inputs
    from neuroedge.models.envy_free.spec import SPEC

    x = np.random.default_rng(0).uniform(size=(40, 2))
    deflated = _npz(x, compressed=True)
    name_len, extra_len = struct.unpack_from("<HH", deflated, 26)
    deflated[30 + name_len + extra_len] ^= 0xFF  # the deflate stream's first byte
    stored = _npz(x, compressed=False)
    method = stored.index(b"PK\x01\x02") + 10  # the central directory's compression method
    stored[method : method + 2] = b"\x63\x00"
    for name, raw, why in [
        ("d.npz", deflated, "member 'query_means.npy': error: Error -3"),
        ("m.npz", stored, "member 'query_means.npy': NotImplementedError: That compression"),
    ]:
        (tmp_path / name).write_bytes(bytes(raw))
        with pytest.raises(InputError, match=f"{name}: not a readable .npz file .*{why}"):
            load_inputs(tmp_path / name, SPEC)


def test_npz_member_with_a_huge_shape_is_refused_before_allocating(tmp_path) -> None:
    from neuroedge.arrays import load_inputs
    from neuroedge.models.envy_free.spec import SPEC

    path = tmp_path / "a.npz"
    with zipfile.ZipFile(path, "w") as zf:  # the zip is sound: only the member's header lies
        zf.writestr("query_means.npy", _huge_shape(np.zeros((3, 2))))
    with pytest.raises(InputError, match=r"declares shape \(50000000000, 2\) .* 48 bytes fol"):
        load_inputs(path, SPEC)


def test_npz_member_with_a_forged_zip64_size_is_refused_before_allocating(tmp_path) -> None:
    """The central directory's zip64 size says 1 TiB and the member's header a shape that fits
    it: both lie, and the array (was: MemoryError, 1 TiB) is never allocated."""
    from neuroedge.arrays import load_inputs
    from neuroedge.models.envy_free.spec import SPEC

    header = io.BytesIO()
    fields = {"descr": "<f8", "fortran_order": False, "shape": (2**36 - 16, 2)}
    np.lib.format.write_array_header_1_0(header, fields)
    path = tmp_path / "a.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("query_means.npy", header.getvalue() + np.zeros(6).tobytes())
        zf.filelist[0].file_size = 2**40  # written into the central directory as zip64
    with pytest.raises(InputError, match=r"declares 1099511627776 bytes from \d+ compressed"):
        load_inputs(path, SPEC)
    for compressed in (False, True):  # sound archives of either method still read
        big = np.zeros((4096, 2)) if compressed else np.arange(12.0).reshape(6, 2)
        (tmp_path / "b.npz").write_bytes(bytes(_npz(big, compressed)))
        np.testing.assert_array_equal(load_inputs(tmp_path / "b.npz", SPEC)["query_means"], big)


def test_the_deflate_bound_is_1032_to_1(tmp_path) -> None:
    """A deflated member may declare at most 1032 bytes per compressed byte (+64): one byte
    more is the forged-size refusal, the bound itself reaches the member's own checks."""
    from neuroedge.npyfile import load_npz

    for extra, forged in ((65, True), (64, False)):
        path = tmp_path / f"d{extra}.npz"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("a.npy", _huge_shape(np.zeros((3, 2))))
            info = zf.filelist[0]
            info.file_size = 1032 * info.compress_size + extra
        with pytest.raises(ValueError) as err:
            load_npz(path)
        assert ("a corrupt or forged zip size" in str(err.value)) is forged, err.value


@pytest.mark.parametrize(
    ("field", "value"),
    [(10, b"\x63\x00"), (8, b"\x01\x00"), (6, b"\xff\x00"), ("zip64", b"\x02\x00\x00\x00")],
    ids=["compression method 99", "encrypted flag", "zip version 25.5", "multi-disk zip64"],
)
def test_checkpoint_with_corrupt_zip_metadata_is_an_artifact_error(tmp_path, field, value):
    import torch
    from neuroedge.checkpoints import load_checkpoint, save_checkpoint

    path = save_checkpoint(tmp_path / "c.pt", {"w": torch.ones(3), "epoch": 1})
    raw = bytearray(path.read_bytes())
    at = raw.rindex(b"PK\x06\x07") + 16 if field == "zip64" else raw.index(b"PK\x01\x02") + field
    raw[at : at + len(value)] = value
    path.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="c.pt: not a readable checkpoint"):
        load_checkpoint(path)


def test_deeply_nested_json_line_names_its_line(tmp_path) -> None:
    from neuroedge.jsonl import read_objects

    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"a": 1}) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"rows.jsonl:2: JSON nested too deeply"):
        read_objects(path)


@pytest.mark.parametrize("fmt", ["evt2", "dat"])
def test_streaming_reads_the_header_not_the_whole_file(tmp_path, fmt) -> None:
    from neuroedge.events.core import read_header
    from neuroedge.events.io import stream_events

    path = tmp_path / ("big.raw" if fmt == "evt2" else "big.dat")
    words = np.zeros(2 << 20, "<u4")  # 8 MiB: DAT events at t=0, EVT 2.0 CD events at (0, 0)
    words[0] = 0x80000000 if fmt == "evt2" else 0  # EVT 2.0: a time-high word first
    path.write_bytes(CODECS[fmt].header(SensorSize(64, 64)) + words.tobytes())
    tracemalloc.start()
    try:
        read_header(path)
        next(iter(stream_events(path, chunk_bytes=1 << 12)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, f"{peak} bytes traced reading the header of an 8 MiB file"


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_every_npy_header_version_reads(tmp_path, version) -> None:
    from neuroedge.npyfile import load_npy

    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    with open(tmp_path / "a.npy", "wb") as fh:
        np.lib.format.write_array(fh, array, version=version)
    np.testing.assert_array_equal(load_npy(tmp_path / "a.npy"), array)
