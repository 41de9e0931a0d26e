"""Task-set generation from Python: the same generator as hsched generate."""

import pytest

import hsched


def test_sets_are_seeded_and_sum_to_the_utilization():
    a = hsched.generate(12, 0.8, seed=5)
    b = hsched.generate(12, 0.8, seed=5)
    c = hsched.generate(12, 0.8, seed=6)
    assert a.tasks.equals(b.tasks) and not a.tasks.equals(c.tasks)
    assert a.tasks["utilization"].sum() == pytest.approx(0.8, abs=1e-12)
    assert a.utilization == pytest.approx(0.8, abs=1e-5)
    assert sorted(a.tasks["priority"]) == list(range(1, 13))


@pytest.mark.parametrize("method,u,cpus", [("uunifast", 0.9, 1), ("uunifast-discard", 2.5, 4),
                                           ("randfixedsum", 3.5, 4)])
def test_every_set_checks(method, u, cpus):
    for seed in range(5):
        ts = hsched.generate(10, u, method=method, seed=seed, deadlines="constrained",
                             deadline_factor=0.5, jitter=0.01)
        assert (ts.tasks["utilization"] <= 1.0).all()
        assert (ts.tasks["deadline_ns"] <= ts.tasks["period_ns"]).all()
        assert ts.hierarchy(cpus).check().ok


def test_threads_under_a_named_scheduler():
    text = hsched.generate(3, 0.3).to_threads("app", priorities=True)
    assert text.count('scheduler = "app"') == 3 and text.count("priority =") == 3
    h = hsched.loads('[[scheduler]]\nname = "app"\npolicy = "fp"\n\n' + text)
    assert len(h.threads) == 3


def test_bad_parameters():
    with pytest.raises(hsched.GenerateError, match="uunifast-discard"):
        hsched.generate(3, 1.5)
    with pytest.raises(ValueError, match="method"):
        hsched.generate(3, 0.5, method="magic")
    with pytest.raises(TypeError, match="n"):
        hsched.generate("3", 0.5)
    with pytest.raises(ValueError, match="n"):
        hsched.generate(0, 0.5)
    with pytest.raises(ValueError, match="utilization"):
        hsched.generate(3, -0.5)
    with pytest.raises(ValueError, match="period_min"):
        hsched.generate(3, 0.5, period_min="0ms")
    with pytest.raises(ValueError, match="deadlines"):
        hsched.generate(3, 0.5, deadlines="soon")

