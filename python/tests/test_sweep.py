"""Sweeps: every point and seed gathered, failures reported per point."""

import os

import pytest

import hsched


def miss_count(seed, utilization, n=5):
    ts = hsched.generate(n, utilization, seed=seed)
    r = ts.hierarchy().sim("1s", seed=seed)
    return {"misses": int(r.threads["deadline_misses"].sum()), "u": ts.utilization}


def sometimes_fails(seed, x):
    if x == 2 and seed == 1:
        raise RuntimeError("point 2 fails with seed 1")
    return {"y": x * 10 + seed}


def dies(seed, x):
    if x == 1:
        os._exit(3)  # the worker process dies, as on a crash
    return {"y": x}


def test_serial_sweep_gathers_every_point():
    df = hsched.sweep(sometimes_fails, {"x": [1, 2, 3]}, seeds=2, backend="serial", progress=False)
    assert list(df["x"]) == [1, 1, 2, 2, 3, 3] and list(df["seed"]) == [0, 1] * 3
    bad = df[df["error"].notna()]
    assert len(bad) == 1 and bad.iloc[0]["seed"] == 1 and bad.iloc[0]["x"] == 2
    assert "point 2 fails" in bad.iloc[0]["error"]
    assert list(df[df["error"].isna()]["y"]) == [10, 11, 20, 30, 31]


def test_bad_arguments():
    with pytest.raises(TypeError, match="params"):
        hsched.sweep(sometimes_fails, 3)
    with pytest.raises(ValueError, match="seeds"):
        hsched.sweep(sometimes_fails, {"x": [1]}, seeds=0)
    with pytest.raises(TypeError, match="fn"):
        hsched.sweep(42, {"x": [1]})
    with pytest.raises(ValueError, match="backend"):
        hsched.sweep(sometimes_fails, {"x": [1]}, backend="spark")


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_sweep_matches_serial(ray_local):
    params = {"utilization": [0.5, 0.95]}
    seen = []
    a = hsched.sweep(miss_count, params, seeds=3, progress=lambda d, t, f: seen.append((d, t, f)))
    b = hsched.sweep(miss_count, params, seeds=3, backend="serial", progress=False)
    assert a.equals(b)
    assert seen and seen[-1] == (6, 6, 0)


def test_ray_failure_loses_only_its_point(ray_local):
    df = hsched.sweep(sometimes_fails, {"x": [1, 2, 3]}, seeds=[0, 1], chunk_size=2, progress=False)
    assert len(df) == 6
    bad = df[df["error"].notna()]
    assert list(zip(bad["x"], bad["seed"])) == [(2, 1)]


def test_ray_worker_death_is_reported_with_its_seed(ray_local):
    df = hsched.sweep(dies, {"x": [0, 1, 2]}, seeds=[7], progress=False)
    assert len(df) == 3
    bad = df[df["error"].notna()]
    assert list(bad["x"]) == [1] and list(bad["seed"]) == [7]
    assert list(df[df["error"].isna()]["y"]) == [0, 2]
