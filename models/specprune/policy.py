"""The deployable policy: observation -> action chunk, with SpecPrune's per-step state.

``PrunedPolicy.select_action(obs)`` validates the observation (missing cameras, wrong image
sizes, NaN proprioception raise before inference), returns the next action and re-plans once
the current chunk is used up. Between inferences it keeps what SpecPrune carries across steps:

* the previous inference's last-layer task scores (the global set V_global),
* the frames seen at past queries (the dynamic set's reference frame t - T(v)),
* the controller state, updated from the measured end-effector displacement over the executed
  chunk (translation v_t in cm/step, dz the vertical displacement; v_r = 0, see sim.py).

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
    lookback_steps,
    patch_cosine,
    patch_vectors,
    top_k_set,
)
from neuroedge.models.specprune.sim import CAMERAS, check_observation

Engine = Callable[[str, Mapping[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]
PATCH, PER_VIEW = 8, 64


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
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> None:
        """Forget the episode: queued actions, frames, scores and the controller mode."""
        self.queue: deque[np.ndarray] = deque()
        # patch vectors and norms of the frames seen at past queries, per camera
        self.frames: deque[dict[str, tuple[np.ndarray, np.ndarray]]] = deque(maxlen=4)
        self.current: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.scores: np.ndarray | None = None
        self.state = ControllerState(COARSE)
        self.hand_at_query: np.ndarray | None = None
        self.kept: list[int] = []  # visual tokens kept after layer 1, per inference
        self.modes: list[str] = []

    def select_action(self, obs: Mapping[str, Any]) -> np.ndarray:
        """The next action (dx, dy, dz, grip); runs the network when the chunk is used up
        (only then are the cameras needed and checked)."""
        if not self.queue:
            self.queue.extend(self.plan(obs))
        return self.queue.popleft()

    def plan(self, obs: Mapping[str, Any]) -> np.ndarray:
        """Run one inference: controller, pruning prior, network; returns [CHUNK, 4]."""
        check_observation(obs)
        hand = np.asarray(obs["proprio"][:3], dtype=np.float64)
        v_t, dz = 0.0, 0.0
        if self.hand_at_query is not None:
            delta = hand - self.hand_at_query
            v_t, dz = 100.0 * float(np.linalg.norm(delta)) / CHUNK, float(delta[2])
            if self.controller:
                self.state = controller_step(self.state, v_t, 0.0, dz, self.prune)
        self.hand_at_query = hand
        inputs = self.inputs(obs, self.prior(obs, v_t))
        actions, scores = self.engine(self.state.mode, inputs)
        if self.current:  # only SpecPrune's dynamic set reads past frames
            self.frames.append(self.current)
        self.current = {}
        self.scores = scores[0]
        self.modes.append(self.state.mode)
        self.kept.append(
            2 * PER_VIEW if self.method == "unpruned" else self.prune.budget(self.state.mode)
        )
        return np.clip(actions[0], -1.0, 1.0).astype(np.float32)

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
                prior[view * PER_VIEW + top_k_set(part, self.prune.k_global)] = 1.0
        # the current frames' patches are computed once and kept for later comparisons
        self.current = {cam: patch_vectors(np.asarray(obs[cam]), PATCH) for cam in CAMERAS}
        if self.frames:
            back = max(1, round(lookback_steps(v_t, self.prune.v_max) / CHUNK))
            past = self.frames[-min(back, len(self.frames))]
            for view, cam in enumerate(CAMERAS):
                sim = patch_cosine(self.current[cam], past[cam])
                prior[view * PER_VIEW + dynamic_set(sim, self.prune.tau, self.prune.k_dynamic)] = 1
        return prior


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
