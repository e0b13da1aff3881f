"""The DVS simulator (threshold crossings, refractory period, noise, hot pixels) and the
N-CARS-like / Gen1-like dataset generators."""

from __future__ import annotations

import json

import numpy as np
import pytest
from neuroedge.events import SensorSize
from neuroedge.events.datasets import gen1_files, ncars_files, read_boxes
from neuroedge.events.generate import (
    GeneratorConfig,
    add_noise_to_dataset,
    make_gen1_like,
    make_ncars_like,
)
from neuroedge.events.io import read_events
from neuroedge.events.simulator import (
    DVSParams,
    MovingObject,
    log_frames_to_events,
    noise_events,
    simulate,
)

SENSOR = SensorSize(32, 24)


def test_brightening_pixel_emits_one_on_event_per_threshold_crossed():
    frames = np.log(np.array([[[0.5]], [[0.5 * np.exp(0.65)]]]))  # +0.65 log units
    events = log_frames_to_events(
        frames,
        np.array([0, 1000]),
        DVSParams(threshold=0.2, sigma_threshold=0.0, refractory_us=0),
        np.random.default_rng(0),
    )
    assert len(events) == 3 and set(events["p"]) == {1}
    assert np.all(np.diff(events["t"]) > 0) and events["t"].max() <= 1000


def test_crossing_times_are_interpolated_within_the_frame_interval():
    """Log intensity ramps 0 -> 1.0 over 0-1000 us, then down to 0.3 by 2000 us, threshold 0.2.
    A level L is crossed where the linear ramp between the frames reaches it: t = t0 + (L -
    start) / (end - start) (t1 - t0). Evenly spaced times k / (n + 1) (which passed every test
    before, 2026-12-07 audit) give 167, 333, ... and 1250, 1500, 1750 instead."""
    params = DVSParams(threshold=0.2, sigma_threshold=0.0, refractory_us=0)
    frames, times = np.array([0.0, 1.0, 0.3]).reshape(3, 1, 1), np.array([0, 1000, 2000])
    events = log_frames_to_events(frames, times, params, np.random.default_rng(0))
    on_levels = 0.2 * np.arange(1, 6)  # 0.2 .. 1.0 crossed on the way up
    off_levels = 1.0 - 0.2 * np.arange(1, 4)  # 0.8, 0.6, 0.4 on the way down to 0.3
    expected = np.r_[on_levels / 1.0 * 1000, 1000 + (off_levels - 1.0) / (0.3 - 1.0) * 1000]
    assert events["p"].tolist() == [1] * 5 + [0] * 3
    np.testing.assert_allclose(events["t"], expected, atol=1.0)  # times are whole us
    assert events["t"][5:].tolist() == [1285, 1571, 1857]


def test_refractory_period_suppresses_events_closer_than_it():
    frames = np.log(np.array([[[0.5]], [[0.5 * np.exp(1.0)]]]))
    params = DVSParams(threshold=0.2, sigma_threshold=0.0, refractory_us=400)
    events = log_frames_to_events(frames, np.array([0, 1000]), params, np.random.default_rng(0))
    assert len(events) >= 1 and len(events) < 5 and np.all(np.diff(events["t"]) >= 400)


def test_static_scene_without_noise_is_silent_and_moving_car_is_not():
    still = MovingObject("car", 8, 6, 14, 9, 0, 0, 0.4)
    moving = MovingObject("car", 2, 6, 14, 9, 120, 0, 0.4)
    quiet = simulate([still], SENSOR, 50_000, DVSParams(), seed=1)
    busy = simulate([moving], SENSOR, 50_000, DVSParams(), seed=1)
    assert len(quiet) == 0
    assert len(busy) > 100 and set(np.unique(busy["p"])) == {0, 1}
    assert np.all(np.diff(busy["t"]) >= 0)


def test_background_activity_matches_its_poisson_rate():
    params = DVSParams(noise_rate_hz=20.0)
    events = noise_events(SENSOR, 0, 200_000, params, np.random.default_rng(3))
    expected = 20.0 * SENSOR.width * SENSOR.height * 0.2
    assert abs(len(events) - expected) < 5 * np.sqrt(expected)
    assert events["x"].max() < SENSOR.width and events["y"].max() < SENSOR.height


def test_hot_pixels_fire_far_above_the_background():
    params = DVSParams(noise_rate_hz=1.0, hot_pixels=2, hot_rate_hz=500.0)
    events = noise_events(SENSOR, 0, 100_000, params, np.random.default_rng(4))
    per_pixel = np.bincount(events["y"].astype(int) * SENSOR.width + events["x"])
    assert np.sort(per_pixel)[-2] > 20 > np.sort(per_pixel)[-3]


def test_simulation_is_reproducible_from_its_seed():
    car = MovingObject("car", 0, 4, 12, 8, 150, 10, -0.3)
    a = simulate([car], SENSOR, 30_000, DVSParams(noise_rate_hz=5), seed=7)
    b = simulate([car], SENSOR, 30_000, DVSParams(noise_rate_hz=5), seed=7)
    np.testing.assert_array_equal(a, b)


def test_bad_simulator_parameters_are_refused():
    with pytest.raises(ValueError, match="DVSParams threshold must be > 0, got 0"):
        DVSParams(threshold=0)
    with pytest.raises(ValueError, match="kind"):
        MovingObject("truck", 0, 0, 1, 1, 0, 0, 0.1)


def test_generators_write_real_formats_and_layouts(tmp_path):
    cfg = GeneratorConfig(width=32, height=32, noise_rate_hz=2.0, seed=3)
    make_ncars_like(tmp_path / "nc", {"train": 4, "test": 2}, cfg, progress=False)
    files = ncars_files(tmp_path / "nc", "train")
    assert sorted(label for _, label in files) == [0, 0, 1, 1]
    events = read_events(files[0][0], sensor=SensorSize(32, 32))
    assert len(events) > 50 and events["t"].max() < cfg.duration_us
    make_gen1_like(tmp_path / "g1", {"test": 3}, cfg, progress=False)
    pairs = gen1_files(tmp_path / "g1", "test")
    boxes = np.concatenate([read_boxes(b) for _, b in pairs])
    assert len(pairs) == 3 and len(boxes) >= 3
    assert np.all(boxes["x"] >= 0) and np.all(boxes["x"] + boxes["w"] <= 32 + 1e-4)
    assert json.loads((tmp_path / "g1" / "config.json").read_text())["noise_rate_hz"] == 2.0


def test_noisy_copy_keeps_the_scene_and_adds_the_noise(tmp_path):
    cfg = GeneratorConfig(width=32, height=32, seed=5, hot_pixels=0)
    make_ncars_like(tmp_path / "clean", {"test": 2}, cfg, progress=False)
    add_noise_to_dataset(tmp_path / "clean", tmp_path / "noisy", 50.0, seed=1)
    for (clean, _), (noisy, _) in zip(
        ncars_files(tmp_path / "clean", "test"), ncars_files(tmp_path / "noisy", "test")
    ):
        a, b = read_events(clean), read_events(noisy)
        added = len(b) - len(a)
        assert abs(added - 50.0 * 32 * 32 * 0.1) < 5 * np.sqrt(5120)
        assert np.isin(a, b).all()
