//! docs/writing-a-policy.md stays true: its C pieces put together are
//! sdk/tutorial/rr.c, and rr.c, built with clang-14 and run under
//! sdk/tutorial/rr.toml, gives each of three CPU-bound threads a third of
//! the processor within one quantum, as round robin must; and the broken
//! rr of its section 6 is unloaded, its threads going on under the
//! hierarchy's default scheduler.

mod common;

use common::{read, repo, scratch};
use hsched_core::Duration;
use hsched_sim::SimOptions;
use std::path::Path;

/// The code blocks the tutorial marks as parts of rr.c, in order.
fn pieces(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "<!-- part of rr.c -->" {
            continue;
        }
        assert_eq!(
            lines.next(),
            Some("```c"),
            "a marked part must open a C block"
        );
        let mut p = Vec::new();
        for l in lines.by_ref() {
            if l == "```" {
                break;
            }
            p.push(l);
        }
        out.push(p.join("\n"));
    }
    out
}

#[test]
fn the_tutorial_shows_all_of_rr_c() {
    let doc = read(&repo().join("docs/writing-a-policy.md"));
    let src = read(&repo().join("sdk/tutorial/rr.c"));
    let parts = pieces(&doc);
    assert!(
        parts.len() >= 4,
        "only {} parts of rr.c in the tutorial",
        parts.len()
    );
    let shown = parts.join("\n\n") + "\n";
    if shown != src {
        let at = shown
            .lines()
            .zip(src.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(shown.lines().count().min(src.lines().count()));
        panic!(
            "docs/writing-a-policy.md and sdk/tutorial/rr.c differ from line {}: \
             the tutorial shows\n{:?}\nthe file has\n{:?}",
            at + 1,
            shown.lines().nth(at),
            src.lines().nth(at)
        );
    }
}

/// Builds C source `src` into `dir/NAME.wasm`, or returns false when
/// clang-14 is not installed (and not required).
fn build(dir: &Path, name: &str, src: &str) -> bool {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let Some(wasm) = common::compile(&c, name, &[]) else {
        return false;
    };
    std::fs::copy(wasm, dir.join(format!("{name}.wasm"))).unwrap();
    true
}

fn simulate(toml: &Path) -> hsched_sim::Report {
    common::simulate(toml, SimOptions::default())
}

#[test]
fn rr_shares_the_processor_in_thirds() {
    let dir = scratch("rr");
    if !build(&dir, "rr", &read(&repo().join("sdk/tutorial/rr.c"))) {
        return;
    }
    let toml = dir.join("rr.toml");
    std::fs::copy(repo().join("sdk/tutorial/rr.toml"), &toml).unwrap();
    let report = simulate(&toml);
    let faults: Vec<_> = hsched_plugin::faults()
        .into_iter()
        .filter(|f| f.plugin.starts_with(&dir))
        .collect();
    assert!(faults.is_empty(), "rr faulted: {faults:?}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir);

    // rr.toml sets quantum = "10ms" and runs A, B and C, CPU-bound, under
    // rr, which FP always runs: each gets the third of the processor's
    // busy time, give or take the quantum the run ended in.
    let quantum = Duration::from_millis(10).as_nanos();
    let busy = report.machine.busy_ns;
    assert!(busy > 0, "nothing ran");
    for name in ["A", "B", "C"] {
        let t = report
            .threads
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no thread {name} in the report"));
        assert_eq!(t.scheduler, "rr", "{name} left rr for {}", t.scheduler);
        let diff = t.cpu_ns.abs_diff(busy / 3);
        assert!(
            diff <= quantum,
            "{name} ran {} ns of {busy} ns busy: {diff} ns from a third, more than one quantum",
            t.cpu_ns
        );
    }
}

#[test]
fn the_broken_rr_is_unloaded_and_its_threads_go_on() {
    // Section 6: rr that keeps a processor nobody runs on, under threads
    // that sleep.
    let dir = scratch("broken");
    let release = "      hsched_release(hsched_parent_vp(0));";
    let src = read(&repo().join("sdk/tutorial/rr.c"));
    assert!(
        src.contains(release),
        "rr.c no longer has the line section 6 removes"
    );
    if !build(
        &dir,
        "broken",
        &src.replace(release, "      /* forgot to release */"),
    ) {
        return;
    }
    let toml = dir.join("broken.toml");
    let text = read(&repo().join("sdk/tutorial/rr.toml"))
        .replace("policy = \"rr.wasm\"", "policy = \"broken.wasm\"")
        .replace(
            "{ kind = \"cpu-bound\" }",
            "{ kind = \"periodic\", period = \"20ms\", exec = \"5ms\" }",
        );
    std::fs::write(&toml, text).unwrap();
    let report = simulate(&toml);
    let _ = std::fs::remove_dir_all(&dir);

    assert_eq!(report.unloaded.len(), 1, "{:?}", report.unloaded);
    let u = &report.unloaded[0];
    assert_eq!(u.scheduler, "rr");
    assert_eq!(u.fallback.as_deref(), Some("ts"), "{u:?}");
    assert!(u.at_ns < 100_000_000, "unloaded only at {} ns", u.at_ns);
    for name in ["A", "B", "C"] {
        let t = report.threads.iter().find(|t| t.name == name).unwrap();
        assert_eq!(t.scheduler, "ts", "{name} is under {}", t.scheduler);
        // 5 ms every 20 ms for 3 s: 750 ms, all of it once under ts.
        assert!(
            t.cpu_ns >= 700_000_000,
            "{name} ran only {} ns after the fallback",
            t.cpu_ns
        );
    }
}
