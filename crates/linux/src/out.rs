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
/// closed pipe so), or 1 after saying why on stderr (a full disk).
pub fn print_stdout(text: &str) -> i32 {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            diag!("hsched: cannot write the output: {e}");
            1
        }
    }
}
