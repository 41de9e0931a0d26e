//! `hsched ctl`: talk to a running `hsched run` daemon over its control
//! socket (the HLSCtl operations of Regehr 2001, §4.3.9).

use crate::outcome::Outcome;

/// Long help.
pub const LONG_ABOUT: &str = "\
Send one request to a running `hsched run` daemon over its Unix socket and
print the reply. OP is one of: hello, show, create, destroy, move,
begin-reservation, end-reservation, set-params, set-share, set-default,
attach, detach, shutdown. KEY=VALUE pairs become the request's fields; a
value is read as JSON when it parses, dotted keys nest
(params.amount=10ms). Root and members of the daemon's --group may do
everything; other users act only on their own processes. The protocol is
documented in docs/live-mode.md.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched ctl show
  hsched ctl attach pid=4242 scheduler=TS
  hsched ctl begin-reservation thread=4242 scheduler=RES params.amount=10ms params.period=33ms
  hsched ctl --json show";

/// Arguments of `hsched ctl`, parsed by `hsched-linux`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// [--socket PATH] [--json] OP [KEY=VALUE]...
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "OP [KEY=VALUE]..."
    )]
    pub args: Vec<String>,
}

/// Sends the request.
///
/// # Errors
/// None of its own: `hsched-linux` reports and chooses the exit status.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    Ok(Outcome::Status(hsched_linux::cli_glue::ctl_main(
        &args.args,
    )))
}
