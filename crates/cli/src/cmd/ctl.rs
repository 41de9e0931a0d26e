//! `hsched ctl`: talk to a running `hsched run` daemon over its control
//! socket (the HLSCtl operations of Regehr 2001, §4.3.9).

use crate::outcome::Outcome;

/// Long help.
pub const LONG_ABOUT: &str = "\
Send one request to a running `hsched run` daemon over its Unix socket
(/run/hsched.sock, where `hsched run` listens unless given --socket PATH
or --no-socket) and print the reply. KEY=VALUE pairs become the request's
fields; a value is read as JSON when it parses, dotted keys nest
(params.amount=10ms). Anyone may use hello and show; root and members of
the daemon's --group may do everything; other users act only on their own
processes, within the limits of docs/live-mode.md (\"Control interface\"),
which also documents the protocol.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched ctl show
  hsched ctl attach pid=4242 scheduler=TS
  hsched ctl begin-reservation thread=4242 scheduler=RES params.amount=10ms params.period=33ms
  hsched ctl replace scheduler=TS policy=sdk/build/lottery.wasm
  hsched ctl unload scheduler=TS
  hsched ctl --json show
  hsched ctl --socket /tmp/test.sock hello";

/// The exit statuses of `hsched ctl`, shown by `--help`.
pub const EXIT_STATUS: &str = "\
Exit status:
    0  the daemon carried the request out; its reply is printed
    1  no daemon answers on the socket, or it refused the request (the
       message gives its code: refused, not-found, unauthorized, ...)
    2  usage error: no or an unknown OP, a field that is not KEY=VALUE;
       or standard output cannot be written
  101  hsched itself failed (a bug: please report it)";

/// Arguments of `hsched ctl`, passed on to `hsched-linux` (whose parser
/// `hsched-live ctl` shares).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The daemon's control socket
    #[arg(long, value_name = "PATH", default_value = hsched_linux::ctl::DEFAULT_SOCKET)]
    pub socket: String,
    /// Print the reply as JSON (`show` is otherwise drawn as a table)
    #[arg(long)]
    pub json: bool,
    /// The operation
    #[arg(value_name = "OP", value_parser = clap::builder::PossibleValuesParser::new(hsched_linux::control::OPERATIONS))]
    pub op: String,
    /// The request's fields, e.g. thread=4242 params.amount=10ms
    #[arg(value_name = "KEY=VALUE", value_parser = field, allow_hyphen_values = true)]
    pub fields: Vec<String>,
}

/// A `KEY=VALUE` pair.
fn field(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((k, _)) if !k.is_empty() => Ok(s.to_string()),
        _ => Err("expected KEY=VALUE, e.g. thread=4242".into()),
    }
}

/// Sends the request.
///
/// # Errors
/// None of its own: `hsched-linux` reports and chooses the exit status.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let mut v = vec!["--socket".to_string(), args.socket.clone()];
    if args.json {
        v.push("--json".into());
    }
    v.push(args.op.clone());
    v.extend(args.fields.iter().cloned());
    Ok(Outcome::Status(hsched_linux::cli_glue::ctl_main(&v)))
}
