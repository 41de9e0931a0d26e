//! Costs of the cooperative-polling pieces: one event through the
//! dispatcher, and one `coop_poll` through the HSI to the `coop` policy
//! with ten members (the simulator's round trip; no live IPC).

use criterion::{criterion_group, criterion_main, Criterion};
use hsched_coop::{BestEffortKey, EventLoop, ManualClock, When};
use hsched_core::{CpuId, Hsi, Instant, Msg, ParamValue, Params, ParentLink, ParentRef};
use std::hint::black_box;

fn dispatch(c: &mut Criterion) {
    c.bench_function("event_loop/submit_dispatch_1000", |b| {
        let mut l = EventLoop::new(ManualClock::new(0));
        let mut left = 0u32;
        let ev = l.event(move |h| {
            left += 1;
            if !left.is_multiple_of(1000) {
                let me = h.me();
                h.submit(
                    me,
                    When::BestEffort(BestEffortKey {
                        priority: (left % 7) as i64,
                        timestamp: u64::from(left),
                    }),
                );
            }
        });
        b.iter(|| {
            l.submit(ev, When::Deadline(0));
            black_box(l.run());
        });
    });
}

fn coop_poll(c: &mut Criterion) {
    let mut hsi = Hsi::new(1);
    let policy = hsched_policies::build("coop", &Params::new()).unwrap();
    let root = hsi
        .create_instance(
            Instant(0),
            "coop",
            policy,
            vec![ParentLink {
                parent: ParentRef::Top {
                    cpus: vec![CpuId(0)],
                },
                params: Params::new(),
            }],
        )
        .unwrap();
    let ts: Vec<_> = (0..10)
        .map(|i| {
            let t = hsi
                .create_thread(Instant(0), &format!("p{i}"), root, Params::new())
                .unwrap();
            hsi.wake(Instant(0), t).unwrap();
            t
        })
        .collect();
    let mut now = 1_000u64;
    let mut k = 0i64;
    c.bench_function("coop_poll/hsi_round_trip_10_members", |b| {
        b.iter(|| {
            now += 1_000;
            k += 1;
            let t = hsi.running(CpuId(0)).unwrap_or(ts[0]);
            let msg = Msg::App {
                kind: "coop_poll".into(),
                params: Params::new()
                    .with("deadline", ParamValue::Int(now as i64 + 5_000_000))
                    .with("be_priority", ParamValue::Int(k % 3))
                    .with("be_timestamp", ParamValue::Int(now as i64)),
            };
            hsi.thread_msg(Instant(now), t, &msg).unwrap();
            black_box(
                hsi.vp_info(hsi.thread_vp(t))
                    .params
                    .get("out_deadline")
                    .cloned(),
            );
        });
    });
}

criterion_group!(benches, dispatch, coop_poll);
criterion_main!(benches);
