"""The guarantee functions, the reference policies and the Gantt colors."""

import pytest

import hsched
from hsched import guarantee as g

EDF = """
[[scheduler]]
name = "root"
policy = "edf-true-periods"
[[thread]]
name = "a"
scheduler = "root"
params = { period = "10ms" }
workload = { kind = "periodic", period = "10ms", exec = "6ms" }
[[thread]]
name = "b"
scheduler = "root"
params = { period = "20ms" }
workload = { kind = "periodic", period = "20ms", exec = "7ms" }
"""


def test_the_sfq_chain_of_section_5_3_3_1():
    assert g.convert("RESCS 10 20", "PSBE").guarantee == "PSBE 0.5 5"
    p = g.provide("ps", "RESCS 10 20", [{"share": 5}] + [{"share": 1}] * 5, quantum="10ms")
    assert (p.accepted, p.children[0]) == ("PSBE 0.5 5", "PSBE 0.25 75")
    assert "Equation 5.2" in p.rules[0]
    assert g.convert("PSBE 0.25 75", "RESCS", period="400ms").guarantee == "RESCS 25 400"
    assert g.satisfies("PSBE 0.25 75", "RESCS 25 400")[0]
    ok, why = g.satisfies("PSBE 0.25 75", "RESCS 26 400")
    assert not ok and "26" in why
    assert g.period_for_pessimism(0.25, "75ms", 0.1) == 3_000_000_000


def test_the_eevdf_numbers_of_section_5_3_3_2():
    assert g.psbe_share_for("5ms", "33ms", "10ms") == pytest.approx(15 / 33)
    assert g.psbe_error_for("5ms", "33ms", 1.1 * 5 / 33) == 500_000
    assert g.psbe_error_for("5ms", "33ms", 0.1) is None


def test_bad_guarantee_arguments_name_the_argument():
    with pytest.raises(ValueError, match="^guarantee: `RESX 1` is not a guarantee"):
        g.convert("RESX 1", "PSBE")
    with pytest.raises(ValueError, match="needs a target period"):
        g.convert("PSBE 0.5 5", "RESCS")
    with pytest.raises(ValueError, match="^policy: unknown policy `nope`"):
        g.provide("nope", "ALL", [])
    with pytest.raises(ValueError, match=r"^children\[0\]: `weight` is not one of"):
        g.provide("ps", "ALL", [{"weight": 1}])
    with pytest.raises(TypeError, match="^received: expected a str"):
        g.satisfies(1, "ALL")


def test_reference_policies_are_accepted_only_when_asked():
    with pytest.raises(hsched.HierarchyError, match="unknown policy `edf-true-periods`"):
        hsched.loads(EDF)
    r = hsched.loads(EDF, reference_policies=True).sim("2s")
    th = r.threads.set_index("name")
    assert th.loc["a", "jobs"] == 200 and th.loc["a", "deadline_misses"] == 0
    assert th.loc["b", "deadline_misses"] == 0
    with pytest.raises(TypeError, match="^reference_policies: expected True or False"):
        hsched.loads(EDF, reference_policies=1)


def test_the_gantt_chart_is_colored_by_thread_on_request(tmp_path, examples):
    h = hsched.load(examples / "home-computer.toml")
    by_cpu, by_thread = tmp_path / "cpu.svg", tmp_path / "thread.svg"
    h.sim("500ms", gantt=by_cpu)
    h.sim("500ms", gantt=by_thread, gantt_color="thread")
    assert "<title>cpu0</title>" not in by_cpu.read_text()
    assert "<title>cpu0</title>" in by_thread.read_text()
    with pytest.raises(ValueError, match="^gantt_color: `red` is not one of cpu, thread"):
        h.sim("500ms", gantt=by_cpu, gantt_color="red")
