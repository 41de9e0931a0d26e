"""The adaptive-player experiment (Sinha 2007, Table 3.1) from Python."""

import pytest

import hsched


def test_player_experiment_runs_and_checks_its_arguments():
    r = hsched.players(4, "coop", period="20ms")
    assert r["fps_total"] == pytest.approx(96.0, abs=0.5)  # 4 players at 24 fps
    assert r["policed"] == 0 and len(r["fps"]) == 4
    with pytest.raises(ValueError, match="scheduler"):
        hsched.players(4, "edf")
    with pytest.raises(ValueError, match="n"):
        hsched.players(0, "coop")
