//! Lines for people, written without panicking.
//!
//! `println!` and `eprintln!` panic when their stream is closed or full (a
//! pipe into `head` that has exited, a log reader that went away). In the
//! daemon such a panic would end the run and lose its report, and in a
//! panic hook it aborts the process. Every message and result the live
//! tools write goes through [`diag!`](crate::diag) and [`print_stdout`].

/// `eprintln!` that drops the line when stderr cannot take it.
#[macro_export]
macro_rules! diag {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr().lock(), $($arg)*);
    }};
}

/// Writes `text` to stdout and flushes it. Returns the exit status: 0,
/// also when the reader has gone (`| head`; every hsched verb treats a
/// closed pipe so), or 2 after saying why on stderr (a full disk: an output
/// that cannot be written, as for every verb).
pub fn print_stdout(text: &str) -> i32 {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            diag!("error: writing the report to standard output: {e}");
            2
        }
    }
}

/// Where `hsched run` writes its report: standard output, so far as a
/// launched program's own output allows, or the file `--output` names,
/// created (emptied) before the run starts so that a path that cannot be
/// written stops hsched before any program runs (and removed when the run
/// fails and there is no report).
pub enum ReportOut {
    /// Standard output.
    Stdout,
    /// `--output FILE`.
    File(std::path::PathBuf, std::fs::File),
}

impl ReportOut {
    /// Standard output, or `path` created for writing.
    ///
    /// # Errors
    /// The file cannot be created, in words naming it.
    pub fn create(path: Option<&std::path::Path>) -> Result<Self, String> {
        match path {
            None => Ok(Self::Stdout),
            Some(p) => std::fs::File::create(p)
                .map(|f| Self::File(p.to_path_buf(), f))
                .map_err(|e| format!("cannot create `{}`: {e}", p.display())),
        }
    }

    /// Writes `text`. Returns the exit status: as [`print_stdout`] for
    /// standard output; for a file 0, or 2 after saying why on stderr (an
    /// output that cannot be written, as for every verb).
    pub fn write(&mut self, text: &str) -> i32 {
        use std::io::Write;
        match self {
            Self::Stdout => print_stdout(text),
            Self::File(path, f) => match f.write_all(text.as_bytes()).and_then(|()| f.flush()) {
                Ok(()) => 0,
                Err(e) => {
                    diag!(
                        "hsched: cannot write the report to `{}`: {e}",
                        path.display()
                    );
                    2
                }
            },
        }
    }
}
