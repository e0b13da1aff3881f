"""The command line's exit status and its one-line errors: 2 for bad input (NEUROEDGE_DEBUG=1
raises it with its traceback), 130 for Ctrl-C, 0 for a bench that ran (its claim's verdict
printed); conflicting options refused naming both; empty and folder paths named as given."""

from __future__ import annotations

from pathlib import Path

import pytest
from neuroedge.cli import main
from neuroedge.errors import ConfigError


def test_debug_raises_the_error_with_its_traceback(monkeypatch, capsys) -> None:
    args = ["run", "snn.lif_convnet", "--backend", "null", "--config", "bogus=1"]
    monkeypatch.delenv("NEUROEDGE_DEBUG", raising=False)
    assert main(args) == 2
    assert "does not read the config key 'bogus'" in capsys.readouterr().err
    monkeypatch.setenv("NEUROEDGE_DEBUG", "0")  # off, as unset
    assert main(args) == 2
    monkeypatch.setenv("NEUROEDGE_DEBUG", "1")
    with pytest.raises(ConfigError, match="does not read the config key 'bogus'"):
        main(args)


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys) -> None:
    import neuroedge.cli as cli

    def stopped(args) -> int:
        raise KeyboardInterrupt

    monkeypatch.delenv("NEUROEDGE_DEBUG", raising=False)
    monkeypatch.setattr(cli, "cmd_doctor", stopped)
    assert main(["doctor"]) == 130  # was a KeyboardInterrupt traceback
    assert capsys.readouterr().err.strip() == "neuroedge: interrupted"


def test_the_help_lists_the_exit_codes(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "0 ran" in out and "1 internal error" in out and "2 bad input or refused" in out
    assert "130 interrupted" in out and "NEUROEDGE_DEBUG=1" in out
    assert "141 the reader of the output left" in out and "143 stopped by SIGTERM" in out


@pytest.mark.parametrize("holds", [True, False])
def test_a_bench_prints_its_claims_verdict_and_exits_0(tmp_path, monkeypatch, capsys, holds):
    from neuroedge.bench.report import build_document
    from neuroedge.models.grad_transformer import experiment

    def bench(out_dir, backends=("host",), config=None, history=None):
        return build_document(experiment.NAME, [], config={}, claim={"holds": holds})

    monkeypatch.setattr(experiment, "bench", bench)
    assert main(["bench", "transfer.grad_transformer", "--out", str(tmp_path / "r")]) == 0
    verdict = "holds" if holds else "NOT met"
    assert f"claim: {verdict} (its parts in report.md)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "model",  # the last three also refuse it in their bench hooks (tests/test_bench_seeds.py)
    [
        "transfer.grad_transformer",
        "causal.cadre",
        "safety.hair_trigger",
        "event.bivision",
        "snn.unisparse",
        "uq.last_layer",
    ],
)
def test_seed_with_seeds_is_refused_naming_both(tmp_path, capsys, model) -> None:
    out = tmp_path / "r"
    assert main(["bench", model, "--out", str(out), "--config", "seeds=[5]", "seed=7"]) == 2
    assert "seed=7 and seeds=[5]: give one" in capsys.readouterr().err  # seeds ran, seed shown
    assert not out.exists()


def test_an_empty_seeds_value_is_refused_not_the_default_list(tmp_path, monkeypatch, capsys):
    from neuroedge.models.grad_transformer import experiment

    def run_seed(cfg):
        pytest.fail("a seed ran: seeds= was read as the default list")

    monkeypatch.setattr(experiment, "run_seed", run_seed)
    out = tmp_path / "r"
    assert main(["bench", "transfer.grad_transformer", "--out", str(out), "--config", "seeds="])
    assert "seeds must be a list of integers, got ''" in capsys.readouterr().err


@pytest.mark.parametrize("other", ["B.pt", "/proc/x/B.pt"])
def test_train_out_with_another_checkpoint_is_refused(tmp_path, monkeypatch, capsys, other):
    monkeypatch.chdir(tmp_path)
    args = ["train", "physics.meshft", "--out", "A.pt", "--config", f"checkpoint={other}"]
    assert main(args) == 2  # only A.pt was written; /proc/x/B.pt was not even checked
    err = capsys.readouterr().err
    assert f"--out A.pt and --config checkpoint={other}: two destinations" in err
    assert not list(tmp_path.iterdir())


def test_train_out_and_the_same_checkpoint_agree(tmp_path, monkeypatch) -> None:
    from neuroedge.cli import _check_train_destination
    from neuroedge.registry import get_model

    monkeypatch.chdir(tmp_path)
    spec = get_model("physics.meshft")
    _check_train_destination(spec, {"checkpoint": str(tmp_path / "A.pt")}, "A.pt")
    _check_train_destination(spec, {}, "A.pt")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--input", ""], "--input='': an empty path"),  # was reported as '.'
        (["--events", ""], "--events='': an empty path"),
        (["--events", "FOLDER"], "is a directory, not an event recording file"),
    ],
)
def test_run_names_an_empty_or_folder_path_as_given(tmp_path, capsys, extra, message) -> None:
    extra = [str(tmp_path) if e == "FOLDER" else e for e in extra]
    assert main(["run", "event.bivision", "--config", "smoke=true", *extra]) == 2
    assert message in capsys.readouterr().err


def test_nir_names_a_folder_an_empty_path_and_a_negative_seed(tmp_path: Path, capsys) -> None:
    assert main(["nir", str(tmp_path)]) == 2
    assert f"{tmp_path}: is a directory, not a NIR file" in capsys.readouterr().err
    assert main(["nir", ""]) == 2
    assert "NIR file='': an empty path" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["nir", "x.nir", "--seed", "-1"])  # numpy's message, without the flag, before
    assert exit_.value.code == 2
    assert "argument --seed: expected an integer in [0, 2**32), got -1" in capsys.readouterr().err


def test_run_says_when_its_weights_are_untrained(capsys) -> None:
    args = ["run", "snn.lif_convnet", "--repeats", "1", "--config", "train_if_missing=false"]
    assert main(args) == 0  # no checkpoint in the test home: random weights, as bench notes
    assert "weights: untrained (random initialisation)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "sig, code, line", [("SIGTERM", 143, "terminated (SIGTERM)"), ("SIGINT", 130, "interrupted")]
)
@pytest.mark.parametrize("lost", ["swallowed", "turned into another error"])
def test_a_stop_signal_native_code_lost_still_stops_the_command(
    monkeypatch, capsys, sig, code, line, lost
) -> None:
    """numba's compiler, torch's exporter or an extension's import can print the signal's
    exception as ignored (the command then ended 0) or turn it into another error (exit 1,
    a long traceback): the command still ends with the signal's status and one line."""
    import signal
    import threading

    import neuroedge.cli as cli

    def work(args) -> int:
        try:
            # to the main thread itself: os.kill lets the kernel pick any thread (torch's
            # OpenMP workers under make test), and the handler then ran after this block
            signal.pthread_kill(threading.main_thread().ident, getattr(signal, sig))  # raises...
            signal.pthread_sigmask(signal.SIG_BLOCK, [])  # (lets it run)
        except BaseException:  # ...and native code loses it
            if lost != "swallowed":
                raise RuntimeError("no compiled object yet") from None
        return 0

    monkeypatch.delenv("NEUROEDGE_DEBUG", raising=False)
    monkeypatch.setattr(cli, "cmd_doctor", work)
    # Python's own Ctrl-C handler, as in a terminal: a shell starts a background job (`make
    # test &`, nohup) with SIGINT ignored, and then no SIGINT reaches the command at all
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        status = main(["doctor"])
    finally:
        signal.signal(signal.SIGINT, before)
    assert status == code
    assert capsys.readouterr().err.strip() == f"neuroedge: {line}"
    monkeypatch.setattr(cli, "cmd_doctor", lambda args: 0)
    assert main(["doctor"]) == 0  # the next command in this process is not stopped


def test_a_lost_stop_is_kept_through_a_nested_block(monkeypatch, capsys) -> None:
    """A seed pool opens its own sigterm_exits block inside the command's: a stop lost
    before it must not be forgotten there."""
    import os
    import signal

    import neuroedge.cli as cli
    from neuroedge.signals import sigterm_exits

    def work(args) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])
        except BaseException:
            pass  # lost
        with sigterm_exits():  # the pool's
            pass
        return 0

    monkeypatch.delenv("NEUROEDGE_DEBUG", raising=False)
    monkeypatch.setattr(cli, "cmd_doctor", work)
    assert main(["doctor"]) == 143
    assert capsys.readouterr().err.strip() == "neuroedge: terminated (SIGTERM)"


def test_python_dash_m_entry_points_report_a_lost_stop_too() -> None:
    """stoppable (conrad's and data_parallel's ``python -m``): a stop signal native code
    lost, swallowed or turned into another error, still ends with its status; in a thread of
    a library caller no stop of the main thread's leaks into a success."""
    import os
    import signal
    import threading

    from neuroedge.cli_exit import stoppable

    def lose(turn: bool) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])
        except BaseException:
            if turn:
                raise RuntimeError("initialization failed") from None
        return 0

    assert stoppable(lambda: lose(False)) == 143
    assert stoppable(lambda: lose(True)) == 143
    got: list[int] = []
    worker = threading.Thread(target=lambda: got.append(stoppable(lambda: 0)))
    worker.start()
    worker.join()
    assert got == [0]  # the main thread's stop above is not this thread's command
