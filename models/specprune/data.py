"""Expert demonstrations (cached on disk) and the instruction tokenizer.

Demonstrations come from Meta-World's scripted experts. Design decisions:

* DART-style noise: the executed action is the expert's plus Gaussian noise (std 0.15), the
  recorded label is the clean expert action, so the cloned policy sees and corrects small drifts.
* Every STRIDE-th step is one sample (only those frames are rendered), whose target is the
  chunk of the next ``CHUNK`` expert labels
  (OpenVLA-OFT's action chunking), padded by repeating the last label at the episode end.
* Only episodes in which the (noise-perturbed) expert succeeds are kept: a failed episode
  teaches the policy to fail.
* Demonstrations use seeds 0..n-1; evaluations use seeds from ``EVAL_SEED0`` on (unseen layouts);
  settings such as SpecPrune's budgets are chosen on layouts from ``TUNE_SEED0`` on.
* Generated files live under ``neuroedge.paths.home()/specprune`` and are written atomically.
"""

from __future__ import annotations

import functools
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from neuroedge.atomic import write_bytes
from neuroedge.errors import ArtifactError
from neuroedge.npyfile import load_npz
from neuroedge.models.specprune.sim import ACTION_DIM, MAX_STEPS, TASKS, ManipulationEnv
from neuroedge.paths import home

CHUNK = 8  # actions predicted and executed per policy query (OpenVLA-OFT's chunk of 8)
STRIDE = 2  # a training sample every STRIDE steps (neighbouring frames are near duplicates)
TEXT_LEN = 8  # instruction tokens, padded
# the most samples one demonstration episode gives: one every STRIDE of its MAX_STEPS steps
MAX_EPISODE_SAMPLES = -(-MAX_STEPS // STRIDE)
EVAL_SEED0 = 10_000  # first evaluation seed; demonstrations use 0..n-1
TUNE_SEED0 = 20_000  # first held-out layout for choosing settings (never the evaluation seeds)
NOISE_STD = 0.15


@functools.cache
def vocabulary() -> tuple[str, ...]:
    """Index 0 is padding; words of every task instruction follow in sorted order."""
    words = sorted({w for t in TASKS.values() for w in t.instruction.split()})
    return ("<pad>", *words)


@functools.cache
def _word_ids() -> dict[str, int]:
    return {w: i for i, w in enumerate(vocabulary())}


def tokenize(instruction: str) -> np.ndarray:
    """int64[TEXT_LEN] word ids; an unknown word raises ValueError naming it."""
    vocab = _word_ids()
    words = instruction.lower().split()
    unknown = [w for w in words if w not in vocab]
    if unknown:
        raise ValueError(f"instruction {instruction!r} has words outside the vocabulary: {unknown}")
    if len(words) > TEXT_LEN:
        raise ValueError(f"instruction {instruction!r} has {len(words)} words; at most {TEXT_LEN}")
    ids = np.zeros(TEXT_LEN, dtype=np.int64)
    ids[: len(words)] = [vocab[w] for w in words]
    return ids


@dataclass(frozen=True)
class Demos:
    """Behaviour-cloning samples, one per environment step."""

    primary: np.ndarray  # uint8 [N, H, W, 3]
    wrist: np.ndarray  # uint8 [N, H, W, 3]
    proprio: np.ndarray  # float32 [N, 4]
    text: np.ndarray  # int64 [N, TEXT_LEN]
    actions: np.ndarray  # float32 [N, CHUNK, ACTION_DIM], clean expert labels

    def __len__(self) -> int:
        return len(self.proprio)


def _episode(
    env: ManipulationEnv, seed: int, rng: np.random.Generator
) -> tuple[dict[str, list], bool]:
    """One noisy-expert episode; a sample (frames, proprio, label chunk) every STRIDE steps."""
    obs, labels, frames = env.reset(seed), [], {"primary": [], "wrist": [], "proprio": []}
    success, starts = False, []
    while not success and not env.done_by_time:
        if env.steps % STRIDE == 0:
            starts.append(env.steps)
            for key, values in frames.items():
                values.append(obs[key])
        label = env.expert_action()
        labels.append(label)
        noisy = np.clip(label + rng.normal(0, NOISE_STD, ACTION_DIM), -1, 1)
        obs, success = env.step(
            noisy.astype(np.float32), with_images=env.steps % STRIDE == STRIDE - 1
        )
    labels += [labels[-1]] * (CHUNK - 1)
    chunks = [np.stack(labels[i : i + CHUNK]) for i in starts]
    return {**frames, "actions": chunks}, success


def generate(tasks: tuple[str, ...], episodes: int, seed: int = 0) -> Demos:
    """Run the scripted experts for ``episodes`` per task with a progress bar."""
    from tqdm import tqdm

    rng = np.random.default_rng(seed)
    parts: dict[str, list] = {"primary": [], "wrist": [], "proprio": [], "actions": [], "text": []}
    with tqdm(total=episodes * len(tasks), desc="expert demos", unit="ep") as bar:
        for name in tasks:
            with ManipulationEnv(name) as env:
                ids = tokenize(env.task.instruction)
                for ep in range(episodes):
                    got, success = _episode(env, ep, rng)
                    bar.update(1)
                    if not success:  # the noisy expert missed: not a demonstration
                        continue
                    for key, values in got.items():
                        parts[key] += values
                    parts["text"] += [ids] * len(got["actions"])
    return Demos(
        np.stack(parts["primary"]),
        np.stack(parts["wrist"]),
        np.stack(parts["proprio"]).astype(np.float32),
        np.stack(parts["text"]),
        np.stack(parts["actions"]).astype(np.float32),
    )


def cache_path(tasks: tuple[str, ...], episodes: int, seed: int) -> Path:
    tag = f"{tasks}-{episodes}-{seed}-{CHUNK}-{NOISE_STD}-{STRIDE}-ok"
    key = hashlib.sha1(tag.encode()).hexdigest()[:10]
    return home() / "specprune" / f"demos-{key}.npz"


def load_or_generate(tasks: tuple[str, ...], episodes: int, seed: int = 0) -> Demos:
    """Cached demonstrations, generated on first use."""
    path = cache_path(tasks, episodes, seed)
    if path.is_file():
        try:
            f = load_npz(path, only=Demos.__dataclass_fields__)
            return Demos(**{k: f[k] for k in Demos.__dataclass_fields__})
        except (OSError, KeyError, ValueError, TypeError) as err:
            raise ArtifactError(
                f"{path}: unreadable demonstration cache ({err}); delete it to regenerate"
            ) from err
    demos = generate(tasks, episodes, seed)
    buf = io.BytesIO()
    np.savez(buf, **{k: getattr(demos, k) for k in Demos.__dataclass_fields__})
    write_bytes(path, buf.getvalue())
    return demos
