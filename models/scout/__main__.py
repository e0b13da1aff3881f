"""``python -m neuroedge.models.scout FILE QUESTION``: SCOUT over a text file of yours.

Prints the answer, whether it is grounded in an anchored span, the anchored evidence and the
tokens read (``--json``: the whole summary as JSON). Offline it uses the keyword policy; with
``--endpoint URL --model NAME`` a chat LLM on an OpenAI-compatible server forages (the API key,
if the server needs one, from NEUROEDGE_LLM_API_KEY). Exit status 2 on bad input, naming it;
141 when the reader of the output left, 130 / 143 when stopped (Ctrl-C / SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from neuroedge.errors import NeuroedgeError
    from neuroedge.models.scout.agent import describe, forage
    from neuroedge.models.scout.document import Document
    from neuroedge.models.scout.experiment import policy_factory
    from neuroedge.models.scout.protocol import ScoutError

    ap = argparse.ArgumentParser(prog="python -m neuroedge.models.scout", description=__doc__)
    ap.add_argument("file")
    ap.add_argument("question")
    ap.add_argument("--endpoint", default="", help="OpenAI-compatible base URL, e.g. .../v1")
    ap.add_argument("--model", default="", help="the model name the endpoint serves")
    ap.add_argument("--max-turns", type=int, default=200)
    ap.add_argument("--json", action="store_true", help="print the run summary as JSON")
    args = ap.parse_args(argv)
    if bool(args.endpoint) != bool(args.model):
        print("error: give --endpoint and --model together", file=sys.stderr)
        return 2
    if args.max_turns < 1:
        print(f"error: --max-turns={args.max_turns}: expected an integer >= 1", file=sys.stderr)
        return 2
    make = policy_factory({"endpoint": args.endpoint, "llm_model": args.model})
    try:
        result = forage(
            Document.from_path(args.file), args.question, make(), max_turns=args.max_turns
        )
    except (ScoutError, NeuroedgeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = describe(result)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"answer: {summary['answer'] or '(none found)'}")
    print(
        f"grounded: {summary['grounded']}  stopped: {summary['stopped']}  "
        f"turns: {summary['turns']}  tokens read: {summary['tokens_read']}"
    )
    for entry in summary["entries"]:
        print(f"  {entry}")
    return 0


if __name__ == "__main__":
    from neuroedge.cli_exit import command_status

    # a reader that left: 141 quietly; SIGTERM / Ctrl-C: 143 / 130 and one line
    raise SystemExit(command_status(main))
