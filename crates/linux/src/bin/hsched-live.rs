//! `hsched-live`: live mode on its own, for tests and measurements. The
//! `hsched` binary offers the same `run` and `ctl` verbs.
//!
//! ```text
//! hsched-live run FILE [options] [-- COMMAND...]   run a hierarchy live
//! hsched-live ctl [--socket PATH] OP [KEY=VALUE]...  talk to a running daemon
//! hsched-live probe hog|frame|poll [options]       test programs (docs/live-mode.md)
//! hsched-live bench NAME [options]                 the measurements of docs/measurements/live-mode.md
//! hsched-live stolen [rez|app] [options]           stolen time (docs/stolen-time.md)
//! ```

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or(&[]);
    let code = match args.first().map(String::as_str) {
        Some("run") => hsched_linux::cli_glue::run_main(rest),
        Some("ctl") => hsched_linux::cli_glue::ctl_main(rest),
        Some("probe") => hsched_linux::probe::probe_main(rest),
        Some("bench") => hsched_linux::bench::bench_main(rest),
        Some("stolen") => hsched_linux::stolen::tool::stolen_main(rest),
        _ => {
            hsched_linux::diag!(
                "usage: hsched-live run|ctl|probe|bench|stolen ...\n{}\n{}\n{}",
                hsched_linux::cli_glue::RUN_USAGE,
                hsched_linux::cli_glue::CTL_USAGE,
                hsched_linux::stolen::tool::USAGE
            );
            2
        }
    };
    std::process::exit(code);
}
