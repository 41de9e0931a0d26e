//! The dispatcher's rules (Sinha 2007, §2.1.1–2.1.3).

use hsched_coop::{BestEffortKey, Clock, CoopPoll, EventLoop, ManualClock, PollIn, PollOut, When};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

type Log = Arc<Mutex<Vec<(String, u64)>>>;

fn logger(log: &Log, name: &str) -> impl FnMut(&mut hsched_coop::Handle<'_>) + Send + 'static {
    let log = log.clone();
    let name = name.to_string();
    move |h| log.lock().unwrap().push((name.clone(), h.now()))
}

fn be(priority: i64, timestamp: u64) -> When {
    When::BestEffort(BestEffortKey {
        priority,
        timestamp,
    })
}

fn names(log: &Log) -> Vec<String> {
    log.lock().unwrap().iter().map(|(n, _)| n.clone()).collect()
}

#[test]
fn deadline_events_never_run_early() {
    let log = Log::default();
    let mut l = EventLoop::new(ManualClock::new(0));
    for (i, at) in [30_000u64, 10_000, 20_000].into_iter().enumerate() {
        let e = l.event(logger(&log, &format!("d{i}")));
        l.submit(e, When::Deadline(at));
    }
    l.run();
    let got = log.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![
            ("d1".to_string(), 10_000),
            ("d2".to_string(), 20_000),
            ("d0".to_string(), 30_000)
        ]
    );
    assert_eq!(l.stats().sleeps, 3);
}

/// A clock shared with handlers, so an event can "take" time.
#[derive(Clone, Default)]
struct Shared(Arc<AtomicU64>);

impl Clock for Shared {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn sleep_until(&mut self, t: u64) {
        self.0.fetch_max(t, Ordering::SeqCst);
    }
}

#[test]
fn expired_deadline_events_run_before_best_effort() {
    let log = Log::default();
    let clock = Shared::default();
    let mut l = EventLoop::new(clock.clone());
    // A best-effort event that computes 5 µs, resubmitting itself 4 times.
    let log2 = log.clone();
    let c2 = clock.clone();
    let mut left = 4;
    let busy = l.event(move |h| {
        log2.lock().unwrap().push(("be".into(), h.now()));
        c2.0.fetch_add(5_000, Ordering::SeqCst);
        left -= 1;
        if left > 0 {
            let me = h.me();
            h.submit(me, be(100, 0));
        }
    });
    l.submit(busy, be(100, 0));
    let d = l.event(logger(&log, "deadline"));
    l.submit(d, When::Deadline(7_000));
    l.run();
    // be at 0 and 5000; at 10000 the deadline (released at 7000) first.
    assert_eq!(names(&log), vec!["be", "be", "deadline", "be", "be"]);
    assert_eq!(log.lock().unwrap()[2].1, 10_000);
}

#[test]
fn best_effort_order_is_priority_then_timestamp() {
    let log = Log::default();
    let mut l = EventLoop::new(ManualClock::new(0));
    let spec = [
        ("a", 1, 50),
        ("b", 5, 90),
        ("c", 5, 10),
        ("d", -3, 0),
        ("e", 1, 50),
    ];
    for (n, p, ts) in spec {
        let e = l.event(logger(&log, n));
        l.submit(e, be(p, ts));
    }
    l.run();
    // Larger priority first; equal priority: earlier timestamp; then
    // submission order.
    assert_eq!(names(&log), vec!["c", "b", "a", "e", "d"]);
}

#[test]
fn submit_and_cancel_are_idempotent() {
    let log = Log::default();
    let mut l = EventLoop::new(ManualClock::new(0));
    let e = l.event(logger(&log, "e"));
    assert!(l.submit(e, be(0, 0)));
    assert!(!l.submit(e, be(9, 0)), "second submit has no effect");
    assert!(!l.submit(e, When::Deadline(5)));
    assert_eq!(l.pending(), 1);
    assert!(l.cancel(e));
    assert!(!l.cancel(e), "second cancel has no effect");
    assert!(!l.cancel(hsched_coop::EventId(999)), "unknown id");
    assert!(
        !l.submit(hsched_coop::EventId(0), be(0, 0)),
        "proxy ids are private"
    );
    assert!(l.submit(e, be(0, 0)));
    l.run();
    assert_eq!(names(&log), vec!["e"], "ran once");
    assert!(!l.is_submitted(e));
}

/// A scheduler stub: records IN, answers with scripted OUTs (the last
/// one repeats), and takes 1 µs per call.
struct Stub {
    seen: Arc<Mutex<Vec<PollIn>>>,
    outs: Vec<PollOut>,
}

impl CoopPoll for Stub {
    fn coop_poll(&mut self, clock: &mut dyn Clock, input: &PollIn) -> PollOut {
        self.seen.lock().unwrap().push(*input);
        let t = clock.now_ns() + 1_000;
        clock.sleep_until(t);
        if self.outs.len() > 1 {
            self.outs.remove(0)
        } else {
            self.outs[0]
        }
    }
}

#[test]
fn cooperative_yield_reports_only_own_events_and_follows_proxies() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    // Twice the rest of the world has a best-effort event of priority 7,
    // then none.
    let busy = PollOut {
        deadline: Some(1_000_000),
        best_effort: Some(BestEffortKey {
            priority: 7,
            timestamp: 0,
        }),
    };
    let idle = PollOut {
        deadline: Some(1_000_000),
        best_effort: None,
    };
    let stub = Stub {
        seen: seen.clone(),
        outs: vec![busy, busy, idle],
    };
    let log = Log::default();
    let mut l = EventLoop::cooperative(ManualClock::new(0), Box::new(stub));
    let hi = l.event(logger(&log, "hi"));
    let lo = l.event(logger(&log, "lo"));
    let d = l.event(logger(&log, "d"));
    l.submit(hi, be(9, 0));
    l.submit(lo, be(3, 0));
    l.submit(d, When::Deadline(1_500));
    // Learn OUT before the first event (t = 0 -> 1000).
    l.yield_now();
    l.run();
    // hi (9) outranks the proxy (7); the proxy outranks lo (3), so the
    // process yields (t -> 2000); d, released at 1500, runs first; the
    // proxy yields again (t -> 3000), and with the world idle lo runs.
    assert_eq!(names(&log), vec!["hi", "d", "lo"]);
    let seen = seen.lock().unwrap().clone();
    let key = |priority| {
        Some(BestEffortKey {
            priority,
            timestamp: 0,
        })
    };
    assert_eq!(
        seen[0],
        PollIn {
            deadline: Some(1_500),
            best_effort: key(9)
        }
    );
    assert_eq!(
        seen[1],
        PollIn {
            deadline: Some(1_500),
            best_effort: key(3)
        }
    );
    assert_eq!(
        seen[2],
        PollIn {
            deadline: None,
            best_effort: key(3)
        }
    );
    // Never yields to itself: no IN carries the proxy's priority 7 nor the
    // proxy deadline.
    assert!(seen.iter().all(|i| i.best_effort != key(7)));
    assert!(seen.iter().all(|i| i.deadline != Some(1_000_000)));
    assert_eq!(l.stats().polls, seen.len() as u64);
}

#[test]
fn non_cooperative_mode_stops_when_empty() {
    let mut l = EventLoop::new(ManualClock::new(0));
    let s = l.run();
    assert_eq!(s.dispatched, 0);
    assert_eq!(l.pending(), 0);
}
