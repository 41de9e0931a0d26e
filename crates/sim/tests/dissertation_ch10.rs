//! The shape of Regehr 2001, §10.5: Tables 10.4 and 10.5, reproduced in the
//! simulator with the real policies.
//!
//! The dissertation measured a 500 MHz Pentium III running Windows 2000;
//! the simulator has no scheduler overhead, so the numbers match the
//! table's pattern rather than its last digits.

mod common;
use common::*;
use hsched_sim::Report;

// ----- Table 10.4: isolation of resource principals (§10.5.1) ------------

/// One thread of principal 1 against `n` CPU-bound threads of principal 2,
/// under one PS instance (Fig 10.5 left) or one PS instance per principal
/// under a root PS (Fig 10.5 right). 10-second runs, as in the table.
fn principals(n: usize, isolated: bool) -> Report {
    let (p1_sched, p2_sched, extra) = if isolated {
        (
            "P1",
            "P2",
            r#"
[[scheduler]]
name = "P1"
policy = "ps"
parent = "root"
params = { share = 1 }
[[scheduler]]
name = "P2"
policy = "ps"
parent = "root"
params = { share = 1 }
"#,
        )
    } else {
        ("root", "root", "")
    };
    let text = format!(
        r#"
[machine]
cpus = 1
[[principal]]
name = "p1"
[[principal]]
name = "p2"
[[scheduler]]
name = "root"
policy = "ps"
{extra}
[[thread]]
name = "one"
scheduler = "{p1_sched}"
principal = "p1"
workload = {{ kind = "cpu-bound" }}
[[thread]]
name = "many"
count = {n}
scheduler = "{p2_sched}"
principal = "p2"
workload = {{ kind = "cpu-bound" }}
"#
    );
    sim(&text, 10.0)
}

#[test]
fn table_10_4_one_level_ps_gives_each_thread_an_equal_share() {
    for n in [1usize, 4, 16, 64, 256] {
        let r = principals(n, false);
        let p1 = r.principal("p1").unwrap().share;
        let p2 = r.principal("p2").unwrap().share;
        let fair = 1.0 / (n as f64 + 1.0);
        // Within one 10 ms quantum of the exact fair share over 10 s.
        assert!(
            (p1 - fair).abs() <= 0.0011,
            "N2 = {n}: principal 1 got {:.3}% (fair {:.3}%)",
            p1 * 100.0,
            fair * 100.0
        );
        assert!((p1 + p2 - 1.0).abs() < 1e-9);
    }
}

#[test]
fn table_10_4_two_level_ps_keeps_principal_1_at_half() {
    for n in [1usize, 4, 16, 64, 256] {
        let r = principals(n, true);
        let p1 = r.principal("p1").unwrap().share;
        assert!(
            (p1 - 0.5).abs() <= 0.002,
            "N2 = {n}: principal 1 got {:.2}%",
            p1 * 100.0
        );
        assert!((r.scheduler("P1").unwrap().share - 0.5).abs() <= 0.002);
        // Principal 2's threads still share its half equally.
        let many: Vec<u64> = r
            .threads
            .iter()
            .filter(|t| t.name.starts_with("many"))
            .map(|t| t.cpu_ns)
            .collect();
        let (lo, hi) = (*many.iter().min().unwrap(), *many.iter().max().unwrap());
        assert!(
            hi - lo <= 10 * MS + 1,
            "N2 = {n}: principal 2's threads got {lo}..{hi} ns"
        );
    }
}

// ----- Table 10.5: a CPU-bound real-time application (§10.5.2) -----------

#[derive(Clone, Copy, Debug)]
enum Guarantee {
    /// RESBH 10 33: Fig 10.6 left, the renderer in Rez under FP.
    Hard,
    /// RESBS 10 33: Fig 10.6 right, the renderer under a Join of Rez and TS.
    Soft,
    /// No reservation: the renderer in TS at this priority (default 8).
    Null(u8),
}

const HIGH: u8 = 15;
const DEFAULT: u8 = 8;
const LOW: u8 = 1;

/// The renderer (10 ms per frame, a gap over 33 ms is a miss) and `bg`
/// CPU-bound background threads at TS's default priority, for 30 s as in
/// the table. The FP root runs Rez above TS (§11.4's hierarchy).
fn renderer(g: Guarantee, bg: usize) -> Report {
    let placement = match g {
        Guarantee::Hard => r#"scheduler = "rez"
params = { amount = "10ms", period = "33ms" }"#
            .to_string(),
        Guarantee::Soft => r#"scheduler = "join""#.to_string(),
        Guarantee::Null(p) => format!("scheduler = \"ts\"\nparams = {{ priority = {p} }}"),
    };
    let background = if bg > 0 {
        format!(
            r#"
[[thread]]
name = "bg"
count = {bg}
scheduler = "ts"
workload = {{ kind = "cpu-bound" }}
"#
        )
    } else {
        String::new()
    };
    let text = format!(
        r#"
[machine]
cpus = 1
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = {{ priority = 1 }}
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = {{ priority = 0 }}
[[scheduler]]
name = "join"
policy = "join"
parents = [{{ name = "rez", amount = "10ms", period = "33ms" }}, {{ name = "ts" }}]
[[thread]]
name = "app"
{placement}
workload = {{ kind = "frame-renderer", work = "10ms", miss_gap = "33ms" }}
{background}
"#
    );
    sim(&text, 30.0)
}

fn app(r: &Report) -> (f64, u64) {
    let a = r.thread("app").unwrap();
    (a.fps.unwrap(), a.deadline_misses)
}

#[test]
fn table_10_5_hard_reservation_gives_about_30_fps_and_no_misses() {
    for bg in [0, 1, 10] {
        let r = renderer(Guarantee::Hard, bg);
        let (fps, misses) = app(&r);
        assert!(
            (30.0..=33.5).contains(&fps),
            "{bg} background: {fps:.1} fps"
        );
        assert_eq!(misses, 0, "{bg} background");
        // The CPU percentage equals the frame rate (10 ms per frame).
        let share = r.thread("app").unwrap().share * 100.0;
        assert!((share - fps).abs() < 0.5, "{share}% vs {fps} fps");
        if bg > 0 {
            // The background threads get the rest (%b).
            let b: f64 = r
                .threads
                .iter()
                .filter(|t| t.name.starts_with("bg"))
                .map(|t| t.share)
                .sum();
            assert!(
                (b * 100.0 + share - 100.0).abs() < 0.5,
                "background {:.1}%",
                b * 100.0
            );
        }
    }
}

#[test]
fn table_10_5_soft_reservation_uses_spare_time_without_misses() {
    let (fps0, m0) = app(&renderer(Guarantee::Soft, 0));
    let (fps1, m1) = app(&renderer(Guarantee::Soft, 1));
    let (fps10, m10) = app(&renderer(Guarantee::Soft, 10));
    assert_eq!((m0, m1, m10), (0, 0, 0));
    // Alone it takes the whole processor.
    assert!(fps0 > 99.0, "{fps0:.1} fps alone");
    // With background work it still gets its reservation plus a share of
    // the unreserved time: more than 30 FPS, decreasing with the load.
    assert!(
        fps1 > 55.0 && fps1 < 80.0,
        "{fps1:.1} fps with one background thread"
    );
    assert!(fps10 > 30.0 && fps10 < fps1, "{fps10:.1} fps with ten");
}

#[test]
fn table_10_5_no_reservation_misses_under_contention() {
    // Alone, every priority runs at 100 FPS without misses.
    for p in [HIGH, DEFAULT, LOW] {
        let (fps, misses) = app(&renderer(Guarantee::Null(p), 0));
        assert!(
            fps > 99.0 && misses == 0,
            "priority {p} alone: {fps:.1} fps, {misses} misses"
        );
    }
    for bg in [1, 10] {
        // Same priority as the background: time slicing at 30 ms quanta is
        // too coarse for a 33 ms gap.
        let (fps_d, miss_d) = app(&renderer(Guarantee::Null(DEFAULT), bg));
        assert!(
            miss_d >= 100,
            "default priority, {bg} background: {miss_d} misses"
        );
        assert!(fps_d < 100.0 / (bg as f64 + 1.0) + 2.0, "{fps_d:.1} fps");
        // Low priority: it only runs when the starvation boost lifts it.
        let (fps_l, miss_l) = app(&renderer(Guarantee::Null(LOW), bg));
        assert!(
            fps_l < 10.0 && miss_l >= 800,
            "low priority, {bg} background: {fps_l:.1} fps, {miss_l} misses"
        );
        // High priority: the boosted background thread still gets the
        // processor now and then, and each boost costs the renderer a miss.
        let r = renderer(Guarantee::Null(HIGH), bg);
        let (fps_h, miss_h) = app(&r);
        assert!(
            fps_h > 60.0,
            "high priority, {bg} background: {fps_h:.1} fps"
        );
        assert!(miss_h >= 1, "high priority, {bg} background: no misses");
    }
}

/// Prints both tables next to the dissertation's figures (run with
/// `--nocapture`); asserts only that every run works.
#[test]
fn print_tables() {
    println!("Table 10.4 (Regehr 2001): principal 1's share, 1-level vs 2-level PS");
    println!(
        "{:>5} {:>12} {:>12} {:>12}",
        "N2", "1-level %", "fair %", "2-level %"
    );
    for n in [1usize, 4, 16, 64, 256] {
        let flat = principals(n, false).principal("p1").unwrap().share * 100.0;
        let iso = principals(n, true).principal("p1").unwrap().share * 100.0;
        println!(
            "{n:>5} {flat:>12.3} {:>12.3} {iso:>12.3}",
            100.0 / (n as f64 + 1.0)
        );
    }
    println!();
    println!("Table 10.5 (Regehr 2001): the renderer, 30 s runs");
    println!(
        "{:>4} {:<18} {:>7} {:>7} {:>7} {:>7}",
        "bg", "guarantee", "%a", "FPS", "misses", "%b"
    );
    for bg in [0, 1, 10] {
        for (label, g) in [
            ("RESBH 10 33", Guarantee::Hard),
            ("RESBS 10 33", Guarantee::Soft),
            ("NULL (high pri.)", Guarantee::Null(HIGH)),
            ("NULL (default)", Guarantee::Null(DEFAULT)),
            ("NULL (low pri.)", Guarantee::Null(LOW)),
        ] {
            let r = renderer(g, bg);
            let a = r.thread("app").unwrap();
            let b: f64 = r
                .threads
                .iter()
                .filter(|t| t.name.starts_with("bg"))
                .map(|t| t.share)
                .sum::<f64>()
                + 0.0;
            println!(
                "{bg:>4} {label:<18} {:>7.2} {:>7.2} {:>7} {:>7.2}",
                a.share * 100.0,
                a.fps.unwrap(),
                a.deadline_misses,
                b * 100.0
            );
        }
    }
}
