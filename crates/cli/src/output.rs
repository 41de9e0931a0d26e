//! Files a verb writes on the user's behalf.

use std::io;
use std::path::Path;

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
