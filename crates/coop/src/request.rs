//! Asking the hsched daemon's resource manager for a guarantee, from C
//! (Regehr 2001, §8.6: requests through a library): an audio server asks
//! for "1 ms every 5 ms for this thread" over the control socket without
//! root, and hears on the same connection when a pending request is
//! granted. The protocol is docs/live-mode.md, "Requests: the resource
//! manager"; this is a small client of it with no dependency on the rest
//! of hsched.
//!
//! ```c
//! HschedRm *rm = hsched_rm_open(NULL);                 /* /run/hsched.sock */
//! int32_t state; char why[256];
//! int64_t id = hsched_rm_request(rm, 0, "RESBS 1ms 5ms", &state, why, sizeof why);
//! if (id > 0 && state == HSCHED_RM_PENDING) {
//!     int32_t ev;
//!     hsched_rm_wait(rm, 5000, &ev);                    /* HSCHED_RM_GRANTED */
//! }
//! hsched_rm_release(rm, id);
//! hsched_rm_close(rm);
//! ```
// The C entry points take raw pointers; each block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The daemon's default socket.
pub const DEFAULT_SOCKET: &str = "/run/hsched.sock";

/// A granted request (`state`, and the event of a later grant).
pub const GRANTED: i32 = 1;
/// A pending request.
pub const PENDING: i32 = 2;
/// A granted guarantee revoked by a rule.
pub const REVOKED: i32 = 3;
/// A pending request that can no longer be granted.
pub const REFUSED: i32 = 4;

/// Why a call failed.
#[derive(Debug)]
pub enum RmError {
    /// The socket could not be reached or broke.
    Io(io::Error),
    /// The daemon answered with an error (`code: message`).
    Daemon(String),
    /// A line that is not the protocol.
    Protocol(String),
}

impl std::fmt::Display for RmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RmError::Io(e) => write!(f, "control socket: {e}"),
            RmError::Daemon(m) => f.write_str(m),
            RmError::Protocol(m) => write!(f, "bad response: {m}"),
        }
    }
}

impl From<io::Error> for RmError {
    fn from(e: io::Error) -> Self {
        RmError::Io(e)
    }
}

/// A connection to the daemon for requests.
pub struct Rm {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next: u64,
    events: Vec<serde_json::Value>,
}

/// An event: which request, and what happened to it ([`GRANTED`],
/// [`REVOKED`], [`REFUSED`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The request number.
    pub id: u64,
    /// What.
    pub what: i32,
}

impl Rm {
    /// Connects to `path`.
    ///
    /// # Errors
    /// No daemon listens there.
    pub fn open(path: &str) -> Result<Rm, RmError> {
        let s = UnixStream::connect(path)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        Ok(Rm {
            r: BufReader::new(s.try_clone()?),
            w: s,
            next: 1,
            events: Vec::new(),
        })
    }

    fn line(&mut self) -> Result<serde_json::Value, RmError> {
        let mut l = String::new();
        if self.r.read_line(&mut l)? == 0 {
            return Err(RmError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            )));
        }
        serde_json::from_str(&l).map_err(|e| RmError::Protocol(format!("{e}: {l}")))
    }

    fn call(
        &mut self,
        op: &str,
        mut args: serde_json::Value,
    ) -> Result<serde_json::Value, RmError> {
        let id = self.next;
        self.next += 1;
        args["v"] = 1.into();
        args["id"] = id.into();
        args["op"] = op.into();
        writeln!(self.w, "{args}")?;
        loop {
            let v = self.line()?;
            if v.get("event").is_some() {
                self.events.push(v);
                continue;
            }
            if v["ok"] == true {
                return Ok(v["result"].clone());
            }
            return Err(RmError::Daemon(format!(
                "{}: {}",
                v["error"]["code"].as_str().unwrap_or("?"),
                v["error"]["message"].as_str().unwrap_or("")
            )));
        }
    }

    /// Asks for `guarantee` for thread `tid` (it is attached first if the
    /// daemon does not manage it yet). Returns the request number and
    /// [`GRANTED`] or [`PENDING`].
    ///
    /// # Errors
    /// I/O, or the daemon's refusal (naming the rule).
    pub fn request(&mut self, tid: i32, guarantee: &str) -> Result<(u64, i32), RmError> {
        let ask = serde_json::json!({"thread": tid, "guarantee": guarantee});
        let r = match self.call("request", ask.clone()) {
            Err(RmError::Daemon(m)) if m.starts_with("not-found") => {
                self.call("attach", serde_json::json!({"tid": tid}))?;
                self.call("request", ask)?
            }
            other => other?,
        };
        let id = r["id"]
            .as_u64()
            .ok_or_else(|| RmError::Protocol(format!("no request number in {r}")))?;
        let state = match r["state"].as_str() {
            Some("granted") => GRANTED,
            Some("pending") => PENDING,
            _ => return Err(RmError::Protocol(format!("no state in {r}"))),
        };
        Ok((id, state))
    }

    /// Ends request `id`.
    ///
    /// # Errors
    /// I/O, or the daemon's refusal.
    pub fn release(&mut self, id: u64) -> Result<(), RmError> {
        self.call("release", serde_json::json!({"request": id}))
            .map(|_| ())
    }

    /// The next event about this connection's requests, waiting at most
    /// `wait`; `None` when none came.
    ///
    /// # Errors
    /// I/O, or a line that is not an event.
    pub fn wait(&mut self, wait: Duration) -> Result<Option<Event>, RmError> {
        let v = if self.events.is_empty() {
            self.w
                .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
            let r = self.line();
            self.w.set_read_timeout(Some(Duration::from_secs(5)))?;
            match r {
                Ok(v) => v,
                Err(RmError::Io(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(e),
            }
        } else {
            self.events.remove(0)
        };
        let what = match v["event"].as_str() {
            Some("granted") => GRANTED,
            Some("revoked") => REVOKED,
            Some("refused") => REFUSED,
            _ => return Err(RmError::Protocol(format!("not an event: {v}"))),
        };
        let id = v["id"]
            .as_u64()
            .ok_or_else(|| RmError::Protocol(format!("no request number in {v}")))?;
        Ok(Some(Event { id, what }))
    }
}

/// Copies `msg` into the C buffer `buf` of `len` bytes, NUL-terminated.
///
/// # Safety
/// `buf` is null or valid for `len` bytes.
unsafe fn put(buf: *mut c_char, len: usize, msg: &str) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = msg.len().min(len - 1);
    // SAFETY: the caller gives `len` writable bytes at `buf`; n < len.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
}

/// Opens a connection to the daemon at `socket` (NULL: `/run/hsched.sock`);
/// NULL when there is none.
///
/// # Safety
/// `socket` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hsched_rm_open(socket: *const c_char) -> *mut Rm {
    let path = if socket.is_null() {
        DEFAULT_SOCKET.to_string()
    } else {
        // SAFETY: the caller passes a NUL-terminated string.
        match unsafe { CStr::from_ptr(socket) }.to_str() {
            Ok(p) => p.to_string(),
            Err(_) => return std::ptr::null_mut(),
        }
    };
    match Rm::open(&path) {
        Ok(rm) => Box::into_raw(Box::new(rm)),
        Err(_) => std::ptr::null_mut(),
    }
}

/// Closes a connection (its requests remain until released or their
/// threads exit).
///
/// # Safety
/// `rm` is null or from [`hsched_rm_open`], not closed before.
#[no_mangle]
pub unsafe extern "C" fn hsched_rm_close(rm: *mut Rm) {
    if !rm.is_null() {
        // SAFETY: made by Box::into_raw in hsched_rm_open, closed once.
        drop(unsafe { Box::from_raw(rm) });
    }
}

/// Asks for `guarantee` (`"RESBS 1ms 5ms"`) for thread `tid` (0: the
/// calling thread). Returns the request number (> 0) and sets `*state` to
/// 1 (granted: in force now) or 2 (pending: an event follows); -1 on a bad
/// argument, -2 when the daemon refused (the message, naming the rule, is
/// copied into `msg`), -3 on an I/O or protocol failure.
///
/// # Safety
/// `rm` from [`hsched_rm_open`]; `guarantee` NUL-terminated; `state` null
/// or writable; `msg` null or valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hsched_rm_request(
    rm: *mut Rm,
    tid: i32,
    guarantee: *const c_char,
    state: *mut i32,
    msg: *mut c_char,
    len: usize,
) -> i64 {
    if rm.is_null() || guarantee.is_null() {
        return -1;
    }
    // SAFETY: checked non-null; the caller passes a string.
    let Ok(g) = unsafe { CStr::from_ptr(guarantee) }.to_str() else {
        return -1;
    };
    // SAFETY: a live handle from hsched_rm_open.
    let rm = unsafe { &mut *rm };
    let tid = if tid == 0 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    } else {
        tid
    };
    match rm.request(tid, g) {
        Ok((id, s)) => {
            if !state.is_null() {
                // SAFETY: checked non-null, writable by contract.
                unsafe { *state = s };
            }
            i64::try_from(id).unwrap_or(i64::MAX)
        }
        Err(e) => {
            // SAFETY: msg/len by contract.
            unsafe { put(msg, len, &e.to_string()) };
            if matches!(e, RmError::Daemon(_)) {
                -2
            } else {
                -3
            }
        }
    }
}

/// Ends request `id`: 0 done, -2 refused by the daemon, -3 I/O.
///
/// # Safety
/// `rm` from [`hsched_rm_open`].
#[no_mangle]
pub unsafe extern "C" fn hsched_rm_release(rm: *mut Rm, id: i64) -> i32 {
    if rm.is_null() || id <= 0 {
        return -1;
    }
    // SAFETY: a live handle from hsched_rm_open.
    match unsafe { &mut *rm }.release(id as u64) {
        Ok(()) => 0,
        Err(RmError::Daemon(_)) => -2,
        Err(_) => -3,
    }
}

/// Waits at most `timeout_ms` for an event about this connection's
/// requests: returns its request number and sets `*event` to 1 (granted),
/// 3 (revoked) or 4 (refused); 0 when none came; -3 on I/O failure.
///
/// # Safety
/// `rm` from [`hsched_rm_open`]; `event` null or writable.
#[no_mangle]
pub unsafe extern "C" fn hsched_rm_wait(rm: *mut Rm, timeout_ms: i32, event: *mut i32) -> i64 {
    if rm.is_null() {
        return -1;
    }
    let wait = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
    // SAFETY: a live handle from hsched_rm_open.
    match unsafe { &mut *rm }.wait(wait) {
        Ok(Some(e)) => {
            if !event.is_null() {
                // SAFETY: checked non-null, writable by contract.
                unsafe { *event = e.what };
            }
            i64::try_from(e.id).unwrap_or(i64::MAX)
        }
        Ok(None) => 0,
        Err(_) => -3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A stand-in daemon: answers each request line with the next canned
    /// lines (with the request's id put in).
    fn fake(
        name: &str,
        script: Vec<Vec<&'static str>>,
    ) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let path = std::env::temp_dir()
            .join(format!("hsched-rm-ffi-{name}-{}.sock", std::process::id()))
            .display()
            .to_string();
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).unwrap();
        let h = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            let mut seen = Vec::new();
            for replies in script {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                seen.push(v["op"].as_str().unwrap_or("").to_string());
                for rep in replies {
                    writeln!(w, "{}", rep.replace("ID", &v["id"].to_string())).unwrap();
                }
            }
            std::thread::sleep(Duration::from_millis(100));
            seen
        });
        (path, h)
    }

    #[test]
    fn a_pending_request_is_attached_then_granted_through_the_c_calls() {
        let (path, h) = fake(
            "pending",
            vec![
                vec![
                    r#"{"v":1,"id":ID,"ok":false,"error":{"code":"not-found","message":"no managed thread 7"}}"#,
                ],
                vec![r#"{"v":1,"id":ID,"ok":true,"result":{"attached":[7]}}"#],
                vec![
                    r#"{"v":1,"id":ID,"ok":true,"result":{"id":4,"state":"pending","rule":"admission"}}"#,
                    r#"{"v":1,"event":"granted","id":4,"thread":"t","scheduler":"rez"}"#,
                ],
                vec![r#"{"v":1,"id":ID,"ok":true,"result":{"released":4}}"#],
            ],
        );
        let c = std::ffi::CString::new(path.clone()).unwrap();
        let g = std::ffi::CString::new("RESBS 1ms 5ms").unwrap();
        unsafe {
            let rm = hsched_rm_open(c.as_ptr());
            assert!(!rm.is_null());
            let mut state = 0;
            let id = hsched_rm_request(rm, 7, g.as_ptr(), &mut state, std::ptr::null_mut(), 0);
            assert_eq!((id, state), (4, PENDING));
            let mut ev = 0;
            assert_eq!(hsched_rm_wait(rm, 1000, &mut ev), 4);
            assert_eq!(ev, GRANTED);
            assert_eq!(hsched_rm_wait(rm, 50, &mut ev), 0);
            assert_eq!(hsched_rm_release(rm, 4), 0);
            hsched_rm_close(rm);
        }
        assert_eq!(
            h.join().unwrap(),
            ["request", "attach", "request", "release"]
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_refusal_is_minus_two_with_the_rule_in_the_message() {
        let (path, h) = fake(
            "refused",
            vec![vec![
                r#"{"v":1,"id":ID,"ok":false,"error":{"code":"refused","message":"refused by rule `cap 30% per user`: too much"}}"#,
            ]],
        );
        let c = std::ffi::CString::new(path.clone()).unwrap();
        let g = std::ffi::CString::new("RESBS 4ms 10ms").unwrap();
        let mut msg = [0 as c_char; 32];
        unsafe {
            let rm = hsched_rm_open(c.as_ptr());
            let id = hsched_rm_request(
                rm,
                9,
                g.as_ptr(),
                std::ptr::null_mut(),
                msg.as_mut_ptr(),
                msg.len(),
            );
            assert_eq!(id, -2);
            let text = CStr::from_ptr(msg.as_ptr()).to_str().unwrap();
            assert!(text.starts_with("refused: refused by rule `cap"), "{text}");
            assert_eq!(text.len(), 31, "cut to the buffer");
            assert_eq!(
                hsched_rm_request(
                    rm,
                    9,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0
                ),
                -1
            );
            hsched_rm_close(rm);
            assert!(hsched_rm_open(c"/nonexistent/hsched.sock".as_ptr()).is_null());
        }
        h.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}
