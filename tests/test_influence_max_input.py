"""graph.influence_max input checks: edge-list files, bench config, the array oracle, and the
regret_vs_random metric when random's regret is zero."""

from __future__ import annotations

import json

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.influence_max import experiment as X
from neuroedge.models.influence_max.data import check_edges, load_edge_list
from neuroedge.models.influence_max.spec import build


def write(tmp_path, text: str, name: str = "edges.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, match",
    [
        ("0,1\n0,1\n1,2\n", "line 2 repeats the edge 0 -> 1 of line 1"),
        ("# c\n0 1 0.5\n1 2 0.5\n\n0 1 0.3\n", "line 5 repeats the edge 0 -> 1 of line 2"),
        ("O,1\n1,2\n2,0\n", "line 1: source 'O' is not an integer node id"),
        ("0.0,1.0\n1,2\n2,0\n", r"line 1: source '0\.0' is not an integer node id"),
        ("a,b\nc,d\n0,1\n1,0\n", "line 2: source 'c' is not an integer node id"),
        ("u,v\n0,1\nu,v\n1,0\n", "line 3: source 'u' is not an integer node id"),
        ("0;1\n1;2\n", r"line 1 has 1 field, expected 2 \(u v\) or 3 \(u v p\) separated by"),
        ("0 1\n1 2 0.3\n", "line 2 has 3 fields, expected 2 as on the first edge line"),
        ("# only\n\nu v\n", "no edges"),
    ],
)
def test_edge_list_refusals_name_the_line(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        load_edge_list(write(tmp_path, text))


@pytest.mark.parametrize("header", ["u,v,p", "source target weight", "src\tdst", "# x\nu v"])
def test_one_non_numeric_header_line_is_skipped(tmp_path, header):
    g = load_edge_list(write(tmp_path, f"{header}\n0 1\n1 2\n2 0\n"))
    assert g.n == 3 and g.src.tolist() == [0, 1, 2]


def test_huge_node_id_is_refused_without_allocating_the_range(tmp_path):
    path = write(tmp_path, "0 1\n1 1000000000000\n")
    with pytest.raises(ValueError) as err:
        load_edge_list(path)
    text = str(err.value)
    assert "largest id 1000000000000 (line 2)" in text
    assert "only 3 distinct ids appear" in text
    assert "ids [2, 3, 4, 5, 6, 7, 8, 9, 10, 11] and 999999999988 more appear in no edge" in text


def test_id_past_pythons_digit_limit_names_the_file_and_line(tmp_path):
    path = write(tmp_path, "0,1\n1," + "9" * 5000 + "\n")
    with pytest.raises(ValueError, match=r"edges\.csv: line 2: target of 5000 characters is too"):
        load_edge_list(path)


def test_gap_ids_are_listed_exactly(tmp_path):
    with pytest.raises(ValueError, match=r"ids \[0, 3\] appear in no edge"):
        load_edge_list(write(tmp_path, "1 2\n2 4\n"))


def cfg(**over):
    return {**X.DEFAULTS, **over}


@pytest.mark.parametrize(
    "over, error, match",
    [
        ({"edges": 123}, ConfigError, "config edges must be the path .* got 123 \\(int\\)"),
        ({"graphs": ["karat"]}, ConfigError, "'karat' is neither .* random20, karate, lesmis"),
        ({"graphs": 5}, ConfigError, "config graphs must be a list"),
        ({"graphs": ["karate", 3]}, ConfigError, "config graphs must be a list"),
        ({"graphs": []}, ConfigError, "nothing to run"),
        ({"edges": "/nonexistent/e.csv"}, FileNotFoundError, "e.csv does not exist"),
        ({"graphs": ["karate"], "k": 34}, ConfigError, "'karate' has only 34 nodes"),
        ({"graphs": ["karate"], "k": 0}, ConfigError, "k=0: expected an integer >= 1"),
        ({"graphs": ["karate"], "k": 2.0}, ConfigError, "k=2.0: expected an integer >= 1"),
        ({"horizons": 5}, ConfigError, "horizons must map graph names"),
        ({"horizon": 2.5}, ConfigError, "horizon=2.5: expected an integer in 2..1000000"),
        ({"horizon": 0}, ConfigError, "horizon=0"),
        ({"horizons": {"lesmis": 2.5}}, ConfigError, "horizons\\['lesmis'\\]=2.5"),
        ({"worlds": 0}, ConfigError, "worlds=0"),
        ({"eval_worlds": 2.5}, ConfigError, "eval_worlds=2.5"),
        ({"seed": -1}, ConfigError, "seed=-1"),
        ({"rho": -1}, ConfigError, "rho=-1"),
        ({"rho": float("nan")}, ConfigError, "rho=nan"),
    ],
)
def test_bad_bench_config_is_refused_before_any_simulation(over, error, match):
    with pytest.raises(error, match=match):
        X.load_all(cfg(**over))


def test_bad_edges_file_fails_before_the_default_graphs_run(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(X, "run_graph", lambda name, *a: ran.append(name))
    bad = write(tmp_path, "0,1\n0,1\n1,2\n")
    with pytest.raises(ValueError, match="line 2 repeats the edge"):
        X.bench(str(tmp_path / "out"), config={"edges": str(bad)})
    assert ran == []


@pytest.mark.parametrize(
    ("config", "key"),
    [(["horizon=1"], "horizon=1"), (['horizons={"random20": 1}'], "horizons['random20']=1")],
)
def test_a_horizon_of_one_round_is_refused_before_any_policy_runs(
    config, key, tmp_path, monkeypatch, capsys
):
    """horizon=1 ran every policy, then the slope's fit over [T/4, T] (one point) failed."""
    from neuroedge.cli import main

    ran = []
    monkeypatch.setattr(X, "run_graph", lambda name, *a: ran.append(name))
    out = tmp_path / "out"
    args = ["bench", X.NAME, "--out", str(out), "--config", "graphs=random20", *config]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{key}: expected an integer in 2..1000000 (the log-log regret slope" in err
    assert "Traceback" not in err and ran == [] and not out.exists()
    assert X.loglog_slope(np.array([1.0, 3.0])) == pytest.approx(np.log(3) / np.log(2))  # T=2


def test_single_graph_string_is_a_one_element_list(tmp_path):
    path = write(tmp_path, "0 1\n1 2\n2 0\n")
    assert list(X.load_all(cfg(graphs="karate"))) == ["karate"]
    assert list(X.load_all(cfg(graphs=[], edges=str(path)))) == [str(path)]


def test_zero_random_regret_gives_no_nan_and_says_why(tmp_path):
    path = write(tmp_path, "0 1\n1 2\n2 0\n")  # p = 1 cycle: every seed set reaches all
    config = {"graphs": [], "edges": str(path), "horizon": 8, "eval_worlds": 20, "worlds": 10}
    doc = X.bench(str(tmp_path / "out"), config=config, history=str(tmp_path / "h.sqlite"))
    json.loads((tmp_path / "out" / "report.json").read_text(), parse_constant=pytest.fail)
    for row in doc["rows"]:
        assert "regret_vs_random" not in row["metrics"]
        assert "regret_vs_random undefined" in row["rejections"][0]


def test_regret_vs_random_is_the_ratio_when_random_has_regret():
    res = {"n": 3, "edges": 3, "horizon": 4, "best_set": [0], "best_spread": 2.0}
    res["regret"] = {"ucb": [0, 1, 1, 1], "epsilon_greedy": [1, 2, 2, 2], "random": [1, 2, 3, 4]}
    rows = {r.variant: r for r in X.rows_from({"g": res})}
    assert rows["g/ucb"].metrics["regret_vs_random"].value == 0.25
    assert rows["g/random"].rejections == ()


@pytest.mark.parametrize(
    "src, dst, prob, match",
    [
        ([], [], [], "no edges"),
        ([0, 1], [1, 1], [0.5, 0.5], "edge 1: self-loop 1 -> 1"),
        ([0, 0, 1], [1, 1, 0], [0.5, 0.5, 0.5], "edge 1 repeats the edge 0 -> 1 of edge 0"),
        ([0, 1], [1, 10**12], [0.5, 0.5], r"largest id 1000000000000 \(edge 1\)"),
        ([0, -1], [1, 0], [0.5, 0.5], "edge 1: node id -1 is negative"),
        ([0.0, 1.0], [1, 0], [0.5, 0.5], "src must hold integer node ids"),
        ([0, 1], [1, 0], [0.5], "one entry per edge"),
    ],
)
def test_array_oracle_checks_its_edges(src, dst, prob, match):
    oracle = build({"k": 1, "worlds": 10}).fn
    with pytest.raises(ValueError, match=match):
        oracle(src=np.asarray(src), dst=np.asarray(dst, np.int64), prob=np.asarray(prob))


def test_array_oracle_still_answers_good_edges():
    out = build({"k": 1, "worlds": 10}).fn(
        src=np.array([0, 1]), dst=np.array([1, 2]), prob=np.array([1.0, 1.0])
    )
    assert out["seeds"].tolist() == [0] and out["spread"].tolist() == [3.0]
    assert check_edges(np.array([0, 1]), np.array([1, 2]), np.array([1.0, 1.0])) == 3


def test_an_edge_list_that_is_not_utf8_names_the_file_and_line(tmp_path):
    from neuroedge.models.influence_max.data import load_edge_list

    path = tmp_path / "latin1.csv"
    path.write_bytes(b"0,1\n1,2\n# caf\xe9\n")
    with pytest.raises(ValueError, match=r"latin1.csv: line 3: byte b'\\xe9' is not UTF-8"):
        load_edge_list(path)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"horizon": 4}, {"karate": 4, "lesmis": 4}),  # lesmis ran the default 500
        ({"horizon": 4, "horizons": {"lesmis": 6}}, {"karate": 4, "lesmis": 6}),
        ({}, {"karate": X.DEFAULTS["horizon"], "lesmis": 500}),
    ],
)
def test_a_users_horizon_applies_to_every_graph_unless_horizons_names_it(
    config, expected, tmp_path, monkeypatch
):
    """horizon=8 ran karate at 8 and lesmis at the default horizons' 500."""
    from neuroedge.models.influence_max import learner as L

    ran = {}

    def run_online(graph, policy, ref, horizon, seed, learn=True, desc=None):
        ran[desc.split()[0]] = horizon
        return np.arange(1.0, horizon + 1)

    monkeypatch.setattr(L, "run_online", run_online)
    config = {"graphs": ["karate", "lesmis"], "worlds": 4, "eval_worlds": 4, **config}
    doc = X.bench(str(tmp_path / "out"), config=config)
    assert ran == expected
    assert {name: g["horizon"] for name, g in doc["results"].items()} == expected
