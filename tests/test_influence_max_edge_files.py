"""graph.influence_max edge-list files as tools write them: a header that would shift the
columns (pandas' index column, a field count other than the rows') is refused naming the file,
line and reason; ``undirected=true`` reads one line per undirected edge (nx.write_edgelist) as
both directions, and a file read as directed with no reverse edge gets a note saying so."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from neuroedge.cli import main
from neuroedge.errors import ConfigError
from neuroedge.models.influence_max import experiment as X
from neuroedge.models.influence_max import functional as F
from neuroedge.models.influence_max.data import load_edge_list, reads_as_one_way


def write(tmp_path, text: str, name: str = "edges.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_pandas_index_column_is_refused_not_read_shifted(tmp_path):
    import pandas as pd

    path = tmp_path / "tree.csv"
    pd.DataFrame({"source": [1, 2, 3, 4], "target": [0, 0, 1, 1]}).to_csv(path)
    with pytest.raises(ValueError) as err:
        load_edge_list(path)
    text = str(err.value)
    assert f"edge list {path}: line 1: header ',source,target' has an empty first field" in text
    assert "index=False" in text


@pytest.mark.parametrize(
    "text, match",
    [
        ("u,v\n0,1,0.5\n1,2,0.5\n", r"line 1: header 'u,v' has 2 fields but the edge line 2 has 3"),
        ("a b c d\n0 1 1\n", r"line 1: header 'a b c d' has 4 fields but the edge line 2 has 3"),
        ("# c\n\nu,,v\n0,1\n", r"line 3: header 'u,,v' has 3 fields but the edge line 4 has 2"),
        ("\tsource\ttarget\n0\t1\t2\n", "line 1: header .* has 2 fields but the edge line 2 has 3"),
    ],
)
def test_header_and_rows_of_different_widths_are_refused(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        load_edge_list(write(tmp_path, text))


@pytest.mark.parametrize(
    "text", ["u,v\n0,1\n1,2\n", "u,v,\n0,1,\n1,2,\n", "u,v,\n0,1\n1,2\n", "u v p\n0 1\n1 2\n"]
)
def test_headers_that_match_the_rows_are_skipped(tmp_path, text):
    g = load_edge_list(write(tmp_path, text))
    assert g.src.tolist() == [0, 1] and g.dst.tolist() == [1, 2]


def test_line_numbers_count_only_cr_and_lf(tmp_path):
    with pytest.raises(ValueError, match="line 3 repeats the edge 0 -> 1 of line 1"):
        load_edge_list(write(tmp_path, "0 1\x0c\n1 2\x0b\n0 1\n"))


def karate_file(tmp_path):
    path = tmp_path / "karate.txt"
    nx.write_edgelist(nx.karate_club_graph(), path, data=False)
    return path


def test_undirected_reads_each_line_both_ways(tmp_path):
    path = karate_file(tmp_path)
    one_way, both = load_edge_list(path), load_edge_list(path, undirected=True)
    assert len(one_way.src) == 78 and reads_as_one_way(one_way)
    built_in = F.from_networkx(nx.karate_club_graph())
    assert len(both.src) == len(built_in.src) == 156 and not reads_as_one_way(both)

    def triples(g):
        return sorted(zip(g.src.tolist(), g.dst.tolist(), np.round(g.prob, 9).tolist()))

    assert triples(both) == triples(built_in)  # weighted cascade on both directions
    with_p = load_edge_list(write(tmp_path, "0 1 0.3\n1 2 0.6\n"), undirected=True)
    assert sorted(zip(with_p.src.tolist(), with_p.dst.tolist(), with_p.prob.tolist())) == [
        (0, 1, 0.3),
        (1, 0, 0.3),
        (1, 2, 0.6),
        (2, 1, 0.6),
    ]


def test_undirected_refuses_a_file_with_both_directions(tmp_path):
    path = write(tmp_path, "0 1\n1 2\n1 0\n")
    with pytest.raises(ValueError, match=r"line 3 \(1 -> 0\) is the reverse of line 1 \(0 -> 1\)"):
        load_edge_list(path, undirected=True)


@pytest.mark.parametrize("value", ["yes", "1", '"true"'])
def test_undirected_must_be_true_or_false(tmp_path, value, capsys):
    path = write(tmp_path, "0 1\n1 2\n")
    args = ["bench", "graph.influence_max", "--out", str(tmp_path / "out")]
    assert main([*args, "--config", "graphs=[]", f"edges={path}", f"undirected={value}"]) == 2
    err = capsys.readouterr().err
    assert "undirected=" in err and "expected true or false" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="expected true or false"):
        X.load_all({**X.DEFAULTS, "graphs": [], "edges": str(path), "undirected": "yes"})


def test_a_one_way_file_gets_a_note_naming_undirected(tmp_path):
    path = karate_file(tmp_path)
    small = {"graphs": [], "edges": str(path), "horizon": 4, "eval_worlds": 4, "worlds": 4}
    history = str(tmp_path / "h.sqlite")
    doc = X.bench(str(tmp_path / "a"), config=small, history=history)
    notes = {row["variant"]: row.get("notes", []) for row in doc["rows"]}
    ucb = notes[f"{path}/ucb"]
    assert len(ucb) == 2 and "read as directed (78 one-way edges" in ucb[1]
    assert "undirected=true" in ucb[1]
    assert all(len(notes[f"{path}/{p}"]) == 1 for p in ("ucb_rho0", "random"))
    assert "undirected=true" in (tmp_path / "a" / "report.md").read_text()
    doc = X.bench(str(tmp_path / "b"), config={**small, "undirected": True}, history=history)
    assert doc["results"][str(path)]["edges"] == 156
    assert all(len(row["notes"]) == 1 for row in doc["rows"])
    both = write(tmp_path, "0 1\n1 0\n1 2\n")  # one reverse pair: read as written, no note
    assert X.one_way_note(str(both), load_edge_list(both), X.DEFAULTS) is None
    assert X.one_way_note("random20", F.random_graph(20, 0), X.DEFAULTS) is None


@pytest.mark.parametrize("line", ["0,,1", ",0,1", "0, ,1,0.5"])
def test_an_empty_field_inside_an_edge_line_is_refused_not_skipped(tmp_path, line) -> None:
    """Dropping the empty field read the next column in its place (0,,1 as the edge 0 -> 1)."""
    from neuroedge.models.influence_max.data import load_edge_list

    path = tmp_path / "e.csv"
    path.write_text(f"1,2\n{line}\n")
    with pytest.raises(ValueError, match=r"line 2: .* has an empty field \(column \d, 0-based\)"):
        load_edge_list(path)
    path.write_text("0,1,\n1,2,\n")  # a trailing comma is no column
    assert load_edge_list(path).src.tolist() == [0, 1]


def test_networkx_default_edge_data_is_refused_with_the_writer_that_works(tmp_path) -> None:
    """nx.write_edgelist writes each edge's attribute dict unless data=False ('0 1 {}' read
    as a probability '{}'); the refusal names the call that writes a file the reader takes."""
    graph = nx.karate_club_graph()
    nx.write_edgelist(graph, tmp_path / "default.txt")
    with pytest.raises(ValueError, match=r"line 1: .* attribute dict.*data=False"):
        load_edge_list(tmp_path / "default.txt", undirected=True)
    nx.write_edgelist(graph, tmp_path / "plain.txt", data=False)
    assert len(load_edge_list(tmp_path / "plain.txt", undirected=True).src) == 156
