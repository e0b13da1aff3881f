"""graph.influence_max limits: the dense reachability's memory (bench and run), quoted and
non-ASCII edge-list fields, and horizons keys that name no graph."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.influence_max import experiment as X
from neuroedge.models.influence_max import functional as F
from neuroedge.models.influence_max.data import load_edge_list
from neuroedge.models.influence_max.spec import build


def _ring(tmp_path, n: int):
    path = tmp_path / f"ring{n}.csv"
    path.write_text("".join(f"{i},{(i + 1) % n},0.1\n" for i in range(n)))
    return path


def _no_worlds(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("worlds were drawn before the memory check")

    monkeypatch.setattr(F.Worlds, "draw", refuse)


def test_bench_refuses_a_graph_whose_reach_would_not_fit(tmp_path, monkeypatch) -> None:
    _no_worlds(monkeypatch)
    cfg = {**X.DEFAULTS, "graphs": [], "edges": str(_ring(tmp_path, 3000))}
    with pytest.raises(ConfigError) as err:
        X.bench(str(tmp_path / "out"), config=cfg)
    text = str(err.value)
    assert "ring3000.csv" in text and "n=3000" in text
    assert "worlds=200 and eval_worlds=2000" in text
    assert "234.7 GiB, above the 4 GiB cap" in text and "lower worlds and eval_worlds" in text


def test_bench_memory_estimate_is_the_documented_one(tmp_path) -> None:
    assert F.reach_peak_bytes(77, 2000) == 77 * 77 * 14 * 2000
    assert F.reach_peak_bytes(77, 200, 2000) == 77 * 77 * (14 * 200 + 2000)
    graphs = X.load_all({**X.DEFAULTS, "graphs": [], "edges": str(_ring(tmp_path, 300))})
    assert list(graphs.values())[0].n == 300  # 300 nodes: about 2.3 GiB, under the cap


def test_run_oracle_refuses_before_drawing_worlds(monkeypatch) -> None:
    _no_worlds(monkeypatch)
    src = np.arange(3000)
    oracle = build({}).fn
    with pytest.raises(ConfigError, match=r"n=3000 nodes with worlds=200: .* 23\.5 GiB"):
        oracle(src, (src + 1) % 3000, np.full(3000, 0.1))


def test_quoted_numeric_first_line_is_an_edge_not_a_header(tmp_path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('"0","1","0.5"\n"1","2","0.5"\n"2","0","0.5"\n')
    g = load_edge_list(path)
    assert g.src.tolist() == [0, 1, 2] and g.dst.tolist() == [1, 2, 0]
    path.write_text('"u","v"\n0,1\n1,0\n')
    assert load_edge_list(path).src.tolist() == [0, 1]


@pytest.mark.parametrize(
    "text, match",
    [
        ("0,1_0\n1,0\n", r"line 1: target '1_0' is not an integer node id"),
        ("0,\u0662\n1,0\n", r"line 1: target '\u0662' is not an integer node id"),
        ("0,1,0_5\n1,0,0.5\n", r"line 1: probability '0_5' is not a number"),
        ("0,1,\u0660.5\n1,0,0.5\n", r"line 1: probability '\u0660\.5' is not a number"),
    ],
)
def test_underscored_and_non_ascii_numbers_are_refused(tmp_path, text, match) -> None:
    path = tmp_path / "e.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        load_edge_list(path)


def test_horizons_keys_must_name_a_graph_of_the_run(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"'typo' names no graph .* random20, karate, lesmis"):
        X.load_all({**X.DEFAULTS, "horizons": {"typo": 3}})
    edges = str(_ring(tmp_path, 5))
    cfg = {**X.DEFAULTS, "graphs": ["karate"], "edges": edges, "horizons": {edges: 7}}
    assert set(X.load_all(cfg)) == {"karate", edges}
    assert set(X.load_all({**X.DEFAULTS, "graphs": ["karate"]})) == {"karate"}  # default ok
