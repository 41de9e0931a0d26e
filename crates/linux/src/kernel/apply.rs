//! Setting a compiled plan on threads, and taking it back: scheduling
//! attributes, affinities and the run's cpu cgroups (cgroup v1 `cpu`
//! controller). Every thread is recorded with the watchdog before it is
//! changed, so it is restored however the daemon ends.

use super::compile::{Mechanism, NodeMap, Plan};
use crate::cpuset::Cpusets;
use crate::sys::{self, CpuMask, SchedAttr};
use std::io;
use std::path::{Path, PathBuf};

/// `SCHED_DEADLINE`.
pub const SCHED_DEADLINE: u32 = 6;
/// `SCHED_FLAG_RECLAIM` (GRUB).
pub const SCHED_FLAG_RECLAIM: u64 = 0x02;

/// A cgroup of the plan: path, `cpu.shares`, bandwidth.
type Group<'a> = (
    &'a String,
    u64,
    Option<(hsched_core::Duration, hsched_core::Duration)>,
);

/// The run's cpu cgroups: `root` (`BASE/hsched-PID`) under the daemon's
/// own cgroup `base`, where threads go back.
#[derive(Debug)]
pub struct Cgroups {
    /// The daemon's own cpu cgroup directory.
    pub base: PathBuf,
    /// The run's directory under it.
    pub root: PathBuf,
}

/// The cgroup-v1 `cpu` controller's mount point.
pub fn cpu_mount() -> Option<PathBuf> {
    sys::cgroup_v1_mount("cpu")
}

impl Cgroups {
    /// Makes every cgroup the plan names, parents first, with its weight
    /// and bandwidth; `None` when the plan has none.
    ///
    /// # Errors
    /// No v1 `cpu` controller, or a cgroup could not be made.
    pub fn create(plan: &Plan) -> io::Result<Option<Cgroups>> {
        let groups: Vec<Group<'_>> = plan
            .nodes
            .iter()
            .filter_map(|n| match &n.mechanism {
                Mechanism::FairGroup {
                    cgroup,
                    shares,
                    quota,
                } => Some((cgroup, *shares, *quota)),
                _ => None,
            })
            .collect();
        let mut groups = groups;
        groups.extend(plan.leaf_groups.iter().map(|(g, w)| (g, *w, None)));
        if groups.is_empty() {
            return Ok(None);
        }
        let mount = cpu_mount().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no cgroup-v1 cpu controller is mounted",
            )
        })?;
        let own = std::fs::read_to_string("/proc/self/cgroup")?
            .lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
                ctl.split(',').any(|c| c == "cpu").then(|| path.to_string())
            })
            .unwrap_or_else(|| "/".into());
        let base = mount.join(own.trim_start_matches('/'));
        let root = base.join(format!("hsched-{}", sys::getpid()));
        std::fs::create_dir(&root)?;
        let cg = Cgroups { base, root };
        // Shortest paths first: parents before children.
        let mut sorted = groups;
        sorted.sort_by_key(|g| g.0.matches('/').count());
        for (path, shares, quota) in sorted {
            let dir = cg.root.join(path);
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("cpu.shares"), shares.to_string())?;
            if let Some((q, p)) = quota {
                std::fs::write(
                    dir.join("cpu.cfs_period_us"),
                    (p.as_nanos() / 1000).to_string(),
                )?;
                std::fs::write(
                    dir.join("cpu.cfs_quota_us"),
                    (q.as_nanos() / 1000).to_string(),
                )?;
            }
        }
        Ok(Some(cg))
    }

    /// Moves thread `tid` into cgroup `rel` of the run.
    ///
    /// # Errors
    /// The cgroup is gone or the thread cannot be moved.
    pub fn attach(&self, tid: i32, rel: &str) -> io::Result<()> {
        let dir = if rel.is_empty() {
            self.base.clone()
        } else {
            self.root.join(rel)
        };
        std::fs::write(dir.join("tasks"), tid.to_string())
    }

    /// Moves every task left in the run's cgroups back to `base` and
    /// removes them, deepest first.
    pub fn cleanup(&self) {
        cleanup_tree(&self.base, &self.root);
    }
}

/// Empties `dir` and every cgroup below it into `base`, then removes them.
pub fn cleanup_tree(base: &Path, dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                cleanup_tree(base, &e.path());
            }
        }
    }
    if let Ok(tasks) = std::fs::read_to_string(dir.join("tasks")) {
        for t in tasks.split_whitespace() {
            let _ = std::fs::write(base.join("tasks"), t);
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The scheduling attributes of a thread mechanism (`None` for a
/// scheduler's). Every one resets on fork: a thread the program creates
/// starts in the fair class and the daemon places it (a deadline server's
/// child could not be created otherwise).
pub fn attr_for(m: &Mechanism) -> Option<SchedAttr> {
    let mut a = match m {
        Mechanism::Deadline {
            runtime,
            deadline,
            period,
            reclaim,
        } => SchedAttr {
            policy: SCHED_DEADLINE,
            runtime: runtime.as_nanos(),
            deadline: deadline.as_nanos(),
            period: period.as_nanos(),
            flags: if *reclaim { SCHED_FLAG_RECLAIM } else { 0 },
            ..SchedAttr::other()
        },
        Mechanism::Fifo { priority } => SchedAttr::fifo(*priority),
        Mechanism::Fair { nice, .. } => SchedAttr {
            nice: *nice,
            ..SchedAttr::other()
        },
        _ => return None,
    };
    a.flags |= sys::SCHED_FLAG_RESET_ON_FORK;
    Some(a)
}

/// Sets `node`'s mechanism on thread `tid`: its partition (an exclusive
/// cpuset) and cgroup, its affinity (the whole root domain for a deadline
/// server, which the kernel requires), then its policy.
///
/// # Errors
/// A system call failed; `EBUSY` from `sched_setattr` (or from the move
/// into a partition) is the kernel's deadline admission refusing the
/// server; `EPERM` for a server in a partition, that the thread has not
/// run there yet.
pub fn apply(
    tid: i32,
    node: &NodeMap,
    cg: Option<&Cgroups>,
    cs: Option<&Cpusets>,
) -> io::Result<()> {
    let Some(attr) = attr_for(&node.mechanism) else {
        return Ok(());
    };
    if let (Some(k), Some(cs)) = (node.partition, cs) {
        cs.attach(tid, k)?;
    }
    if let (Mechanism::Fair { cgroup, .. }, Some(cg)) = (&node.mechanism, cg) {
        cg.attach(tid, cgroup)?;
    }
    let mut mask = CpuMask::empty();
    if node.cpus.is_empty() {
        sys::online_cpus().into_iter().for_each(|c| mask.set(c));
    } else {
        node.cpus.iter().for_each(|&c| mask.set(c));
    }
    sys::set_affinity(tid, &mask)?;
    match sys::sched_setattr(tid, &attr) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) && node.partition.is_some() => {
            Err(io::Error::new(
                e.kind(),
                format!("{e}: the kernel makes a thread a deadline server of a partition only once it has run there (this one is asleep on a CPU outside {}); try again after it has run", crate::cpuset::cpu_list(&node.cpus)),
            ))
        }
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsched_core::Duration;

    #[test]
    fn attributes_of_each_mechanism_reset_on_fork() {
        let dl = attr_for(&Mechanism::Deadline {
            runtime: Duration::from_millis(2),
            deadline: Duration::from_millis(10),
            period: Duration::from_millis(10),
            reclaim: true,
        })
        .unwrap();
        assert_eq!(dl.policy, SCHED_DEADLINE);
        assert_eq!(
            (dl.runtime, dl.deadline, dl.period),
            (2_000_000, 10_000_000, 10_000_000)
        );
        assert_eq!(dl.flags, SCHED_FLAG_RECLAIM | sys::SCHED_FLAG_RESET_ON_FORK);
        let f = attr_for(&Mechanism::Fifo { priority: 7 }).unwrap();
        assert_eq!((f.policy, f.priority), (libc::SCHED_FIFO as u32, 7));
        let o = attr_for(&Mechanism::Fair {
            nice: 3,
            cgroup: String::new(),
        })
        .unwrap();
        assert_eq!((o.policy, o.nice), (libc::SCHED_OTHER as u32, 3));
        assert!(attr_for(&Mechanism::DeadlineClass).is_none());
    }
}
