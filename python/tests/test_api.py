"""The Python API against what the hsched command says of the same files."""

import datetime
import json
import shutil
import subprocess

import pandas as pd
import pytest

import hsched

SIMPLE = {
    "scheduler": [{"name": "fp", "policy": "fp"}],
    "thread": [
        {"name": "video", "scheduler": "fp", "params": {"priority": 1},
         "workload": {"kind": "periodic", "period": "33ms", "exec": "10ms"}},
        {"name": "hog", "scheduler": "fp", "workload": {"kind": "cpu-bound"}},
    ],
}


def test_load_check_and_summary(examples):
    h = hsched.load(examples / "home-computer.toml")
    assert h.summary == "1 CPU, 8 schedulers, 8 threads"
    assert h.cpus == 1
    assert list(h.threads["name"]) == [f"T{i}" for i in range(1, 9)]
    res = h.check()
    assert res.ok and bool(res)
    assert str(res).startswith(f"{h.file}: ok (1 CPU, 8 schedulers, 8 threads)")


def test_sim_matches_the_library_example():
    # The simulator crate's own documented example (crates/sim/src/lib.rs).
    h = hsched.from_dict(SIMPLE)
    r = h.sim("1s")
    video = r.thread("video")
    assert video["jobs"] == 30 and video["deadline_misses"] == 0
    assert video["cpu_ns"] == 310_000_000
    assert r.thread("hog")["cpu_ns"] == 690_000_000
    t = r.threads.set_index("name")
    assert t.loc["video", "share"] == pytest.approx(0.31)
    assert isinstance(r.schedulers, pd.DataFrame) and list(r.schedulers["name"]) == ["fp"]
    assert r.duration_ns == 1_000_000_000


def test_durations_take_strings_ints_and_timedeltas():
    h = hsched.from_dict(SIMPLE)
    a = h.sim("500ms").report
    b = h.sim(500_000_000).report
    c = h.sim(datetime.timedelta(milliseconds=500)).report
    assert a == b == c


@pytest.mark.skipif(shutil.which("hsched") is None, reason="the hsched binary is not on PATH")
def test_sim_report_is_the_cli_report(examples):
    f = examples / "home-computer.toml"
    cli = subprocess.run(["hsched", "sim", str(f), "--duration", "2s", "--seed", "3", "--json"],
                         check=True, capture_output=True, text=True).stdout
    py = hsched.load(f).sim("2s", seed=3).report
    assert json.loads(cli) == py


@pytest.mark.skipif(shutil.which("hsched") is None, reason="the hsched binary is not on PATH")
def test_analyze_is_the_cli_analysis(examples):
    f = examples / "media-player.toml"
    cli = subprocess.run(["hsched", "analyze", str(f), "--json"], capture_output=True, text=True).stdout
    assert json.loads(cli) == hsched.analyze(f).data


def test_analyze_gives_response_times(examples):
    a = hsched.analyze(examples / "media-player.toml")
    assert a.composes and a.certified
    rt = a.response_times
    assert len(rt) > 0 and rt["meets"].all()
    assert (rt["response_ns"] <= rt["deadline_ns"]).all()
    assert a.applications.loc[0, "reservation"].startswith("RES")


def test_guarantee_problems_carry_file_line_and_text(examples, tmp_path):
    text = (examples / "home-computer.toml").read_text()
    broken = text.replace('guarantee = "RESBH 1 10"', 'guarantee = "RESBH 2 10"', 1)
    assert broken != text
    h = hsched.loads(broken, name="broken.toml")
    res = h.check()
    assert not res.ok
    p = res.problems[0]
    assert p.file == "broken.toml" and p.line is not None and p.node
    assert "broken.toml:" in p.text
    assert "guarantee problem" in str(res)


def test_input_errors_are_the_cli_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[thread]]\nname = "x"\nscheduler = "fp"\nworkload = { kind = "periodic", period = "10ms", exec = "20ms" }\n')
    with pytest.raises(hsched.HierarchyError) as info:
        hsched.load(bad)
    e = info.value
    assert isinstance(e, ValueError)
    assert e.file == str(bad) and e.line >= 1 and e.col >= 1
    assert e.errors and all({"file", "line", "hint"} <= set(x) for x in e.errors)
    assert str(bad) in str(e)
    with pytest.raises(hsched.HierarchyError, match="cannot read|No such file"):
        hsched.load(tmp_path / "missing.toml")


def test_wrong_types_and_values_name_the_argument():
    h = hsched.from_dict(SIMPLE)
    with pytest.raises(TypeError, match="duration"):
        h.sim(1.5)
    with pytest.raises(ValueError, match="duration"):
        h.sim("-1s")
    with pytest.raises(ValueError, match="duration"):
        h.sim("10 parsecs")
    with pytest.raises(TypeError, match="seed"):
        h.sim("1s", seed="7")
    with pytest.raises(ValueError, match="seed"):
        h.sim("1s", seed=-1)
    with pytest.raises(TypeError, match="check_protocol"):
        h.sim("1s", check_protocol=1)
    with pytest.raises(ValueError, match="window"):
        h.sim("1s", window=("0s", "1s"))
    with pytest.raises(TypeError, match="path"):
        hsched.load(42)
    with pytest.raises(ValueError, match="tolerance"):
        h.analyze(tolerance=-1)
    with pytest.raises(TypeError, match="hierarchy"):
        hsched.check(3.0)


def test_trace_and_gantt(tmp_path):
    h = hsched.from_dict(SIMPLE)
    tr, svg = tmp_path / "t.json", tmp_path / "g.svg"
    r = h.sim("1s", trace=tr, gantt=svg, window=("0s", "200ms"))
    assert r.trace == str(tr) and svg.read_text().lstrip().startswith("<")
    t = hsched.read_trace(tr)
    video = t.slices[t.slices["thread"] == "video"]
    # Released at 0, 33, ... 198 ms, 10 ms each, the top priority: six
    # whole jobs and the first 2 ms of the seventh inside the window.
    assert (video["end_ns"] - video["start_ns"]).sum() == 62_000_000
    assert t.slices["end_ns"].max() <= 200_000_000


def test_a_stuck_simulation_raises_simulation_error(tmp_path):
    with pytest.raises(hsched.SimulationError):
        hsched.from_dict(SIMPLE).sim("1s", trace=tmp_path / "no-such-dir" / "t.json")


def test_from_dict_errors_point_into_its_text():
    doc = {"scheduler": [{"name": "fp", "policy": "nope"}]}
    with pytest.raises(hsched.HierarchyError) as info:
        hsched.from_dict(doc)
    assert info.value.file == "<dict>" and info.value.line == 3
    assert 'policy = "nope"' in hsched.to_toml(doc)


def test_a_hierarchy_naming_a_plugin_loads_analyzes_and_simulates(tmp_path):
    # sdk/examples/sfq-worked-example.toml names ../build/rescs.wasm; build
    # the SDK's plug-ins into a copy of that layout.
    import os
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    if shutil.which("clang-14") is None:
        if os.environ.get("HSCHED_REQUIRE_CLANG") == "1":
            pytest.fail("clang-14 is required (HSCHED_REQUIRE_CLANG=1)")
        pytest.skip("clang-14 is not installed")
    build = tmp_path / "build"
    subprocess.run(["make", "-s", "-C", str(root / "sdk"), f"OUT={build}"], check=True)
    (tmp_path / "examples").mkdir()
    f = tmp_path / "examples" / "sfq.toml"
    shutil.copy(root / "sdk" / "examples" / "sfq-worked-example.toml", f)
    h = hsched.load(f)
    res = h.check()
    assert res.ok
    assert "the mapping it declares" in str(res)
    assert h.analyze().composes
    r = h.sim("2s")
    assert abs(r.thread("T1")["cpu_ns"] / 2e9 - 0.25) < 0.01
    # A file naming a plug-in that is not there is an error naming it.
    bad = tmp_path / "bad.toml"
    bad.write_text('[[scheduler]]\nname = "r"\npolicy = "nowhere.wasm"\n')
    with pytest.raises(hsched.HierarchyError) as e:
        hsched.load(bad)
    assert "nowhere.wasm" in str(e.value)
