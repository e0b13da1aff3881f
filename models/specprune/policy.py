"""The deployable policy: observation -> action chunk, with SpecPrune's per-step state.

``PrunedPolicy.select_action(obs)`` validates the observation (missing cameras, wrong image
sizes, NaN proprioception raise before inference), returns the next action and re-plans once
the current chunk is used up. Between inferences it keeps what SpecPrune carries across steps:

* the previous inference's last-layer task scores (the global set V_global),
* camera frames by environment step, for the dynamic set's reference frame
  (``PruneConfig.lookback``): ``"speed"`` (default, the paper's) compares with the frame
  exactly T(v) env steps before the re-plan (6..11 steps, clamped to the episode start);
  ``"chunk"`` with the frame of round(T(v) / chunk) inferences back (the previous one, 8
  steps back at every speed, at today's chunk of 8; 2-3 back at an older policy's chunk of 4),
  the rule every result up to 2026-12-05 was measured with,
* the controller state, updated from the measured end-effector displacement over the executed
  chunk (translation v_t in cm/step, dz the vertical displacement; v_r = 0, see sim.py).

Steps per chunk are those the network returned (``self.chunk``), not the package's CHUNK: a
policy directory exported when CHUNK was 4 (before e0a859b) runs as it did then.

Frames for the speed look-back: ``select_action`` holds the frames of every observation that
carries camera images, so a robot stack that passes images at every step needs nothing more.
A caller that renders only at re-plans (the benchmark: a render pair costs 70-90 ms on the
loaded 2-core machine against 1-3 ms of physics per step) asks ``missing_reference(obs)``
before each re-plan and hands over that one earlier frame with ``add_frame`` (bench.rollout,
the timing replay). A re-plan whose frame came neither way compares with the nearest earlier
frame held; ``lookbacks`` records how many env steps back each inference's reference was.

The network runs behind an ``engine(mode, inputs) -> (actions, scores)``: eager PyTorch
(``torch_engine``) or one ONNX Runtime session per controller mode (``deploy.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from neuroedge.models.specprune.data import CHUNK, tokenize
from neuroedge.models.specprune.functional import (
    COARSE,
    ControllerState,
    PruneConfig,
    controller_step,
    dynamic_set,
    lookback_range,
    lookback_steps,
    patch_cosine,
    patch_vectors,
    top_k_set,
)
from neuroedge.models.specprune.sim import CAMERAS, check_cameras, check_observation

Engine = Callable[[str, Mapping[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]
PATCH, PER_VIEW = 8, 64
Patches = dict[str, tuple[np.ndarray, np.ndarray]]


class PrunedPolicy:
    """One method ("unpruned", "specprune", "fastv", "random") behind ``select_action``."""

    def __init__(
        self,
        engine: Engine,
        method: str,
        prune: PruneConfig,
        seed: int = 0,
        controller: bool = True,
    ) -> None:
        self.engine, self.method, self.prune = engine, method, prune
        self.controller = controller and method == "specprune"
        # only SpecPrune's speed look-back compares with frames between re-plans
        self.by_step = method == "specprune" and prune.lookback == "speed"
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> None:
        """Forget the episode: queued actions, the clock, frames, scores and the controller."""
        self.queue: deque[np.ndarray] = deque()
        self.step = 0  # env step of the observation select_action gets next
        self.chunk = CHUNK  # env steps per action chunk (the last inference's)
        self.queries: list[int] = []  # env steps of the last four inferences
        self.frames: dict[int, dict[str, np.ndarray]] = {}  # camera frames held, by env step
        self.patches: dict[int, Patches] = {}  # their patch vectors, once compared
        self.scores: np.ndarray | None = None
        self.state = ControllerState(COARSE)
        self.hand_at_query: np.ndarray | None = None
        self.kept: list[int] = []  # visual tokens kept after layer 1, per inference
        self.modes: list[str] = []
        self.lookbacks: list[int] = []  # env steps back to each reference frame (0: none)

    def select_action(self, obs: Mapping[str, Any]) -> np.ndarray:
        """The next action (dx, dy, dz, grip); runs the network when the chunk is used up
        (only then are the cameras needed and checked; frames given between re-plans are held
        for the speed look-back)."""
        if not self.queue:
            self.queue.extend(self.plan(obs))
        elif self.by_step and all(cam in obs for cam in CAMERAS):
            self.add_frame(self.step, obs)
        self.step += 1
        return self.queue.popleft()

    def add_frame(self, step: int, frames: Mapping[str, Any]) -> None:
        """Hold the camera frames (``{camera: uint8 [H, W, 3]}``) of env ``step``."""
        check_cameras(frames)
        self.frames[int(step)] = {cam: np.array(frames[cam], copy=True) for cam in CAMERAS}
        self.patches.pop(int(step), None)

    def query_step(self) -> int:
        """Env step of the coming inference: select_action's clock, or one chunk after the
        last inference for a caller that re-plans with ``plan`` alone (the clock never moved)."""
        if self.queries and self.step <= self.queries[-1]:
            return self.queries[-1] + self.chunk
        return self.step

    def missing_reference(self, obs: Mapping[str, Any]) -> int | None:
        """The env step whose frames the re-plan on ``obs`` will compare with, when the
        policy re-plans next, uses the speed look-back and does not hold them; else None."""
        if not self.by_step or self.queue:
            return None
        check_observation(obs)
        step = self.reference(self.query_step(), self.speed(obs)[0], exact=True)
        return None if step is None or step in self.frames else step

    def reference(self, step: int, v_t: float, exact: bool = False) -> int | None:
        """The env step of the frame the inference at ``step`` compares with (None: none);
        ``exact``: the look-back target even where no frame is held for it."""
        back = lookback_steps(v_t, self.prune.v_max)
        if self.prune.lookback == "chunk":  # round(T / chunk): 1 inference back at chunk 8
            past = [s for s in self.queries if s < step]
            return past[-min(max(1, round(back / self.chunk)), len(past))] if past else None
        if step <= 0:
            return None
        target = max(0, step - back)  # T(v) env steps back, clamped to the episode start
        if exact or target in self.frames:
            return target
        held = [s for s in self.frames if s < step]  # the frame was not given: the nearest
        return min(held, key=lambda s: (abs(s - target), s)) if held else None

    def speed(self, obs: Mapping[str, Any]) -> tuple[float, float]:
        """(v_t in cm/step, dz in m) of the hand since the last inference; (0, 0) at the first.
        v_t is per env step of the chunk the last inference returned (``self.chunk``: 8 for a
        policy of today, 4 for a graph exported before e0a859b), not the package's CHUNK."""
        if self.hand_at_query is None:
            return 0.0, 0.0
        delta = np.asarray(obs["proprio"][:3], dtype=np.float64) - self.hand_at_query
        return 100.0 * float(np.linalg.norm(delta)) / self.chunk, float(delta[2])

    def plan(self, obs: Mapping[str, Any]) -> np.ndarray:
        """Run one inference: controller, pruning prior, network; returns [chunk, 4]."""
        check_observation(obs)
        self.step = self.query_step()
        v_t, dz = self.speed(obs)
        if self.controller and self.hand_at_query is not None:
            self.state = controller_step(self.state, v_t, 0.0, dz, self.prune)
        self.hand_at_query = np.asarray(obs["proprio"][:3], dtype=np.float64)
        inputs = self.inputs(obs, self.prior(obs, v_t))
        actions, scores = self.engine(self.state.mode, inputs)
        self.queries = [*self.queries[-3:], self.step]
        self.chunk = len(actions[0])
        self.forget()
        self.scores = scores[0]
        self.modes.append(self.state.mode)
        self.kept.append(
            2 * PER_VIEW if self.method == "unpruned" else self.prune.budget(self.state.mode)
        )
        return np.clip(actions[0], -1.0, 1.0).astype(np.float32)

    def forget(self) -> None:
        """Drop the frames no later inference can compare with."""
        if self.prune.lookback == "chunk":
            oldest = self.queries[0]
        else:
            oldest = self.queries[-1] + self.chunk - lookback_range(self.prune.v_max)[1]
        for step in [s for s in self.frames if s < oldest]:
            del self.frames[step]
            self.patches.pop(step, None)

    def inputs(self, obs: Mapping[str, Any], prior: np.ndarray) -> dict[str, np.ndarray]:
        return {
            "primary": np.asarray(obs["primary"])[None],
            "wrist": np.asarray(obs["wrist"])[None],
            "proprio": np.asarray(obs["proprio"], dtype=np.float32)[None],
            "text": tokenize(obs["instruction"])[None],
            "prior": prior[None],
        }

    def prior(self, obs: Mapping[str, Any], v_t: float) -> np.ndarray:
        """Random scores for ``random``; V_global u V_dynamic membership for ``specprune``."""
        if self.method == "random":
            return self.rng.random(2 * PER_VIEW).astype(np.float32)
        prior = np.zeros(2 * PER_VIEW, dtype=np.float32)
        if self.method != "specprune":
            return prior
        if self.scores is not None:
            for view in range(2):
                part = self.scores[view * PER_VIEW : (view + 1) * PER_VIEW]
                prior[view * PER_VIEW + global_set(part, self.prune.k_global)] = 1.0
        step = self.query_step()
        self.add_frame(step, obs)
        past = self.reference(step, v_t)
        self.lookbacks.append(0 if past is None else step - past)
        if past is not None:
            now, then = self.patches_at(step), self.patches_at(past)
            for view, cam in enumerate(CAMERAS):
                sim = patch_cosine(now[cam], then[cam])
                prior[view * PER_VIEW + dynamic_set(sim, self.prune.tau, self.prune.k_dynamic)] = 1
        return prior

    def patches_at(self, step: int) -> Patches:
        """Patch vectors and norms of the frames held for ``step``, computed once."""
        if step not in self.patches:
            self.patches[step] = {
                cam: patch_vectors(self.frames[step][cam], PATCH) for cam in CAMERAS
            }
        return self.patches[step]


def global_set(scores: np.ndarray, k: int) -> np.ndarray:
    """V_global of one view (eq. 2): the ``k`` highest of the previous inference's last-layer
    scores among the tokens that reached that layer. The network scatters survivors' scores
    (softmax attention means: positive) into zeros, so a token pruned on the way scores 0 and
    is never picked, not even as a tie: a view with fewer than ``k`` survivors gives fewer."""
    scored = np.flatnonzero(scores > 0)
    return scored[top_k_set(scores[scored], k)]


def torch_engine(model: Any, method: str, prune: PruneConfig) -> Engine:
    """Eager PyTorch: the model reconfigured per controller mode (budget, K_local)."""
    import torch

    def run(mode: str, inputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        model.configure(method, prune.budget(mode), prune.k_local(mode), prune)
        with torch.inference_mode():
            actions, scores = model(
                *(
                    torch.from_numpy(np.ascontiguousarray(inputs[k]))
                    for k in ("primary", "wrist", "proprio", "text", "prior")
                )
            )
        return actions.numpy(), scores.numpy()

    return run
