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
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset"))
            .then(|| PathBuf::from(f[1]))
    })
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
}

impl Cpusets {
    /// Makes an exclusive cpuset for each of `partitions` (CPU sets,
    /// disjoint) named `hsched-PID-K`, then stops the top cpuset's
    /// balancing, which makes each its own root domain. Undoes what it did
    /// when a step fails.
    ///
    /// # Errors
    /// No cpuset controller, an overlapping exclusive cpuset of another
    /// program, or a write the kernel refused.
    pub fn create(partitions: &[Vec<usize>], pid: i32) -> io::Result<Cpusets> {
        let mount = mount().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no cgroup-v1 cpuset controller is mounted",
            )
        })?;
        let top = |f: &str| std::fs::read_to_string(mount.join(f)).map(|s| s.trim().to_string());
        let mems = top("cpuset.mems")?;
        let mut cs = Cpusets {
            balance_was: top("cpuset.sched_load_balance")?,
            mount: mount.clone(),
            dirs: Vec::new(),
        };
        let made = (|| {
            for (k, cpus) in partitions.iter().enumerate() {
                let dir = mount.join(format!("hsched-{pid}-{k}"));
                std::fs::create_dir(&dir)?;
                cs.dirs.push(dir.clone());
                let set = |f: &str, v: &str| {
                    std::fs::write(dir.join(f), v).map_err(|e| {
                        io::Error::new(e.kind(), format!("{}: {v}: {e}", dir.join(f).display()))
                    })
                };
                set("cpuset.cpus", &cpu_list(cpus))?;
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
    /// and gives the top cpuset its balancing back.
    pub fn remove(&self) {
        let _ = std::fs::write(
            self.mount.join("cpuset.sched_load_balance"),
            &self.balance_was,
        );
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
    }
}
