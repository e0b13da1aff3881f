"""apr.conrad: the generated repository, the shape library, the sandbox, exemplar mining,
the repair pass, the experiment and its claims, the registered program and the command line."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import numpy as np
import pytest

from neuroedge.models.conrad import mining
from neuroedge.models.conrad import operators as ops
from neuroedge.models.conrad.corpus import FAMILIES, generate
from neuroedge.models.conrad.protocol import ConradError, Exemplar, Plan, Verdict
from neuroedge.models.conrad.repair import ScriptedRepairer, repair_once
from neuroedge.models.conrad.sandbox import Outcome, Sandbox, all_pass, diagnose

FIX_SHAPES = {
    "off_by_one": ("slice_bound", ("+1",)),
    "inclusive_filter": ("flip_compare", ("Lt->LtE",)),
    "none_guard": ("none_guard", ("param0", "param1")),
    "precedence": ("swap_merge", ()),
    "unit_factor": ("scale_constant", ("x10",)),
    "stale_key": ("add_key_param", ("param2",)),
    "boundary": ("flip_compare", ("Lt->LtE",)),
}


@pytest.fixture(scope="module")
def corpus():
    return generate(3, targets=7)


def test_every_function_is_canonical_and_its_fix_shape_is_recovered(corpus) -> None:
    assert set(FIX_SHAPES) == set(FAMILIES)
    for f in corpus.functions:
        assert ast.unparse(ast.parse(f.fixed)) == f.fixed, f.name
        fix = ops.classify_fix(f.buggy, f.fixed)
        assert fix is not None and (fix.shape, fix.params) == FIX_SHAPES[f.family], f.name
    assert sorted(corpus.function(n).family for n in corpus.targets) == sorted(FAMILIES)
    assert not set(corpus.targets) & set(corpus.history)
    assert len(corpus.targets) + len(corpus.history) == len(corpus.functions) == 70


def test_each_buggy_function_fails_its_own_test_only(corpus) -> None:
    with Sandbox(corpus.files()) as box:
        assert all_pass(box.run()) and len(box.run()) == 70
    with Sandbox(corpus.files(buggy=corpus.history)) as box:
        failing = {o.test for o in box.run() if not o.ok}
    assert failing == {corpus.function(n).test_id for n in corpus.history}


def test_classify_fix_refuses_a_fix_of_two_edits() -> None:
    buggy = "def f(xs, n):\n    return xs[:n - 1] if n < 3 else xs"
    fixed = "def f(xs, n):\n    return xs[:n] if n <= 3 else xs"
    assert ops.classify_fix(buggy, fixed) is None
    assert ops.classify_fix(buggy, "def f(xs, n):\n    return xs[:n] if n < 3 else xs")


def test_candidates_cover_the_library_and_name_bad_input() -> None:
    src = (
        "def g(a, b, store):\n"
        "    key = (a,)\n"
        "    if key not in store:\n"
        "        store[key] = max(a, b) * 100\n"
        "    return {**store, **{'k': a}}[key][:b]"
    )
    shapes = {c.shape for c in ops.candidates(src)}
    assert shapes == set(ops.SHAPES) - {"flip_compare"}
    assert all(ops.parse_function(c.source) for c in ops.candidates(src))
    with pytest.raises(ValueError, match="expected one function definition"):
        ops.candidates("x = 1")
    with pytest.raises(ValueError, match="does not parse: line 1"):
        ops.candidates("def (:")
    # CPython's parser runs out of stack (MemoryError) or recursion on deep nesting, and a
    # tree it does build can be too deep for copy.deepcopy and ast.unparse
    with pytest.raises(ValueError, match="nests too deeply .* to parse .MemoryError"):
        ops.parse_function("def f(x):\n    return " + "-" * 200_000 + "x\n")
    with pytest.raises(ValueError, match="nests 404 syntax levels deep; at most 100"):
        ops.parse_function("def f(x):\n    return " + "-" * 400 + "x\n")
    with pytest.raises(ValueError, match="unknown shapes"):
        ops.candidates(src, ("rewrite_all",))


def test_every_edit_keeps_the_functions_comments_and_layout() -> None:
    src = (
        "def g(a, b, store):\n"
        "    # build the key\n"
        "    key = (a,)  # one part\n"
        "    if key not in store:\n"
        "        store[key] = max(a,   b) * 100   # scaled\n"
        "    return {**store, **{'k': a}}[key][:b]"
    )
    cands = ops.candidates(src)
    assert {c.shape for c in cands} == set(ops.SHAPES) - {"flip_compare"}
    for c in cands:
        assert all(x in c.source for x in ("# build the key", "# one part", "# scaled")), c
        removed = [d for d in difflib.ndiff(src.splitlines(), c.source.splitlines()) if d[0] == "-"]
        added = [d for d in difflib.ndiff(src.splitlines(), c.source.splitlines()) if d[0] == "+"]
        assert len(removed) <= 1 and len(added) <= 2, c


def test_sandbox_edits_match_once_and_restore(tmp_path: Path) -> None:
    files = {"m.py": "X = 1\nY = 1\n", "tests/test_m.py": "from m import X\n\ndef test_x():\n"}
    files["tests/test_m.py"] += "    got, want = X, 2\n    assert got == want, (got, want)\n"
    with Sandbox(files) as box:
        with pytest.raises(ConradError, match="m.py: the SEARCH block .* matches 2 times"):
            box.edit("m.py", "= 1", "= 2")
        with pytest.raises(ConradError, match="matches 0 times"):
            box.edit("m.py", "Z = 1", "Z = 2")
        with pytest.raises(ConradError, match="nope.py: no such file"):
            box.read("nope.py")
        (before,) = box.run(["tests/test_m.py::test_x"])
        with box.patched("m.py", "X = 1", "X = 2"):
            (during,) = box.run(["tests/test_m.py::test_x"])
        (after,) = box.run(["tests/test_m.py::test_x"])  # restored within the same second
        root = box.root
    assert not before.ok and during.ok and not after.ok
    assert diagnose(before) == "wrong_value" and not root.exists()


def test_runner_keeps_what_tests_print_apart_and_skips_non_callables() -> None:
    files = {
        "tests/test_noisy.py": "import sys\ntest_data = [1]\n\ndef test_prints():\n"
        "    print('{not a record')\n    sys.stdout.write('@@conrad\\n')\n"
    }
    with Sandbox(files) as box:
        assert box.run() == [Outcome("tests/test_noisy.py::test_prints", True)]


def test_sandbox_reports_timeouts_and_broken_imports() -> None:
    files = {"tests/test_loop.py": "def test_forever():\n    while True:\n        pass\n"}
    with Sandbox(files, timeout=1.0) as box:
        (out,) = box.run(["tests/test_loop.py::test_forever"])
    assert not out.ok and out.exc == "Timeout"
    with Sandbox({"tests/test_bad.py": "import missing_module\n"}) as box:
        outs = box.run()
    assert outs[0].exc == "ModuleNotFoundError" and not all_pass(outs)


@pytest.mark.parametrize(
    ("outcome", "symptom"),
    [
        (
            Outcome("t", False, "AttributeError", "'NoneType' object has no attribute 'x'"),
            "none_input",
        ),
        (Outcome("t", False, "AssertionError", "([1, 2], [1, 2, 3])"), "one_item_short"),
        (Outcome("t", False, "AssertionError", "(25.0, 2.5)"), "power_of_ten_scale"),
        (Outcome("t", False, "AssertionError", "(2.6, 2.5)"), "wrong_value"),
        (Outcome("t", False, "AssertionError", "('a-1', 'a-2', 'a-1')"), "stale_result"),
        (Outcome("t", False, "AssertionError", "(False, True)"), "predicate_flipped"),
        (Outcome("t", False, "AssertionError", "({'a': 0}, {'a': 1})"), "wrong_mapping_values"),
        (Outcome("t", False, "AssertionError", "values differ"), "unknown"),
        (Outcome("t", False, "KeyError", "'k'"), "exception:KeyError"),
        (Outcome("t", True), "passed"),
    ],
)
def test_diagnose_reads_the_symptom(outcome: Outcome, symptom: str) -> None:
    assert diagnose(outcome) == symptom


def _exemplar(name: str, issue: str, symptom: str) -> Exemplar:
    src = f"def {name}(xs, n):\n    return xs[:n - 1]"
    return Exemplar(name, "m.py", issue, src, src.replace("n - 1", "n"), symptom, "off_by_one")


def test_guardian_refuses_a_lexically_closer_exemplar_with_another_symptom() -> None:
    close = _exemplar("a", "order dashboard order records crash order", "none_input")
    far = _exemplar("b", "listing returns one item too few", "one_item_short")
    issue = "the order dashboard shows order records, one is missing"
    assert mining.retrieve(issue, [far, close], 2)[0] is close
    ex, verdicts, calls = mining.choose_exemplar(issue, "one_item_short", [far, close], 2)
    assert ex is far and [v.label for _, v in verdicts] == ["harmful", "useful"] and calls == 3
    ex, verdicts, calls = mining.choose_exemplar(issue, "one_item_short", [far, close], 2, False)
    assert ex is close and verdicts == [] and calls == 1
    assert mining.guard("unknown", far).label == "not_useful"
    with pytest.raises(ValueError, match="verdict 'maybe'"):
        Verdict("maybe", 0.0, "")


def test_distilled_plan_carries_the_fix_shape_into_every_stage() -> None:
    plan = mining.distill(_exemplar("take", "x", "one_item_short"))
    assert (plan.shape, plan.params, plan.site_kind) == ("slice_bound", ("+1",), "Slice")
    assert len(plan.steps) == 4 and "slice_bound['+1']" in plan.steps[3]


def test_scripted_repairer_is_greedy_at_zero_and_samples_otherwise() -> None:
    greedy = ScriptedRepairer(0)
    assert [greedy.choose([0.1, 0.9, 0.3]) for _ in range(5)] == [1] * 5
    assert greedy.calls == 5
    warm = ScriptedRepairer(0, temperature=5.0)
    assert len({warm.choose([0.1, 0.2, 0.15]) for _ in range(50)}) == 3
    with pytest.raises(ConradError, match="temperature must be >= 0"):
        ScriptedRepairer(0, -1.0)


def test_a_right_plan_repairs_what_the_baseline_misses(corpus) -> None:
    name = next(n for n in corpus.targets if corpus.function(n).family == "unit_factor")
    f = corpus.function(name)
    files = corpus.files(buggy=(name,))
    sources = sorted(p for p in files if not p.startswith("tests/"))
    plan = Plan("x", "scale_constant", ("x10",), "Constant")
    with Sandbox(files) as box:
        a = repair_once(f.issue, box, sources, ScriptedRepairer(0), plan)
        with box.patched(a.path, a.search, a.replace):
            fixed = all_pass(box.run())
        shapes = {repair_once(f.issue, box, sources, ScriptedRepairer(s)).shape for s in range(12)}
    assert (a.path, a.function, a.shape, a.calls) == (f.path, name, "scale_constant", 4)
    assert fixed and len(shapes) > 1


def test_experiment_rows_claims_and_plot(tmp_path: Path) -> None:
    from neuroedge.models.conrad.claims import bench

    doc = bench(str(tmp_path), config={"seeds": [1], "targets": 7, "samples": 3})
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    assert {"baseline", "conrad", "no_guardian", "forward", "conrad@seed=1"} <= set(rows)
    assert rows["baseline"]["model_calls"]["value"] == 4
    assert rows["forward"]["model_calls"]["value"] == 12
    assert rows["conrad"]["pass_at_1"]["value"] >= rows["conrad"]["plan_shape_right"]["value"] - 0.3
    issues = doc["results"]["seeds"][1]["issues"]
    assert all(i["conrad"]["patch"].startswith("--- a/") for i in issues if i["conrad"]["passed"])
    assert set(doc["claim"]) >= {"C1_gain_over_baseline", "C2_guardian_helps", "C3_calls"}
    assert doc["claim"]["holds"] is None  # one seed of 7 issues decides nothing
    assert (tmp_path / "conrad.png").stat().st_size > 0
    md = (tmp_path / "report.md").read_text()
    assert "## Claims over seeds [1]" in md
    assert md.count("not measured (read from 7 open issues per seed; needs targets >= 10)") == 3


def test_claims_meet_their_bounds_exactly_despite_float_rounding() -> None:
    from neuroedge.models.conrad.claims import claims

    def seed(base: float, gain: float, calls: dict[str, float]) -> dict:
        p = {"baseline": base, "conrad": base + gain, "no_guardian": base + gain, "forward": 0}
        return {"summary": {a: {"pass_at_1": p[a], "model_calls": calls[a]} for a in p}}

    calls = {"baseline": 0.1 * 3, "conrad": 4.3, "no_guardian": 5.0, "forward": 2.4}
    runs = {0: seed(0.2, 0.1, calls), 1: seed(0.15, 0.1, calls)}
    runs[0]["summary"]["conrad"]["pass_at_1"] = 0.3  # 0.3 - 0.2 < 0.1 in floats
    got = claims(runs, 20)
    assert got["C1_gain_over_baseline"]["holds"] and got["C3_calls"]["holds"]
    assert got["C2_guardian_helps"]["holds"] is False  # conrad - no_guardian ~ 0: no gain
    runs[1]["summary"]["conrad"]["pass_at_1"] = 0.24
    assert claims(runs, 20)["C1_gain_over_baseline"]["holds"] is False


def summaries(gains: list[float], calls: dict[str, float] | None = None) -> dict:
    """Per-seed runs: baseline 0.2, conrad 0.2 + gain, no_guardian 0.2."""
    calls = calls or {"baseline": 4.0, "conrad": 8.0, "no_guardian": 5.0, "forward": 32.0}
    out = {}
    for s, gain in enumerate(gains):
        p = {"baseline": 0.2, "conrad": 0.2 + gain, "no_guardian": 0.2, "forward": 0.3}
        out[s] = {"summary": {a: {"pass_at_1": p[a], "model_calls": calls[a]} for a in p}}
    return out


CLAIMS = ("C1_gain_over_baseline", "C2_guardian_helps", "C3_calls")


@pytest.mark.parametrize(
    ("gains", "targets", "unmeasured", "reason"),
    [
        ([0.8], 1, CLAIMS, "read from 1 open issue per seed; needs targets >= 10"),  # the audit
        ([0.8, 0.8], 9, CLAIMS, "read from 9 open issues per seed; needs targets >= 10"),
        ([0.8], 20, CLAIMS[:2], "1 seed: no paired standard error; needs >= 2 seeds"),
    ],
)
def test_a_claim_read_from_too_few_issues_or_seeds_is_not_measured(
    gains, targets, unmeasured, reason
) -> None:
    from neuroedge.models.conrad.claims import claims

    got = claims(summaries(gains), targets)
    assert got["holds"] is None  # the old code: every claim held on one issue of one seed
    for key in CLAIMS:
        assert got[key]["holds"] is (None if key in unmeasured else True), key
        assert got[key].get("reason") == (reason if key in unmeasured else None), key
    assert got["C1_gain_over_baseline"]["value"] == pytest.approx(0.8)  # still reported


def test_a_mean_gain_within_its_standard_error_does_not_hold() -> None:
    from neuroedge.models.conrad.claims import claims

    got = claims(summaries([0.5, -0.1]), 20)  # mean 0.2 >= 0.1, SE 0.3
    c1 = got["C1_gain_over_baseline"]
    assert c1["value"] == pytest.approx(0.2) and c1["se"] == pytest.approx(0.3)
    assert c1["holds"] is False and got["C2_guardian_helps"]["holds"] is False
    assert claims(summaries([0.5, 0.3]), 10)["holds"] is True


def test_config_is_checked_before_work(tmp_path: Path) -> None:
    from neuroedge.models.conrad.claims import bench

    from neuroedge.errors import ConfigError

    for bad, match in (
        ({"targets": 0}, "targets=0: expected an integer >= 1"),
        ({"targets": True}, "targets=True: expected an integer >= 1"),
        ({"seeds": []}, r"seeds=\[\]"),
        ({"temperature": 0.0}, "temperature=0.0: expected a finite number > 0"),
    ):
        with pytest.raises(ConfigError, match=match):
            bench(str(tmp_path), config=bad)
    with pytest.raises(ConradError, match="unknown config keys"):
        bench(str(tmp_path), config={"samplez": 2})
    with pytest.raises(ValueError, match="targets must be in"):
        generate(0, targets=70)


def test_registered_program_repairs_an_issue_and_names_a_bad_index() -> None:
    from neuroedge.models.conrad.spec import SPEC
    from neuroedge.text_codes import decode_bytes

    program = SPEC.build({"targets": 7})
    out = program.fn(**SPEC.example(0))
    patch = decode_bytes(out["patch"].tobytes(), "patch")
    assert patch.startswith("--- a/") and "+++ b/" in patch
    assert out["model_calls"][0] >= 4 and out["passed"].dtype == np.bool_
    with pytest.raises(ConradError, match=r"issue index 9 outside \[0, 7\)"):
        program.fn(issue=np.asarray([9]))
    with pytest.raises(ConradError, match="method 'oracle'"):
        SPEC.build({"method": "oracle"})


def test_neuroedge_run_prints_the_patch_as_text(capsys) -> None:
    from neuroedge.cli import main

    assert main(["run", "apr.conrad", "--config", "targets=7"]) == 0
    out = capsys.readouterr().out
    assert "patch          shape [4096]" in out and "  text:\n    --- a/" in out
    assert "\n    +++ b/" in out and "passed         shape [1]" in out


def test_staged_repairer_delegates_each_stage_and_counts_its_calls(corpus) -> None:
    from neuroedge.models.conrad.experiment import check_config
    from neuroedge.models.conrad.repair import StagedRepairer

    name = corpus.targets[0]
    f = corpus.function(name)
    files = corpus.files(buggy=(name,))
    sources = sorted(p for p in files if not p.startswith("tests/"))
    locate, edit = ScriptedRepairer(0), ScriptedRepairer(1)
    staged = StagedRepairer(
        {"file_think": locate, "func_think": locate, "edit_think": edit, "patch_think": edit}
    )
    with Sandbox(files) as box:
        a = repair_once(f.issue, box, sources, staged)
    assert staged.calls == a.calls == 4 and locate.calls == 2 and edit.calls == 2
    with pytest.raises(ConradError, match="lm_stages must be a non-empty list"):
        check_config({"lm_stages": ["guess"]})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"timeout_s": 99999999999}, r"timeout_s=99999999999: .* in \(0, 86400\]"),
        ({"timeout_s": 10**400}, r"timeout_s=1000.*: expected a finite number"),  # OverflowError
        ({"seeds": [0, 0]}, r"seeds=\[0, 0\]: a seed is given twice"),  # ran seed 0 once
        ({"seeds": [5], "seed": 7}, r"seed=7 and seeds=\[5\]: give one"),  # seed won
        ({"seeds": [2**32]}, r"seeds=\[4294967296\]: .* not integers in 0\.\.4294967295"),
        ({"endpoint": []}, r"endpoint=\[\]: expected a non-empty string"),  # a scripted run
        ({"llm_model": {}}, r"llm_model=\{\}: expected a non-empty string"),
        ({"endpoint": ""}, r"endpoint='': expected a non-empty string"),
    ],
)
def test_config_values_are_bounded_and_conflicts_refused(config, message) -> None:
    from neuroedge.models.conrad.experiment import check_config

    with pytest.raises(ValueError, match=message):  # ConradError or ConfigError
        check_config(config)


def test_the_bench_refuses_a_huge_timeout_before_any_work(tmp_path: Path, capsys) -> None:
    from neuroedge.cli import main

    out = tmp_path / "r"
    assert main(["bench", "apr.conrad", "--out", str(out), "--config", "timeout_s=99999999999"])
    assert "timeout_s=99999999999: expected a finite number in (0, 86400]" in (
        capsys.readouterr().err
    )  # was an OverflowError traceback after the first seed's corpus
    assert not out.exists()
