//! How a verb ends, and the exit status scripts can rely on.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | success: the file is valid, the run finished |
//! | 1 | the check or analysis found problems, or the run itself failed |
//! | 2 | usage or input error: bad command line, unreadable or invalid file |
//! | 2 | an output cannot be written: standard output or a file named on the command line (a full disk, a bad path) |
//! | 3 | `run`: this machine cannot run live mode (not root, no freezer, ...) |
//! | 130 | `sim`: stopped early by Ctrl-C (SIGINT) or SIGTERM; the report covers the time simulated |
//! | 130 | `run --compare`: Ctrl-C or SIGTERM while simulating; the measured report is printed without the comparison |
//! | 130, 143 | `sim`: killed by SIGINT or SIGTERM before the run started, or by a second one |
//! | 101 | hsched itself failed (a bug; the message says so) |

use std::fmt;
use std::process::ExitCode;

/// Exit status: success.
pub const EXIT_OK: u8 = 0;
/// Exit status: the check or analysis found problems, or the run failed.
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit status: usage or input error, or an output that cannot be
/// written.
pub const EXIT_INPUT: u8 = 2;
/// Exit status: `sim` stopped early by a signal (128 + SIGINT, as a shell
/// reports a process Ctrl-C ended).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Text appended to `hsched --help`.
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
    0  success: the file is valid, the run finished
    1  the check or analysis found problems, or the run failed
    2  usage or input error: bad command line, unreadable or invalid file
    2  an output cannot be written: standard output or a file named on the
       command line (a full disk, a bad path)
    3  run, record, stolen: this machine cannot run live mode or trace the
       scheduler (not root, missing kernel feature)
  130  sim: stopped early by Ctrl-C or SIGTERM; the report and the trace
       cover the time simulated (a second Ctrl-C stops at once)
  130  sim: Ctrl-C (143: SIGTERM) while the files load, before the run
       starts: hsched ends at once and writes nothing
  130  run --compare: Ctrl-C or SIGTERM while simulating; the measured
       report is printed without the comparison
  101  hsched itself failed (a bug: please report it)";

/// How a verb that did not fail ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything is fine (exit 0).
    Ok,
    /// The verb ran and found problems it already reported (exit 1).
    Problems,
    /// A status chosen by the library the verb forwards to (live mode).
    Status(i32),
}

impl Outcome {
    /// The process exit status.
    pub fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Ok => ExitCode::from(EXIT_OK),
            Outcome::Problems => ExitCode::from(EXIT_PROBLEMS),
            Outcome::Status(s) => ExitCode::from(s.clamp(0, 255) as u8),
        }
    }
}

/// A usage or input error (exit 2). Its message is printed as it is: the
/// configuration crate already renders `file:line:col`, what was expected
/// and a hint.
#[derive(Debug)]
pub struct InputError(pub String);

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// Shorthand for an [`InputError`] as an `anyhow::Error`.
pub fn input_error(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(message.into()))
}

/// Whether the error chain ends in a closed pipe (`hsched tree f | head`),
/// which is not worth a message.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// A report that could not be written to standard output, carried inside
/// the `io::Error` (whose kind is kept, so that a closed pipe is still
/// recognised) up to `main`, which exits with [`EXIT_INPUT`].
#[derive(Debug)]
pub struct StdoutError(pub std::io::Error);

impl fmt::Display for StdoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "writing the report to standard output: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

/// The [`StdoutError`] in the error chain, if any.
pub fn stdout_error(err: &anyhow::Error) -> Option<&StdoutError> {
    err.chain().find_map(|e| {
        e.downcast_ref::<std::io::Error>()?
            .get_ref()?
            .downcast_ref::<StdoutError>()
    })
}
