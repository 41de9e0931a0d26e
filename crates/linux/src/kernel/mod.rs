//! The kernel backend: the hierarchy enforced by Linux's own scheduling
//! classes instead of the daemon's freezer and `SCHED_FIFO` raises, so a
//! switch between managed threads costs what a native one does and the
//! kernel keeps enforcing while the daemon is stopped or dead.
//!
//! [`compile`](mod@compile) maps a hierarchy node by node (pure, unit-tested);
//! [`apply`] sets the mapped attributes, cgroups and affinities on threads
//! and puts them back; [`run`](mod@run) is the kernel-backed live run.
//!
//! # What maps to what, and why
//!
//! Linux's scheduling classes are themselves a fixed-priority order:
//! deadline above real-time above fair. A hierarchy maps when its
//! schedulers come in that order.
//!
//! | node | kernel mechanism | guarantee it gets |
//! |---|---|---|
//! | thread under `rez` or `dl` | `SCHED_DEADLINE`, runtime = amount, deadline = period = period | `RESBH (amount − tick) period` |
//! | `join` of `rez` and one best-effort parent, over one thread | that thread's server with `SCHED_FLAG_RECLAIM` (GRUB) | `RESBS (amount − tick) period` |
//! | `rez` | the deadline class (global EDF over the servers, admission) | — |
//! | thread under `realrate` | `SCHED_DEADLINE` of proportion × period, an adaptive child's runtime set by the daemon's real-rate controller ([`adapt`]) | `RESBH (amount − tick) period` (`real-time`, `aperiodic`); NULL (`real-rate`, `misc`) |
//! | `realrate` | the deadline class on a root domain of one CPU, admitted at its `overload` | — |
//! | `dl` | the deadline class it models, with the kernel's tick and root domain (a note when the file's differ) | — |
//! | `fp` over threads (and nested `fp`) | `SCHED_FIFO` priorities in the children's order, ties kept as ties | NULL |
//! | `ts`, `linux24` | a cpu cgroup; threads `SCHED_OTHER` with nice = 8 − priority | NULL |
//! | `ps` | a cpu cgroup per child, `cpu.shares` ∝ share | NULL |
//! | `limit` | a cpu cgroup with `cpu.cfs_quota_us`/`cpu.cfs_period_us` = amount/period | NULL |
//! | CPU placement | affinity of real-time and fair threads to the root's CPUs; where a root with deadline servers owns fewer CPUs than the machine, an exclusive cpuset per root ([`crate::cpuset`]) | — |
//!
//! - **`rez` → `SCHED_DEADLINE`.** A deadline server is a constant
//!   bandwidth server: EDF over per-period budgets with admission, the
//!   basic hard reservation of Regehr 2001, §5.2.2, that Rez provides
//!   (§5.3.1.5, Table 5.1: `ALL ↦ RESBH⁺`). Two things differ, and the
//!   guarantee says so. The kernel schedules all servers of a root domain
//!   by *global* EDF (a file whose roots own CPU sets of their own gets a
//!   root domain per root from exclusive cpusets, so its servers are
//!   scheduled and admitted per root: partitioned EDF), which on several CPUs does not meet every deadline
//!   at any load below the admission limit; hsched admits a server only
//!   where Goossens, Funk and Baruah's bound (`U ≤ m − (m − 1)·u_max`)
//!   shows global EDF meets them all ([`compile::admit`]), and the
//!   kernel's own limit (`sched_rt_runtime_us`/`sched_rt_period_us` on
//!   every CPU, less each CPU's fair server) is checked beside it, so the
//!   two agree before anything changes. And without `HRTICK_DL` the
//!   kernel checks a server's runtime at the tick: a server can run up to
//!   one tick past its budget, which the kernel takes back from its next
//!   budget. So a server is guaranteed its amount less one tick in every
//!   period, `RESBH (amount − tick) period`; its long-run share is the
//!   full amount/period. Admission counts every server with one tick of
//!   overrun, so the others' overruns cannot make a server late. An amount
//!   no longer than the tick guarantees nothing per period (NULL).
//! - **Soft reservations** (a `join` of a reservation and a best-effort
//!   parent, Regehr 2001, §5.3.1.2, §6.3) become reclaiming servers: GRUB
//!   lets a server run beyond its budget on bandwidth the others leave
//!   unused, so it keeps its reservation's lower bound and can get more
//!   (`RESBS`). The surplus does not come from the join's second parent,
//!   which the notes say.
//! - **`fp`** (§5.3.1.1) over threads becomes a band of `SCHED_FIFO`
//!   priorities that keeps the children's order and their ties; FP gives
//!   its highest child what it receives, but in Linux the deadline class
//!   and the real-time throttling (`sched_rt_runtime_us`) take time from
//!   every real-time thread, so the mapping promises NULL.
//! - **`ts`** (§5.3.1.6) becomes the fair class, which like TS guarantees
//!   nothing (NULL); each `ts` is a cpu cgroup, so a nested one is fenced
//!   in as one entity, as hsched's is. TS priorities become nice values
//!   (a weight ratio of about 1.25 per step), not strict precedence.
//! - **`ps`** (§5.3.1.4) becomes cgroup weights in proportion to the
//!   shares. The fair class has no proven lag bound between groups that
//!   also compete with the machine's other tasks, so the mapping promises
//!   NULL, not PSBE.
//! - **`limit`** (§5.3.1.3) becomes cgroup bandwidth, which caps its
//!   fair-class children at amount per period as Limit does.
//! - **`realrate`** (Steere et al. 1998) becomes adaptive reservations:
//!   the kernel enforces each child's server and the daemon runs the
//!   policy's controller on the progress monitor's fill levels and the
//!   kernel's CPU time, writing each new proportion into a runtime
//!   ([`adapt`]). It is uniprocessor, so its root must own one CPU.
//!
//! # What is refused
//!
//! Nodes the kernel cannot enforce exactly are refused with the node, the
//! reason and what would work, never approximated: an application
//! scheduler inside a reservation (needs hierarchical deadline servers,
//! which mainline Linux does not have); `best` and `best-rate`, which
//! adapt reservations from the period of every wake-up and block; a
//! `realrate` on several CPUs; `coop`; a deadline
//! or real-time node below the fair class or in the wrong order under
//! `fp`; two fair-class subtrees at different `fp` priorities; Rez-C and
//! Rez-FB (stolen-time corrections); `warp`.

pub mod adapt;
pub mod apply;
pub mod compile;
pub mod ops;
pub mod run;
pub mod serve;
pub mod show;
pub mod simulate;

pub use compile::{
    compile, Admission, Held, KernelModel, Mechanism, Node, NodeMap, Partition, Plan, Refusal,
    Shortfall,
};

/// Which backend enforces a live run (`hsched run --enforce`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Enforce {
    /// The daemon enforces every decision (freezer, `SCHED_FIFO` raises):
    /// every policy, the control socket, exact per-decision enforcement.
    #[default]
    User,
    /// Linux's own classes enforce the mapped hierarchy ([`compile()`]).
    Kernel,
    /// The kernel where every node maps and every requested guarantee
    /// holds under the kernel's enforcement, the user backend otherwise.
    Auto,
}

impl std::str::FromStr for Enforce {
    type Err = String;
    fn from_str(s: &str) -> Result<Enforce, String> {
        match s {
            "user" => Ok(Enforce::User),
            "kernel" => Ok(Enforce::Kernel),
            "auto" => Ok(Enforce::Auto),
            _ => Err(format!(
                "--enforce takes `kernel`, `user` or `auto`, not `{s}`"
            )),
        }
    }
}

/// The kernel model of this machine: its root domain (the online CPUs),
/// `CONFIG_HZ` from `/proc/config.gz` (250 with a note when it cannot be
/// read), `sched_rt_runtime_us`/`sched_rt_period_us`.
pub fn machine_model() -> KernelModel {
    let cpus = crate::sys::online_cpus();
    let online = cpus.len().max(1);
    let (hz, from) = match read_hz() {
        Some(hz) => (hz, "CONFIG_HZ from /proc/config.gz"),
        None => (250, "CONFIG_HZ unknown here, 250 assumed"),
    };
    let mut m = KernelModel::defaults(online, hz);
    m.online = cpus;
    m.cpusets = crate::cpuset::mount().is_some();
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
    };
    if let Some(r) = read("/proc/sys/kernel/sched_rt_runtime_us") {
        m.rt_runtime_us = u64::try_from(r).ok();
    }
    if let Some(p) = read("/proc/sys/kernel/sched_rt_period_us").and_then(|p| u64::try_from(p).ok())
    {
        m.rt_period_us = p;
    }
    m.source = format!("this machine: {online} CPU(s), HZ={hz} ({from})");
    m
}

fn read_hz() -> Option<u32> {
    let out = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
}
