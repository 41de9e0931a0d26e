"""Per-job records (``sim(..., jobs=True)``): a schedule worked out by
hand, the agreement with ``hsched sim --csv DIR --job-records``, and the
errors of a wrong argument."""

import shutil
import subprocess

import pandas as pd
import pytest

import hsched

MS = 1_000_000

# Two rate-monotonic tasks on one processor: t1 (3 ms every 10 ms, the
# higher priority) and t2 (6 ms every 15 ms). Over 32 ms:
#   t1 | 0-3 |      | 10-13 |       | 20-23 |    | 30-32 (unfinished)
#   t2 |     | 3-9  |       | 15-20 |       | 23-24 |
# t2's second job (released 15, due 30) is preempted at 20 and finishes
# at 24; at 30 both release again, and neither of those jobs finishes.
RM = {
    "scheduler": [{"name": "fp", "policy": "fp"}],
    "thread": [
        {"name": "t1", "scheduler": "fp", "params": {"priority": 2},
         "workload": {"kind": "periodic", "period": "10ms", "exec": "3ms"}},
        {"name": "t2", "scheduler": "fp", "params": {"priority": 1},
         "workload": {"kind": "periodic", "period": "15ms", "exec": "6ms"}},
    ],
}


def test_jobs_frame_matches_the_schedule_by_hand():
    r = hsched.from_dict(RM).sim("32ms", jobs=True)
    j = r.jobs
    assert list(j.columns) == ["thread", "job", "release_ns", "deadline_ns", "completion_ns",
                               "response_ns", "lateness_ns", "missed"]
    got = [
        (t, k, rel // MS, dl // MS, None if pd.isna(c) else c // MS, m)
        for t, k, rel, dl, c, m in j[["thread", "job", "release_ns", "deadline_ns",
                                      "completion_ns", "missed"]].itertuples(index=False)
    ]
    assert got == [
        ("t1", 0, 0, 10, 3, False),
        ("t1", 1, 10, 20, 13, False),
        ("t1", 2, 20, 30, 23, False),
        ("t1", 3, 30, 40, None, False),
        ("t2", 0, 0, 15, 9, False),
        ("t2", 1, 15, 30, 24, False),
        ("t2", 2, 30, 45, None, False),
    ]
    row = j[(j.thread == "t2") & (j.job == 1)].iloc[0]
    assert row.response_ns == 9 * MS and row.lateness_ns == -6 * MS
    assert str(j["completion_ns"].dtype) == "Int64" and j["missed"].dtype == bool
    # Rows marked missed add up to each thread's misses.
    per_thread = j.groupby("thread")["missed"].sum()
    for t in ("t1", "t2"):
        assert per_thread[t] == r.thread(t)["deadline_misses"]


def test_missed_and_unfinished_jobs():
    # 15 ms every 10 ms for 35 ms: jobs 0 and 1 finish late (15, 30), job 2
    # is unfinished past its deadline of 30, job 3 (due 40) waits.
    doc = {
        "scheduler": [{"name": "fp", "policy": "fp"}],
        "thread": [{"name": "late", "scheduler": "fp",
                    "workload": {"kind": "periodic", "period": "10ms", "exec": "15ms"}}],
    }
    r = hsched.from_dict(doc).sim("35ms", jobs=True)
    j = r.jobs
    assert list(j["missed"]) == [True, True, True, False]
    assert list(j["lateness_ns"].iloc[:2]) == [5 * MS, 10 * MS]
    assert j["completion_ns"].iloc[2:].isna().all()
    assert int(j["missed"].sum()) == r.thread("late")["deadline_misses"] == 3


def test_jobs_are_off_by_default_and_change_nothing_else():
    h = hsched.from_dict(RM)
    plain = h.sim("32ms")
    with pytest.raises(ValueError, match="jobs=True"):
        plain.jobs
    rec = h.sim("32ms", jobs=True)
    report = dict(rec.report)
    del report["jobs"]
    assert report == plain.report
    pd.testing.assert_frame_equal(plain.threads, rec.threads)
    # Asked, but no thread has deadlines: an empty frame with the columns.
    doc = {"scheduler": [{"name": "fp", "policy": "fp"}],
           "thread": [{"name": "hog", "scheduler": "fp", "workload": {"kind": "cpu-bound"}}]}
    empty = hsched.from_dict(doc).sim("10ms", jobs=True).jobs
    assert empty.empty and "release_ns" in empty.columns


def test_wrong_jobs_argument_is_named():
    h = hsched.from_dict(RM)
    with pytest.raises(TypeError, match="jobs"):
        h.sim("32ms", jobs=1)
    with pytest.raises(TypeError, match="jobs"):
        hsched.sim(h, "32ms", jobs="yes")


@pytest.mark.skipif(shutil.which("hsched") is None, reason="the hsched command is not on PATH")
def test_jobs_frame_is_the_cli_jobs_csv(tmp_path, examples):
    f = examples / "home-computer.toml"
    subprocess.run(["hsched", "sim", str(f), "--duration", "2s", "--csv", str(tmp_path),
                    "--job-records"], check=True, capture_output=True)
    csv = pd.read_csv(tmp_path / "jobs.csv", dtype={"completion_ns": "Int64",
                                                     "response_ns": "Int64",
                                                     "lateness_ns": "Int64"})
    frame = hsched.load(f).sim("2s", jobs=True).jobs
    assert len(frame) > 100
    pd.testing.assert_frame_equal(frame, csv)
