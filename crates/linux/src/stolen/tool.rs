//! `hsched-live stolen`: how much time this machine steals from a reserved
//! thread (Regehr 2001, §11.8), and the live over-reservation experiment of
//! Fig 11.3.
//!
//! ```text
//! hsched-live stolen [--load none,tcp,tcp-local,disk,timers] [--cpu N] [--duration 5s]
//!                    [--reserve 4ms/20ms] [--threshold 1us] [--no-trace]
//! hsched-live stolen rez [--load tcp] [--cpu N] [--duration 5s] [--source trace]
//!                    [--over -10,-5,0,5,10,15,20,25,30] [--variants basic,catch-up,feedback] [--irq-overhead 8us]
//! hsched-live stolen app --period 20ms --need 4ms --duration D --out FILE
//! ```
//!
//! The first form runs, for each load, a probe thread pinned to the CPU at
//! `SCHED_FIFO` 50 that spins for the reserved amount at the start of every
//! period, like a thread holding a 4 ms / 20 ms reservation, and records
//! every gap in its clock readings (§11.6.2), while the IRQ tracepoints,
//! `/proc/stat` and the probe's schedstat are read for comparison. The
//! second runs the test application of §11.6.2 (`app`) live under Rez,
//! Rez-C and Rez-FB at each over-reservation, with the load running and
//! the daemon measuring stolen time from `--source`, and prints the misses.
//! Every run is bounded by its duration; loads are stopped, `lo`'s RPS mask
//! restored and temporary files removed at the end of each.

use super::load::{self, Load};
use super::{
    covered, kernel_accounting, probe_window, read_proc_stat, read_schedstat, IrqTracer,
    StolenSource, Window,
};
use crate::sys;
use std::fmt::Write as _;

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Rejects what a form does not take: a misspelt option would otherwise
/// run the whole measurement on a default.
fn only(args: &[String], valued: &[&str], switches: &[&str]) -> Result<(), String> {
    let mut i = 0;
    while let Some(a) = args.get(i).map(String::as_str) {
        if valued.contains(&a) {
            if args.get(i + 1).is_none() {
                return Err(format!("{a} needs a value"));
            }
            i += 2;
        } else if switches.contains(&a) {
            i += 1;
        } else {
            let known: Vec<&str> = valued.iter().chain(switches).copied().collect();
            return Err(format!(
                "unknown option `{a}` (this form takes {})",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

fn dur(args: &[String], name: &str, default_ns: u64) -> Result<u64, String> {
    match flag(args, name) {
        None => Ok(default_ns),
        Some(v) => hsched_core::time::parse_duration(&v, None)
            .map(|d| d.as_nanos())
            .map_err(|e| format!("{name}: {}", e.message)),
    }
}

/// Longest run accepted (every run is bounded).
const MAX_RUN_NS: u64 = 600_000_000_000;

fn cpus(args: &[String]) -> Result<(usize, usize), String> {
    let online = sys::online_cpus();
    let cpu = match flag(args, "--cpu") {
        Some(c) => c.parse().map_err(|_| "--cpu needs a CPU number")?,
        None => *online.last().unwrap_or(&0),
    };
    if !online.contains(&cpu) {
        return Err(format!("CPU {cpu} is not online (online: {online:?})"));
    }
    let other = online.iter().copied().find(|&c| c != cpu).unwrap_or(cpu);
    Ok((cpu, other))
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// One characterization run.
struct Row {
    load: Load,
    windows: Vec<Window>,
    /// Traced IRQ intervals on the CPU during the measurement.
    traced: Option<Vec<(u64, u64)>>,
    /// Traced own time per kind during the measurement, ns.
    kinds: Vec<(&'static str, u64)>,
    /// Probe thread run time from schedstat, ns.
    sched_run: Option<u64>,
    /// `/proc/stat` deltas of the CPU: (wall, irq + softirq, steal), ns.
    stat: Option<(u64, u64, u64)>,
}

fn characterize(
    load: Load,
    cpu: usize,
    other: usize,
    length: u64,
    (amount, period): (u64, u64),
    threshold: u64,
    trace: bool,
) -> Result<Row, String> {
    let warm = 300_000_000;
    let mut tracer = if trace {
        Some(IrqTracer::new(&[cpu], 8).map_err(|e| format!("IRQ tracepoints: {e}"))?)
    } else {
        None
    };
    let t_start = sys::now_ns();
    let mut running = load::start(load, cpu, other, t_start + warm + length + 2_000_000_000)
        .map_err(|e| format!("starting the {} load: {e}", load.name()))?;
    let self_mask = sys::get_affinity(0).map_err(|e| e.to_string())?;
    let _ = sys::set_affinity(0, &sys::CpuMask::single(other));
    let mut ivs: Vec<(u64, u64)> = Vec::new();
    let mut buf = Vec::new();
    let drain = |t: &mut Option<IrqTracer>,
                 ivs: &mut Vec<(u64, u64)>,
                 buf: &mut Vec<super::IrqInterval>,
                 keep: bool| {
        if let Some(t) = t.as_mut() {
            buf.clear();
            t.drain(buf);
            if keep {
                ivs.extend(
                    buf.iter()
                        .filter(|i| i.cpu == cpu)
                        .map(|i| (i.start, i.end)),
                );
            }
        }
    };
    while sys::now_ns() < t_start + warm {
        sys::sleep_until(sys::now_ns() + 5_000_000);
        drain(&mut tracer, &mut ivs, &mut buf, false);
    }
    let kinds0 = tracer.as_ref().map(|t| t.totals(cpu)).unwrap_or_default();
    let stat0 = read_proc_stat().ok();
    let wall0 = sys::now_ns();
    let first = wall0 + 5_000_000;
    let n = (length / period).max(1);
    let probe = std::thread::spawn(move || {
        let _ = sys::set_affinity(0, &sys::CpuMask::single(cpu));
        let _ = sys::sched_setattr(0, &sys::SchedAttr::fifo(50));
        let tid = sys::gettid();
        let s0 = read_schedstat(tid).ok();
        let mut windows = Vec::with_capacity(n as usize);
        for k in 0..n {
            let start = first + k * period;
            sys::sleep_until(start);
            windows.push(probe_window(start + amount, threshold, 100_000));
        }
        let s1 = read_schedstat(tid).ok();
        let _ = sys::sched_setattr(0, &sys::SchedAttr::other());
        let run = match (s0, s1) {
            (Some(a), Some(b)) => Some(b.run_ns - a.run_ns),
            _ => None,
        };
        (windows, run)
    });
    while !probe.is_finished() {
        sys::sleep_until(sys::now_ns() + 5_000_000);
        drain(&mut tracer, &mut ivs, &mut buf, true);
    }
    drain(&mut tracer, &mut ivs, &mut buf, true);
    let stat1 = read_proc_stat().ok();
    let wall1 = sys::now_ns();
    running.stop();
    let _ = sys::set_affinity(0, &self_mask);
    let (windows, sched_run) = probe.join().map_err(|_| "the probe thread panicked")?;
    let stat = match (stat0, stat1) {
        (Some(a), Some(b)) => {
            let (a, b) = (
                a.iter().find(|s| s.cpu == cpu).copied().unwrap_or_default(),
                b.iter().find(|s| s.cpu == cpu).copied().unwrap_or_default(),
            );
            Some((
                wall1 - wall0,
                (b.irq + b.softirq).saturating_sub(a.irq + a.softirq),
                b.steal.saturating_sub(a.steal),
            ))
        }
        _ => None,
    };
    let mut kinds: Vec<(&'static str, u64)> = Vec::new();
    if let Some(t) = &tracer {
        for (k, v) in t.totals(cpu) {
            let before = kinds0.iter().find(|(k0, _)| *k0 == k).map_or(0, |x| x.1);
            let d = v.saturating_sub(before);
            match kinds.iter_mut().find(|(n, _)| *n == k.name()) {
                Some(e) => e.1 += d,
                None => kinds.push((k.name(), d)),
            }
        }
        kinds.sort_by_key(|&(_, v)| std::cmp::Reverse(v));
    }
    ivs.sort_unstable();
    Ok(Row {
        load,
        windows,
        traced: tracer.is_some().then_some(ivs),
        kinds,
        sched_run,
        stat,
    })
}

fn row_line(r: &Row, out: &mut String) {
    let total: u64 = r
        .windows
        .iter()
        .map(|w| w.end - w.start)
        .sum::<u64>()
        .max(1);
    let stolen: u64 = r.windows.iter().map(Window::stolen).sum();
    let mut gaps: Vec<u64> = r
        .windows
        .iter()
        .flat_map(|w| w.gaps.iter().map(|&(a, b)| b - a))
        .collect();
    gaps.sort_unstable();
    let mut per: Vec<u64> = r
        .windows
        .iter()
        .map(|w| w.stolen() * 10_000 / (w.end - w.start).max(1))
        .collect();
    per.sort_unstable();
    let pct = |v: u64| v as f64 / total as f64 * 100.0;
    let traced = r.traced.as_ref().map_or("-".to_string(), |iv| {
        let t: u64 = r.windows.iter().map(|w| covered(iv, w.start, w.end)).sum();
        format!("{:.2}", pct(t))
    });
    // What each traced interrupt inside the windows leaves unexplained:
    // the entry and exit paths (`--stolen-irq-overhead`).
    let untraced = r.traced.as_ref().map_or("-".to_string(), |iv| {
        let t: u64 = r.windows.iter().map(|w| covered(iv, w.start, w.end)).sum();
        let n: usize = r
            .windows
            .iter()
            .map(|w| {
                let a = iv.partition_point(|&(s, _)| s < w.start);
                let b = iv.partition_point(|&(s, _)| s < w.end);
                b - a
            })
            .sum();
        if n == 0 {
            "-".to_string()
        } else {
            format!("{:.1}", stolen.saturating_sub(t) as f64 / n as f64 / 1e3)
        }
    });
    let sched = r.sched_run.map_or("-".into(), |run| {
        format!("{:.2}", (total as f64 - run as f64) / total as f64 * 100.0)
    });
    let (stat_irq, stat_steal) = r.stat.map_or(("-".into(), "-".into()), |(w, i, s)| {
        (
            format!("{:.2}", i as f64 / w.max(1) as f64 * 100.0),
            format!("{:.2}", s as f64 / w.max(1) as f64 * 100.0),
        )
    });
    let wall: u64 = r.stat.map_or(total, |s| s.0).max(1);
    let kinds: Vec<String> = r
        .kinds
        .iter()
        .take(3)
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k} {:.2}", *v as f64 / wall as f64 * 100.0))
        .collect();
    let us = |v: u64| v as f64 / 1e3;
    let _ = writeln!(
        out,
        "| {} | {:.2} | {:.2} / {:.2} | {:.0} | {:.1} / {:.1} / {:.1} / {:.1} | {traced} | {untraced} | {sched} | {stat_irq} | {stat_steal} | {} |",
        r.load.name(),
        pct(stolen),
        per[per.len() / 2] as f64 / 100.0,
        per[(per.len() * 99 / 100).min(per.len() - 1)] as f64 / 100.0,
        gaps.len() as f64 / (total as f64 / 1e9),
        us(percentile(&gaps, 0.5)),
        us(percentile(&gaps, 0.9)),
        us(percentile(&gaps, 0.99)),
        us(gaps.last().copied().unwrap_or(0)),
        kinds.join(", ")
    );
}

fn characterize_main(args: &[String]) -> Result<String, String> {
    let (cpu, other) = cpus(args)?;
    let length = dur(args, "--duration", 5_000_000_000)?.min(MAX_RUN_NS);
    let threshold = dur(args, "--threshold", 1_000)?.max(1);
    let reserve = flag(args, "--reserve").unwrap_or_else(|| "4ms/20ms".into());
    let (a, p) = reserve
        .split_once('/')
        .ok_or("--reserve needs AMOUNT/PERIOD, e.g. 4ms/20ms")?;
    let amount = hsched_core::time::parse_duration(a, None)
        .map_err(|e| e.message)?
        .as_nanos();
    let period = hsched_core::time::parse_duration(p, None)
        .map_err(|e| e.message)?
        .as_nanos();
    if amount == 0 || amount >= period {
        return Err("--reserve: the amount must be positive and shorter than the period".into());
    }
    let loads: Vec<Load> = flag(args, "--load")
        .unwrap_or_else(|| "none,tcp,tcp-local,disk,timers".into())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let trace = !args.iter().any(|a| a == "--no-trace");
    let k = kernel_accounting();
    let mut out = String::new();
    let yn = |v: Option<bool>| v.map_or("unknown", |b| if b { "yes" } else { "no" });
    let _ = writeln!(
        out,
        "kernel accounting ({}): IRQ time accounting {}, paravirt steal time {}, tick-sampled CPU accounting {}, HZ {}",
        k.source.as_deref().unwrap_or("configuration not found"),
        yn(k.irq_time),
        yn(k.paravirt_steal),
        yn(k.tick_accounting),
        k.hz.map_or("unknown".into(), |h| h.to_string())
    );
    let _ = writeln!(
        out,
        "probe: CPU {cpu}, SCHED_FIFO 50, spinning {:.1} ms every {:.1} ms for {:.1} s, gaps > {:.1} us; helpers on CPU {other}\n",
        amount as f64 / 1e6,
        period as f64 / 1e6,
        length as f64 / 1e9,
        threshold as f64 / 1e3
    );
    out.push_str("| load | stolen (% of reserved time) | per-period stolen p50 / p99 (%) | gaps/s | gap p50 / p90 / p99 / max (us) | IRQ tracepoints in the windows (%) | untraced time per traced interrupt (us) | schedstat shortfall (%) | /proc/stat irq+softirq (% of CPU) | /proc/stat steal (% of CPU) | traced IRQ time by kind (% of CPU) |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for load in loads {
        let r = characterize(load, cpu, other, length, (amount, period), threshold, trace)?;
        row_line(&r, &mut out);
    }
    Ok(out)
}

// ----- the test application of §11.6.2 ---------------------------------------------

/// What the test application measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppResult {
    /// Reserved blocks seen (after the warm-up ones).
    pub blocks: u64,
    /// Blocks in which it received less than it needed.
    pub misses: u64,
    /// Mean CPU time received per block, ns.
    pub mean_received: f64,
    /// Mean time stolen inside a block (gaps), ns.
    pub mean_stolen: f64,
}

/// The test application of §11.6.2 for a thread holding a reservation:
/// spins reading the clock until `end`; a pause longer than a quarter of
/// `period` ends a block of reserved time (the reservation ran out), and
/// a block counts as a deadline hit when the CPU time received in it
/// (its length minus the gaps longer than `threshold`) reaches `need`
/// less 2.2 µs, the probe's resolution in §11.6.2. The first `skip`
/// blocks (start-up) and the last (cut by the end) are not counted.
pub fn test_app(period: u64, need: u64, end: u64, threshold: u64, skip: u64) -> AppResult {
    let split = period / 4;
    let mut res = AppResult::default();
    let (mut recv_sum, mut stolen_sum) = (0u64, 0u64);
    let mut blocks = 0u64;
    let mut block_start = sys::now_ns();
    let mut last = block_start;
    let mut stolen = 0u64;
    let mut close = |start: u64, last: u64, stolen: u64| {
        blocks += 1;
        if blocks > skip {
            let recv = (last - start).saturating_sub(stolen);
            res.blocks += 1;
            if recv + 2_200 < need {
                res.misses += 1;
            }
            recv_sum += recv;
            stolen_sum += stolen;
        }
    };
    while last < end {
        let t = sys::now_ns();
        let d = t - last;
        if d > split {
            close(block_start, last, stolen);
            block_start = t;
            stolen = 0;
        } else if d > threshold {
            stolen += d;
        }
        last = t;
    }
    if res.blocks > 0 {
        res.mean_received = recv_sum as f64 / res.blocks as f64;
        res.mean_stolen = stolen_sum as f64 / res.blocks as f64;
    }
    res
}

fn app_main(args: &[String]) -> Result<String, String> {
    let period = dur(args, "--period", 20_000_000)?.max(1_000);
    let need = dur(args, "--need", 4_000_000)?;
    let length = dur(args, "--duration", 5_000_000_000)?.min(MAX_RUN_NS);
    let r = test_app(period, need, sys::now_ns() + length, 1_000, 5);
    let text = format!(
        "{{\"blocks\":{},\"misses\":{},\"mean_received_ns\":{:.0},\"mean_stolen_ns\":{:.0}}}",
        r.blocks, r.misses, r.mean_received, r.mean_stolen
    );
    match flag(args, "--out") {
        Some(path) => {
            std::fs::write(&path, &text).map_err(|e| format!("{path}: {e}"))?;
            Ok(String::new())
        }
        None => Ok(text),
    }
}

// ----- live Fig 11.3 -------------------------------------------------------------------

fn rez_main(args: &[String]) -> Result<String, String> {
    let (cpu, other) = cpus(args)?;
    let length = dur(args, "--duration", 5_000_000_000)?.min(MAX_RUN_NS);
    let load: Load = flag(args, "--load")
        .unwrap_or_else(|| "tcp".into())
        .parse()?;
    let source: StolenSource = flag(args, "--source")
        .unwrap_or_else(|| "trace".into())
        .parse()?;
    let overs: Vec<i64> = flag(args, "--over")
        .unwrap_or_else(|| "-10,-5,0,5,10,15,20,25,30".into())
        .split(',')
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| format!("bad --over value `{v}`"))
        })
        .collect::<Result<_, _>>()?;
    let variants: Vec<String> = flag(args, "--variants")
        .unwrap_or_else(|| "basic,catch-up,feedback".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let overhead = dur(args, "--irq-overhead", 0)?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let out_file = std::env::temp_dir().join(format!("hsched-stolen-app-{}.json", sys::getpid()));
    let mut results: Vec<Vec<(f64, f64, f64, f64)>> = vec![Vec::new(); variants.len()];
    for (vi, variant) in variants.iter().enumerate() {
        for &over in &overs {
            let amount = (4_000_000i64 + 40_000 * over).max(1) as u64;
            let text = format!(
                "[machine]\ncpus = 1\n[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n\
                 [[scheduler]]\nname = \"rez\"\npolicy = \"rez\"\nparent = \"root\"\nvariant = \"{variant}\"\nparams = {{ priority = 10 }}\n\
                 [[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\nparent = \"root\"\nparams = {{ priority = 1 }}\n\
                 [[thread]]\nname = \"app\"\nscheduler = \"rez\"\nparams = {{ amount = \"{amount}ns\", period = \"20ms\" }}\n\
                 exec = [\"{}\", \"stolen\", \"app\", \"--period\", \"20ms\", \"--need\", \"4ms\", \"--duration\", \"{}ns\", \"--out\", \"{}\"]\n",
                me.display(),
                length,
                out_file.display()
            );
            let h =
                hsched_config::parse_str(&text, "stolen-rez.toml").map_err(|e| e.to_string())?;
            let _ = std::fs::remove_file(&out_file);
            let t0 = sys::now_ns();
            let mut running = load::start(load, cpu, other, t0 + length + 3_000_000_000)
                .map_err(|e| format!("starting the {} load: {e}", load.name()))?;
            sys::sleep_until(t0 + 200_000_000);
            let opts = crate::RunOptions {
                cpus: Some(vec![cpu]),
                duration: Some(hsched_core::Duration(length + 1_000_000_000)),
                stolen: source,
                stolen_irq_overhead: hsched_core::Duration(overhead),
                ..crate::RunOptions::default()
            };
            let report = crate::run(&h, opts).map_err(|e| e.to_string());
            running.stop();
            let report = report?;
            let v: serde_json::Value = std::fs::read_to_string(&out_file)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .ok_or("the test application wrote no result")?;
            let _ = std::fs::remove_file(&out_file);
            let blocks = v["blocks"].as_u64().unwrap_or(0).max(1) as f64;
            let misses = v["misses"].as_u64().unwrap_or(0) as f64;
            let fed: u64 = report.stats.stolen_fed_ns.iter().sum();
            let measured: u64 = report.stats.stolen_measured_ns.iter().sum();
            let of_run = |v: u64| v as f64 / report.duration_ns.max(1) as f64 * 100.0;
            results[vi].push((
                misses / blocks * 100.0,
                v["mean_received_ns"].as_f64().unwrap_or(0.0),
                of_run(measured),
                of_run(fed),
            ));
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "live Fig 11.3: a 4 ms / 20 ms test application (§11.6.2) on CPU {cpu} under Rez variants, {:.1} s per point, load `{}`, stolen time from `{}` (+{:.1} us per traced interrupt)\n",
        length as f64 / 1e9,
        load.name(),
        source.name(),
        overhead as f64 / 1e3
    );
    out.push_str("| over-reservation |");
    for v in &variants {
        let _ = write!(
            out,
            " {v}: misses % (mean received ms; stolen measured, fed % of CPU) |"
        );
    }
    out.push_str("\n|---|");
    for _ in &variants {
        out.push_str("---|");
    }
    out.push('\n');
    for (i, o) in overs.iter().enumerate() {
        let _ = write!(out, "| {o:+} % |");
        for r in &results {
            let (m, recv, measured, fed) = r[i];
            let _ = write!(
                out,
                " {m:.1} ({:.3}; {measured:.2}, {fed:.2}) |",
                recv / 1e6
            );
        }
        out.push('\n');
    }
    out.push('\n');
    for (vi, v) in variants.iter().enumerate() {
        let curve: Vec<f64> = results[vi].iter().map(|r| r.0).collect();
        let need = (0..curve.len())
            .find(|&i| curve[i..].iter().all(|&m| m <= 1.0))
            .map_or("more than the largest tried".to_string(), |i| {
                format!("{:+} %", overs[i])
            });
        let _ = writeln!(
            out,
            "{v}: over-reservation needed for at most 1 % misses: {need}"
        );
    }
    Ok(out)
}

/// `hsched-live stolen ...`: returns the exit code.
pub fn stolen_main(args: &[String]) -> i32 {
    // Named as invoked: `hsched stolen` forwards here.
    let me = std::env::args()
        .next()
        .and_then(|a| {
            let p = std::path::Path::new(&a);
            Some(p.file_name()?.to_string_lossy().into_owned())
        })
        .filter(|n| n == "hsched")
        .unwrap_or_else(|| "hsched-live".into());
    let usage = USAGE.replace("hsched-live", &me);
    let sub = args.first().map(String::as_str);
    if sub == Some("help") || args.iter().any(|a| a == "--help" || a == "-h") {
        return crate::out::print_stdout(&format!("{usage}\n"));
    }
    let (rest, valued, switches): (&[String], &[&str], &[&str]) = match sub {
        Some("app") => (
            &args[1..],
            &["--period", "--need", "--duration", "--out"],
            &[],
        ),
        Some("rez") => (
            &args[1..],
            &[
                "--load",
                "--cpu",
                "--duration",
                "--source",
                "--over",
                "--variants",
                "--irq-overhead",
            ],
            &[],
        ),
        _ => (
            args,
            &["--load", "--cpu", "--duration", "--reserve", "--threshold"],
            &["--no-trace"],
        ),
    };
    if let Err(e) = only(rest, valued, switches) {
        crate::diag!("{me} stolen: {e}\n{usage}");
        return 2;
    }
    // The test application runs under a daemon that has checked already.
    if sub != Some("app") {
        if let Err(e) = crate::check_support() {
            crate::diag!("{me} stolen: {e}");
            return 3;
        }
    }
    let r = match sub {
        Some("app") => app_main(rest),
        Some("rez") => rez_main(rest),
        _ => characterize_main(rest),
    };
    match r {
        Ok(mut t) => {
            if !t.is_empty() && !t.ends_with('\n') {
                t.push('\n');
            }
            crate::out::print_stdout(&t)
        }
        Err(e) => {
            crate::diag!("{me} stolen: {e}\n{usage}");
            1
        }
    }
}

/// Usage of `hsched-live stolen`.
pub const USAGE: &str = "usage: hsched-live stolen [--load none,tcp,tcp-local,disk,timers] [--cpu N] [--duration 5s] [--reserve 4ms/20ms] [--threshold 1us] [--no-trace]\n       hsched-live stolen rez [--load tcp] [--cpu N] [--duration 5s] [--source off|procstat|trace] [--over -10,-5,0,5,...] [--variants basic,catch-up,feedback] [--irq-overhead D]\n       hsched-live stolen app [--period 20ms] [--need 4ms] [--duration D] [--out FILE]";
