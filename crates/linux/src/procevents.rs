//! New threads and renamed threads, as the kernel announces them: the
//! process-events connector (`NETLINK_CONNECTOR`, `CN_IDX_PROC`), which
//! multicasts a message for every `fork`/`clone` and every `comm` change
//! on the machine.
//!
//! The kernel backend has no tracepoint stream of its own, so without this
//! it finds a program's new threads by listing `/proc/PID/task` of every
//! program five times a second, which is most of its CPU time with a
//! hundred programs and leaves a new thread in its parent's place for up
//! to 200 ms. With it, the daemon wakes only when some thread is created
//! or renamed, and lists only that thread's program. A socket filter keeps
//! every other kind of process event (exec, exit, ...) in the kernel.
//!
//! Listening needs `CAP_NET_ADMIN`; messages can be lost when the socket's
//! buffer fills (a fork storm), which [`ProcEvents::drain`] reports so that
//! the caller lists every program once.

// The connector's bind, subscription, filter and reads live here rather
// than in `sys`; each block says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

// <linux/connector.h>, <linux/cn_proc.h>.
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_FORK: u32 = 0x0000_0001;
const PROC_EVENT_COMM: u32 = 0x0000_0200;
/// `struct nlmsghdr`.
const NLMSG_HDR: usize = 16;
/// `struct cn_msg` without its data.
const CN_MSG: usize = 20;
/// Offset of `proc_event.what` in a message; the event's data starts 16
/// bytes after it (`what`, `cpu`, `timestamp_ns`).
const WHAT: usize = NLMSG_HDR + CN_MSG;
const DATA: usize = WHAT + 16;

/// One announcement that matters to a daemon placing threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEvent {
    /// Thread `tid` of process `tgid` was created (a new process is its
    /// own first thread: `tid == tgid`).
    Created {
        /// The process.
        tgid: i32,
        /// The new thread.
        tid: i32,
        /// The thread that created it (in another process for a fork).
        parent: i32,
    },
    /// Thread `tid` of process `tgid` changed its name (`prctl(PR_SET_NAME)`,
    /// a write to `comm`, `exec`).
    Renamed {
        /// The process.
        tgid: i32,
        /// The thread.
        tid: i32,
    },
}

impl ProcEvent {
    /// The process the thread belongs to.
    pub fn tgid(self) -> i32 {
        match self {
            ProcEvent::Created { tgid, .. } | ProcEvent::Renamed { tgid, .. } => tgid,
        }
    }
}

/// A socket subscribed to the process-events connector.
#[derive(Debug)]
pub struct ProcEvents {
    fd: OwnedFd,
}

impl ProcEvents {
    /// Subscribes, non-blocking.
    ///
    /// # Errors
    /// No connector in this kernel, or no `CAP_NET_ADMIN` (`EPERM`).
    pub fn open() -> io::Result<ProcEvents> {
        let fd = crate::sys::netlink_socket(libc::NETLINK_CONNECTOR, true)?;
        let raw = fd.as_raw_fd();
        filter(raw)?;
        // SAFETY: an all-zero sockaddr_nl is valid; fields set below.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = CN_IDX_PROC;
        // SAFETY: `addr` is a sockaddr_nl of the size given.
        let r = unsafe {
            libc::bind(
                raw,
                std::ptr::addr_of!(addr).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut msg = [0u8; NLMSG_HDR + CN_MSG + 4];
        let len = msg.len() as u32;
        msg[0..4].copy_from_slice(&len.to_ne_bytes());
        msg[4..6].copy_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u32;
        msg[12..16].copy_from_slice(&pid.to_ne_bytes());
        let cn = NLMSG_HDR;
        msg[cn..cn + 4].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
        msg[cn + 4..cn + 8].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
        msg[cn + 16..cn + 18].copy_from_slice(&4u16.to_ne_bytes());
        msg[cn + CN_MSG..].copy_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
        // SAFETY: `msg` is readable for its length.
        let r = unsafe { libc::send(raw, msg.as_ptr().cast(), msg.len(), 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ProcEvents { fd })
    }

    /// The descriptor to poll for input.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Moves every pending announcement into `out`. Returns `false` when
    /// some were lost since the last call (the buffer overflowed), so the
    /// caller must look at every program once.
    ///
    /// # Errors
    /// The socket failed otherwise: it announces nothing more, and polling
    /// it would return at once, so the caller should stop using it.
    pub fn drain(&self, out: &mut Vec<ProcEvent>) -> io::Result<bool> {
        let mut complete = true;
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { libc::recv(self.fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => {
                        complete = false;
                        continue;
                    }
                    Some(libc::EAGAIN) => return Ok(complete),
                    _ => return Err(e),
                }
            }
            parse(&buf[..n as usize], out);
        }
    }
}

/// The announcements in one datagram (one netlink message each).
fn parse(mut b: &[u8], out: &mut Vec<ProcEvent>) {
    let word = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    while let Some(len) = word(b, 0) {
        let len = (len as usize).min(b.len());
        if len < NLMSG_HDR {
            return;
        }
        let m = &b[..len];
        let int = |at: usize| word(m, at).map(|v| v as i32);
        let event = match word(m, WHAT) {
            // fork_proc_event: parent pid, parent tgid, child pid, child tgid.
            Some(PROC_EVENT_FORK) => int(DATA)
                .zip(int(DATA + 8))
                .zip(int(DATA + 12))
                .map(|((parent, tid), tgid)| ProcEvent::Created { tgid, tid, parent }),
            // comm_proc_event: process pid, process tgid, comm.
            Some(PROC_EVENT_COMM) => int(DATA)
                .zip(int(DATA + 4))
                .map(|(tid, tgid)| ProcEvent::Renamed { tgid, tid }),
            _ => None,
        };
        out.extend(event);
        // Messages are 4-byte aligned.
        b = b.get(len.next_multiple_of(4)..).unwrap_or(&[]);
    }
}

/// A classic BPF filter that passes only fork and comm events: the
/// connector sends every exec and exit on the machine too, which a build
/// beside the run would make many.
fn filter(fd: RawFd) -> io::Result<()> {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    // Absolute loads read in network byte order.
    let what = |v: u32| u32::from_be_bytes(v.to_ne_bytes());
    let prog = [
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, WHAT as u32),
        jeq(what(PROC_EVENT_FORK), 2, 0),
        jeq(what(PROC_EVENT_COMM), 1, 0),
        stmt(libc::BPF_RET | libc::BPF_K, 0),
        stmt(libc::BPF_RET | libc::BPF_K, u32::MAX),
    ];
    let f = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `f` points at `prog`, which outlives the call (the kernel
    // copies it).
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            std::ptr::addr_of!(f).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fork event and a comm event, built as the kernel lays them out,
    /// in one datagram with an exit event between them.
    #[test]
    fn parse_reads_fork_and_comm_events_and_skips_others() {
        let msg = |what: u32, data: [u32; 4]| {
            let mut m = vec![0u8; DATA + 16 + 16];
            let len = m.len() as u32;
            m[0..4].copy_from_slice(&len.to_ne_bytes());
            m[WHAT..WHAT + 4].copy_from_slice(&what.to_ne_bytes());
            for (k, v) in data.iter().enumerate() {
                m[DATA + 4 * k..DATA + 4 * k + 4].copy_from_slice(&v.to_ne_bytes());
            }
            m
        };
        let mut b = msg(PROC_EVENT_FORK, [10, 10, 11, 10]);
        b.extend(msg(0x8000_0000, [11, 10, 0, 0]));
        b.extend(msg(PROC_EVENT_COMM, [12, 10, 0, 0]));
        let mut out = Vec::new();
        parse(&b, &mut out);
        assert_eq!(
            out,
            [
                ProcEvent::Created {
                    tgid: 10,
                    tid: 11,
                    parent: 10
                },
                ProcEvent::Renamed { tgid: 10, tid: 12 }
            ]
        );
        // A truncated message ends the datagram without a panic.
        parse(&b[..30], &mut out);
        assert_eq!(out.len(), 2);
    }

    /// As root: the kernel announces a thread this process creates and
    /// the name it gives itself.
    #[test]
    fn a_new_thread_and_its_name_are_announced() {
        let ev = match ProcEvents::open() {
            Ok(ev) => ev,
            Err(e) => {
                eprintln!("SKIPPED: no process-events connector here: {e}");
                return;
            }
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::Builder::new()
            .name("hsched-pe-test".into())
            .spawn(move || {
                tx.send(crate::sys::gettid()).unwrap();
            })
            .unwrap();
        let tid = rx.recv().unwrap();
        t.join().unwrap();
        // SAFETY: getpid has no preconditions.
        let tgid = unsafe { libc::getpid() };
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !out.contains(&ProcEvent::Renamed { tgid, tid })
            && std::time::Instant::now() < deadline
        {
            crate::sys::poll_many(&[ev.fd()], 100);
            ev.drain(&mut out).unwrap();
        }
        assert!(
            out.iter().any(
                |e| matches!(*e, ProcEvent::Created { tgid: g, tid: t, .. } if (g, t) == (tgid, tid))
            ),
            "{out:?}"
        );
        assert!(out.contains(&ProcEvent::Renamed { tgid, tid }), "{out:?}");
    }
}
