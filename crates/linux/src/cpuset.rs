//! Root domains from exclusive cpusets (cgroup-v1 `cpuset` controller).
//!
//! Linux schedules every `SCHED_DEADLINE` server of a root domain by
//! global EDF, admits servers per root domain, and refuses a deadline
//! server an affinity narrower than its root domain. A hierarchy whose
//! roots own disjoint CPU sets (space sharing, Regehr 2001, §4.3.7.3)
//! therefore needs one root domain per root for its reservations to be
//! scheduled, admitted and pinned where the file puts them: partitioned
//! EDF. The kernel makes a root domain of every cpuset that balances load
//! (`cpuset.sched_load_balance`) once the top cpuset stops balancing
//! across all CPUs, so a run makes one exclusive cpuset per partition,
//! turns the top cpuset's balancing off, and puts both back when it ends
//! (the daemon itself, or its watchdog after a `kill -9`).
//!
//! While the run lasts the kernel does not balance the machine's other
//! tasks across partitions: a task stays in the partition of the CPU it
//! runs on unless it wakes up elsewhere (which is what shielding a CPU set
//! for real-time work costs).
//!
//! A thread must have run on a CPU of its partition before the kernel lets
//! it become a deadline server there (`sched_setattr` checks the root
//! domain of the CPU it last ran on): a program the run launches joins its
//! partition itself before it starts ([`Cpusets::join_fd`]).

use std::io;
use std::path::{Path, PathBuf};

/// The cgroup-v1 `cpuset` controller's mount point.
pub fn mount() -> Option<PathBuf> {
    crate::sys::cgroup_v1_mount("cpuset")
}

/// A CPU list in the kernel's format (`0-2,5`).
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// The run's partitions: one exclusive cpuset each under the top cpuset,
/// and the top cpuset's balancing as it was.
#[derive(Clone, Debug)]
pub struct Cpusets {
    /// The controller's mount point (the top cpuset).
    pub mount: PathBuf,
    /// The partitions' directories, in the plan's order.
    pub dirs: Vec<PathBuf>,
    /// The top cpuset's `cpuset.sched_load_balance` before the run.
    pub balance_was: String,
    /// The daemon whose partitions these are.
    pub pid: i32,
}

impl Cpusets {
    /// Makes an exclusive cpuset for each of `partitions` (CPU sets,
    /// disjoint) named `hsched-PID-K`, then stops the top cpuset's
    /// balancing, which makes each its own root domain. When `rest` is set
    /// the last partition is the CPUs no root of the file owns
    /// (`hsched-PID-rest`, which holds no thread and only keeps the kernel
    /// balancing the machine's other tasks across those CPUs). Runs on
    /// disjoint CPUs may partition the machine side by side: a run takes
    /// its CPUs out of the other runs' rest partitions, and leaves theirs
    /// out of its own. Undoes what it did when a step fails.
    ///
    /// # Errors
    /// No cpuset controller, an overlapping exclusive cpuset of another
    /// program, or a write the kernel refused.
    pub fn create(partitions: &[Vec<usize>], rest: bool, pid: i32) -> io::Result<Cpusets> {
        let mount = mount().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no cgroup-v1 cpuset controller is mounted",
            )
        })?;
        let top = |f: &str| std::fs::read_to_string(mount.join(f)).map(|s| s.trim().to_string());
        let mems = top("cpuset.mems")?;
        let roots = partitions.len().saturating_sub(usize::from(rest));
        let mine: Vec<usize> = partitions[..roots].iter().flatten().copied().collect();
        for (dir, cpus) in other_runs(&mount, pid) {
            if dir.to_string_lossy().ends_with("-rest") && cpus.iter().any(|c| mine.contains(c)) {
                let left: Vec<usize> = cpus.into_iter().filter(|c| !mine.contains(c)).collect();
                if left.is_empty() {
                    let _ = std::fs::remove_dir(&dir);
                } else {
                    let _ = std::fs::write(dir.join("cpuset.cpus"), cpu_list(&left));
                }
            }
        }
        let others = other_runs(&mount, pid);
        let taken: Vec<usize> = others.iter().flat_map(|(_, c)| c.iter().copied()).collect();
        let mut cs = Cpusets {
            // Another run turned the balancing off; the last run to end
            // turns it back on.
            balance_was: if others.is_empty() {
                top("cpuset.sched_load_balance")?
            } else {
                "1".into()
            },
            mount: mount.clone(),
            dirs: Vec::new(),
            pid,
        };
        let made = (|| {
            for (k, cpus) in partitions.iter().enumerate() {
                let mut cpus = cpus.clone();
                let name = if k < roots {
                    format!("hsched-{pid}-{k}")
                } else {
                    cpus.retain(|c| !taken.contains(c));
                    if cpus.is_empty() {
                        break;
                    }
                    format!("hsched-{pid}-rest")
                };
                let dir = mount.join(name);
                std::fs::create_dir(&dir)?;
                cs.dirs.push(dir.clone());
                let set = |f: &str, v: &str| {
                    std::fs::write(dir.join(f), v).map_err(|e| {
                        io::Error::new(e.kind(), format!("{}: {v}: {e}", dir.join(f).display()))
                    })
                };
                set("cpuset.cpus", &cpu_list(&cpus))?;
                set("cpuset.mems", &mems)?;
                set("cpuset.cpu_exclusive", "1")?;
                set("cpuset.sched_load_balance", "1")?;
            }
            std::fs::write(mount.join("cpuset.sched_load_balance"), "0")
        })();
        match made {
            Ok(()) => Ok(cs),
            Err(e) => {
                cs.release_tasks();
                cs.remove();
                Err(e)
            }
        }
    }

    /// Moves thread `tid` into partition `k`.
    ///
    /// # Errors
    /// The partition is gone or the kernel refused the move (a deadline
    /// server that does not fit the partition's bandwidth: `EBUSY`).
    pub fn attach(&self, tid: i32, k: usize) -> io::Result<()> {
        let dir = self
            .dirs
            .get(k)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such partition"))?;
        std::fs::write(dir.join("tasks"), tid.to_string())
    }

    /// Moves thread `tid` back to the top cpuset.
    ///
    /// # Errors
    /// The kernel refused the move.
    pub fn leave(&self, tid: i32) -> io::Result<()> {
        std::fs::write(self.mount.join("tasks"), tid.to_string())
    }

    /// The `tasks` file of partition `k`, open for writing, for a child to
    /// write `0` (itself) to before it blocks: a thread that has run there
    /// can become a deadline server there.
    ///
    /// # Errors
    /// The partition is gone.
    pub fn join_fd(&self, k: usize) -> io::Result<std::fs::File> {
        let dir = self
            .dirs
            .get(k)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such partition"))?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("tasks"))
    }

    /// Moves every task of the partitions back to the top cpuset (whose
    /// CPUs they may then use again), before their own affinity is
    /// restored.
    pub fn release_tasks(&self) {
        for d in &self.dirs {
            release(&self.mount, d);
        }
    }

    /// Removes the partitions (moving any task left in them out first)
    /// and gives the top cpuset its balancing back, unless another run's
    /// partitions are still there.
    pub fn remove(&self) {
        if other_runs(&self.mount, self.pid).is_empty() {
            let _ = std::fs::write(
                self.mount.join("cpuset.sched_load_balance"),
                &self.balance_was,
            );
        }
        for d in &self.dirs {
            release(&self.mount, d);
            // A task that is exiting may hold the directory a moment.
            for _ in 0..100 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
                release(&self.mount, d);
            }
        }
    }
}

/// The daemon pid in a partition's name `hsched-PID-K`.
fn run_of(name: &str) -> Option<i32> {
    name.strip_prefix("hsched-")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// The partitions of other live runs than `pid`'s, with their CPUs.
fn other_runs(mount: &Path, pid: i32) -> Vec<(PathBuf, Vec<usize>)> {
    let Ok(rd) = std::fs::read_dir(mount) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let run = run_of(&e.file_name().to_string_lossy())?;
            (run != pid && Path::new(&format!("/proc/{run}")).exists()).then(|| {
                let cpus =
                    std::fs::read_to_string(e.path().join("cpuset.cpus")).unwrap_or_default();
                (e.path(), crate::sys::parse_cpu_list(&cpus))
            })
        })
        .collect()
}

fn release(mount: &Path, dir: &Path) {
    if let Ok(tasks) = std::fs::read_to_string(dir.join("tasks")) {
        for t in tasks.split_whitespace() {
            let _ = std::fs::write(mount.join("tasks"), t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_written_as_the_kernel_reads_them() {
        assert_eq!(cpu_list(&[0]), "0");
        assert_eq!(cpu_list(&[3, 1, 2, 5, 7, 6]), "1-3,5-7");
        assert_eq!(cpu_list(&[]), "");
        assert_eq!(
            crate::sys::parse_cpu_list(&cpu_list(&[3, 1, 2, 5, 7, 6])),
            vec![1, 2, 3, 5, 6, 7]
        );
        assert!(crate::sys::parse_cpu_list("").is_empty());
        assert_eq!(run_of("hsched-41-0"), Some(41));
        assert_eq!(run_of("system"), None);
    }
}
