//! hsched's input files: the hierarchy file (TOML), rt-app workload files
//! (JSON), and the builder that turns a validated hierarchy into a running
//! [`hsched_core::Hsi`].
//!
//! * [`parse_str`] / [`load`] read a hierarchy file into the [`Hierarchy`]
//!   model, reporting *every* problem at once as [`ConfigErrors`]: each with
//!   `file:line:col`, what was wrong, what was expected and a hint, rendered
//!   like rustc's diagnostics. Parameters are checked against the specs the
//!   policies declare in `hsched_policies::registry()`.
//! * [`parse_rtapp`] reads an rt-app file; [`attach_rtapp`] maps its tasks
//!   onto threads with the file's `[[workload.map]]` rules.
//! * [`parse_sched_trace`] reads a Linux scheduler trace of real programs;
//!   [`SchedTrace::to_rtapp`] writes chosen threads as rt-app tasks.
//! * [`build_hsi`], [`create_thread`], [`create_scheduler`] and [`apply_op`]
//!   drive the HSI from the model (the simulator and live mode use them).
//!
//! The format is documented in `docs/hierarchy-format.md`.
//!
//! ```
//! let text = r#"
//! default = "ts"
//! [[scheduler]]
//! name = "ts"
//! policy = "ts"
//! [[thread]]
//! name = "worker"
//! workload = { kind = "cpu-bound" }
//! "#;
//! let h = hsched_config::parse_str(text, "example.toml").unwrap();
//! assert_eq!(h.threads[0].scheduler, "ts");
//!
//! let err = hsched_config::parse_str("[machine]\ncpus = 0\n", "bad.toml").unwrap_err();
//! assert!(err.to_string().contains("bad.toml:2:8"));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod build;
mod check;
mod error;
mod json;
pub mod model;
mod parse;
mod read;
pub mod rm;
mod rtapp;
mod sched_trace;

pub use build::{
    apply_op, apply_op_with, build_hsi, build_hsi_with, create_scheduler, create_scheduler_with,
    create_thread, BuildError,
};
pub use error::{ConfigError, ConfigErrors};
pub use model::*;
pub use parse::{parse_str, parse_str_with_policies};
pub use rtapp::{attach_rtapp, attach_rtapp_with_policies, glob_match, parse_rtapp};
pub use sched_trace::{parse_sched_trace, Burst, SchedTrace, Silence, TracedThread};

use std::path::Path;

/// Reads a hierarchy file and the rt-app file it names (`[workload] rtapp`,
/// relative to the hierarchy file), and attaches the rt-app tasks.
///
/// # Errors
/// A file that cannot be read, or every problem in either file.
pub fn load(path: &Path) -> Result<Hierarchy, ConfigErrors> {
    load_with_policies(path, hsched_policies::registry())
}

/// [`load`] against another table of policies.
///
/// # Errors
/// As [`load`].
pub fn load_with_policies(
    path: &Path,
    policies: &[hsched_policies::PolicyInfo],
) -> Result<Hierarchy, ConfigErrors> {
    load_inner(path, None, policies)
}

/// Reads a hierarchy file and attaches the rt-app file at `rtapp` in place
/// of the one it names (`hsched sim --workload`), which is not read.
///
/// # Errors
/// As [`load`].
pub fn load_with_workload(path: &Path, rtapp: &Path) -> Result<Hierarchy, ConfigErrors> {
    load_inner(path, Some(rtapp), hsched_policies::registry())
}

/// [`load`], with the rt-app file at `rtapp` instead of the one the file
/// names. Operations may name the threads of the rt-app file, so when the
/// hierarchy file has errors the rt-app file is still read and those
/// operations are checked too: every problem is reported at once.
fn load_inner(
    path: &Path,
    rtapp: Option<&Path>,
    policies: &[hsched_policies::PolicyInfo],
) -> Result<Hierarchy, ConfigErrors> {
    let name = path.display().to_string();
    let text = read_file(path, &name, None)?;
    let (mut h, invalid) = match parse::parse_partial(&text, &name, policies) {
        Ok(h) => (h, None),
        Err(mut i) => match i.hierarchy.take() {
            Some(h) if rtapp.is_some() || h.workload.rtapp_file.is_some() => (*h, Some(i)),
            _ => return Err(i.errs),
        },
    };
    let (rpath, named_at) = match (rtapp, &h.workload.rtapp_file) {
        (Some(p), _) => (p.to_path_buf(), None),
        (None, Some(rel)) => (
            path.parent().unwrap_or(Path::new("")).join(rel),
            Some((h.workload_span(), text.as_str())),
        ),
        (None, None) => return Ok(h),
    };
    let rname = rpath.display().to_string();
    let (broken_threads, broken_ops) = invalid.as_ref().map_or((&[][..], &[][..]), |i| {
        (&i.broken_threads[..], &i.broken_ops[..])
    });
    let read = match named_at {
        Some(_) => read_file(&rpath, &name, named_at),
        // Given on the command line: no line of the hierarchy names it.
        None => read_text(&rpath, MAX_FILE_BYTES).map_err(|e| {
            let msg = format!("cannot read the rt-app file `{rname}`: {e}");
            ConfigErrors::one(
                ConfigError::new(&rname, 0, 0, msg).expected("a readable UTF-8 text file"),
            )
        }),
    };
    let attached = read.and_then(|rtext| {
        let w = parse_rtapp(&rtext, &rname)?;
        let mut r = rtapp::attach_rtapp_sparing(&mut h, w, policies, broken_threads, broken_ops);
        if let Err(e) = &mut r {
            e.fill_source(&name, &text);
            e.fill_source(&rname, &rtext);
        }
        r
    });
    let Some(invalid) = invalid else {
        return attached.map(|()| h);
    };
    // What the first reading found is reported once, even where the
    // timeline check with the rt-app threads finds it again.
    let mut errs = invalid.errs;
    if let Err(more) = attached {
        let known: std::collections::BTreeSet<(String, String)> = errs
            .iter()
            .map(|e| (e.file.clone(), e.message.clone()))
            .collect();
        errs.0.extend(
            more.0
                .into_iter()
                .filter(|e| !known.contains(&(e.file.clone(), e.message.clone()))),
        );
        errs.sort();
    }
    Err(errs)
}

/// Reads a hierarchy file without the rt-app file it names, for a caller
/// that attaches another workload in its place (`hsched sim --workload`).
///
/// # Errors
/// The file cannot be read, or every problem in it.
pub fn load_without_rtapp(path: &Path) -> Result<Hierarchy, ConfigErrors> {
    let name = path.display().to_string();
    parse_str(&read_file(path, &name, None)?, &name)
}

/// The largest rt-app file [`load`] reads: 256 MiB, room for the 10 million
/// program steps a workload may have, and a bound on the memory a path
/// such as `/dev/zero` could otherwise take.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The largest hierarchy file [`load`] reads: 16 MiB, more than 100 000
/// threads each declared in its own table (about 12 MB). Reading TOML
/// takes 40 to 130 bytes of memory per byte of the file (a long array, a
/// table per line, an error per table), so this bounds it to about 2 GB.
pub const MAX_HIERARCHY_BYTES: u64 = 16 << 20;

/// Reads the text file at `path`, refusing one longer than `max_bytes`
/// (with an error of kind `InvalidData` that says so) instead of reading
/// a device or a runaway file until memory runs out.
///
/// # Errors
/// The file cannot be opened or read, is not UTF-8, or is too long.
pub fn read_text(path: &Path, max_bytes: u64) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(max_bytes.saturating_add(1))
        .read_to_string(&mut text)?;
    if text.len() as u64 > max_bytes {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the file is longer than {} MiB", max_bytes >> 20),
        ));
    }
    Ok(text)
}

/// Reads a file; a failure is reported against `file` (and, for a file
/// named inside another, at the line that names it).
fn read_file(
    path: &Path,
    file: &str,
    named_at: Option<(Span, &str)>,
) -> Result<String, ConfigErrors> {
    let max = match named_at {
        Some(_) => MAX_FILE_BYTES,
        None => MAX_HIERARCHY_BYTES,
    };
    read_text(path, max).map_err(|e| {
        let mut err = match named_at {
            Some((span, _)) => ConfigError::at_span(
                file,
                span,
                format!("cannot read the rt-app file `{}`: {e}", path.display()),
            ),
            None => ConfigError::new(file, 0, 0, format!("cannot read `{}`: {e}", path.display())),
        };
        err = err.expected("a readable UTF-8 text file");
        if named_at.is_some() {
            err = err.hint("the path is relative to the hierarchy file");
        }
        let mut errs = ConfigErrors::one(err);
        if let Some((_, text)) = named_at {
            errs.fill_source(file, text);
        }
        errs
    })
}

impl Hierarchy {
    /// Where `[workload]` names its rt-app file (the first line of the
    /// file when unknown).
    fn workload_span(&self) -> Span {
        self.workload.rtapp_span.unwrap_or(Span { line: 1, col: 1 })
    }

    /// A note on what the file schedules at or after `end`, which a run
    /// that ends at `end` never applies (`[[at]]` operations, thread
    /// starts), or `None` when everything falls inside the run. A run
    /// shortened on the command line is usual, so this is a note and not
    /// an error; it keeps such a file from looking as if it had run whole.
    pub fn unreached_note(&self, end: hsched_core::Duration) -> Option<String> {
        let line = |s: Span| {
            if s.line > 0 {
                format!(", line {}", s.line)
            } else {
                String::new()
            }
        };
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let first_of = |n: usize| if n == 1 { "" } else { "the first " };
        let mut parts = Vec::new();
        let ops: Vec<&TimedOp> = self.operations.iter().filter(|o| o.at >= end).collect();
        if let Some(first) = ops.first() {
            parts.push(format!(
                "{} [[at]] operation{} ({}at {}{})",
                ops.len(),
                plural(ops.len()),
                first_of(ops.len()),
                first.at,
                line(first.span)
            ));
        }
        let late: Vec<&ThreadSpec> = self.threads.iter().filter(|t| t.start >= end).collect();
        if let Some(first) = late.iter().min_by_key(|t| t.start) {
            parts.push(format!(
                "{} thread start{} ({}`{}`, at {}{})",
                late.len(),
                plural(late.len()),
                first_of(late.len()),
                first.name,
                first.start,
                line(first.span)
            ));
        }
        (!parts.is_empty()).then(|| {
            format!(
                "note: the run ends at {end}; {} of the file come at or after that and are not applied",
                parts.join(" and ")
            )
        })
    }
}

/// A guarantee's syntax problem, for diagnostics.
pub(crate) struct GuaranteeProblem {
    pub offset: usize,
    pub token: String,
    pub problem: String,
    pub expected: String,
    pub hint: String,
}

/// The smallest share or rate a guarantee may give: what reports print with
/// six decimals (`0.000001`).
const MIN_SHARE: f64 = 1e-6;

/// Checks guarantee text with `hsched_guarantee`'s parser (Regehr 2001,
/// §5.2.1).
pub(crate) fn guarantee_syntax(text: &str) -> Result<(), GuaranteeProblem> {
    use hsched_guarantee::parse::ParseErrorKind as K;
    use hsched_guarantee::Guarantee as G;
    match text.parse::<G>() {
        // hsched prints shares with six decimals: a smaller one would be
        // printed as 0, which it cannot read back.
        Ok(G::Ps { share: s } | G::Psbe { share: s, .. } | G::ResU { rate: s })
            if s < MIN_SHARE =>
        {
            let mut words = text.split_whitespace();
            let kind = words.next().unwrap_or_default();
            let token = words.next().unwrap_or_default();
            let offset = text.find(kind).unwrap_or(0) + kind.len();
            let offset = offset + text[offset..].find(token).unwrap_or(0);
            Err(GuaranteeProblem {
                offset,
                token: token.to_string(),
                problem: format!("the share `{token}` is smaller than {MIN_SHARE}, the smallest share hsched prints"),
                expected: format!("a share from {MIN_SHARE} (0.0001%) to 1"),
                hint: String::new(),
            })
        }
        Ok(_) => Ok(()),
        Err(e) => Err(GuaranteeProblem {
            offset: e.offset,
            token: e.token.clone(),
            problem: match e.kind {
                K::Empty => "the guarantee is empty".into(),
                K::UnknownType => format!("unknown guarantee type `{}`", e.token),
                K::MissingParameter => "a parameter is missing".into(),
                K::ExtraParameter => format!("too many parameters (`{}`)", e.token),
                K::BadDuration => format!("`{}` is not a duration", e.token),
                K::BadShare => format!("`{}` is not a share", e.token),
                K::Invalid => "the parameters do not make a valid guarantee".into(),
            },
            expected: e.expected,
            hint: e.hint,
        }),
    }
}
