//! A client of the control socket (what `hsched ctl` uses).
//!
//! ```no_run
//! use hsched_linux::ctl::Client;
//! use serde_json::json;
//! let mut c = Client::connect("/run/hsched.sock".as_ref()).unwrap();
//! let tree = c.request("show", json!({})).unwrap();
//! c.request("begin-reservation", json!({"thread": "renderer", "scheduler": "rez",
//!     "params": {"amount": "10ms", "period": "33ms"}})).unwrap();
//! # let _ = tree;
//! ```

use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The default socket path.
pub const DEFAULT_SOCKET: &str = "/run/hsched.sock";

/// What a request can end in.
#[derive(Debug)]
pub enum CtlError {
    /// The socket could not be reached or broke.
    Io(io::Error),
    /// The daemon answered with an error.
    Daemon {
        /// Its code (`refused`, `not-found`, `unauthorized`, ...).
        code: String,
        /// Its message.
        message: String,
    },
    /// The answer was not a protocol response.
    Protocol(String),
}

impl std::fmt::Display for CtlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CtlError::Io(e) => write!(f, "control socket: {e}"),
            CtlError::Daemon { code, message } => write!(f, "{code}: {message}"),
            CtlError::Protocol(m) => write!(f, "bad response: {m}"),
        }
    }
}
impl std::error::Error for CtlError {}

impl From<io::Error> for CtlError {
    fn from(e: io::Error) -> Self {
        CtlError::Io(e)
    }
}

/// A connection to a running daemon.
pub struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next_id: u64,
    /// Event lines (notices about requests) read while waiting for a
    /// response.
    events: std::collections::VecDeque<Value>,
}

impl Client {
    /// Connects to the daemon's socket (5 s timeouts).
    ///
    /// # Errors
    /// No daemon listens there.
    pub fn connect(path: &Path) -> io::Result<Client> {
        let s = UnixStream::connect(path)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(Client {
            r: BufReader::new(s.try_clone()?),
            w: s,
            next_id: 1,
            events: std::collections::VecDeque::new(),
        })
    }

    /// Sends operation `op` with the fields of `args` (an object) and
    /// returns the `result`.
    ///
    /// # Errors
    /// I/O, an error reply, or a malformed reply.
    pub fn request(&mut self, op: &str, args: Value) -> Result<Value, CtlError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut req = json!({"v": crate::control::PROTOCOL_VERSION, "id": id, "op": op});
        if let (Some(obj), Value::Object(a)) = (req.as_object_mut(), args) {
            for (k, v) in a {
                obj.insert(k, v);
            }
        }
        let mut resp = self.raw(&req.to_string())?;
        let v: Value = loop {
            let v: Value =
                serde_json::from_str(&resp).map_err(|e| CtlError::Protocol(e.to_string()))?;
            // Notices about earlier requests may come before the response.
            if v.get("event").is_none() {
                break v;
            }
            self.events.push_back(v);
            resp = self.read_line()?;
        };
        if v.get("ok").and_then(Value::as_bool) == Some(true) {
            Ok(v.get("result").cloned().unwrap_or(Value::Null))
        } else {
            let e = v.get("error");
            Err(CtlError::Daemon {
                code: e
                    .and_then(|e| e.get("code"))
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                message: e
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            })
        }
    }

    /// Sends one raw line and returns the raw response line (for tests of
    /// malformed input).
    ///
    /// # Errors
    /// I/O failure or the daemon closed the connection.
    pub fn raw(&mut self, line: &str) -> Result<String, CtlError> {
        self.w.write_all(line.as_bytes())?;
        self.w.write_all(b"\n")?;
        self.read_line()
    }

    /// The next notice about this connection's requests (`{"event":
    /// "granted", ...}`, docs/live-mode.md), waiting at most `wait`;
    /// `None` when none came.
    ///
    /// # Errors
    /// I/O failure, the daemon closed the connection, or a line that is
    /// not an event.
    pub fn next_event(&mut self, wait: Duration) -> Result<Option<Value>, CtlError> {
        if let Some(e) = self.events.pop_front() {
            return Ok(Some(e));
        }
        self.w
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        let line = self.read_line();
        self.w.set_read_timeout(Some(Duration::from_secs(5)))?;
        let line = match line {
            Ok(l) => l,
            Err(CtlError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let v: Value =
            serde_json::from_str(&line).map_err(|e| CtlError::Protocol(e.to_string()))?;
        if v.get("event").is_none() {
            return Err(CtlError::Protocol(format!("not an event: {line}")));
        }
        Ok(Some(v))
    }

    fn read_line(&mut self) -> Result<String, CtlError> {
        let mut resp = String::new();
        if self.r.read_line(&mut resp)? == 0 {
            return Err(CtlError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            )));
        }
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn event_lines_before_a_response_are_kept_for_next_event() {
        let path =
            std::env::temp_dir().join(format!("hsched-ctl-events-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            writeln!(w, r#"{{"v":1,"event":"granted","id":2,"thread":"a2"}}"#).unwrap();
            writeln!(
                w,
                r#"{{"v":1,"id":{},"ok":true,"result":{{"state":"pending"}}}}"#,
                v["id"]
            )
            .unwrap();
            // A later notice, and a line that is not one.
            std::thread::sleep(Duration::from_millis(50));
            writeln!(w, r#"{{"v":1,"event":"revoked","id":3}}"#).unwrap();
            writeln!(w, r#"{{"v":1,"id":9,"ok":true,"result":{{}}}}"#).unwrap();
            std::thread::sleep(Duration::from_millis(200));
        });
        let mut c = Client::connect(&path).unwrap();
        let r = c
            .request(
                "request",
                json!({"thread": "a3", "guarantee": "RESBS 1ms 5ms"}),
            )
            .unwrap();
        assert_eq!(r["state"], "pending");
        let e = c.next_event(Duration::from_millis(10)).unwrap().unwrap();
        assert_eq!(e["event"], "granted");
        let e = c.next_event(Duration::from_secs(2)).unwrap().unwrap();
        assert_eq!(e["event"], "revoked");
        assert!(matches!(
            c.next_event(Duration::from_secs(2)),
            Err(CtlError::Protocol(_))
        ));
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn no_event_in_time_is_none() {
        let path =
            std::env::temp_dir().join(format!("hsched-ctl-quiet-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            drop(s);
        });
        let mut c = Client::connect(&path).unwrap();
        assert!(c.next_event(Duration::from_millis(50)).unwrap().is_none());
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}
