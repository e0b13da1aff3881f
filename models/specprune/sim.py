"""The simulated manipulation benchmark: Meta-World (MuJoCo) tasks with language, two cameras.

Each task is a Meta-World v3 environment (Sawyer arm at a table) with a language instruction,
a third-person camera (``corner``) and a wrist camera (``gripperPOV``), proprioception
(end-effector xyz and gripper opening) and Meta-World's own scripted expert and success test.

Design decisions (the paper uses LIBERO, whose scene assets are not on PyPI):

* Rendering is offscreen on the CPU with ``MUJOCO_GL=egl`` (set by the first environment,
  just before MuJoCo is imported, unless the user chose a backend; importing this module or
  listing the models leaves the caller's environment alone). Shadows, reflections and the
  skybox are switched off: shadows alone cost 60-150 ms per frame, against about 5-25 ms
  without them (research/FACTS.md).
* Frames are 64x64 RGB: the policy's vision patches are 8x8, so each view gives an 8x8 grid of
  64 tokens (the paper's 16x16 grid of 256 tokens per 224x224 view, scaled down for 2 CPU cores).
* Object and goal positions are re-drawn at every reset from the episode seed
  (Meta-World freezes them by default), so demonstrations and evaluations are reproducible and
  held-out seeds give unseen layouts.
* The Sawyer action space is (dx, dy, dz, grip) with no wrist rotation, so the controller's
  rotation speed v_r is always 0 here.
* Environments hold an EGL context: close them explicitly (``with ManipulationEnv(...)``);
  interpreter-exit teardown prints harmless but noisy tracebacks.
* A rendering environment stores the physics state of every step of the episode (21 numbers,
  ~15 us a step), so ``frames_at(step)`` renders an earlier step's frames when asked: the
  same pixels as rendering them then (tests/test_specprune_sim.py), without rendering every
  step (a render pair costs 70-90 ms on the loaded 2-core machine, 1-3 ms the physics).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

IMAGE_SIZE = 64  # pixels per side of each camera view
CAMERAS = ("primary", "wrist")  # observation keys of the two views
MUJOCO_CAMERAS = {"primary": "corner3", "wrist": "gripperPOV"}
PROPRIO_DIM = 4  # end-effector x, y, z (m) and gripper opening (0..1)
ACTION_DIM = 4  # dx, dy, dz (mocap steps, x0.01 m) and gripper effort, each in [-1, 1]
MAX_STEPS = 120  # environment steps per episode before it counts as a failure


@dataclass(frozen=True)
class Task:
    """One benchmark task: a Meta-World environment, its instruction and its scripted expert."""

    env_name: str  # Meta-World v3 environment id
    instruction: str  # the language instruction given to the policy
    expert: str  # class name in metaworld.policies


TASKS: dict[str, Task] = {
    "button": Task(
        "button-press-topdown-v3", "press the red button down", "SawyerButtonPressTopdownV3Policy"
    ),
    "drawer": Task("drawer-close-v3", "push the green drawer closed", "SawyerDrawerCloseV3Policy"),
    "reach": Task("reach-v3", "move the gripper to the red goal", "SawyerReachV3Policy"),
}


def task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def check_observation(obs: Mapping[str, Any], image_size: int = IMAGE_SIZE) -> None:
    """Raise ValueError/TypeError naming the problem before any inference is run.

    An observation is ``{"primary": uint8[H, W, 3], "wrist": uint8[H, W, 3],
    "proprio": float[4], "instruction": str}``.
    """
    if not isinstance(obs, Mapping):
        raise TypeError(f"observation must be a mapping, got {type(obs).__name__}")
    missing = [k for k in (*CAMERAS, "proprio", "instruction") if k not in obs]
    if missing:
        raise ValueError(
            f"observation lacks {missing}; it needs cameras {list(CAMERAS)}, "
            "'proprio' and 'instruction'"
        )
    check_cameras(obs, image_size)
    proprio = np.asarray(obs["proprio"], dtype=np.float64)
    if proprio.shape != (PROPRIO_DIM,):
        raise ValueError(f"proprio: expected shape ({PROPRIO_DIM},), got {proprio.shape}")
    bad = np.flatnonzero(~np.isfinite(proprio))
    if bad.size:
        raise ValueError(
            f"proprio has non-finite values at indices {bad.tolist()}: {proprio.tolist()}"
        )
    if not isinstance(obs["instruction"], str):
        raise TypeError(f"instruction must be a str, got {type(obs['instruction']).__name__}")


def check_cameras(frames: Mapping[str, Any], image_size: int = IMAGE_SIZE) -> None:
    """ValueError/TypeError unless ``frames`` holds every camera as uint8 [H, W, 3]."""
    missing = [cam for cam in CAMERAS if cam not in frames]
    if missing:
        raise ValueError(f"frames lack cameras {missing}; expected {list(CAMERAS)}")
    for cam in CAMERAS:
        img = np.asarray(frames[cam])
        if img.shape != (image_size, image_size, 3):
            raise ValueError(
                f"camera {cam!r}: expected image shape ({image_size}, {image_size}, 3)"
                f", got {img.shape}"
            )
        if img.dtype != np.uint8:
            raise TypeError(f"camera {cam!r}: expected dtype uint8, got {img.dtype}")


def _choose_gl() -> None:
    """MuJoCo picks its GL platform when first imported (metaworld imports it): offscreen EGL
    on Linux unless the user chose one (mujoco refuses egl elsewhere: it takes CGL on macOS,
    GLFW on Windows by itself). Done here, by the first environment, not at module import."""
    if "mujoco" not in sys.modules and platform.system() == "Linux":
        os.environ.setdefault("MUJOCO_GL", "egl")


class ManipulationEnv:
    """One Meta-World task with two rendered views; ``reset(seed)`` and ``step(action)``.

    ``step`` returns ``(obs, success)``; the episode ends on success or after ``MAX_STEPS``.
    """

    def __init__(self, task_name: str, image_size: int = IMAGE_SIZE, render: bool = True) -> None:
        _choose_gl()
        import metaworld.policies
        import mujoco
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE as envs

        self.task_name, self.task = task_name, task(task_name)
        self.image_size, self._mujoco = image_size, mujoco
        self.env = envs[f"{self.task.env_name}-goal-observable"](seed=0)
        self.env._freeze_rand_vec = False  # re-draw the layout at every reset (see docstring)
        self.env.seeded_rand_vec = True
        self.env.model.light_castshadow[:] = 0
        self.expert = getattr(metaworld.policies, self.task.expert)()
        self.renderer = mujoco.Renderer(self.env.model, image_size, image_size) if render else None
        self._state = np.zeros(39)
        self.steps = 0
        self._physics: list[np.ndarray] = []  # MuJoCo state of each step (frames_at)
        self._spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self._scratch: Any = None  # the MjData that frames_at renders from

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None
        self.env.close()

    def render(self, camera: str, data: Any = None) -> np.ndarray:
        """One uint8 [H, W, 3] frame with shadows, reflections and skybox off (of ``data``, an
        MjData, if given; the live simulation otherwise)."""
        if self.renderer is None:
            raise RuntimeError("this ManipulationEnv was made with render=False")
        flags = self._mujoco.mjtRndFlag
        scene = self.env.data if data is None else data
        self.renderer.update_scene(scene, camera=MUJOCO_CAMERAS[camera])
        for flag in (flags.mjRND_SHADOW, flags.mjRND_REFLECTION, flags.mjRND_SKYBOX):
            self.renderer.scene.flags[flag] = 0
        return self.renderer.render().copy()

    def frames_at(self, step: int) -> dict[str, np.ndarray]:
        """The camera frames of env ``step`` of this episode (0: the reset), rendered now from
        the physics state stored then."""
        mujoco, model = self._mujoco, self.env.model
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"step must be an integer, got {step!r}")
        if not 0 <= step < len(self._physics):
            raise ValueError(f"step {step}: this episode has steps 0..{len(self._physics) - 1}")
        if self._scratch is None:
            self._scratch = mujoco.MjData(model)
        mujoco.mj_setState(model, self._scratch, self._physics[step], self._spec)
        mujoco.mj_forward(model, self._scratch)
        return {cam: self.render(cam, self._scratch) for cam in CAMERAS}

    def _store_physics(self) -> None:
        if self.renderer is not None:
            state = np.empty(self._mujoco.mj_stateSize(self.env.model, self._spec))
            self._mujoco.mj_getState(self.env.model, self.env.data, state, self._spec)
            self._physics.append(state)

    def observation(self, with_images: bool = True) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "proprio": self._state[:PROPRIO_DIM].astype(np.float32),
            "instruction": self.task.instruction,
        }
        if with_images:
            obs.update({cam: self.render(cam) for cam in CAMERAS})
        return obs

    def reset(self, seed: int, with_images: bool = True) -> dict[str, Any]:
        from gymnasium.utils import seeding

        # Meta-World draws the layout before gymnasium applies reset(seed=...): seed first.
        self.env.np_random, _ = seeding.np_random(int(seed))
        self._state, _ = self.env.reset()
        self.steps = 0
        self._physics = []
        self._store_physics()
        return self.observation(with_images)

    def expert_action(self) -> np.ndarray:
        """Meta-World's scripted expert action for the current state, clipped to [-1, 1]."""
        return np.clip(self.expert.get_action(self._state), -1.0, 1.0).astype(np.float32)

    def step(self, action: np.ndarray, with_images: bool = True) -> tuple[dict[str, Any], bool]:
        action = np.asarray(action, dtype=np.float32)
        if action.shape != (ACTION_DIM,) or not np.all(np.isfinite(action)):
            raise ValueError(f"action must be {ACTION_DIM} finite numbers, got {action}")
        self._state, _, _, _, info = self.env.step(np.clip(action, -1.0, 1.0))
        self.steps += 1
        self._store_physics()
        return self.observation(with_images), bool(info["success"])

    @property
    def done_by_time(self) -> bool:
        return self.steps >= MAX_STEPS
