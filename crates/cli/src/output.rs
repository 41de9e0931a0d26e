//! Files a verb writes on the user's behalf.

use crate::outcome::{input_error, StdoutError};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The value parser of an option that names a file to write next to a
/// report on standard output: `-` cannot mean standard output there, and a
/// file called `-` is more likely a mistake than meant (`./-` names one).
///
/// # Errors
/// `-`.
pub fn file_path(s: &str) -> Result<PathBuf, String> {
    if s == "-" {
        return Err(
            "`-` would be standard output, which carries the report; give a file name (`./-` names a file called `-`)"
                .to_string(),
        );
    }
    Ok(PathBuf::from(s))
}

/// A file named on the command line, with the option (or argument) that
/// names it: `("--trace", "out.json")`, `("FILE", "home.toml")`.
pub type Named<'a> = (&'a str, &'a Path);

/// Refuses, before anything is created, an output that is one of the
/// `inputs` or another output: writing it would destroy what the verb reads
/// or writes. Each pair is compared as files (the same device and inode
/// for files that exist, so that links are caught; the same directory and
/// name for one to be created). Devices and pipes (`/dev/null`) may be
/// named twice: writing them destroys nothing.
///
/// # Errors
/// An input error naming both options and the file.
pub fn check_outputs<'a>(inputs: &[Named<'a>], outputs: &[Named<'a>]) -> anyhow::Result<()> {
    for (k, &(option, path)) in outputs.iter().enumerate() {
        let Some(id) = identity(path) else { continue };
        let clash = |others: &[Named<'a>]| {
            others
                .iter()
                .copied()
                .find(|&(_, other)| identity(other).as_ref() == Some(&id))
        };
        if let Some(input) = clash(inputs) {
            return Err(same_file(
                (option, path),
                input,
                "writing it would destroy the input",
            ));
        }
        if let Some(other) = clash(&outputs[..k]) {
            return Err(same_file(
                (option, path),
                other,
                "one output would overwrite the other",
            ));
        }
    }
    Ok(())
}

/// What makes two paths the same file.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    /// A regular file that exists.
    Inode(u64, u64),
    /// A file to be created: its directory (resolved) and name.
    New(PathBuf),
}

/// `None` for a device, pipe or directory, and for a path whose file
/// cannot be inspected (creating it will fail with its own message).
fn identity(path: &Path) -> Option<Identity> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Some(Identity::Inode(m.dev(), m.ino())),
        Ok(_) => None,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let name = path.file_name()?;
            Some(Identity::New(dir.canonicalize().ok()?.join(name)))
        }
        Err(_) => None,
    }
}

/// The error for `output`, which names the same file as `other`.
fn same_file(output: Named<'_>, other: Named<'_>, consequence: &str) -> anyhow::Error {
    let (option, path) = output;
    let what = if path == other.1 {
        format!("`{}`", path.display())
    } else {
        format!(
            "the same file (`{}` and `{}`)",
            path.display(),
            other.1.display()
        )
    };
    input_error(format!(
        "error: {option} and {} both name {what}: {consequence}\n  = hint: give {option} another path",
        other.0
    ))
}

/// Removes an output this run wrote but could not finish, if it is a
/// regular file. A device, pipe or symbolic link named as the output (such
/// as `--trace /dev/full`) is left where it is: it is not ours to remove.
/// Returns whether the file was removed.
pub fn remove_unfinished(path: &Path) -> io::Result<bool> {
    if std::fs::symlink_metadata(path)?.is_file() {
        std::fs::remove_file(path)?;
        Ok(true)
    } else {
        Ok(false)
    }
}

/// Standard output, where a verb writes its report: a failed write says
/// so (`writing the report to standard output: No space left on device`).
pub struct Report(io::StdoutLock<'static>);

/// The verb's report on standard output.
pub fn report() -> Report {
    Report(io::stdout().lock())
}

impl Report {
    fn failed(e: io::Error) -> io::Error {
        match e.kind() {
            // Not an error: `main` ends quietly.
            io::ErrorKind::BrokenPipe => e,
            kind => io::Error::new(kind, StdoutError(e)),
        }
    }
}

impl io::Write for Report {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(Self::failed)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(Self::failed)
    }
}
