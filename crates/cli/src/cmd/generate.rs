//! `hsched generate`: a random periodic task set as a hierarchy file, or
//! as the `[[thread]]` tables to place under a scheduler of another file.
//! The generators are `hsched-taskgen`'s.

use crate::numbers::whole;
use crate::outcome::{input_error, Outcome};
use hsched_core::time::parse_duration;
use hsched_core::Duration;
use hsched_taskgen::{Config, Deadlines, Method};
use std::io::Write;
use std::path::PathBuf;

/// Long help.
pub const LONG_ABOUT: &str = "\
Generate a random set of periodic tasks, seeded: the same options always
give the same file.

Utilizations are drawn by UUniFast (Bini & Buttazzo 2005; a total of at most
1), UUniFast-discard (Davis & Burns 2009: UUniFast draws with a task above
--max-task-util discarded) or Randfixedsum (Stafford's algorithm, as
Emberson, Stafford & Davis 2010 use it: uniform within [--min-task-util,
--max-task-util], no rejection). Periods are log-uniform between
--period-min and --period-max, rounded to a multiple of --granularity (0:
not rounded). Deadlines are implicit (D = T), constrained:F (D uniform in
[max(C, F*T), T]) or arbitrary:F (D uniform in [C, F*T]); --jitter F gives
every task a release jitter of F times its period.

The output is a hierarchy file (one fixed-priority root, `root`, with
deadline-monotonic priorities) that `hsched check` accepts, or with
--scheduler NAME only the threads, under NAME (add --priorities for an fp
scheduler), to append to a file that declares NAME.";

/// Examples shown by `--help`.
pub const EXAMPLES: &str = "\
Examples:
  hsched generate --tasks 10 --utilization 0.7 --seed 1 > set.toml
  hsched generate --tasks 16 --utilization 3.2 --cpus 4 --method randfixedsum
  hsched generate --tasks 5 --utilization 0.4 --scheduler app --priorities >> mine.toml
  hsched generate --tasks 8 --utilization 0.6 --deadlines constrained:0.5 --jitter 0.05";

/// Arguments of `hsched generate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Number of tasks
    #[arg(long, short = 'n', value_name = "N", value_parser = parse_tasks, allow_negative_numbers = true)]
    pub tasks: usize,
    /// Total utilization (above 1 for several processors)
    #[arg(long, short = 'u', value_name = "U", value_parser = parse_positive, allow_negative_numbers = true)]
    pub utilization: f64,
    /// How utilizations are drawn: uunifast, uunifast-discard or randfixedsum
    #[arg(long, value_name = "METHOD", default_value = "uunifast", value_parser = parse_method)]
    pub method: Method,
    /// Smallest utilization of one task (randfixedsum)
    #[arg(long, value_name = "U", default_value = "0", value_parser = parse_fraction_like, allow_negative_numbers = true)]
    pub min_task_util: f64,
    /// Largest utilization of one task (uunifast-discard, randfixedsum)
    #[arg(long, value_name = "U", default_value = "1", value_parser = parse_positive, allow_negative_numbers = true)]
    pub max_task_util: f64,
    /// Shortest period
    #[arg(long, value_name = "D", default_value = "10ms", value_parser = parse_dur)]
    pub period_min: Duration,
    /// Longest period
    #[arg(long, value_name = "D", default_value = "1s", value_parser = parse_dur)]
    pub period_max: Duration,
    /// Round periods to a multiple of this (0 or 0ms: no rounding)
    #[arg(long, value_name = "D", default_value = "1ms", value_parser = parse_granularity)]
    pub granularity: Duration,
    /// implicit, constrained:F or arbitrary:F
    #[arg(long, value_name = "KIND", default_value = "implicit", value_parser = parse_deadlines)]
    pub deadlines: Deadlines,
    /// Release jitter as a fraction of the period, in [0, 1)
    #[arg(long, value_name = "F", default_value = "0", value_parser = parse_fraction_like, allow_negative_numbers = true)]
    pub jitter: f64,
    /// Random seed
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_seed, allow_negative_numbers = true)]
    pub seed: u64,
    /// Processors of the machine in the hierarchy file
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_cpus, allow_negative_numbers = true)]
    pub cpus: usize,
    /// Write only the threads, under this scheduler
    #[arg(long, value_name = "NAME", conflicts_with = "cpus")]
    pub scheduler: Option<String>,
    /// With --scheduler: give each thread a deadline-monotonic `priority`
    #[arg(long, requires = "scheduler")]
    pub priorities: bool,
    /// Write the file here instead of standard output
    #[arg(long, short = 'o', value_name = "OUT.toml", value_parser = crate::output::file_path)]
    pub output: Option<PathBuf>,
}

/// Generates the set and writes it.
///
/// # Errors
/// Parameters the generators refuse (input errors), or an output that
/// cannot be written.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let cfg = Config {
        n: args.tasks,
        utilization: args.utilization,
        method: args.method,
        min_task_utilization: args.min_task_util,
        max_task_utilization: args.max_task_util,
        period_min_ns: args.period_min.as_nanos(),
        period_max_ns: args.period_max.as_nanos(),
        granularity_ns: args.granularity.as_nanos(),
        deadlines: args.deadlines,
        jitter: args.jitter,
        seed: args.seed,
    };
    let set = hsched_taskgen::generate(&cfg).map_err(|e| input_error(format!("error: {e}")))?;
    let text = match &args.scheduler {
        Some(name) => set.to_threads(name, args.priorities),
        None => set.to_hierarchy(args.cpus),
    };
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| input_error(format!("error: cannot write `{}`: {e}", path.display())))?,
        None => crate::output::report().write_all(text.as_bytes())?,
    }
    Ok(Outcome::Ok)
}

fn parse_tasks(s: &str) -> Result<usize, String> {
    whole(s, 1u64, hsched_taskgen::MAX_TASKS as u64).map(|v| v as usize)
}

fn parse_cpus(s: &str) -> Result<usize, String> {
    whole(s, 1u64, 1024).map(|v| v as usize)
}

fn parse_seed(s: &str) -> Result<u64, String> {
    whole(s, 0, u64::MAX)
}

fn number(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("`{s}` is not a number")),
    }
}

fn parse_positive(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("`{s}`: give a number above 0"))
    }
}

fn parse_fraction_like(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("`{s}`: give a number of at least 0"))
    }
}

fn parse_method(s: &str) -> Result<Method, String> {
    Method::parse(s).map_err(|e| e.message)
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s, None).map_err(|e| e.message)?;
    if d.as_nanos() == 0 {
        return Err(format!("`{s}`: a period must be longer than zero"));
    }
    Ok(d)
}

fn parse_granularity(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(s, None).map_err(|e| e.message)
}

fn parse_deadlines(s: &str) -> Result<Deadlines, String> {
    let t = s.trim();
    let factor = |f: &str| number(f);
    match t.split_once(':') {
        None if t == "implicit" => Ok(Deadlines::Implicit),
        Some(("constrained", f)) => Ok(Deadlines::Constrained {
            min_fraction: factor(f)?,
        }),
        Some(("arbitrary", f)) => Ok(Deadlines::Arbitrary {
            max_factor: factor(f)?,
        }),
        None if t == "constrained" => Ok(Deadlines::Constrained { min_fraction: 0.0 }),
        _ => Err(format!(
            "`{s}`: expected implicit, constrained:F (D in [max(C, F*T), T]) or arbitrary:F (D in [C, F*T])"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_kinds_parse() {
        assert_eq!(parse_deadlines("implicit"), Ok(Deadlines::Implicit));
        assert_eq!(
            parse_deadlines("constrained:0.5"),
            Ok(Deadlines::Constrained { min_fraction: 0.5 })
        );
        assert_eq!(
            parse_deadlines("arbitrary:2"),
            Ok(Deadlines::Arbitrary { max_factor: 2.0 })
        );
        assert!(parse_deadlines("soon").unwrap_err().contains("implicit"));
        assert!(parse_deadlines("arbitrary:x").is_err());
    }
}
