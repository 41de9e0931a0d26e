//! Thin, documented wrappers over the Linux system calls live mode needs.
//! Every `unsafe` block of the crate lives here, each with the reason it is
//! sound; the rest of the crate is safe Rust.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// `Err(last_os_error)` when `r` is negative.
fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Wraps a fresh descriptor returned by a system call.
fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = check(fd)? as RawFd;
    // SAFETY: the kernel just returned `fd` to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

// ----- clocks ---------------------------------------------------------------

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids used are
    // always supported on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC` in nanoseconds (the clock perf samples are stamped with).
pub fn now_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `USER_HZ`: the unit of `/proc/stat` times (100 on every mainstream
/// architecture).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no arguments and no memory effects.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// CPU time of the calling process (all threads) in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `at_ns` (a one-shot high-resolution
/// sleep; no tick involved).
pub fn sleep_until(at_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `ts` is a valid timespec; a null remainder is allowed with
        // TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            return;
        }
    }
}

// ----- scheduling attributes ------------------------------------------------

/// `struct sched_attr` (include/uapi/linux/sched/types.h), first version
/// plus the utilization clamps.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedAttr {
    /// Size of the structure.
    pub size: u32,
    /// `SCHED_OTHER`, `SCHED_FIFO`, ...
    pub policy: u32,
    /// `SCHED_FLAG_*`.
    pub flags: u64,
    /// Nice value (fair policies).
    pub nice: i32,
    /// Real-time priority.
    pub priority: u32,
    /// SCHED_DEADLINE runtime.
    pub runtime: u64,
    /// SCHED_DEADLINE deadline.
    pub deadline: u64,
    /// SCHED_DEADLINE period.
    pub period: u64,
    /// Utilization clamp, minimum.
    pub util_min: u32,
    /// Utilization clamp, maximum.
    pub util_max: u32,
}

/// `SCHED_FLAG_RESET_ON_FORK`.
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 1;

impl SchedAttr {
    /// `SCHED_FIFO` at `prio`.
    pub fn fifo(prio: u32) -> Self {
        SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_FIFO as u32,
            priority: prio,
            ..Default::default()
        }
    }
    /// `SCHED_OTHER` at nice 0.
    pub fn other() -> Self {
        SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_OTHER as u32,
            ..Default::default()
        }
    }
}

/// The scheduling attributes of thread `tid` (0: the caller).
pub fn sched_getattr(tid: i32) -> io::Result<SchedAttr> {
    let mut a = SchedAttr::default();
    // SAFETY: `a` is a writable sched_attr of the size passed; the kernel
    // writes at most that many bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0u32,
        )
    };
    check(r)?;
    Ok(a)
}

/// Sets the scheduling attributes of thread `tid` (0: the caller).
pub fn sched_setattr(tid: i32, attr: &SchedAttr) -> io::Result<()> {
    let mut a = *attr;
    a.size = std::mem::size_of::<SchedAttr>() as u32;
    // Utilization clamps are only applied when their flags are set; keep
    // the call to policy, priority, nice and deadline parameters.
    a.flags &= !(0x20 | 0x40);
    // SAFETY: `a` is a valid sched_attr whose `size` field matches its size;
    // the kernel only reads it.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0u32) };
    check(r).map(|_| ())
}

/// A set of CPUs (`cpu_set_t`, up to 1024 CPUs).
#[derive(Clone, Copy)]
pub struct CpuMask(pub libc::cpu_set_t);

impl PartialEq for CpuMask {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}
impl Eq for CpuMask {}

impl std::fmt::Debug for CpuMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.cpus()).finish()
    }
}

impl CpuMask {
    /// The empty set.
    pub fn empty() -> Self {
        // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
        CpuMask(unsafe { std::mem::zeroed() })
    }
    /// The set `{cpu}`.
    pub fn single(cpu: usize) -> Self {
        let mut m = Self::empty();
        m.set(cpu);
        m
    }
    /// Adds `cpu` (ignored beyond 1023).
    pub fn set(&mut self, cpu: usize) {
        if cpu < libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is below CPU_SETSIZE, so the bit is inside the set.
            unsafe { libc::CPU_SET(cpu, &mut self.0) };
        }
    }
    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        // SAFETY: `cpu` is below CPU_SETSIZE, so the bit is inside the set.
        cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, &self.0) }
    }
    /// The CPUs in the set, ascending.
    pub fn cpus(&self) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| self.contains(c))
            .collect()
    }
    /// The raw bytes (128).
    pub fn bytes(&self) -> [u8; 128] {
        let mut out = [0u8; 128];
        for c in self.cpus() {
            out[c / 8] |= 1 << (c % 8);
        }
        out
    }
    /// From raw bytes.
    pub fn from_bytes(b: &[u8; 128]) -> Self {
        let mut m = Self::empty();
        for (i, byte) in b.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    m.set(i * 8 + bit);
                }
            }
        }
        m
    }
}

/// The affinity of thread `tid` (0: the caller).
pub fn get_affinity(tid: i32) -> io::Result<CpuMask> {
    let mut m = CpuMask::empty();
    // SAFETY: `m.0` is a writable cpu_set_t of the size passed.
    let r =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut m.0) };
    check(r as libc::c_long)?;
    Ok(m)
}

/// Sets the affinity of thread `tid` (0: the caller).
pub fn set_affinity(tid: i32, m: &CpuMask) -> io::Result<()> {
    // SAFETY: `m.0` is a valid cpu_set_t of the size passed; only read.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &m.0) };
    check(r as libc::c_long).map(|_| ())
}

/// The CPUs that are online (`/sys/devices/system/cpu/online`).
pub fn online_cpus() -> Vec<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut out = parse_cpu_list(&text);
    if out.is_empty() {
        out.push(0);
    }
    out
}

/// Where the cgroup-v1 hierarchy with `controller` is mounted, if it is.
pub fn cgroup_v1_mount(controller: &str) -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 3 && f[2] == "cgroup" && f[3].split(',').any(|o| o == controller))
            .then(|| std::path::PathBuf::from(f[1]))
    })
}

/// The CPUs of a list in the kernel's format (`0-2,5`).
pub fn parse_cpu_list(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in text.trim().split(',') {
        let mut it = part.split('-');
        let a = it.next().and_then(|s| s.parse::<usize>().ok());
        let b = it.next().and_then(|s| s.parse::<usize>().ok());
        match (a, b) {
            (Some(a), Some(b)) if b >= a => out.extend(a..=b),
            (Some(a), None) => out.push(a),
            _ => {}
        }
    }
    out
}

// ----- perf events ----------------------------------------------------------

/// `struct perf_event_attr`, `PERF_ATTR_SIZE_VER5` (112 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PerfEventAttr {
    /// `PERF_TYPE_*`.
    pub type_: u32,
    /// Size of the structure.
    pub size: u32,
    /// Event within the type (a tracepoint id).
    pub config: u64,
    /// Sample every n events.
    pub sample_period: u64,
    /// `PERF_SAMPLE_*`.
    pub sample_type: u64,
    /// `PERF_FORMAT_*`.
    pub read_format: u64,
    /// The flag bitfield (`disabled`, `inherit`, ...).
    pub flags: u64,
    /// Wake pollers every n events.
    pub wakeup_events: u32,
    /// Breakpoint type (unused).
    pub bp_type: u32,
    /// Extension (unused).
    pub config1: u64,
    /// Extension (unused).
    pub config2: u64,
    /// Branch sampling (unused).
    pub branch_sample_type: u64,
    /// Registers (unused).
    pub sample_regs_user: u64,
    /// Stack (unused).
    pub sample_stack_user: u32,
    /// Clock of the sample times when `use_clockid` is set.
    pub clockid: i32,
    /// Registers (unused).
    pub sample_regs_intr: u64,
    /// AUX (unused).
    pub aux_watermark: u32,
    /// Callchain depth (unused).
    pub sample_max_stack: u16,
    /// Reserved.
    pub reserved2: u16,
}

/// `PERF_TYPE_SOFTWARE`.
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`.
pub const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_COUNT_SW_DUMMY`.
pub const PERF_COUNT_SW_DUMMY: u64 = 9;
/// `PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW`.
pub const SAMPLE_TYPE: u64 = (1 << 1) | (1 << 2) | (1 << 7) | (1 << 10);
/// `disabled` bit of the flags: the event counts nothing until enabled.
pub const FLAG_DISABLED: u64 = 1;
/// `inherit` bit of the flags.
pub const FLAG_INHERIT: u64 = 1 << 1;
/// `use_clockid` bit of the flags.
pub const FLAG_USE_CLOCKID: u64 = 1 << 25;
/// `sample_id_all` bit.
pub const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
/// `PERF_RECORD_LOST`.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_SWITCH` (attr `context_switch`).
pub const PERF_RECORD_SWITCH: u32 = 14;
/// `PERF_RECORD_MISC_SWITCH_OUT`: the record is a switch-out.
pub const PERF_RECORD_MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`: switched out while runnable.
pub const PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// The `context_switch` bit of the flag bitfield.
pub const FLAG_CONTEXT_SWITCH: u64 = 1 << 26;
/// `PERF_RECORD_SAMPLE`.
pub const PERF_RECORD_SAMPLE: u32 = 9;

/// Opens a perf event on thread `pid` (-1: every thread) and CPU `cpu`.
pub fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    let mut a = *attr;
    a.size = std::mem::size_of::<PerfEventAttr>() as u32;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: `a` is a fully initialised perf_event_attr whose size field
    // matches; the kernel only reads it. The returned fd is owned below.
    let r = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &a as *const PerfEventAttr,
            pid,
            cpu,
            -1i32,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    owned(r)
}

/// Makes `fd` write its records into the ring buffer of `target`
/// (`PERF_EVENT_IOC_SET_OUTPUT`).
pub fn perf_set_output(fd: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
    // SAFETY: both descriptors are open perf events; the ioctl takes an fd
    // number as its argument and touches no user memory.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            PERF_EVENT_IOC_SET_OUTPUT as _,
            target.as_raw_fd(),
        )
    };
    check(r as libc::c_long).map(|_| ())
}

/// Enables or disables a perf event (`PERF_EVENT_IOC_ENABLE` / `_DISABLE`).
pub fn perf_enable(fd: &OwnedFd, on: bool) -> io::Result<()> {
    const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
    const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
    let req = if on {
        PERF_EVENT_IOC_ENABLE
    } else {
        PERF_EVENT_IOC_DISABLE
    };
    // SAFETY: the ioctl takes no argument and touches no user memory.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, 0) };
    check(r as libc::c_long).map(|_| ())
}

/// Sets a tracepoint event's filter (`PERF_EVENT_IOC_SET_FILTER`), in
/// ftrace's filter syntax over the tracepoint's fields.
pub fn perf_set_filter(fd: &OwnedFd, filter: &str) -> io::Result<()> {
    const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;
    let c = std::ffi::CString::new(filter)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a filter"))?;
    // SAFETY: the ioctl reads a NUL-terminated string from the pointer,
    // which stays valid for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER as _, c.as_ptr()) };
    check(r as libc::c_long).map(|_| ())
}

/// Mounts a cgroup-v1 hierarchy with controller `controller` at `at`
/// (`mount -t cgroup -o CONTROLLER none AT`, without setuid, devices or
/// exec). A controller already mounted elsewhere gives the same hierarchy.
pub fn mount_cgroup_v1(at: &Path, controller: &str) -> io::Result<()> {
    let c = |s: &str| {
        CString::new(s)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a mount argument"))
    };
    let target = c(at
        .to_str()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "mount point is not UTF-8"))?)?;
    let (source, fstype, data) = (c("none")?, c("cgroup")?, c(controller)?);
    // SAFETY: every pointer is a NUL-terminated string alive for the call.
    let r = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            data.as_ptr().cast(),
        )
    };
    check(r as libc::c_long).map(|_| ())
}

/// Detaches the mount at `at` (`umount -l`).
pub fn umount_lazy(at: &Path) -> io::Result<()> {
    let target = CString::new(at.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a mount point"))?;
    // SAFETY: a NUL-terminated string alive for the call.
    let r = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    check(r as libc::c_long).map(|_| ())
}

/// The kernel's unique id of a perf event (`PERF_EVENT_IOC_ID`), the value
/// `PERF_SAMPLE_ID` puts in its samples.
pub fn perf_event_id(fd: &OwnedFd) -> io::Result<u64> {
    const PERF_EVENT_IOC_ID: libc::c_ulong = 0x8008_2407;
    let mut id: u64 = 0;
    // SAFETY: the ioctl writes one u64 to the pointer, which is valid.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ID as _, &mut id as *mut u64) };
    check(r as libc::c_long).map(|_| id)
}

/// A perf ring buffer mapped from an event descriptor.
pub struct PerfRing {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value alone and only accessed
// through `&mut self`.
unsafe impl Send for PerfRing {}

impl PerfRing {
    /// Maps `1 + 2^order` pages of `fd`'s ring buffer.
    pub fn map(fd: &OwnedFd, order: u32) -> io::Result<PerfRing> {
        let page = page_size();
        let len = page * (1 + (1usize << order));
        // SAFETY: mapping a perf event fd with a length of 1 + 2^n pages is
        // the documented interface; the result is checked for MAP_FAILED
        // and unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p as *mut u8;
        // SAFETY: the header page is mapped; data_offset/data_size live at
        // offsets 1040/1048 of perf_event_mmap_page (kernel >= 4.1).
        let (off, size) = unsafe {
            (
                std::ptr::read_volatile(base.add(1040) as *const u64),
                std::ptr::read_volatile(base.add(1048) as *const u64),
            )
        };
        let (data_offset, data_size) = if off == 0 {
            (page, len - page)
        } else {
            (off as usize, size as usize)
        };
        Ok(PerfRing {
            base,
            len,
            data_offset,
            data_size,
            scratch: Vec::with_capacity(512),
        })
    }

    fn head(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: data_head is a naturally aligned u64 at offset 1024 of the
        // mapped header page, written by the kernel; AtomicU64 has the same
        // layout as u64.
        unsafe { &*(self.base.add(1024) as *const std::sync::atomic::AtomicU64) }
    }
    fn tail(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: as `head`, data_tail at offset 1032, written by us.
        unsafe { &*(self.base.add(1032) as *const std::sync::atomic::AtomicU64) }
    }

    /// Calls `f(record_type, record_bytes_after_header)` for every record
    /// available, then frees their space. Returns the number of records.
    pub fn drain(&mut self, mut f: impl FnMut(u32, &[u8])) -> usize {
        self.drain_misc(|ty, _, body| f(ty, body))
    }

    /// As [`PerfRing::drain`], also passing the header's `misc` bits.
    pub fn drain_misc(&mut self, mut f: impl FnMut(u32, u16, &[u8])) -> usize {
        use std::sync::atomic::Ordering;
        let head = self.head().load(Ordering::Acquire);
        let mut tail = self.tail().load(Ordering::Relaxed);
        let mut n = 0;
        while tail + 8 <= head {
            let mut hdr = [0u8; 8];
            self.copy_out(tail, &mut hdr);
            let ty = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let misc = u16::from_ne_bytes([hdr[4], hdr[5]]);
            let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
            if size < 8 || tail + size > head {
                break;
            }
            let mut buf = std::mem::take(&mut self.scratch);
            buf.resize((size - 8) as usize, 0);
            self.copy_out(tail + 8, &mut buf);
            f(ty, misc, &buf);
            self.scratch = buf;
            tail += size;
            n += 1;
        }
        self.tail().store(tail, Ordering::Release);
        n
    }

    fn copy_out(&self, pos: u64, out: &mut [u8]) {
        let mut off = (pos % self.data_size as u64) as usize;
        let mut done = 0;
        while done < out.len() {
            let chunk = (out.len() - done).min(self.data_size - off);
            // SAFETY: `off + chunk <= data_size`, so the source range lies in
            // the mapped data area; `out` has room for `chunk` more bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base.add(self.data_offset + off),
                    out.as_mut_ptr().add(done),
                    chunk,
                )
            };
            done += chunk;
            off = 0;
        }
    }
}

impl Drop for PerfRing {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping made in `map`.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// The page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

// ----- epoll, timerfd, signalfd ----------------------------------------------

/// An epoll instance.
pub struct Epoll(OwnedFd);

impl Epoll {
    /// A new epoll instance.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain system call, result owned.
        owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) } as libc::c_long).map(Epoll)
    }
    /// Watches `fd` for `events`, reporting `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event, only read by the kernel.
        check(
            unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) }
                as libc::c_long,
        )
        .map(|_| ())
    }
    /// Stops watching `fd`.
    pub fn del(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as `add`; errors (fd already closed) are irrelevant.
        unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }
    /// Waits up to `timeout_ms` (-1: forever); returns the ready tokens.
    pub fn wait(&self, out: &mut Vec<u64>, timeout_ms: i32) -> io::Result<()> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: `evs` is a writable array of 64 epoll_events.
        let r = unsafe { libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), 64, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        out.extend(evs[..r as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// A one-shot `CLOCK_MONOTONIC` timerfd armed at absolute times.
pub struct TimerFd(pub OwnedFd);

impl TimerFd {
    /// A new, disarmed timer.
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: plain system call, result owned.
        owned(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        } as libc::c_long)
        .map(TimerFd)
    }
    /// Arms at `at_ns` (absolute `CLOCK_MONOTONIC`); `None` disarms.
    pub fn arm(&self, at_ns: Option<u64>) -> io::Result<()> {
        let v = match at_ns {
            // An expiry of zero would disarm: use 1 ns for "now".
            Some(t) => libc::timespec {
                tv_sec: (t.max(1) / 1_000_000_000) as libc::time_t,
                tv_nsec: (t.max(1) % 1_000_000_000) as libc::c_long,
            },
            None => libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: v,
        };
        // SAFETY: `spec` is a valid itimerspec; the old value is not wanted.
        let r = unsafe {
            libc::timerfd_settime(
                self.0.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        check(r as libc::c_long).map(|_| ())
    }
    /// Consumes the expiry count.
    pub fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into an 8-byte buffer; EAGAIN is fine.
        unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, 8) };
    }
}

/// Blocks `sigs` in the calling thread and returns a signalfd for them.
pub fn signalfd(sigs: &[i32]) -> io::Result<OwnedFd> {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    for &s in sigs {
        // SAFETY: as above; invalid numbers only make the call fail.
        unsafe { libc::sigaddset(&mut set, s) };
    }
    // SAFETY: `set` is initialised; the old mask is not wanted.
    check(
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) }
            as libc::c_long,
    )?;
    // SAFETY: plain system call with a valid set, result owned.
    owned(
        unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) } as libc::c_long,
    )
}

/// Reads one signal number from a signalfd, if any is pending.
pub fn read_signal(fd: &OwnedFd) -> Option<i32> {
    // SAFETY: signalfd_siginfo is plain data.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let n = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: reads at most `n` bytes into `info`, which is `n` bytes long.
    let r = unsafe { libc::read(fd.as_raw_fd(), &mut info as *mut _ as *mut libc::c_void, n) };
    (r == n as isize).then_some(info.ssi_signo as i32)
}

/// Unblocks `sigs` in the calling thread: a caller that goes on after a
/// run (whose signalfd blocked them) and wants them delivered again.
pub fn unblock_signals(sigs: &[i32]) {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid set pointers; invalid numbers only make sigaddset fail.
    unsafe {
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Unblocks every signal in the calling thread (used in forked children).
pub fn unblock_all_signals() {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid set pointers.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Ignores `sig` in this process.
pub fn ignore_signal(sig: i32) {
    // SAFETY: SIG_IGN is a valid disposition for catchable signals.
    unsafe { libc::signal(sig, libc::SIG_IGN) };
}

/// Restores the default disposition of `sig`.
pub fn default_signal(sig: i32) {
    // SAFETY: SIG_DFL is valid for every signal.
    unsafe { libc::signal(sig, libc::SIG_DFL) };
}

// ----- processes ------------------------------------------------------------

/// `fork()`: `Ok(0)` in the child, the child's pid in the parent.
///
/// The child of a multi-threaded process may only call async-signal-safe
/// functions before `exec` or `_exit`; callers document what they do there.
pub fn fork() -> io::Result<i32> {
    // SAFETY: fork has no memory-safety preconditions by itself; each caller
    // restricts what its child does (see their comments).
    let r = unsafe { libc::fork() };
    check(r as libc::c_long).map(|r| r as i32)
}

/// Ends the calling process at once, without running destructors.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is always safe to call.
    unsafe { libc::_exit(code) }
}

/// The caller's process id.
pub fn getpid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::getpid() }
}

/// The caller's thread id.
pub fn gettid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() }
}

/// Sends `sig` to process `pid` (negative: a process group).
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: no memory effects.
    check(unsafe { libc::kill(pid, sig) } as libc::c_long).map(|_| ())
}

/// Puts the caller in a new process group of its own.
pub fn setpgid_self() {
    // SAFETY: no memory effects.
    unsafe { libc::setpgid(0, 0) };
}

/// Has the kernel SIGKILL the caller when the thread that forked it ends,
/// and ends the caller at once if that has already happened (`parent` is
/// the pid it was forked from; a dead parent's children are re-parented).
pub fn die_with_parent(parent: i32) {
    // SAFETY: no memory effects.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    if getppid() != parent {
        exit_now(0);
    }
}

/// Starts a new session (detaches from the terminal's signals).
pub fn setsid() {
    // SAFETY: no memory effects.
    unsafe { libc::setsid() };
}

/// Reaps one exited child without blocking: `(pid, wait status)`.
pub fn reap_any() -> Option<(i32, i32)> {
    let mut status = 0;
    // SAFETY: `status` is a valid int to write.
    let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    (r > 0).then_some((r, status))
}

/// Waits for child `pid` to end; returns its wait status.
pub fn wait_pid(pid: i32) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int to write.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r >= 0 {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A prepared `execve`: everything allocated before `fork`, so the child
/// only makes async-signal-safe calls.
pub struct Exec {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

impl Exec {
    /// Resolves `argv[0]` in `PATH` and captures the environment.
    ///
    /// # Errors
    /// Empty command, a NUL byte in an argument, or no such program.
    pub fn new(argv: &[String]) -> io::Result<Exec> {
        let first = argv
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
        let path = if first.contains('/') {
            // Checked here, so that a mistyped path fails the launch with
            // its reason rather than in the child after the fork.
            executable(first.as_ref())?;
            first.into()
        } else {
            resolve(first).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("program `{first}` not found in PATH"),
                )
            })?
        };
        let nul = |_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in an argument");
        let argv = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()).map_err(nul))
            .collect::<Result<Vec<_>, _>>()?;
        let envp = std::env::vars_os()
            .filter_map(|(k, v)| {
                use std::os::unix::ffi::OsStrExt;
                let mut b = k.as_bytes().to_vec();
                b.push(b'=');
                b.extend_from_slice(v.as_bytes());
                CString::new(b).ok()
            })
            .collect();
        Ok(Exec {
            path: CString::new(path.into_os_string().into_encoded_bytes()).map_err(nul)?,
            argv,
            envp,
        })
    }

    /// Forks a child that becomes this program once a byte arrives on (or
    /// the write end closes of) the pipe `gate`, so that the daemon can
    /// adopt it first. The child starts its own process group with default
    /// signal handling, and closes every descriptor above `last_fd` but
    /// `gate`; an exec that fails says so on standard error and exits 127
    /// (no such program) or 126, as a shell would. With `join`, a cgroup's
    /// `tasks` file open for writing, the child first moves itself there
    /// (while it runs, so it is on that cgroup's CPUs when it blocks).
    /// Returns the child's pid.
    ///
    /// # Errors
    /// `fork` fails.
    pub fn spawn_gated(&self, gate: RawFd, last_fd: RawFd, join: Option<RawFd>) -> io::Result<i32> {
        // Made before the fork: the child may not allocate.
        let failed = format!(
            "hsched: could not execute `{}`\n",
            self.argv
                .first()
                .map_or(std::borrow::Cow::Borrowed(""), |a| a.to_string_lossy())
        );
        let pid = fork()?;
        if pid == 0 {
            // Child: only async-signal-safe calls until execve.
            setpgid_self();
            unblock_all_signals();
            for s in [
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGCHLD,
                libc::SIGHUP,
                libc::SIGPIPE,
            ] {
                default_signal(s);
            }
            if let Some(j) = join {
                let _ = write_all(j, b"0");
            }
            close_cloexec(last_fd, gate);
            let mut b = [0u8; 1];
            let _ = read(gate, &mut b);
            let err = self.exec();
            let _ = write_all(2, failed.as_bytes());
            exit_now(if err == libc::ENOENT { 127 } else { 126 });
        }
        Ok(pid)
    }

    /// Replaces the calling process (in a forked child). Returns only on
    /// failure, with the errno.
    pub fn exec(&self) -> i32 {
        // Pointer arrays are built without allocating: they live on the stack.
        const MAX: usize = 256;
        let mut a: [*const libc::c_char; MAX + 1] = [std::ptr::null(); MAX + 1];
        for (i, s) in self.argv.iter().take(MAX).enumerate() {
            a[i] = s.as_ptr();
        }
        let mut env: [*const libc::c_char; 1024] = [std::ptr::null(); 1024];
        for (i, s) in self.envp.iter().take(1023).enumerate() {
            env[i] = s.as_ptr();
        }
        // SAFETY: `path`, `a` and `env` are NUL-terminated arrays of pointers
        // to NUL-terminated strings owned by `self`, alive during the call.
        unsafe { libc::execve(self.path.as_ptr(), a.as_ptr(), env.as_ptr()) };
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOENT)
    }
}

/// The first executable `prog` in `PATH` (`prog` has no `/`).
fn resolve(prog: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| executable(p).is_ok())
}

/// Whether `p` is a file with an execute bit (root may run any such file).
fn executable(p: &std::path::Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::metadata(p)?;
    if !m.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a file"));
    }
    if m.permissions().mode() & 0o111 == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not executable (no x permission)",
        ));
    }
    Ok(())
}

/// A pipe `(read, write)`, both close-on-exec.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors; they are owned below.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } as libc::c_long)?;
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets a pipe's capacity (best effort).
pub fn set_pipe_size(fd: &OwnedFd, bytes: i32) {
    // SAFETY: F_SETPIPE_SZ takes an int and touches no memory.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) };
}

/// Writes all of `buf` to `fd` (retrying on EINTR and short writes).
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: reads `buf.len()` bytes from a valid slice.
        let r = unsafe { libc::write(fd, buf.as_ptr() as *const libc::c_void, buf.len()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[r as usize..];
    }
    Ok(())
}

/// Reads into `buf`; `Ok(0)` at end of file.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: writes at most `buf.len()` bytes into a valid slice.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Waits until `fd` is readable or hung up, or `timeout_ms` passes.
pub fn poll_in(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

/// Closes descriptor `fd`, which nothing else owns (no `OwnedFd` or `File`
/// will drop it later).
pub fn close(fd: RawFd) {
    // SAFETY: the caller vouches that no owner will close it again.
    unsafe { libc::close(fd) };
}

/// Closes every descriptor from `first` up, except those in `keep`
/// (`close_range`, one call per gap: fast and async-signal-safe).
pub fn close_from(first: RawFd, keep: &[RawFd]) {
    // Room for the watchdog's pipe and pidfd plus one CPU lock per CPU of
    // a large machine; no allocation (async-signal-safe after fork).
    let mut ks: [RawFd; 256] = [RawFd::MAX; 256];
    let mut n = 0;
    for &k in keep.iter().filter(|&&k| k >= first).take(256) {
        ks[n] = k;
        n += 1;
    }
    ks[..n].sort_unstable();
    let mut lo = first as u32;
    for &k in &ks[..n] {
        if k as u32 > lo {
            // SAFETY: closes descriptors of this process only; called in a
            // freshly forked child where nothing else uses them.
            unsafe { libc::syscall(libc::SYS_close_range, lo, k as u32 - 1, 0u32) };
        }
        lo = k as u32 + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, lo, u32::MAX, 0u32) };
}

/// The highest descriptor number this process has open (2 if it cannot
/// tell). Allocates: call it before `fork`, not in the child.
pub fn highest_fd() -> RawFd {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
                .max()
                .unwrap_or(2)
        })
        .unwrap_or(2)
}

/// Closes every close-on-exec descriptor from 3 to `last` except `keep`:
/// what an `execve` would close anyway, closed before it instead. Others
/// (descriptors the daemon's caller passed on, for the program) stay.
/// Async-signal-safe (`fcntl` and `close` only).
pub fn close_cloexec(last: RawFd, keep: RawFd) {
    for fd in 3..=last {
        if fd == keep {
            continue;
        }
        // SAFETY: queries and closes descriptors of this process only;
        // called in a freshly forked child where nothing else uses them.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC != 0 {
                libc::close(fd);
            }
        }
    }
}

/// Waits until every copy of the write end of the pipe `r` is closed (end
/// of file), for at most `timeout_ms`; `Ok(false)` on timeout.
pub fn wait_closed(r: RawFd, timeout_ms: u64) -> io::Result<bool> {
    let deadline = now_ns() + timeout_ms * 1_000_000;
    let mut b = [0u8; 16];
    loop {
        let left = deadline.saturating_sub(now_ns()) / 1_000_000;
        if !poll_in(r, left.min(i32::MAX as u64) as i32)? {
            if now_ns() >= deadline {
                return Ok(false);
            }
            continue;
        }
        if read(r, &mut b)? == 0 {
            return Ok(true);
        }
    }
}

/// Raises the soft descriptor limit to the hard one.
pub fn raise_nofile_limit() {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit to read and write.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

/// `prctl(PR_SET_NAME)` for the calling thread (shown in `ps`).
pub fn set_thread_name(name: &str) {
    let mut b = [0u8; 16];
    for (i, c) in name.bytes().take(15).enumerate() {
        b[i] = c;
    }
    // SAFETY: `b` is a NUL-terminated 16-byte buffer.
    unsafe { libc::prctl(libc::PR_SET_NAME, b.as_ptr()) };
}

/// The credentials of the peer of a connected Unix socket:
/// `(pid, uid, gid)`.
pub fn peer_cred(fd: RawFd) -> io::Result<(i32, u32, u32)> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` is a writable ucred and `len` its size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut c as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    check(r as libc::c_long)?;
    Ok((c.pid, c.uid, c.gid))
}

/// The effective user id of the caller.
pub fn geteuid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}

/// Runs `f` in a new child process (fork without exec) and returns its
/// pid. The child closes every descriptor above 2 except `keep`, resets
/// its signals, runs `f`, and exits.
///
/// Only for a single-threaded caller (the daemon), where the child is an
/// exact copy that may allocate freely.
pub fn spawn_fn(keep: &[RawFd], f: impl FnOnce() -> i32) -> io::Result<i32> {
    let pid = fork()?;
    if pid == 0 {
        close_from(3, keep);
        unblock_all_signals();
        for s in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGCHLD,
            libc::SIGPIPE,
            libc::SIGHUP,
        ] {
            default_signal(s);
        }
        // Scheduling is reset by the parent (the daemon runs with
        // SCHED_RESET_ON_FORK): changing it here would race with it.
        let code = f();
        exit_now(code);
    }
    Ok(pid)
}

// ----- shared result slots --------------------------------------------------

/// Results a probe workload publishes to the daemon (shared memory that
/// survives `fork`). All fields are atomics, valid when zeroed.
#[repr(C)]
#[derive(Debug, Default)]
pub struct ProbeSlot {
    /// Completed jobs or frames.
    pub jobs: std::sync::atomic::AtomicU64,
    /// Missed deadlines or frames.
    pub misses: std::sync::atomic::AtomicU64,
    /// Largest lateness in ns (can be negative), `i64::MIN` when unset.
    pub max_lateness: std::sync::atomic::AtomicI64,
    /// Whether the slot is in use.
    pub used: std::sync::atomic::AtomicU64,
    /// Deadline (absolute `CLOCK_MONOTONIC`) of the job in progress or
    /// next; 0 when none is pending.
    pub pending_due: std::sync::atomic::AtomicU64,
    /// Interval between `pending_due` and the deadlines of the jobs after
    /// it, which will be pending too if it is not done (0: count only it).
    pub pending_every: std::sync::atomic::AtomicU64,
}

impl ProbeSlot {
    /// Misses so far at `now`: those counted, and the pending deadlines
    /// that have passed unmet, as the simulator counts them at the end of
    /// a run (a starved thread must not look punctual).
    pub fn misses_at(&self, now: u64) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        let due = self.pending_due.load(Relaxed);
        let every = self.pending_every.load(Relaxed);
        let overdue = if due == 0 || due >= now {
            0
        } else {
            // With no interval, only the pending job itself.
            1 + (now - due - 1).checked_div(every).unwrap_or(0)
        };
        self.misses.load(Relaxed) + overdue
    }
}

/// An anonymous shared mapping of `n` [`ProbeSlot`]s.
pub struct Slots {
    base: *mut ProbeSlot,
    n: usize,
}

// SAFETY: the slots are atomics; sharing references across threads is sound.
unsafe impl Send for Slots {}
// SAFETY: as above.
unsafe impl Sync for Slots {}

impl Slots {
    /// Maps `n` zeroed slots shared with future children.
    ///
    /// # Errors
    /// mmap failed.
    pub fn new(n: usize) -> io::Result<Slots> {
        let n = n.max(1);
        let len = n * std::mem::size_of::<ProbeSlot>();
        // SAFETY: anonymous shared mapping, checked below, unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Slots {
            base: p as *mut ProbeSlot,
            n,
        })
    }
    /// Slot `i` (`None` beyond the end).
    pub fn get(&self, i: usize) -> Option<&ProbeSlot> {
        // SAFETY: `i < n`, the mapping holds `n` zero-initialised slots
        // (all-zero atomics are valid) and lives as long as `self`.
        (i < self.n).then(|| unsafe { &*self.base.add(i) })
    }
    /// Number of slots.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether there are no slots (never: at least one is mapped).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`.
        unsafe {
            libc::munmap(
                self.base as *mut libc::c_void,
                self.n * std::mem::size_of::<ProbeSlot>(),
            )
        };
    }
}

/// CPU time of process `pid` (all its threads, dead ones included), in ns,
/// from its POSIX CPU clock.
pub fn process_cpu_ns_of(pid: i32) -> Option<u64> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: `id` is a valid clockid_t to write.
    if unsafe { libc::clock_getcpuclockid(pid, &mut id) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Reaps one exited child without blocking: `(pid, wait status, CPU ns)`
/// with the CPU time of all its threads from `wait4`'s rusage.
pub fn reap_any_rusage() -> Option<(i32, i32, u64)> {
    let mut status = 0;
    // SAFETY: rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `ru` are valid to write.
    let r = unsafe { libc::wait4(-1, &mut status, libc::WNOHANG, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (r > 0).then(|| (r, status, tv(ru.ru_utime) + tv(ru.ru_stime)))
}

/// A pidfd for process `pid` (readable once the process has exited).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain system call, result owned.
    owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) })
}

/// The parent's process id.
pub fn getppid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::getppid() }
}

/// Waits until any of `fds` is readable or hung up; returns which (by
/// index) are. `timeout_ms` -1 waits for ever.
pub fn poll_many(fds: &[RawFd], timeout_ms: i32) -> Vec<usize> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of `p.len()` pollfds.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r <= 0 {
        return Vec::new();
    }
    p.iter()
        .enumerate()
        .filter(|(_, x)| x.revents != 0)
        .map(|(i, _)| i)
        .collect()
}

/// A new netlink socket of `protocol` (`NETLINK_SOCK_DIAG`,
/// `NETLINK_CONNECTOR`, ...), close-on-exec, non-blocking if asked.
pub fn netlink_socket(protocol: i32, nonblocking: bool) -> io::Result<OwnedFd> {
    let flags =
        libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: plain system call with integer arguments.
    let r = unsafe { libc::socket(libc::AF_NETLINK, flags, protocol) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `r` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(r) })
}

/// Makes `fd` non-blocking.
pub fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd we own; no memory effects.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
    }
}

/// `flock(fd, LOCK_EX | LOCK_NB)`: `Ok(true)` when the lock is taken (or
/// was already held through this open file description), `Ok(false)` when
/// another open file description holds it. The lock lasts until every
/// descriptor sharing the description is closed, so it dies with its
/// holder (see [`crate::cpulock`]).
pub fn flock_exclusive_nb(fd: RawFd) -> io::Result<bool> {
    // SAFETY: flock on a descriptor the caller owns; no memory effects.
    let r = unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::{Exec, ProbeSlot};
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn pending_deadlines_that_passed_count_as_misses() {
        let s = ProbeSlot::default();
        s.misses.store(2, Relaxed);
        // Nothing pending.
        assert_eq!(s.misses_at(1_000), 2);
        // One pending job, due at 100: missed only once its deadline has
        // passed.
        s.pending_due.store(100, Relaxed);
        assert_eq!((s.misses_at(100), s.misses_at(101)), (2, 3));
        // A renderer: due every 33 from 100, as the simulator counts the
        // deadlines passed since the last frame.
        s.pending_every.store(33, Relaxed);
        assert_eq!(s.misses_at(133), 3);
        assert_eq!(s.misses_at(134), 4);
        assert_eq!(s.misses_at(100 + 10 * 33 + 1), 2 + 11);
    }

    #[test]
    fn a_program_that_cannot_run_is_refused_before_the_fork() {
        let err = |argv: &[&str]| {
            let v: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            Exec::new(&v).err().map(|e| e.to_string())
        };
        assert_eq!(err(&["/bin/sh"]), None);
        assert_eq!(err(&["sh", "-c", "true"]), None);
        let says = |argv: &[&str], what: &str| {
            let e = err(argv).unwrap_or_else(|| panic!("{argv:?} accepted"));
            assert!(e.contains(what), "{argv:?}: {e}");
        };
        says(&["/no/such/program"], "No such file");
        let dir = std::env::temp_dir();
        says(&[dir.to_str().unwrap()], "not a file");
        let f = dir.join(format!("hsched-not-executable-{}", std::process::id()));
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        says(&[f.to_str().unwrap()], "not executable");
        let _ = std::fs::remove_file(&f);
        says(&["no-such-program-for-hsched"], "not found in PATH");
        says(&[], "empty command");
    }
}
