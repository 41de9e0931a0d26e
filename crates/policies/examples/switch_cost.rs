//! Runs a number of context switches through the hierarchy of
//! `benches/hierarchy_switch.rs` (Regehr 2001, Fig 10.2: a root TS instance
//! time-slicing between two chains of single-child TS instances), so that
//! their cost can be counted in instructions, which are free of timing
//! noise:
//!
//! ```text
//! cargo build --release -p hsched-policies --example switch_cost
//! valgrind --tool=callgrind --toggle-collect='switch_cost::run' \
//!     target/release/examples/switch_cost 8 100000
//! ```
//!
//! Arguments: the depth (1 = threads directly under the root), the number
//! of switches, then optionally `checker` to run the protocol checker after
//! every input and `pass` to put a do-nothing pass-through policy in place
//! of the single-child TS instances, which leaves the HSI's own cost of a
//! level. Only `run` does the switches, so `--toggle-collect` counts
//! them alone; divide the total by the number of switches. Run natively, it
//! also prints the time per switch, by the wall clock and by the time the
//! thread spent on a processor (the kernel updates the latter only at
//! scheduling events: give it 100 000 switches or more).

use hsched_core::{
    CpuId, Ctx, Hsi, InstanceId, Instant, ParamValue, Params, ParentLink, ParentRef, Policy,
    PolicyError, RevokeReason, VpId, VpState,
};

/// The least a single-child, single-parent scheduler can do: pass its
/// parent's processor to its child and take it back, ask while the child
/// asks. Not a policy to use (it has no checks and no invariants); it
/// measures what the HSI costs without a policy's own work.
#[derive(Default)]
struct Pass {
    child: Option<VpId>,
}

impl Policy for Pass {
    fn policy_name(&self) -> &'static str {
        "pass"
    }

    fn register_vp(&mut self, _: &mut Ctx<'_>, vp: VpId, _: &Params) -> Result<(), PolicyError> {
        self.child = Some(vp);
        Ok(())
    }

    fn unregister_vp(&mut self, _: &mut Ctx<'_>, _: VpId) {
        self.child = None;
    }

    fn request(&mut self, ctx: &mut Ctx<'_>, _: VpId) {
        let parent = ctx.parent_vps()[0];
        if ctx.vp_state(parent) == VpState::Waiting {
            ctx.request(parent);
        }
    }

    fn release(&mut self, ctx: &mut Ctx<'_>, _: VpId) {
        let parent = ctx.parent_vps()[0];
        ctx.release(parent);
    }

    fn grant(&mut self, ctx: &mut Ctx<'_>, _: VpId, cpu: CpuId) {
        if let Some(child) = self.child.filter(|&c| ctx.vp_state(c) == VpState::Ready) {
            ctx.grant(child, cpu);
        }
    }

    fn revoke(&mut self, ctx: &mut Ctx<'_>, _: VpId, reason: RevokeReason) {
        if let Some(child) = self.child.filter(|&c| ctx.vp_cpu(c).is_some()) {
            ctx.revoke(child, reason);
        }
    }
}

fn ts(quantum: &str) -> Box<dyn hsched_core::Policy> {
    let p = Params::new().with("quantum", ParamValue::Str(quantum.into()));
    hsched_policies::build("ts", &p).expect("ts builds")
}

fn under(p: InstanceId) -> Vec<ParentLink> {
    vec![ParentLink {
        parent: ParentRef::Instance(p),
        params: Params::new(),
    }]
}

/// The Fig 10.2 hierarchy of the given depth with both threads awake;
/// `pass`: [`Pass`] instances below the root instead of TS.
fn build(depth: usize, checking: bool, pass: bool) -> Hsi {
    let mut hsi = Hsi::new(1);
    hsi.set_checking(checking);
    let t0 = Instant(0);
    let top = vec![ParentLink {
        parent: ParentRef::Top {
            cpus: vec![CpuId(0)],
        },
        params: Params::new(),
    }];
    let root = hsi.create_instance(t0, "ts1", ts("1ms"), top).unwrap();
    for chain in 0..2 {
        let mut parent = root;
        for level in 1..depth {
            let policy = if pass {
                Box::<Pass>::default()
            } else {
                ts("3600s")
            };
            parent = hsi
                .create_instance(t0, &format!("c{chain}-{level}"), policy, under(parent))
                .unwrap();
        }
        let t = hsi
            .create_thread(t0, &format!("t{chain}"), parent, Params::new())
            .unwrap();
        hsi.wake(t0, t).unwrap();
    }
    hsi
}

/// Performs `n` quantum expiries at the root; returns how many changed the
/// running thread.
#[inline(never)]
fn run(hsi: &mut Hsi, n: u64) -> u64 {
    let mut out = Vec::with_capacity(4);
    let mut switched = 0;
    for _ in 0..n {
        let at = hsi.next_timer().expect("the root's quantum timer is armed");
        hsi.fire_timers(at).expect("no protocol violation");
        out.clear();
        hsi.drain_dispatch(&mut out);
        switched += out.len() as u64;
    }
    switched
}

/// Nanoseconds this thread has spent on a processor (Linux
/// `/proc/thread-self/schedstat`), which leaves out the time other programs
/// of a shared machine held the processor.
fn cpu_time() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let depth: Option<usize> = args.get(1).and_then(|a| a.parse().ok());
    let n: Option<u64> = args.get(2).and_then(|a| a.parse().ok());
    let (Some(depth @ 1..), Some(n @ 1..)) = (depth, n) else {
        eprintln!("usage: switch_cost DEPTH SWITCHES [checker] [pass]   (DEPTH, SWITCHES >= 1)");
        std::process::exit(2);
    };
    let checking = args[3..].iter().any(|a| a == "checker");
    let pass = args[3..].iter().any(|a| a == "pass");
    if let Some(bad) = args[3..].iter().find(|a| *a != "checker" && *a != "pass") {
        eprintln!("switch_cost: unknown option '{bad}' (expected checker or pass)");
        std::process::exit(2);
    }
    let mut hsi = build(depth, checking, pass);
    // Warm up: the first expiry also sizes the HSI's internal queues.
    run(&mut hsi, 2);
    let cpu0 = cpu_time();
    let start = std::time::Instant::now();
    let switched = std::hint::black_box(run(&mut hsi, n));
    let took = start.elapsed();
    let cpu = cpu_time().zip(cpu0).map(|(b, a)| b - a);
    assert_eq!(switched, n, "every quantum expiry must switch threads");
    let per = |ns: u128| ns as f64 / n as f64;
    print!(
        "depth {depth}: {n} switches, {:.1} ns each (wall clock)",
        per(took.as_nanos())
    );
    if let Some(cpu) = cpu {
        print!(", {:.1} ns each (on-CPU time)", per(cpu.into()));
    }
    let checker = if checking { ", checker on" } else { "" };
    let below = if pass {
        ", pass-through below the root"
    } else {
        ""
    };
    println!("{checker}{below}");
}
