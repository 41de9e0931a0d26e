//! The `stage` (pipeline) and `player` workloads driven from hierarchy
//! files: queues, blocking, progress messages to `realrate` (Steere et al. 1998, §4,
//! Fig 6's shape), and the adaptive player under `coop` and `ts` (Sinha 2007,
//! §3). Run with `--nocapture` to see the numbers.

mod common;

use common::{opts, parse, sim};
use hsched_sim::Report;

/// Fig 6 of Steere et al. 1998: a producer with a fixed 20 % / 10 ms reservation
/// makes one 1 KiB item per ms of CPU (200 items/s), twice as fast in
/// pulses; a real-rate consumer needs 1 ms per item; a 64-item queue
/// starts half full.
const FIG6: &str = r#"
[machine]
cpus = 1

[[scheduler]]
name = "rr"
policy = "realrate"

[[queue]]
name = "q"
size = 64
initial = 32

[[thread]]
name = "producer"
scheduler = "rr"
params = { proportion = 0.2, period = "10ms" }
workload = { kind = "stage", output = "q", cost = "1ms", pulses = [
  { start = "1s", length = "1s", factor = 2 },
  { start = "3s", length = "500ms", factor = 2 },
] }

[[thread]]
name = "consumer"
scheduler = "rr"
params = { class = "real-rate", period = "10ms" }
workload = { kind = "stage", input = "q", cost = "1ms" }
"#;

/// A run is a prefix of any longer run with the same file and seed, so
/// runs to several ends sample the pipeline over time.
fn at(text: &str, secs: f64) -> Report {
    sim(text, secs)
}

fn items(r: &Report, thread: &str) -> u64 {
    r.thread(thread).unwrap().jobs
}

#[test]
fn fig6_the_consumer_follows_a_rate_pulse_and_the_queue_returns_to_half() {
    // Consumer throughput (items/s) over a window [a, b).
    let rate = |a: f64, b: f64| {
        let (ra, rb) = (at(FIG6, a), at(FIG6, b));
        (items(&rb, "consumer") - items(&ra, "consumer")) as f64 / (b - a)
    };
    let before = rate(0.5, 1.0);
    let during = rate(1.5, 2.0);
    let after = rate(2.5, 3.0);
    println!("fig6 consumer items/s: before {before:.0}, during {during:.0}, after {after:.0}");
    assert!((before - 200.0).abs() < 10.0, "{before}");
    assert!((during - 400.0).abs() < 20.0, "{during}");
    assert!((after - 200.0).abs() < 10.0, "{after}");
    // The allocation follows within about a third of a second: in the
    // first 0.35 s of the pulse the consumer already runs near the new rate.
    let early = rate(1.25, 1.35);
    println!("fig6 consumer items/s over [1.25, 1.35) s: {early:.0}");
    assert!(early > 340.0, "{early}");
    // The queue returns toward half full at the end of each plateau.
    for t in [1.0, 2.0, 3.0, 3.5, 4.5] {
        let r = at(FIG6, t);
        let q = &r.queues[0];
        println!(
            "fig6 t={t}s fill {} of {} (min {}, max {})",
            q.fill, q.size, q.min_fill, q.max_fill
        );
        assert!((q.fill as f64 - 32.0).abs() <= 8.0, "t={t}: {q:?}");
    }
    let r = at(FIG6, 5.0);
    // Never overfull, never negative: the stages block instead.
    let q = &r.queues[0];
    assert!(q.max_fill <= 64 && q.pushed == items(&r, "producer"));
    // The consumer takes an item when it starts on it.
    assert!(q.popped - items(&r, "consumer") <= 1);
    assert!((q.mean_fill - 0.5).abs() < 0.1, "{q:?}");
    // The producer's reservation is untouched: 1 ms of every 10 ms... 2 ms.
    let p = r.thread("producer").unwrap();
    assert!((p.cpu_ns as f64 / 1e9 - 1.0).abs() < 0.01, "{}", p.cpu_ns);
    // Progress reports every 10 ms from each stage, all accepted.
    for t in ["producer", "consumer"] {
        let th = r.thread(t).unwrap();
        assert_eq!(th.messages_refused, 0);
        assert!((500..=502).contains(&th.messages_sent), "{t}: {th:?}");
    }
}

const CHAIN: &str = r#"
[machine]
cpus = 1

[[scheduler]]
name = "ts"
policy = "ts"

[[queue]]
name = "a"
size = 4

[[queue]]
name = "b"
size = 2

[[thread]]
name = "src"
scheduler = "ts"
workload = { kind = "stage", output = "a", cost = "1ms", rate = 100 }

[[thread]]
name = "filter"
scheduler = "ts"
workload = { kind = "stage", input = "a", output = "b", cost = "2ms" }

[[thread]]
name = "sink"
scheduler = "ts"
workload = { kind = "stage", input = "b", cost = "500us", report = "0s" }
"#;

#[test]
fn a_paced_three_stage_chain_moves_every_item_and_blocks_on_its_queues() {
    let r = sim(CHAIN, 2.0);
    let (src, filter, sink) = (items(&r, "src"), items(&r, "filter"), items(&r, "sink"));
    println!("chain items: {src} {filter} {sink}; queues {:?}", r.queues);
    // 100 items/s for 2 s, the first at time zero.
    assert!((199..=201).contains(&src), "{src}");
    // Everything made is passed on; at most the queues' contents and one
    // item per stage are in flight.
    assert!(src - sink <= 4 + 2 + 2, "{src} {sink}");
    assert!(filter <= src && sink <= filter);
    assert_eq!(r.queues[0].pushed, src);
    assert_eq!(r.queues[1].popped, sink);
    // Only 35 % of the CPU is needed: the stages spend the rest blocked.
    let busy = r.machine.busy_ns as f64 / 2e9;
    assert!((busy - 0.35).abs() < 0.01, "{busy}");
    // `ts` does not take progress messages: each report is refused and
    // counted; the sink sends none.
    assert!(r.thread("src").unwrap().messages_refused >= 200);
    assert_eq!(r.thread("sink").unwrap().messages_sent, 0);
    assert_eq!(r.thread("sink").unwrap().messages_refused, 0);
}

#[test]
fn a_slow_consumer_holds_the_producer_at_a_full_queue() {
    let text = r#"
[machine]
cpus = 1
[[scheduler]]
name = "ts"
policy = "ts"
[[queue]]
name = "q"
size = 8
[[thread]]
name = "fast"
scheduler = "ts"
workload = { kind = "stage", output = "q", cost = "100us", report = "0s" }
[[thread]]
name = "slow"
scheduler = "ts"
workload = { kind = "stage", input = "q", cost = "1ms", report = "0s" }
"#;
    let r = sim(text, 1.0);
    let q = &r.queues[0];
    println!(
        "{q:?} {:?}",
        r.threads
            .iter()
            .map(|t| (t.jobs, t.share))
            .collect::<Vec<_>>()
    );
    assert_eq!(q.max_fill, 8);
    // The producer runs only when the consumer frees a slot: ~10 % CPU.
    let fast = r.thread("fast").unwrap();
    let slow = r.thread("slow").unwrap();
    assert!(fast.jobs <= slow.jobs + 9 && fast.jobs >= slow.jobs);
    assert!(slow.share > 0.88, "{}", slow.share);
}

fn players(policy: &str, n: usize) -> String {
    format!(
        r#"
[machine]
cpus = 1
context_switch = "20us"

[[scheduler]]
name = "s"
policy = "{policy}"

[[thread]]
name = "player"
scheduler = "s"
count = {n}
workload = {{ kind = "player" }}
"#
    )
}

fn worst(r: &Report) -> f64 {
    r.threads
        .iter()
        .filter_map(|t| t.max_tardiness_ns)
        .max()
        .unwrap_or(0) as f64
        / 1e6
}

#[test]
fn players_under_coop_poll_and_beat_time_sharing_under_saturation() {
    let coop = sim(&players("coop", 10), 6.0);
    let ts = sim(&players("ts", 10), 6.0);
    let fps = |r: &Report| r.threads.iter().map(|t| t.fps.unwrap()).sum::<f64>();
    let sw = |r: &Report| r.machine.context_switches as f64 / 6.0;
    println!(
        "players coop: worst {:.1} ms, {:.0} switches/s, {:.1} fps; ts: worst {:.1} ms, {:.0} switches/s, {:.1} fps",
        worst(&coop),
        sw(&coop),
        fps(&coop),
        worst(&ts),
        sw(&ts),
        fps(&ts)
    );
    for t in &coop.threads {
        assert!(t.messages_sent > 100, "{t:?}");
        assert_eq!(t.messages_refused, 0);
    }
    // Under ts the first coop_poll is refused and the players stop asking.
    for t in &ts.threads {
        assert_eq!((t.messages_sent, t.messages_refused), (0, 1), "{t:?}");
    }
    // The thesis's advantage: several times lower tardiness.
    assert!(
        worst(&coop) * 5.0 < worst(&ts),
        "{} {}",
        worst(&coop),
        worst(&ts)
    );
    assert!(worst(&coop) < 3.0);
    // Saturated: frames are dropped, the processor is never idle. A frame
    // not shown at its display time is a missed deadline.
    assert!(coop.threads.iter().map(|t| t.dropped).sum::<u64>() > 0);
    for t in coop.threads.iter().chain(&ts.threads) {
        assert_eq!(
            t.deadline_misses,
            t.jobs - t.deadline_hits + t.dropped,
            "{t:?}"
        );
    }
    assert_eq!(coop.machine.idle_ns, 0);
    // Deterministic.
    assert_eq!(coop, sim(&players("coop", 10), 6.0));
}

#[test]
fn four_players_play_every_frame_without_cooperation_too() {
    let text = players("coop", 4).replace(
        "{ kind = \"player\" }",
        "{ kind = \"player\", cooperative = false }",
    );
    let h = parse(&text);
    let r = hsched_sim::run_with_policies(&h, opts(4.0), &common::policies()).unwrap();
    for t in &r.threads {
        assert_eq!(t.messages_sent + t.messages_refused, 0);
        assert_eq!(t.dropped, 0, "{t:?}");
        // 24 fps from the first display, 100 ms plus up to 1.5 frames in.
        let fps = t.fps.unwrap();
        assert!(fps > 22.5 && fps < 24.1, "{fps}");
    }
}

#[test]
fn fig7_a_misc_hog_is_squished_when_the_consumer_needs_more() {
    let text = format!(
        "{FIG6}\n[[thread]]\nname = \"hog\"\nscheduler = \"rr\"\nparams = {{ class = \"misc\" }}\nworkload = {{ kind = \"cpu-bound\" }}\n"
    );
    // CPU shares over a window [a, b).
    let share = |a: f64, b: f64, who: &str| {
        let (ra, rb) = (sim(&text, a), sim(&text, b));
        (rb.thread(who).unwrap().cpu_ns - ra.thread(who).unwrap().cpu_ns) as f64 / (b - a) / 1e9
    };
    let (h1, h2) = (share(0.5, 1.0, "hog"), share(1.5, 2.0, "hog"));
    let (c1, c2) = (share(0.5, 1.0, "consumer"), share(1.5, 2.0, "consumer"));
    let p = share(0.5, 2.0, "producer");
    println!("fig7 hog {h1:.3} -> {h2:.3}, consumer {c1:.3} -> {c2:.3}, producer {p:.3}");
    // The hog takes what the pipeline leaves of the 90 %, and gives back
    // what the consumer needs in the pulse; the producer is untouched.
    assert!(h1 > 0.4 && h2 < h1 - 0.15, "{h1} {h2}");
    assert!(c2 > 0.35, "{c2}");
    assert!((p - 0.2).abs() < 0.005, "{p}");
    let r = sim(&text, 2.0);
    let q = &r.queues[0];
    assert!(q.max_fill < 64 && q.min_fill > 0, "{q:?}");
}
