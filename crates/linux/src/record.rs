//! `hsched record`: a scheduler trace of a command as it runs, for `hsched
//! import` (docs/trace-replay.md).
//!
//! The trace comes from a tracefs *instance* of its own
//! (`instances/hsched-record-PID-N`), so the machine's main trace buffer and
//! any other tracer (live mode's perf events, trace-cmd) are left alone. The
//! instance records `sched_switch`, `sched_wakeup` and `sched_wakeup_new` on
//! every CPU with the monotonic clock while the command runs, then its text
//! is copied to the output file and the instance is removed, on errors too.
//! By default only the command's own threads and processes are traced
//! (`set_event_pid` with the `event-fork` option, so that every thread and
//! child they create is added as it is created): a switch or wake-up is
//! kept when one of its two threads is the command's. With
//! [`RecordOptions::all`] every thread of the machine is.
//! An instance left by a recorder that was killed is removed by the next
//! one. The command is not changed: it inherits the terminal, the
//! environment and the signals (Ctrl-C reaches it as usual; SIGTERM and
//! SIGHUP sent to the recorder are passed on to it).

use crate::observe;
use crate::sys;
use crate::LiveError;
use std::io::{self, BufRead, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The events recorded.
const EVENTS: &[&str] = &["sched_switch", "sched_wakeup", "sched_wakeup_new"];
/// Prefix of the tracefs instances the recorder makes.
const INSTANCE_PREFIX: &str = "hsched-record-";

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// Where the trace goes.
    pub output: PathBuf,
    /// Ring buffer per CPU, in KiB (the oldest events are dropped when it
    /// fills; the result says how many).
    pub buffer_kib: u32,
    /// Trace every thread of the machine, not only the command's threads
    /// and their descendants.
    pub all: bool,
}

/// What was recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The command's process id (its threads and children keep their own
    /// ids; `hsched import --comm NAME` takes them by name).
    pub pid: i32,
    /// Its exit status (128 + N when killed by signal N).
    pub status: i32,
    /// Events in the trace.
    pub events: u64,
    /// Events dropped because the buffer was full.
    pub dropped: u64,
}

/// A tracefs instance, removed when dropped.
struct Instance {
    dir: PathBuf,
}

impl Instance {
    fn create(tracefs: &Path) -> io::Result<Instance> {
        let instances = tracefs.join("instances");
        remove_stale(&instances);
        // PID-N: one per recording, so that recordings of one process can
        // overlap.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = instances.join(format!("{INSTANCE_PREFIX}{}-{n}", sys::getpid()));
        std::fs::create_dir(&dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create the tracefs instance {}: {e}", dir.display()),
            )
        })?;
        Ok(Instance { dir })
    }

    fn write(&self, file: &str, value: &str) -> io::Result<()> {
        std::fs::write(self.dir.join(file), value).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", self.dir.join(file).display()),
            )
        })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        for e in EVENTS {
            let _ = std::fs::write(self.dir.join(format!("events/sched/{e}/enable")), "0");
        }
        // The kernel frees the instance's buffers with the directory.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Removes instances of recorders that are no longer running.
fn remove_stale(instances: &Path) {
    let Ok(dir) = std::fs::read_dir(instances) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(INSTANCE_PREFIX)
            .and_then(|p| p.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            drop(Instance { dir: entry.path() });
        }
    }
}

/// Records the scheduler events of `opts.command`'s threads and
/// descendants (of the whole machine with `opts.all`) while it runs, and
/// writes them as text to `opts.output`.
///
/// # Errors
/// [`LiveError::Setup`]: a command that cannot be started or an output that
/// cannot be written, found before anything runs;
/// [`LiveError::Unsupported`]: no tracefs, or no permission to make an
/// instance (not root); [`LiveError::Io`]: a later failure. The tracefs
/// instance is removed in every case.
pub fn record(opts: &RecordOptions) -> Result<Recorded, LiveError> {
    let exec = sys::Exec::new(&opts.command).map_err(|e| LiveError::Setup(e.to_string()))?;
    // Refuse an unwritable output before running anything.
    let out = std::fs::File::create(&opts.output)
        .map_err(|e| LiveError::Setup(format!("cannot write {}: {e}", opts.output.display())))?;
    let inst = observe::tracefs()
        .and_then(|t| Instance::create(&t))
        .map_err(|e| {
            // Nothing was recorded: leave no empty trace behind (but a
            // device or pipe named as the output is not ours to remove).
            if std::fs::symlink_metadata(&opts.output).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(&opts.output);
            }
            LiveError::Unsupported(e.to_string())
        })?;
    run_recorded(opts, &exec, &inst, out).map_err(|e| LiveError::Io(e.to_string()))
}

/// The recording itself, in `inst`.
fn run_recorded(
    opts: &RecordOptions,
    exec: &sys::Exec,
    inst: &Instance,
    mut out: std::fs::File,
) -> io::Result<Recorded> {
    inst.write("tracing_on", "0")?;
    inst.write("buffer_size_kb", &opts.buffer_kib.max(1).to_string())?;
    // `mono` lines the trace up with CLOCK_MONOTONIC (and with live mode's
    // own timestamps); older kernels without it keep their default clock.
    let _ = inst.write("trace_clock", "mono");
    for e in EVENTS {
        inst.write(&format!("events/sched/{e}/enable"), "1")?;
    }
    inst.write("trace", "")?;
    // Ctrl-C reaches the command through the terminal; the recorder waits
    // for it and cleans up. SIGTERM and SIGHUP are passed on.
    let sigs = sys::signalfd(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP])?;
    // The command waits on a pipe until it is in the pid filter: none of
    // its events, nor its first children's, may come before.
    let (go_r, go_w) = sys::pipe()?;
    let go = go_r.as_raw_fd();
    let pid = sys::spawn_fn(&[go], || {
        let mut b = [0u8; 1];
        if !matches!(sys::read(go, &mut b), Ok(1)) {
            // The recorder could not set the filter up: run nothing.
            return 125;
        }
        let errno = exec.exec();
        crate::diag!(
            "hsched record: cannot run `{}`: {}",
            opts.command[0],
            io::Error::from_raw_os_error(errno)
        );
        127
    })?;
    drop(go_r);
    let started = (|| {
        if !opts.all {
            filter_pid(inst, pid)?;
        }
        inst.write("tracing_on", "1")
    })();
    if let Err(e) = started {
        // Closing the pipe unread ends the command before it runs.
        drop(go_w);
        let _ = sys::wait_pid(pid);
        return Err(e);
    }
    sys::write_all(go_w.as_raw_fd(), b"g")?;
    drop(go_w);
    let pidfd = sys::pidfd_open(pid)?;
    loop {
        let ready = sys::poll_many(&[pidfd.as_raw_fd(), sigs.as_raw_fd()], 1000);
        if ready.contains(&1) {
            while let Some(sig) = sys::read_signal(&sigs) {
                if sig != libc::SIGINT {
                    let _ = sys::kill(pid, sig);
                }
            }
        }
        if ready.contains(&0) {
            break;
        }
    }
    let raw = sys::wait_pid(pid)?;
    let status = if libc::WIFSIGNALED(raw) {
        128 + libc::WTERMSIG(raw)
    } else {
        libc::WEXITSTATUS(raw)
    };
    inst.write("tracing_on", "0")?;
    let (events, dropped) = copy_trace(&inst.dir.join("trace"), &mut out)?;
    out.flush()?;
    Ok(Recorded {
        pid,
        status,
        events,
        dropped,
    })
}

/// Keeps the instance's events to those of `pid` and of the threads and
/// processes it creates (the kernel adds each as it forks, and drops it when
/// it exits).
fn filter_pid(inst: &Instance, pid: i32) -> io::Result<()> {
    inst.write("options/event-fork", "1").map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{e} (this kernel cannot follow a command's children; record everything with --all)"),
        )
    })?;
    inst.write("set_event_pid", &pid.to_string())
}

/// Copies the trace text and reads its `entries-in-buffer/entries-written`
/// header: (events kept, events dropped).
fn copy_trace(from: &Path, out: &mut impl Write) -> io::Result<(u64, u64)> {
    let file = std::fs::File::open(from)?;
    let mut counts = None;
    for line in io::BufReader::new(file).lines() {
        let line = line?;
        if counts.is_none() {
            counts = entries(&line);
        }
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    let (kept, written) = counts.unwrap_or((0, 0));
    Ok((kept, written.saturating_sub(kept)))
}

/// `# entries-in-buffer/entries-written: 680/680   #P:2` → (680, 680).
fn entries(line: &str) -> Option<(u64, u64)> {
    let rest = line.split_once("entries-in-buffer/entries-written:")?.1;
    let pair = rest.split_whitespace().next()?;
    let (a, b) = pair.split_once('/')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_gives_kept_and_written_events() {
        assert_eq!(
            entries("# entries-in-buffer/entries-written: 680/700   #P:2"),
            Some((680, 700))
        );
        assert_eq!(entries("# tracer: nop"), None);
    }
}
