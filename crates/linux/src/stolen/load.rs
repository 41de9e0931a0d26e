//! Background activity that makes the kernel steal time on one CPU, for
//! the characterization of §11.8 and the live Fig 11.3: a loopback TCP
//! stream, disk writes, and a timer storm. Each load runs in forked
//! processes that end by themselves at a deadline; [`Running`] kills them,
//! restores what was changed and removes what was written when dropped.

use crate::sys;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// A kind of background activity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// Nothing: the machine's own background.
    None,
    /// A TCP stream over 127.0.0.1 between a sender and a receiver on
    /// another CPU, with receive packet steering (RPS) of `lo` set to the
    /// measured CPU so that the network receive softirqs run there, as a
    /// NIC's would for a stream from another machine (§11.2).
    Tcp,
    /// The same stream with the receiver pinned to the measured CPU, as on
    /// the dissertation's uniprocessor: it only drains its socket when the
    /// reserved thread leaves it time, so the sender stalls (§11.8.1).
    TcpLocal,
    /// A writer pinned to the measured CPU writing 256 KiB blocks to a
    /// temporary file, `fdatasync` every 4 MiB (§11.8.2).
    Disk,
    /// 512 timers (timerfd) armed by a process pinned to the measured
    /// CPU, each re-armed 50 µs to 20 ms after it fires: hrtimer
    /// interrupts on that CPU.
    Timers,
}

impl std::str::FromStr for Load {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" | "idle" => Ok(Load::None),
            "tcp" => Ok(Load::Tcp),
            "tcp-local" => Ok(Load::TcpLocal),
            "disk" => Ok(Load::Disk),
            "timers" => Ok(Load::Timers),
            other => Err(format!(
                "unknown load `{other}`; expected none, tcp, tcp-local, disk or timers"
            )),
        }
    }
}

impl Load {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Load::None => "none",
            Load::Tcp => "tcp",
            Load::TcpLocal => "tcp-local",
            Load::Disk => "disk",
            Load::Timers => "timers",
        }
    }
}

/// A started load. Dropping it stops everything it started.
#[derive(Debug, Default)]
pub struct Running {
    pids: Vec<i32>,
    /// Files to write back: (path, original contents).
    restore: Vec<(PathBuf, String)>,
    remove: Vec<PathBuf>,
}

impl Running {
    /// Stops the load now (also done on drop).
    pub fn stop(&mut self) {
        for &p in &self.pids {
            let _ = sys::kill(p, libc::SIGKILL);
        }
        for p in self.pids.drain(..) {
            let _ = sys::wait_pid(p);
        }
        for (path, text) in self.restore.drain(..) {
            let _ = std::fs::write(&path, text);
        }
        for path in self.remove.drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn pin(cpu: usize) {
    let _ = sys::set_affinity(0, &sys::CpuMask::single(cpu));
}

/// Path of lo's receive packet steering mask.
const LO_RPS: &str = "/sys/class/net/lo/queues/rx-0/rps_cpus";

/// Starts `load` so that it makes the kernel steal time on `cpu`, with any
/// helper on `other`; every process ends by itself at `end_ns`
/// (`CLOCK_MONOTONIC`). Call it from a single-threaded process (it forks).
///
/// # Errors
/// A socket, file or process could not be created.
pub fn start(load: Load, cpu: usize, other: usize, end_ns: u64) -> io::Result<Running> {
    let mut r = Running::default();
    match load {
        Load::None => {}
        Load::Tcp | Load::TcpLocal => {
            let receiver_cpu = if load == Load::Tcp { other } else { cpu };
            if let Ok(old) = std::fs::read_to_string(LO_RPS) {
                let mask = format!("{:x}", 1u128 << cpu.min(127));
                if std::fs::write(LO_RPS, &mask).is_ok() {
                    r.restore.push((LO_RPS.into(), old.trim().to_string()));
                }
            }
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let addr = listener.local_addr()?;
            let lfd = listener.as_raw_fd();
            r.pids.push(sys::spawn_fn(&[0, 1, 2, lfd], move || {
                pin(receiver_cpu);
                let Ok((mut s, _)) = listener.accept() else {
                    return 1;
                };
                let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(100)));
                let mut buf = vec![0u8; 1 << 16];
                while sys::now_ns() < end_ns {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
                0
            })?);
            r.pids.push(sys::spawn_fn(&[0, 1, 2], move || {
                pin(other);
                let Ok(mut s) = std::net::TcpStream::connect(addr) else {
                    return 1;
                };
                let _ = s.set_write_timeout(Some(std::time::Duration::from_millis(100)));
                let buf = vec![0x5au8; 1 << 16];
                while sys::now_ns() < end_ns {
                    match s.write(&buf) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
                0
            })?);
        }
        Load::Disk => {
            let path = std::env::temp_dir().join(format!("hsched-stolen-disk-{}", sys::getpid()));
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(&path)?;
            r.remove.push(path);
            let fd = file.as_raw_fd();
            r.pids.push(sys::spawn_fn(&[0, 1, 2, fd], move || {
                use std::io::Seek;
                pin(cpu);
                let mut f = file;
                let block = vec![0xa5u8; 256 << 10];
                let mut written: u64 = 0;
                while sys::now_ns() < end_ns {
                    if f.write_all(&block).is_err() {
                        return 1;
                    }
                    written += block.len() as u64;
                    if written.is_multiple_of(4 << 20) {
                        let _ = f.sync_data();
                    }
                    // Wrap at 64 MiB: bounded space, endless I/O.
                    if written.is_multiple_of(64 << 20) {
                        let _ = f.seek(io::SeekFrom::Start(0));
                    }
                }
                0
            })?);
        }
        Load::Timers => {
            r.pids.push(sys::spawn_fn(&[0, 1, 2], move || {
                pin(cpu);
                timer_storm(512, end_ns);
                0
            })?);
        }
    }
    Ok(r)
}

/// Arms `n` one-shot timerfds and re-arms each, 50 µs to 20 ms later,
/// whenever it fires, until `end_ns`.
fn timer_storm(n: usize, end_ns: u64) {
    let Ok(ep) = sys::Epoll::new() else { return };
    let mut timers = Vec::with_capacity(n);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut delay = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        50_000 + x % 19_950_000
    };
    for i in 0..n {
        let Ok(t) = sys::TimerFd::new() else { break };
        if ep
            .add(t.0.as_raw_fd(), libc::EPOLLIN as u32, i as u64)
            .is_err()
        {
            break;
        }
        let _ = t.arm(Some(sys::now_ns() + delay()));
        timers.push(t);
    }
    let mut ready = Vec::new();
    while sys::now_ns() < end_ns {
        ready.clear();
        if ep.wait(&mut ready, 100).is_err() {
            break;
        }
        for &i in &ready {
            if let Some(t) = timers.get(i as usize) {
                t.clear();
                let _ = t.arm(Some(sys::now_ns() + delay()));
            }
        }
    }
}
