//! `hsched record`: a scheduler trace of a command as it runs, for `hsched
//! import`. The recording itself is `hsched_linux::record`.

use crate::numbers::whole;
use crate::outcome::{input_error, Outcome};
use hsched_linux::record::{record, RecordOptions};
use hsched_linux::{diag, LiveError};
use std::path::PathBuf;

/// Long help.
pub const LONG_ABOUT: &str = "\
Run a command and record what the Linux scheduler did to it meanwhile, on
every CPU: the sched_switch, sched_wakeup and sched_wakeup_new tracepoints
of the command's threads and of every thread and process it creates (with
--all, of every thread on the machine), in a tracefs instance of its own
that is removed afterwards (root, or write access to tracefs). The command
is not changed; Ctrl-C reaches it as usual.
The trace is text, for `hsched import`, which turns the command's threads
into an rt-app workload the simulator replays. See docs/trace-replay.md.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  sudo hsched record -o app.trace -- ./my-app --its-flags
  hsched import app.trace --comm my-app -o app.json
  hsched sim examples/rtapp-tasks.toml --workload app.json";

/// Arguments of `hsched record`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the trace goes
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Trace buffer per CPU, in KiB; the oldest events are dropped when it
    /// fills
    #[arg(long, value_name = "KIB", default_value_t = 16384, value_parser = parse_kib,
          allow_negative_numbers = true)]
    pub buffer_kib: u32,
    /// Trace every thread on the machine, not only the command's threads
    /// and their descendants
    #[arg(long)]
    pub all: bool,
    /// The command to run, after `--`
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

/// Records the command's run.
///
/// # Errors
/// A command that cannot be started or an output that cannot be written
/// (input errors); no tracefs or no permission (exit 3).
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let opts = RecordOptions {
        command: args.command.clone(),
        output: args.output.clone(),
        buffer_kib: args.buffer_kib,
        all: args.all,
    };
    let r = match record(&opts) {
        Ok(r) => r,
        Err(LiveError::Unsupported(m)) => {
            diag!("error: cannot record: {m}\n  = help: run it as root (sudo hsched record ...), with tracefs mounted");
            return Ok(Outcome::Status(3));
        }
        Err(LiveError::Setup(m)) => return Err(input_error(format!("error: {m}"))),
        Err(e) => return Err(anyhow::anyhow!("{e}")),
    };
    let out = args.output.display();
    diag!(
        "recorded `{}` (pid {}, exit status {}): {} events in {out}",
        args.command.join(" "),
        r.pid,
        r.status,
        r.events
    );
    if r.dropped > 0 {
        diag!(
            "warning: {} events were dropped because the buffer filled up; record again with a larger --buffer-kib",
            r.dropped
        );
    }
    diag!(
        "next: hsched import {out}   (lists the threads; then --pid {} or --comm NAME -o app.json)",
        r.pid
    );
    Ok(Outcome::Ok)
}

/// The kernel's trace buffer size: at least 1 KiB.
fn parse_kib(s: &str) -> Result<u32, String> {
    whole(s, 1, u32::MAX)
}
