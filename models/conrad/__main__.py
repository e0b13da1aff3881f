"""``python -m neuroedge.models.conrad REPO TEST_ID ISSUE``: repair a repository of yours.

REPO is copied to a temporary folder (yours is never written). TEST_ID (``tests/test_x.py::
test_y``, a plain-assert test function) must fail there. Up to ``--samples`` repair passes
(the first greedy, the rest sampled) each propose one edit of one top-level function from
the shape library (``operators``); the first edit that makes TEST_ID pass and keeps every
test of ``tests/test_*.py`` and ``test_*.py`` passing is printed as a unified diff (or
written to ``--out`` atomically).
With ``--history FILE.jsonl`` (one fixed past issue per line: ``issue``, ``path``, ``buggy``
and ``fixed`` function sources, optionally ``symptom``, a ``sandbox.diagnose`` label) the
ConRAD route runs first: retrieval, the guardian, a plan distilled from the chosen fix.
``--model smollm2`` (or a GGUF file / model folder) makes a language model choose at each
stage instead of the scripted repairer (``--decode generate``: it writes the option's number
instead of scoring each option); ``--endpoint URL --llm-model NAME`` a chat LLM on an
OpenAI-compatible server (API key from ``NEUROEDGE_LLM_API_KEY``).
Exit status 0 with a patch, 1 when no pass found one, 2 on bad input, naming it; 141 when
the reader of the output left, 130 / 143 when stopped (Ctrl-C / SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "build", "dist", "tests"}


def source_files(root: Path) -> list[str]:
    """The repository's Python files outside tests (``tests/``, ``test_*.py``)."""
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if SKIP_DIRS & set(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        out.append(rel.as_posix())
    return out


def load_history(path: Path) -> list:
    """Exemplars from a JSONL file; ConradError naming the line and the missing field."""
    from neuroedge.models.conrad.operators import parse_function
    from neuroedge.models.conrad.protocol import ConradError, Exemplar

    from neuroedge.jsonl import read_objects

    try:
        rows = read_objects(path)
    except ValueError as err:
        raise ConradError(f"history {err}") from err
    out = []
    for n, row in rows:
        if not isinstance(row, dict):
            raise ConradError(f"{path}:{n}: expected a JSON object")
        missing = [k for k in ("issue", "path", "buggy", "fixed") if not row.get(k)]
        if missing:
            raise ConradError(f"{path}:{n}: missing {missing}")
        typed = {k: row[k] for k in ("issue", "path", "buggy", "fixed", "symptom") if k in row}
        bad = {k: type(v).__name__ for k, v in typed.items() if not isinstance(v, str)}
        if bad:
            raise ConradError(f"{path}:{n}: fields {bad} must be strings")
        try:
            name = parse_function(row["buggy"]).name
            parse_function(row["fixed"])
        except ValueError as err:
            raise ConradError(f"{path}:{n}: {err}") from err
        symptom = row.get("symptom", "unknown")
        from neuroedge.models.conrad.sandbox import SYMPTOMS

        if symptom not in SYMPTOMS and not re.fullmatch(r"exception:\w+", symptom):
            raise ConradError(
                f"{path}:{n}: symptom {symptom!r} is not a label the sandbox gives; one of "
                f"{', '.join(SYMPTOMS)} or exception:<ErrorName> (leave it out for unknown)"
            )
        out.append(Exemplar(name, row["path"], row["issue"], row["buggy"], row["fixed"], symptom))
    if not out:
        raise ConradError(f"history {path}: no exemplars")
    return out


def model_config(args: argparse.Namespace) -> dict:
    """The stage model the flags name, checked as the bench checks its config."""
    from neuroedge.models.conrad.experiment import check_config

    model = "endpoint" if args.endpoint else args.model
    if args.endpoint and args.model != "scripted":
        from neuroedge.models.conrad.protocol import ConradError

        raise ConradError(f"--endpoint and --model {args.model}: give one stage model")
    cfg = {"model": model}
    if args.decode is not None:  # given: refused unless a local model reads it
        cfg["decode"] = args.decode
    given = {"endpoint": args.endpoint, "llm_model": args.llm_model}
    cfg.update({k: v for k, v in given.items() if v})  # "" is the flags' default: not given
    return check_config(cfg)


def check_flags(args: argparse.Namespace) -> None:
    """Every flag checked before the repository is copied (ConradError naming the flag)."""
    from neuroedge.config_values import integer, number
    from neuroedge.errors import ConfigError
    from neuroedge.models.conrad.protocol import ConradError

    flags = {"--samples": args.samples, "--top-k": args.top_k, "--timeout": args.timeout}
    flags["--temperature"] = args.temperature
    try:
        integer(flags, "--samples", 1)
        integer(flags, "--top-k", 1)
        number(flags, "--timeout", 0.0, open_low=True)
        number(flags, "--temperature", 0.0, open_low=True)
        model_config(args)
    except ConfigError as err:
        raise ConradError(str(err)) from err
    if "::" not in args.test_id:
        raise ConradError(f"test id {args.test_id!r}: expected path::name")
    if args.out:
        from neuroedge.atomic import check_writable

        try:
            check_writable(args.out)
        except (OSError, ValueError) as err:
            raise ConradError(f"--out {args.out}: {err}") from err


def check_test_id(root: Path, test_id: str) -> None:
    """The test file exists in the repository and defines the test function at top level."""
    import ast

    from neuroedge.models.conrad.protocol import ConradError

    rel, name = test_id.split("::", 1)
    path = root / rel
    if not path.is_file():
        raise ConradError(f"test id {test_id!r}: no file {rel} in the repository")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError) as err:
        raise ConradError(f"{rel}: not a readable Python file: {err}") from err
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    if name not in names:
        raise ConradError(
            f"test id {test_id!r}: {rel} defines no top-level function {name!r} "
            f"(its test functions: {[n for n in names if n.startswith('test_')]})"
        )


def repair_repository(args: argparse.Namespace) -> dict:
    from neuroedge.models.conrad import mining
    from neuroedge.models.conrad.experiment import make_model, patch_text, suite_passes
    from neuroedge.models.conrad.protocol import ConradError
    from neuroedge.models.conrad.repair import repair_once
    from neuroedge.models.conrad.sandbox import Sandbox, diagnose

    history = load_history(Path(args.history)) if args.history else []
    with Sandbox(args.repo, args.timeout) as box:
        check_test_id(box.root, args.test_id)
        first = box.run([args.test_id])[0]
        if first.ok:
            raise ConradError(f"{args.test_id} passes already: nothing to repair")
        if first.exc == "RunnerError":
            raise ConradError(f"{args.test_id} did not run: {first.message}")
        symptom, plan, verdicts = diagnose(first), None, []
        if history:
            ex, verdicts, _ = mining.choose_exemplar(args.issue, symptom, history, args.top_k)
            plan = mining.distill(ex) if ex else None
        sources = source_files(box.root)
        if not sources:
            raise ConradError(f"{args.repo}: no Python source files outside tests")
        result = {"symptom": symptom, "plan": plan.steps if plan else None, "patch": ""}
        result["unanswered"] = 0  # passes the model gave no usable answer in
        result["verdicts"] = [(e.name, v.label, v.reason) for e, v in verdicts]
        for k in range(args.samples):
            temperature = 0.0 if k == 0 else args.temperature
            model = make_model(model_config(args), args.seed + 7919 * k, temperature)
            a = repair_once(args.issue, box, sources, model, plan)
            result["unanswered"] += bool(a.unanswered)
            if suite_passes(box, a, [args.test_id]) and suite_passes(box, a):
                result.update(patch=patch_text(box, a), passes=k + 1, function=a.function)
                break
        result.setdefault("passes", args.samples)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    from neuroedge.models.conrad.protocol import ConradError
    from neuroedge.atomic import write_text

    ap = argparse.ArgumentParser(prog="python -m neuroedge.models.conrad", description=__doc__)
    ap.add_argument("repo")
    ap.add_argument("test_id", help="the failing test, path::name")
    ap.add_argument("issue", help="the issue text (localisation reads it)")
    ap.add_argument("--history", default="", help="JSONL of fixed past issues (see above)")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="scripted", help="scripted, smollm2 or a model path")
    ap.add_argument(
        "--decode", choices=("score", "generate"), help="a local model's way (default score)"
    )
    ap.add_argument("--endpoint", default="", help="an OpenAI-compatible base URL (chat LLM)")
    ap.add_argument("--llm-model", default="", help="the model name the endpoint serves")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per test run")
    ap.add_argument("--out", default="", help="write the diff here instead of stdout")
    ap.add_argument("--json", action="store_true", help="print the run summary as JSON")
    args = ap.parse_args(argv)
    try:
        check_flags(args)  # bad flags fail before the repository is copied
        result = repair_repository(args)
    except ConradError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.out and result["patch"]:
        write_text(Path(args.out), result["patch"])
    if args.json:
        print(json.dumps(result, indent=2))
    elif not args.out:
        none = f"no patch found in {result['passes']} passes"
        if result["unanswered"]:
            none += f" ({result['unanswered']} without a usable model answer)"
        print(result["patch"] or none, end="\n")
    return 0 if result["patch"] else 1


if __name__ == "__main__":
    from neuroedge.cli_exit import command_status

    # a reader that left: 141 quietly; SIGTERM / Ctrl-C: 143 / 130 and one line
    raise SystemExit(command_status(main))
