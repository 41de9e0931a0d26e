//! The cost of one hook call into a plug-in (issue #36): an FP root over
//! one processor with one thread child, woken and blocked `PAIRS` times
//! through the HSI, so that each pair calls three hooks of the root
//! (request, grant, release; counted from the trace), with the built-in FP
//! and then with the FP plug-in `FILE.wasm` (sdk/examples/fp.c), in one
//! run. The difference per pair over the hooks per pair is what one hook
//! call into the plug-in adds over one into a built-in policy: entering
//! the runtime, setting the fuel, the host functions the hook calls and
//! the check of its actions.
//!
//! ```text
//! make -C sdk
//! cargo run --release -p hsched-plugin --example hook_cost -- sdk/build/fp.wasm [PAIRS]
//! ```

use hsched_core::{
    CpuId, Hsi, Instant, Node, ParamValue, Params, ParentLink, ParentRef, TraceKind,
};
use hsched_policies::PolicyInfo;

fn cpu_time() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    text.split_whitespace()
        .next()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Nanoseconds on the CPU per wake/block pair under a root of `info`,
/// and how many hooks of the root one pair calls (from the trace: a
/// request or release to it, a grant or revoke from the top to it).
fn per_pair(info: &PolicyInfo, pairs: u64) -> (f64, usize) {
    let fail = |e: String| -> ! {
        eprintln!("{}: {e}", info.name);
        std::process::exit(1)
    };
    let policy = (info.build)(&Params::new()).unwrap_or_else(|e| fail(e.to_string()));
    let mut hsi = Hsi::new(1);
    let link = ParentLink {
        parent: ParentRef::Top {
            cpus: vec![CpuId(0)],
        },
        params: Params::new(),
    };
    let root = hsi
        .create_instance(Instant(0), "root", policy, vec![link])
        .unwrap_or_else(|e| fail(e.to_string()));
    let t = hsi
        .create_thread(
            Instant(0),
            "t",
            root,
            Params::new().with("priority", ParamValue::Int(1)),
        )
        .unwrap_or_else(|e| fail(e.to_string()));
    let mut now = 1;
    let mut step = |hsi: &mut Hsi| {
        now += 1000;
        hsi.wake(Instant(now), t)
            .unwrap_or_else(|e| fail(e.to_string()));
        now += 1000;
        hsi.block(Instant(now), t)
            .unwrap_or_else(|e| fail(e.to_string()));
    };
    hsi.set_tracing(true);
    step(&mut hsi);
    let mut events = Vec::new();
    hsi.drain_trace(&mut events);
    hsi.set_tracing(false);
    let me = Node::Instance(root);
    let hooks = events
        .iter()
        .filter(|e| match e.kind {
            TraceKind::Request { parent, .. } | TraceKind::Release { parent, .. } => parent == me,
            TraceKind::Grant { child, .. } | TraceKind::Revoke { child, .. } => child == me,
            _ => false,
        })
        .count();
    for _ in 0..pairs / 10 {
        step(&mut hsi);
    }
    let c0 = cpu_time();
    for _ in 0..pairs {
        step(&mut hsi);
    }
    ((cpu_time() - c0) * 1e9 / pairs as f64, hooks)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(plugin) = args.next() else {
        eprintln!("usage: hook_cost FILE.wasm [PAIRS]");
        std::process::exit(2)
    };
    let pairs: u64 = args
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(1_000_000);
    let path = std::fs::canonicalize(&plugin).unwrap_or_else(|e| {
        eprintln!("{plugin}: {e}");
        std::process::exit(2)
    });
    let wasm = hsched_plugin::register("fp.wasm", &path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let builtin = hsched_policies::lookup("fp").expect("the built-in fp");
    println!(
        "runtime    {}, {pairs} wake/block pairs each",
        hsched_plugin::RUNTIME
    );
    let (a, ha) = per_pair(builtin, pairs);
    let (b, hb) = per_pair(&wasm, pairs);
    println!("built-in   {a:.0} ns per pair, {ha} hooks of the root a pair");
    println!("plug-in    {b:.0} ns per pair, {hb} hooks of the root a pair");
    println!(
        "hook call  {:.0} ns more per hook of the plug-in than per hook of the built-in",
        (b - a) / hb as f64
    );
    let faults = hsched_plugin::faults();
    if !faults.is_empty() {
        println!("faults     {faults:?}");
        std::process::exit(1);
    }
}
