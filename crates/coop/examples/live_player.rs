//! A small video player for live cooperative polling (Sinha 2007, §3.2–3.4,
//! QStream-like): frames are shown on display deadlines, decoding is
//! best-effort work of variable cost split into events of at most 1 ms,
//! frames go to /dev/null. Under `hsched run` with a `coop` scheduler it
//! calls `coop_poll` through the live channel (`HSCHED_COOP`); anywhere
//! else it runs non-cooperatively and says so once.
//!
//! ```text
//! live_player [--frames 240] [--fps 24] [--decode-ms 5.5] [--spread 0.4]
//!             [--event-ms 1] [--window 3] [--seed 1] [--name NAME]
//!             [--json FILE] [--no-coop] [--spin-at-ms T --spin-ms D]
//! live_player --hog SECONDS [--name NAME] [--json FILE]   # a CPU hog
//! live_player --bench N [--json FILE]                     # time N coop_poll calls
//! ```
//!
//! At exit it prints one JSON line (to `--json FILE`, else stdout): frames
//! shown and dropped, display tardiness (dispatch time of the display
//! event minus the display time: worst, p99, median, mean in ms),
//! `coop_poll` calls, times policed, context switches
//! (`/proc/thread-self/status`) and CPU time.
//!
//! Build: `cargo build --release --examples -p hsched-coop`, which makes
//! `target/release/examples/live_player`.

use hsched_coop::live::{self, LivePoll, MonoParam};
use hsched_coop::{BestEffortKey, Clock, CoopPoll, EventLoop, PollIn, PollOut, SystemClock, When};
use std::hint::black_box;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

struct Args {
    frames: u64,
    fps: f64,
    decode_ms: f64,
    spread: f64,
    event_ms: f64,
    window: u64,
    seed: u64,
    name: String,
    json: Option<String>,
    no_coop: bool,
    spin_at_ms: Option<f64>,
    spin_ms: f64,
    hog: Option<f64>,
    bench: Option<u64>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        frames: 240,
        fps: 24.0,
        decode_ms: 5.5,
        spread: 0.4,
        event_ms: 1.0,
        window: 3,
        seed: 1,
        name: "player".into(),
        json: None,
        no_coop: false,
        spin_at_ms: None,
        spin_ms: 0.0,
        hog: None,
        bench: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--no-coop" {
            a.no_coop = true;
            continue;
        }
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        let num = |v: &str| v.parse::<f64>().map_err(|e| format!("{k} {v}: {e}"));
        match k.as_str() {
            "--frames" => a.frames = num(&v)? as u64,
            "--fps" => a.fps = num(&v)?,
            "--decode-ms" => a.decode_ms = num(&v)?,
            "--spread" => a.spread = num(&v)?.clamp(0.0, 0.99),
            "--event-ms" => a.event_ms = num(&v)?,
            "--window" => a.window = (num(&v)? as u64).max(1),
            "--seed" => a.seed = num(&v)? as u64,
            "--name" => a.name = v,
            "--json" => a.json = Some(v),
            "--spin-at-ms" => a.spin_at_ms = Some(num(&v)?),
            "--spin-ms" => a.spin_ms = num(&v)?,
            "--hog" => a.hog = Some(num(&v)?),
            "--bench" => a.bench = Some(num(&v)? as u64),
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if a.fps.is_nan() || a.fps <= 0.0 {
        return Err("--fps must be positive".into());
    }
    Ok(a)
}

/// Busy work of a calibrated length: `iters_per_us` loop iterations take
/// one microsecond of CPU on this machine (the fastest of several tries,
/// so preemption during calibration does not inflate it).
#[derive(Clone, Copy)]
struct Burner {
    iters_per_us: f64,
}

fn spin(n: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        x = black_box(x.rotate_left(5) ^ i).wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    x
}

impl Burner {
    fn calibrate() -> Burner {
        // Short tries (about 20 µs), so that even 100 µs slices leave
        // most of them unpreempted.
        let n = 10_000u64;
        let mut best = f64::MAX;
        for _ in 0..200 {
            let t = Instant::now();
            black_box(spin(n));
            best = best.min(t.elapsed().as_secs_f64() * 1e6);
        }
        Burner {
            iters_per_us: n as f64 / best.max(1e-3),
        }
    }
    fn burn_ns(&self, ns: u64) {
        black_box(spin((ns as f64 / 1000.0 * self.iters_per_us) as u64));
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn switches() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    let get = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (
        get("voluntary_ctxt_switches"),
        get("nonvoluntary_ctxt_switches"),
    )
}

fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

/// Quantile of sorted values.
fn q(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn emit(a: &Args, line: String) {
    match &a.json {
        Some(p) => {
            if let Err(e) = std::fs::write(p, line + "\n") {
                eprintln!("live_player: {p}: {e}");
            }
        }
        None => println!("{line}"),
    }
}

fn hog(a: &Args, secs: f64) {
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed().as_secs_f64() < secs {
        black_box(spin(100_000));
        n += 1;
    }
    let (vol, invol) = switches();
    emit(
        a,
        format!(
            "{{\"name\":\"{}\",\"hog\":true,\"elapsed_s\":{:.3},\"cpu_s\":{:.3},\"rounds\":{n},\"voluntary_switches\":{vol},\"involuntary_switches\":{invol}}}",
            a.name,
            t.elapsed().as_secs_f64(),
            cpu_s()
        ),
    );
}

fn bench(a: &Args, n: u64) -> Result<(), String> {
    let mut p = LivePoll::from_env().map_err(|e| e.to_string())?;
    let mut rt = Vec::with_capacity(n as usize);
    let (v0, i0) = switches();
    for k in 0..n {
        let t0 = live::mono_now();
        let inp = MonoParam {
            deadline: None,
            best_effort: Some(BestEffortKey {
                priority: 0,
                timestamp: t0,
            }),
        };
        p.poll_mono(&inp).map_err(|e| format!("call {k}: {e}"))?;
        rt.push((live::mono_now() - t0) as f64 / 1000.0);
    }
    let (v1, i1) = switches();
    rt.sort_by(f64::total_cmp);
    let mean = rt.iter().sum::<f64>() / rt.len().max(1) as f64;
    emit(
        a,
        format!(
            "{{\"name\":\"{}\",\"bench\":true,\"calls\":{n},\"median_us\":{:.2},\"p99_us\":{:.2},\"max_us\":{:.2},\"mean_us\":{mean:.2},\"min_us\":{:.2},\"voluntary_switches\":{},\"involuntary_switches\":{},\"doorbell\":\"{}\"}}",
            a.name,
            q(&rt, 0.5),
            q(&rt, 0.99),
            rt.last().copied().unwrap_or(0.0),
            rt.first().copied().unwrap_or(0.0),
            v1 - v0,
            i1 - i0,
            std::env::var(live::ENV_DOORBELL).unwrap_or_else(|_| "eventfd".into()),
        ),
    );
    Ok(())
}

/// The live poller, measuring how late each call comes after the OUT
/// deadline of the previous one (what the policy polices, with `grace`).
struct Tracked {
    inner: LivePoll,
    last_out: Option<u64>,
    late_ms: Arc<Mutex<Vec<f64>>>,
    outs: Arc<std::sync::atomic::AtomicU64>,
}

impl CoopPoll for Tracked {
    fn coop_poll(&mut self, clock: &mut dyn Clock, input: &PollIn) -> PollOut {
        if let Some(d) = self.last_out.take() {
            let late = clock.now_ns().saturating_sub(d) as f64 / 1e6;
            if let Ok(mut v) = self.late_ms.lock() {
                v.push(late);
            }
        }
        let out = self.inner.coop_poll(clock, input);
        self.last_out = out.deadline;
        if out.deadline.is_some() {
            self.outs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        out
    }
}

#[derive(Default)]
struct St {
    remaining: Vec<u64>,
    decoded: Vec<bool>,
    shown: u64,
    dropped: u64,
    tard_ms: Vec<f64>,
    next_arrival: u64,
}

fn player(a: &Args) {
    let burner = Burner::calibrate();
    let clock = SystemClock::default();
    let late_ms = Arc::new(Mutex::new(Vec::new()));
    let outs = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (mut l, mon) = if a.no_coop {
        (EventLoop::new(clock), None)
    } else {
        match LivePoll::from_env() {
            Ok(p) => {
                let m = p.monitor();
                let t = Tracked {
                    inner: p,
                    last_out: None,
                    late_ms: late_ms.clone(),
                    outs: outs.clone(),
                };
                (EventLoop::cooperative(clock, Box::new(t)), Some(m))
            }
            Err(e) => {
                live::note_fallback(&e);
                (EventLoop::new(clock), None)
            }
        }
    };
    if let Some(m) = &mon {
        m.record_round_trips(true);
    }
    let period = (1e9 / a.fps) as u64;
    let t0 = l.clock().now_ns() + 100_000_000;
    let n = a.frames;
    let mut rng = Rng(a.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let player_factor = 0.8 + 0.4 * rng.next();
    let mut st = St::default();
    for k in 0..n {
        let kind = if k % 12 == 0 {
            1.5
        } else if k % 3 == 0 {
            1.0
        } else {
            0.75
        };
        let u = 2.0 * rng.next() - 1.0;
        let ms = a.decode_ms * player_factor * kind * (1.0 + a.spread * u);
        st.remaining.push((ms * 1e6) as u64);
        st.decoded.push(false);
    }
    let st = Arc::new(Mutex::new(st));
    let display_at = move |k: u64| t0 + k * period;
    let event_ns = (a.event_ms * 1e6) as u64;
    let window = a.window;
    let devnull = Arc::new(Mutex::new(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .ok(),
    ));
    let arrive_st = st.clone();
    let arrive = l.event(move |h| {
        let k = {
            let mut s = arrive_st.lock().unwrap_or_else(|e| e.into_inner());
            let k = s.next_arrival;
            s.next_arrival += 1;
            k
        };
        if k >= n {
            return;
        }
        let d = display_at(k);
        let prio = if k % 12 == 0 {
            3
        } else if k % 3 == 0 {
            2
        } else {
            1
        };
        let dst = arrive_st.clone();
        let decode = h.event(move |h| {
            let s = dst.lock().unwrap_or_else(|e| e.into_inner());
            if h.now() >= d {
                return; // too late to be shown: adaptation drops the rest
            }
            let left = s.remaining[k as usize];
            let chunk = left.min(event_ns);
            drop(s);
            burner.burn_ns(chunk);
            let mut s = dst.lock().unwrap_or_else(|e| e.into_inner());
            s.remaining[k as usize] = left - chunk;
            if left > chunk {
                let me = h.me();
                h.submit(
                    me,
                    When::BestEffort(BestEffortKey {
                        priority: prio,
                        timestamp: d,
                    }),
                );
            } else {
                s.decoded[k as usize] = true;
            }
        });
        h.submit(
            decode,
            When::BestEffort(BestEffortKey {
                priority: prio,
                timestamp: d,
            }),
        );
        let sst = arrive_st.clone();
        let out = devnull.clone();
        let show = h.event(move |h| {
            let late = h.now().saturating_sub(d) as f64 / 1e6;
            let mut s = sst.lock().unwrap_or_else(|e| e.into_inner());
            s.tard_ms.push(late);
            if s.decoded[k as usize] {
                s.shown += 1;
                if let Ok(mut o) = out.lock() {
                    if let Some(f) = o.as_mut() {
                        let _ = f.write_all(&[0u8; 4096]);
                    }
                }
            } else {
                s.dropped += 1;
            }
            if k + 1 == n {
                h.stop();
            }
        });
        h.submit(show, When::Deadline(d));
        let me = h.me();
        let next = k + 1;
        if next < n {
            let at = display_at(next).saturating_sub(window * period);
            h.submit(me, When::Deadline(at));
        }
    });
    l.submit(arrive, When::Deadline(t0.saturating_sub(window * period)));
    if let Some(at) = a.spin_at_ms {
        let spin_ns = (a.spin_ms * 1e6) as u64;
        let bad = l.event(move |_| burner.burn_ns(spin_ns));
        l.submit(bad, When::Deadline(t0 + (at * 1e6) as u64));
    }
    let (v0, i0) = switches();
    let c0 = cpu_s();
    let start = Instant::now();
    if mon.is_some() {
        // Join the domain and learn OUT before the first event: a player
        // that starts behind would otherwise not yield until it caught up.
        l.yield_now();
    }
    let stats = l.run();
    let elapsed = start.elapsed().as_secs_f64();
    let (v1, i1) = switches();
    let s = st.lock().unwrap_or_else(|e| e.into_inner());
    let mut t = s.tard_ms.clone();
    t.sort_by(f64::total_cmp);
    let mean = t.iter().sum::<f64>() / t.len().max(1) as f64;
    let mut late = late_ms.lock().map(|v| v.clone()).unwrap_or_default();
    late.sort_by(f64::total_cmp);
    let (polls, policed, policed_blocked, rtt) = match &mon {
        Some(m) => {
            let mut r: Vec<f64> = m.round_trips().iter().map(|&x| x as f64 / 1e3).collect();
            r.sort_by(f64::total_cmp);
            (m.polls(), m.policed(), m.policed_blocked(), r)
        }
        None => (0, 0, 0, Vec::new()),
    };
    let outs = outs.load(std::sync::atomic::Ordering::Relaxed);
    emit(
        a,
        format!(
            "{{\"name\":\"{}\",\"cooperative\":{},\"frames\":{n},\"shown\":{},\"dropped\":{},\"tardiness_ms\":{{\"worst\":{:.3},\"p99\":{:.3},\"median\":{:.3},\"mean\":{mean:.3}}},\"polls\":{polls},\"loop_polls\":{},\"out_deadlines\":{outs},\"policed\":{policed},\"policed_blocked\":{policed_blocked},\"poll_late_ms\":{{\"worst\":{:.3},\"p99\":{:.3},\"median\":{:.3}}},\"poll_return_us\":{{\"median\":{:.1},\"p99\":{:.1}}},\"voluntary_switches\":{},\"involuntary_switches\":{},\"cpu_s\":{:.3},\"elapsed_s\":{elapsed:.3},\"iters_per_us\":{:.1}}}",
            a.name,
            mon.is_some(),
            s.shown,
            s.dropped,
            t.last().copied().unwrap_or(0.0),
            q(&t, 0.99),
            q(&t, 0.5),
            stats.polls,
            late.last().copied().unwrap_or(0.0),
            q(&late, 0.99),
            q(&late, 0.5),
            q(&rtt, 0.5),
            q(&rtt, 0.99),
            v1 - v0,
            i1 - i0,
            cpu_s() - c0,
            burner.iters_per_us,
        ),
    );
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("live_player: {e}");
            std::process::exit(2);
        }
    };
    if let Some(secs) = a.hog {
        hog(&a, secs);
    } else if let Some(n) = a.bench {
        if let Err(e) = bench(&a, n) {
            eprintln!("live_player: bench: {e}");
            std::process::exit(1);
        }
    } else {
        player(&a);
    }
}
