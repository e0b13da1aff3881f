"""The command line: every --config group counts and a key given twice is refused; a broken
plugin is reported, not a traceback; a reader that leaves the pipe ends the run quietly."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from neuroedge import registry
from neuroedge.cli import main, parser
from neuroedge.cli_args import config_items, option_items
from neuroedge.errors import ConfigError, NeuroedgeError


@pytest.mark.parametrize("command", ["train", "export", "bench", "run"])
def test_every_config_group_is_kept(command: str) -> None:
    extra = ["--out", "r"] if command == "bench" else []
    args = parser().parse_args(
        [command, "uq.last_layer", *extra, "--config", "seeds=[2,3,4]", "--config", "workers=1"]
    )
    assert config_items(args.config) == {"seeds": [2, 3, 4], "workers": 1}


def test_a_misspelt_key_in_an_earlier_config_group_is_refused(capsys) -> None:
    args = ["run", "snn.lif_convnet", "--backend", "null", "--config", "bogus=1"]
    assert main([*args, "--config", "smoke=true"]) == 2
    assert "does not read the config key 'bogus'" in capsys.readouterr().err


def test_a_config_key_given_twice_is_refused(capsys) -> None:
    with pytest.raises(ConfigError, match=r"--config seed is given twice: '1' and '2'"):
        config_items(["seed=1", "seed=2"])
    assert config_items(["seed=1", "seed=1"]) == {"seed": 1}  # the same value: harmless
    args = ["run", "snn.lif_convnet", "--backend", "null", "--config", "smoke=true", "seed=1"]
    assert main([*args, "--config", "seed=2"]) == 2
    assert "--config seed is given twice: '1' and '2'" in capsys.readouterr().err


def test_a_capitalised_flag_names_the_lowercase_spelling(capsys) -> None:
    assert main(["run", "snn.lif_convnet", "--backend", "null", "--config", "smoke=True"]) == 2
    assert "on the command line smoke=true, lowercase as in JSON" in capsys.readouterr().err


def test_an_empty_option_value_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"--option path='': an empty path \(an unset shell"):
        option_items(["path="])  # was PosixPath('.') has an empty name, after the build


def test_an_empty_onnx_path_is_refused_by_name(tmp_path) -> None:
    from neuroedge.export.onnx import state_file

    with pytest.raises(ConfigError, match=r"ONNX path '': an empty path \(an unset shell"):
        state_file("")


def _broken(wanted: str, name: str, value: str):
    fake = SimpleNamespace(name=name, value=value)
    return lambda group: [fake] if group == wanted else []


def test_doctor_reports_a_broken_backend_plugin(monkeypatch, capsys) -> None:
    monkeypatch.setattr(
        registry, "entry_points", _broken(registry.BACKEND_GROUP, "mine", "nosuchmod_xyz:B")
    )
    with pytest.raises(NeuroedgeError, match=r"mine = nosuchmod_xyz:B \(entry point group "):
        registry.get_backend("mine")
    assert main(["doctor"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("mine"))
    assert "missing" in line and "No module named 'nosuchmod_xyz'" in line
    assert registry.available_backends()["null"].ok  # the others are still probed


def test_list_marks_a_broken_model_plugin(monkeypatch, capsys) -> None:
    monkeypatch.setattr(
        registry, "entry_points", _broken(registry.MODEL_GROUP, "my.model", "nosuchmod_xyz:S")
    )
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "snn.lif_convnet" in out
    assert "my.model" in out and "broken" in out and "nosuchmod_xyz" in out
    assert main(["info", "my.model"]) == 2
    assert "model plugin my.model = nosuchmod_xyz:S" in capsys.readouterr().err


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_a_closed_pipe_ends_list_quietly(tmp_path, unbuffered: bool) -> None:
    """Buffered (a user's stdout; print succeeds, the flush at the end raises) and
    unbuffered (PYTHONUNBUFFERED=1, set on some machines: print itself raises)."""
    code = "import sys; from neuroedge.cli import main; sys.exit(main(['list']))"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    proc.stdout.close()  # the reader leaves before the first line, as `| head -0` would
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err.decode()  # 128 + SIGPIPE, as Unix tools
    assert err.decode() == ""


def test_list_started_with_stdout_closed_ends_with_0(tmp_path) -> None:
    """`neuroedge list >&-`: Python's sys.stdout is None (print skips); the flush at the end
    raised AttributeError (rc 1, a traceback)."""
    shell = '"$0" -m neuroedge.cli list >&-'
    proc = subprocess.run(
        ["sh", "-c", shell, sys.executable], capture_output=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr


def test_a_broken_pipe_elsewhere_is_still_an_error_line(monkeypatch, capsys) -> None:
    import neuroedge.cli as cli

    def lost(args) -> int:
        raise BrokenPipeError(32, "Broken pipe (a socket to a model's endpoint)")

    monkeypatch.setattr(cli, "cmd_doctor", lost)
    assert main(["doctor"]) == 2
    assert "error: [Errno 32] Broken pipe (a socket" in capsys.readouterr().err


def test_the_precision_bench_reads_every_config_group(monkeypatch, capsys) -> None:
    from neuroedge.bench import precision

    seen: dict[str, object] = {}

    def compare(model, calibration, samples, config, repeats):  # stops before any build
        seen.update(config)
        raise ConfigError("stop")

    monkeypatch.setattr(precision, "compare_precisions", compare)
    assert precision.main(["--config", "smoke=true", "--config", "seed=3"]) == 2
    assert seen == {"smoke": True, "seed": 3}


def test_the_precision_bench_offers_train_if_missing_only_where_the_build_reads_it() -> None:
    """ttt.linear_attention's build loads no checkpoint: its hint offered a key it refuses."""
    from neuroedge.bench.precision import _untrained_hint
    from neuroedge.registry import get_model

    for name in ("snn.lif_convnet", "ttt.linear_attention"):
        reads = "train_if_missing" in (get_model(name).valid_config_keys("build") or set())
        assert ("train_if_missing=true" in _untrained_hint(name)) is reads, name
    assert "loads no checkpoint" in _untrained_hint("ttt.linear_attention")
    assert "--config checkpoint=PATH" in _untrained_hint("event.bivision")  # it loads one


def test_the_run_history_refuses_an_empty_home(monkeypatch) -> None:
    from neuroedge.bench.history import default_path

    monkeypatch.delenv("NEUROEDGE_HISTORY", raising=False)
    monkeypatch.setenv("NEUROEDGE_HOME", "")
    with pytest.raises(ConfigError, match="NEUROEDGE_HOME='': an empty path"):
        default_path()  # Path("") / "history.sqlite" was a file in the current folder


def test_list_marks_a_model_plugin_whose_spec_refuses_its_fields(
    monkeypatch, capsys, tmp_path
) -> None:
    (tmp_path / "badspec_xyz.py").write_text(
        "from neuroedge.types import ModelSpec\n"
        "SPEC = ModelSpec(name='my.plugin', family='quantum', summary='s', inputs=(), "
        "outputs=(), build=None, example=None)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        registry, "entry_points", _broken(registry.MODEL_GROUP, "my.plugin", "badspec_xyz:SPEC")
    )
    assert main(["list"]) == 0  # a ValueError while the module imports was a traceback
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("my.plugin"))
    assert "broken" in line and "family 'quantum'" in line


def test_the_cifar_recipe_reads_every_config_group(monkeypatch) -> None:
    from neuroedge.models.unisparse import recipe

    seen: dict[str, object] = {}

    def run(data, out, overrides, history):  # stops before any data is read
        seen.update(overrides)
        raise ConfigError("stop")

    monkeypatch.setattr(recipe, "run_recipe", run)
    args = ["--data", "d", "--out", "o", "--config", "epochs=1", "--config", "batch=8"]
    assert recipe.main(args) == 2 and seen == {"epochs": 1, "batch": 8}
    assert recipe.main([*args, "--config", "batch=16"]) == 2  # given twice: refused
    assert seen == {"epochs": 1, "batch": 8}
