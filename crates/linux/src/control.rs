//! The control socket: HLSCtl / hlsutil of Regehr 2001, §4.3.9 and §8.7 as a
//! versioned JSON-lines protocol over a Unix stream socket.
//!
//! One request per line, one response line per request, in order:
//!
//! ```text
//! → {"v":1,"id":7,"op":"begin-reservation","thread":"renderer","scheduler":"rez","params":{"amount":"10ms","period":"33ms"}}
//! ← {"v":1,"id":7,"ok":true,"result":{}}
//! ← {"v":1,"id":8,"ok":false,"error":{"code":"refused","message":"..."}}
//! ```
//!
//! docs/live-mode.md lists every operation. Peers are identified with
//! `SO_PEERCRED`: root and members of the configured group may do
//! everything; any other user may read the tree and act only on threads
//! whose real uid is theirs, within the rules of [`crate::authz`] (no
//! real-time capacity beyond its `RLIMIT_RTPRIO`, a share of reservations,
//! connection and thread limits, unique names). A request is one JSON
//! object with no key twice; `v`, when present, is the integer 1. Lines
//! over 64 KiB, more than 64 clients (8 per unprivileged uid; root always
//! gets in), a client idle for 60 s or holding a partial line for 5 s, or
//! one that does not read its replies (4 MiB queued) are cut off; nothing a
//! client sends can stop the daemon's loop, which never blocks on a client.

use crate::authz;
use crate::daemon::{Daemon, TOK_CLIENT};
use crate::enforce::{self, Original};
use crate::hierarchy;
use crate::sys;
use hsched_config::{OpSpec, ParentSpec, SchedulerSpec, Span};
use hsched_core::time::Duration;
use hsched_core::{Msg, ParamValue, Params, ThreadId, VpState};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// Protocol version.
pub const PROTOCOL_VERSION: u64 = 1;
/// Longest request line.
pub const MAX_LINE: usize = 64 * 1024;
/// Most simultaneous clients.
pub const MAX_CLIENTS: usize = 64;
const MAX_OUT: usize = 4 << 20;
const IDLE_NS: u64 = 60_000_000_000;
const PARTIAL_NS: u64 = 5_000_000_000;

/// The listening socket.
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    group: Option<u32>,
    /// The resource manager, made at the first request.
    rm: Option<RmLive>,
}

/// The resource manager of the daemon (Regehr 2001, ch. 8) and what it
/// needs to know of each request: the managed thread it is for and the
/// connection that asked, which gets the later notices.
pub(crate) struct RmLive {
    manager: hsched_rm::Manager,
    reqs: BTreeMap<hsched_rm::RequestId, (i32, Option<u64>)>,
    /// Threads a `[[rule]]` has been matched against for good (it matched).
    ruled: std::collections::BTreeSet<i32>,
    /// When the threads no rule matched yet were last looked at.
    ruled_at: u64,
}

/// How often threads that no `[[rule]]` matches yet (they may be renamed
/// soon after they start) are looked at again.
const RULE_SCAN_NS: u64 = 100_000_000;

/// Who is on the other end of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Primary group.
    pub gid: u32,
    /// May do everything (root or the configured group).
    pub privileged: bool,
    /// The connection, for notices about its requests.
    pub conn: u64,
}

/// One client connection.
pub struct Conn {
    stream: UnixStream,
    peer: Peer,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    last_active: u64,
    partial_since: Option<u64>,
}

impl Server {
    /// Binds `path` (replacing a stale socket, refusing any other file),
    /// mode 0666 so that ordinary users can connect; what they may do is
    /// decided per request.
    ///
    /// # Errors
    /// The path is in use by a live daemon, or cannot be bound.
    pub fn bind(path: &Path, group: Option<u32>) -> io::Result<Server> {
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running daemon", path.display()),
                ));
            }
            // Only a stale socket is replaced: a mistyped path must not
            // delete a file.
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ));
            }
            let _ = std::fs::remove_file(path);
        }
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666));
        Ok(Server {
            listener,
            path: path.to_path_buf(),
            group,
            rm: None,
        })
    }
    /// The listening descriptor.
    pub fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }
    /// Removes the socket file.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
    /// The next waiting connection, if one waits (for a backend that
    /// carries the protocol itself: [`crate::kernel::serve`]).
    pub(crate) fn accept(&self) -> Option<UnixStream> {
        self.listener.accept().ok().map(|(s, _)| s)
    }
}

/// Whether process `pid`, whose primary group is `gid`, is a member of
/// group `group` (primary or supplementary).
pub(crate) fn in_group(pid: i32, gid: u32, group: u32) -> bool {
    gid == group || supplementary_groups(pid).contains(&group)
}

fn supplementary_groups(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                g.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// A protocol error: a code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fail {
    /// Machine-readable code.
    pub code: &'static str,
    /// What went wrong.
    pub message: String,
}

pub(crate) fn fail(code: &'static str, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
    }
}

/// Converts a JSON object into policy parameters.
///
/// # Errors
/// Not an object, or a value that is not a number, string or boolean.
pub fn params_from_json(v: Option<&Value>) -> Result<Params, Fail> {
    let mut p = Params::new();
    let Some(v) = v else { return Ok(p) };
    if v.is_null() {
        return Ok(p);
    }
    let obj = v
        .as_object()
        .ok_or_else(|| fail("bad-request", "`params` must be an object"))?;
    for (k, v) in obj {
        let pv =
            match v {
                Value::Bool(b) => ParamValue::Bool(*b),
                Value::String(s) => ParamValue::Str(s.clone()),
                Value::Number(n) => match n.as_i64() {
                    Some(i) => ParamValue::Int(i),
                    None => ParamValue::Float(n.as_f64().filter(|f| f.is_finite()).ok_or_else(
                        || fail("bad-request", format!("parameter `{k}` is not finite")),
                    )?),
                },
                _ => {
                    return Err(fail(
                        "bad-request",
                        format!("parameter `{k}` must be a number, string or boolean"),
                    ))
                }
            };
        p.insert(k, pv);
    }
    Ok(p)
}

/// Policy parameters as JSON.
pub fn params_to_json(p: &Params) -> Value {
    let mut m = Map::new();
    for (k, v) in p.iter() {
        let j = match v {
            ParamValue::Int(i) => json!(i),
            ParamValue::Float(f) => json!(f),
            ParamValue::Str(s) => json!(s),
            ParamValue::Bool(b) => json!(b),
        };
        m.insert(k.to_string(), j);
    }
    Value::Object(m)
}

pub(crate) fn str_arg<'a>(req: &'a Value, key: &str) -> Result<&'a str, Fail> {
    req.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| fail("bad-request", format!("`{key}` (a string) is required")))
}

/// Operations, for `hello` and the docs.
pub const OPERATIONS: &[&str] = &[
    "hello",
    "show",
    "create",
    "destroy",
    "move",
    "begin-reservation",
    "end-reservation",
    "set-params",
    "set-share",
    "set-default",
    "attach",
    "detach",
    "load",
    "unload",
    "replace",
    "request",
    "release",
    "requests",
    "shutdown",
];

impl Daemon {
    pub(crate) fn accept_clients(&mut self) {
        let Some(server) = &self.server else { return };
        loop {
            let (stream, _) = match server.listener.accept() {
                Ok(s) => s,
                Err(_) => return,
            };
            let group = server.group;
            let Ok((pid, uid, gid)) = sys::peer_cred(stream.as_raw_fd()) else {
                continue;
            };
            // Root always gets in (slots are kept for it); no other uid can
            // hold more than its share.
            let busy = if uid == 0 {
                (self.conns.len() >= MAX_CLIENTS + authz::ROOT_RESERVED_CONNECTIONS)
                    .then(|| "too many clients".to_string())
            } else if self.conns.values().filter(|c| c.peer.uid != 0).count() >= MAX_CLIENTS {
                Some("too many clients".to_string())
            } else if self.conns.values().filter(|c| c.peer.uid == uid).count()
                >= authz::MAX_USER_CONNECTIONS
            {
                Some(format!(
                    "uid {uid} already holds {} connections, the most one user may",
                    authz::MAX_USER_CONNECTIONS
                ))
            } else {
                None
            };
            if let Some(message) = busy {
                let mut s = stream;
                let _ = s.set_nonblocking(true);
                let e = json!({"v": PROTOCOL_VERSION, "id": null, "ok": false, "error": {"code": "busy", "message": message}});
                let _ = s.write_all(format!("{e}\n").as_bytes());
                continue;
            }
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let privileged = uid == 0
                || group.is_some_and(|g| gid == g || supplementary_groups(pid).contains(&g));
            let id = self
                .stats
                .operations
                .wrapping_add(self.conns.keys().next_back().map_or(0, |k| k + 1))
                & 0xffff_ffff;
            let id = (0..u64::from(u32::MAX))
                .map(|k| (id + k) & 0xffff_ffff)
                .find(|k| !self.conns.contains_key(k))
                .unwrap_or(0);
            if self
                .epoll
                .add(
                    stream.as_raw_fd(),
                    (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
                    TOK_CLIENT + id,
                )
                .is_err()
            {
                continue;
            }
            let now = sys::now_ns();
            self.conns.insert(
                id,
                Conn {
                    stream,
                    peer: Peer {
                        pid,
                        uid,
                        gid,
                        privileged,
                        conn: id,
                    },
                    inbuf: Vec::new(),
                    outbuf: Vec::new(),
                    last_active: now,
                    partial_since: None,
                },
            );
        }
    }

    fn drop_conn(&mut self, id: u64) {
        if let Some(c) = self.conns.remove(&id) {
            self.epoll.del(c.stream.as_raw_fd());
        }
    }

    pub(crate) fn client_io(&mut self, tok: u64) {
        let id = tok - TOK_CLIENT;
        let now = sys::now_ns();
        let mut close = false;
        let mut lines: Vec<Vec<u8>> = Vec::new();
        if let Some(c) = self.conns.get_mut(&id) {
            let mut buf = [0u8; 16384];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        close = true;
                        break;
                    }
                    Ok(n) => {
                        c.inbuf.extend_from_slice(&buf[..n]);
                        c.last_active = now;
                        while let Some(pos) = c.inbuf.iter().position(|&b| b == b'\n') {
                            let line: Vec<u8> = c.inbuf.drain(..=pos).collect();
                            lines.push(line);
                        }
                        if c.inbuf.len() > MAX_LINE {
                            let e = json!({"v": PROTOCOL_VERSION, "id": null, "ok": false, "error": {"code": "too-large", "message": format!("a request line may be at most {MAX_LINE} bytes")}});
                            c.outbuf.extend_from_slice(e.to_string().as_bytes());
                            c.outbuf.push(b'\n');
                            close = true;
                            break;
                        }
                        if lines.len() > 256 {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        close = true;
                        break;
                    }
                }
            }
            c.partial_since = if c.inbuf.is_empty() {
                None
            } else {
                c.partial_since.or(Some(now))
            };
        } else {
            return;
        }
        for line in lines {
            let Some(peer) = self.conns.get(&id).map(|c| c.peer.clone()) else {
                break;
            };
            let resp = self.handle_line(&line, &peer);
            self.stats.operations += 1;
            if let Some(c) = self.conns.get_mut(&id) {
                c.outbuf.extend_from_slice(resp.as_bytes());
                c.outbuf.push(b'\n');
            }
        }
        self.flush_conn(id, close);
    }

    fn flush_conn(&mut self, id: u64, close: bool) {
        let mut dead = close;
        if let Some(c) = self.conns.get_mut(&id) {
            while !c.outbuf.is_empty() {
                match c.stream.write(&c.outbuf) {
                    Ok(0) => {
                        dead = true;
                        break;
                    }
                    Ok(n) => {
                        c.outbuf.drain(..n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        dead = true;
                        break;
                    }
                }
            }
            if c.outbuf.len() > MAX_OUT {
                dead = true;
            }
        }
        if dead {
            self.drop_conn(id);
        }
    }

    /// Drops idle and slow clients; called on every timer wake-up.
    pub(crate) fn expire_clients(&mut self) {
        let now = sys::now_ns();
        let stale: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                now - c.last_active > IDLE_NS
                    || c.partial_since.is_some_and(|p| now - p > PARTIAL_NS)
            })
            .map(|(&k, _)| k)
            .collect();
        for k in stale {
            self.drop_conn(k);
        }
        self.rm_sync();
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.flush_conn(id, false);
        }
    }

    /// Handles one request line and returns the response line.
    pub(crate) fn handle_line(&mut self, line: &[u8], peer: &Peer) -> String {
        let req: Value = match parse_request(line) {
            Ok(v) => v,
            Err(message) => {
                return json!({"v": PROTOCOL_VERSION, "id": null, "ok": false, "error": {"code": "bad-request", "message": message}}).to_string();
            }
        };
        let id = req.get("id").cloned().unwrap_or(Value::Null);
        let res = match req.get("v") {
            None => self.dispatch_op(&req, peer),
            Some(v) if v.as_u64() == Some(PROTOCOL_VERSION) && v.is_u64() => {
                self.dispatch_op(&req, peer)
            }
            Some(v) => Err(fail(
                "version",
                format!(
                    "protocol version {v} is not supported; `v` is the integer {PROTOCOL_VERSION} (or absent)"
                ),
            )),
        };
        let v = match res {
            Ok(result) => json!({"v": PROTOCOL_VERSION, "id": id, "ok": true, "result": result}),
            Err(f) => {
                json!({"v": PROTOCOL_VERSION, "id": id, "ok": false, "error": {"code": f.code, "message": f.message}})
            }
        };
        v.to_string()
    }

    fn thread_ref(&self, req: &Value, key: &str) -> Result<(i32, ThreadId), Fail> {
        let v = req.get(key).ok_or_else(|| {
            fail(
                "bad-request",
                format!("`{key}` (a thread name or tid) is required"),
            )
        })?;
        let found = match v {
            Value::Number(n) => n
                .as_i64()
                .and_then(|t| i32::try_from(t).ok())
                .and_then(|t| self.threads.get(&t)),
            Value::String(s) => {
                let mut named = self.threads.values().filter(|m| &m.name == s);
                let first = named.next();
                if first.is_some() && named.next().is_some() {
                    return Err(fail(
                        "bad-request",
                        format!("several managed threads are named {s:?}: give a tid"),
                    ));
                }
                first
            }
            _ => {
                return Err(fail(
                    "bad-request",
                    format!("`{key}` must be a thread name or tid"),
                ))
            }
        };
        found
            .map(|m| (m.tid, m.hsi))
            .ok_or_else(|| fail("not-found", format!("no managed thread {v}")))
    }

    fn may_touch(&self, peer: &Peer, tid: i32) -> Result<(), Fail> {
        if peer.privileged || enforce::proc_uid(tid) == Some(peer.uid) {
            Ok(())
        } else {
            Err(fail(
                "unauthorized",
                format!("thread {tid} is not yours (uid {})", peer.uid),
            ))
        }
    }

    /// Whether `scheduler` (absent: the default) is the default scheduler.
    fn is_default(&self, scheduler: Option<&str>) -> bool {
        match scheduler {
            None => true,
            Some(name) => self
                .hsi
                .default_instance()
                .is_some_and(|d| self.hsi.instance_name(d) == name),
        }
    }

    /// The rules of [`authz`] for a request that gives `params` (and a
    /// place other than the default) to a thread of `peer`'s; `tid` is the
    /// thread when it is managed already.
    fn authorize(
        &self,
        peer: &Peer,
        params: &Params,
        what: &str,
        tid: Option<i32>,
    ) -> Result<(), Fail> {
        let limits = &self.opts.control_limits;
        authz::check_minimums(limits, params).map_err(|e| fail("refused", e))?;
        if peer.privileged {
            return Ok(());
        }
        let rtprio = authz::rtprio_limit(peer.pid);
        authz::check_capacity(peer.uid, rtprio, params, what)
            .map_err(|e| fail("unauthorized", e))?;
        let Some((amount, period)) =
            authz::reservation(params).map_err(|e| fail("bad-request", e))?
        else {
            return Ok(());
        };
        // The uid's other reservations, wherever they are.
        let held: Vec<(Duration, Duration)> = self
            .threads
            .iter()
            .filter(|(&t, _)| Some(t) != tid && enforce::proc_uid(t) == Some(peer.uid))
            .filter_map(|(_, m)| {
                let p = self.hsi.vp_info(self.hsi.thread_vp(m.hsi)).params;
                authz::reservation(&p).ok().flatten()
            })
            .collect();
        authz::check_user_utilization(limits, peer.uid, &held, (amount, period))
            .map_err(|e| fail("unauthorized", e))
    }

    fn privileged(peer: &Peer, op: &str) -> Result<(), Fail> {
        if peer.privileged {
            Ok(())
        } else {
            Err(fail(
                "unauthorized",
                format!("`{op}` needs root or the control group"),
            ))
        }
    }

    fn dispatch_op(&mut self, req: &Value, peer: &Peer) -> Result<Value, Fail> {
        let op = str_arg(req, "op")?;
        let now = self.inst(sys::now_ns());
        let refused = |e: crate::LiveError| fail("refused", e.to_string());
        let r = match op {
            "hello" => Ok(
                json!({"protocol": PROTOCOL_VERSION, "pid": sys::getpid(), "cpus": self.cpus, "operations": OPERATIONS, "privileged": peer.privileged}),
            ),
            "show" => Ok(self.show()),
            "create" => {
                Self::privileged(peer, op)?;
                let name = str_arg(req, "name")?.to_string();
                let policy = self.policy_named(str_arg(req, "policy")?)?;
                let mut parents = Vec::new();
                if let Some(ps) = req.get("parents") {
                    let arr = ps
                        .as_array()
                        .ok_or_else(|| fail("bad-request", "`parents` must be an array"))?;
                    for p in arr {
                        let pname = match p {
                            Value::String(s) => s.clone(),
                            _ => str_arg(p, "name")?.to_string(),
                        };
                        parents.push(ParentSpec {
                            name: pname,
                            params: params_from_json(p.get("params"))?,
                        });
                    }
                } else if let Some(p) = req.get("parent").and_then(Value::as_str) {
                    parents.push(ParentSpec {
                        name: p.to_string(),
                        params: params_from_json(req.get("parent_params"))?,
                    });
                }
                let cpus = match req.get("cpus") {
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|c| {
                            c.as_u64()
                                .map(|c| c as usize)
                                .ok_or_else(|| fail("bad-request", "`cpus` must be integers"))
                        })
                        .collect::<Result<_, _>>()?,
                    _ => Vec::new(),
                };
                let spec = SchedulerSpec {
                    name,
                    policy,
                    params: params_from_json(req.get("params"))?,
                    parents,
                    cpus,
                    guarantee: None,
                    span: Span::default(),
                };
                hierarchy::create_scheduler(&mut self.hsi, now, &spec)
                    .map(|_| json!({}))
                    .map_err(refused)
            }
            "destroy" => {
                Self::privileged(peer, op)?;
                let name = str_arg(req, "name")?.to_string();
                self.apply(now, &OpSpec::DestroyScheduler { name })
                    .map_err(refused)
            }
            "set-default" => {
                Self::privileged(peer, op)?;
                let name = str_arg(req, "name")?.to_string();
                let move_threads = req
                    .get("move_threads")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                self.apply(now, &OpSpec::SetDefault { name, move_threads })
                    .map_err(refused)
            }
            "move" | "begin-reservation" | "end-reservation" | "set-params" | "set-share" => {
                let (tid, t) = self.thread_ref(req, "thread")?;
                self.may_touch(peer, tid)?;
                let params = params_from_json(req.get("params"))?;
                let target = match op {
                    "move" => Some(str_arg(req, "to")?),
                    "begin-reservation" => Some(str_arg(req, "scheduler")?),
                    _ => None,
                };
                let gives_capacity = match op {
                    "end-reservation" => false,
                    "move" => !params.is_empty() || !self.is_default(target),
                    _ => true,
                };
                if gives_capacity && !peer.privileged && self.h.rm.enabled {
                    return Err(fail(
                        "unauthorized",
                        format!("`{op}` needs root or the control group: with a resource manager ([rm] in the hierarchy file) other users ask with `request` (Regehr 2001, §8.3)"),
                    ));
                }
                if gives_capacity {
                    let shown = match target {
                        Some(to) => format!("`{op}` to `{to}`"),
                        None => format!("`{op}`"),
                    };
                    self.authorize(peer, &params, &shown, Some(tid))?;
                }
                match op {
                    "move" => {
                        let to = hierarchy::instance(&self.hsi, str_arg(req, "to")?)
                            .map_err(|e| fail("not-found", e.to_string()))?;
                        self.hsi
                            .move_thread(now, t, to, params)
                            .map(|_| json!({}))
                            .map_err(|e| fail("refused", e.to_string()))
                    }
                    "begin-reservation" => {
                        let to = hierarchy::instance(&self.hsi, str_arg(req, "scheduler")?)
                            .map_err(|e| fail("not-found", e.to_string()))?;
                        self.hsi
                            .begin_reservation(now, t, to, params)
                            .map(|_| json!({}))
                            .map_err(|e| fail("refused", e.to_string()))
                    }
                    "end-reservation" => self
                        .hsi
                        .end_reservation(now, t)
                        .map(|_| json!({}))
                        .map_err(|e| fail("refused", e.to_string())),
                    "set-share" => {
                        let mut p = self.hsi.vp_info(self.hsi.thread_vp(t)).params;
                        let share = req
                            .get("share")
                            .and_then(Value::as_f64)
                            .ok_or_else(|| fail("bad-request", "`share` (a number) is required"))?;
                        p.insert(
                            "share",
                            if share.fract() == 0.0 {
                                ParamValue::Int(share as i64)
                            } else {
                                ParamValue::Float(share)
                            },
                        );
                        if let Some(w) = req.get("warp") {
                            let w = match w {
                                Value::String(s) => ParamValue::Str(s.clone()),
                                Value::Number(n) if n.as_i64() == Some(0) => ParamValue::Int(0),
                                _ => {
                                    return Err(fail(
                                        "bad-request",
                                        "`warp` must be a duration such as \"5ms\"",
                                    ))
                                }
                            };
                            p.insert("warp", w);
                        }
                        self.hsi
                            .thread_msg(now, t, &Msg::SetParams(p))
                            .map(|_| json!({}))
                            .map_err(|e| fail("refused", e.to_string()))
                    }
                    _ => self
                        .hsi
                        .thread_msg(now, t, &Msg::SetParams(params))
                        .map(|_| json!({}))
                        .map_err(|e| fail("refused", e.to_string())),
                }
            }
            "attach" => self.attach(req, peer),
            "load" => {
                Self::privileged(peer, op)?;
                self.ctl_load(req)
            }
            "unload" => {
                Self::privileged(peer, op)?;
                self.ctl_unload(req, now)
            }
            "replace" => {
                Self::privileged(peer, op)?;
                self.ctl_replace(req, now)
            }
            "request" => self.rm_request(req, peer),
            "release" => self.rm_release(req, peer),
            "requests" => self.rm_list(peer),
            "detach" => {
                let pid = req
                    .get("pid")
                    .or_else(|| req.get("tid"))
                    .and_then(Value::as_i64)
                    .and_then(|p| i32::try_from(p).ok());
                let pid = pid.ok_or_else(|| {
                    fail("bad-request", "`pid` or `tid` (an integer) is required")
                })?;
                let tids: Vec<i32> = self
                    .threads
                    .values()
                    .filter(|m| m.tid == pid || m.orig.tgid == pid)
                    .map(|m| m.tid)
                    .collect();
                if tids.is_empty() {
                    return Err(fail(
                        "not-found",
                        format!("no managed thread or process {pid}"),
                    ));
                }
                for &t in &tids {
                    self.may_touch(peer, t)?;
                }
                for t in &tids {
                    self.release_thread(*t);
                }
                Ok(json!({"released": tids}))
            }
            "shutdown" => {
                Self::privileged(peer, op)?;
                self.stats.ended_by = "control shutdown".into();
                self.shutdown = true;
                Ok(json!({}))
            }
            other => Err(fail(
                "unknown-op",
                format!(
                    "unknown operation `{other}`; known: {}",
                    OPERATIONS.join(", ")
                ),
            )),
        };
        if let Err(e) = self.hsi.check_protocol() {
            self.protocol_error(e);
        }
        // A plug-in may fail in the request's own hooks: unload it now,
        // not at the next pump.
        self.unload_failed();
        r
    }

    fn apply(&mut self, now: hsched_core::Instant, op: &OpSpec) -> Result<Value, crate::LiveError> {
        let names = self.thread_names();
        hierarchy::apply_op(&mut self.hsi, now, op, &|n| names.get(n).copied())?;
        Ok(json!({}))
    }

    fn attach(&mut self, req: &Value, peer: &Peer) -> Result<Value, Fail> {
        let by_pid = req.get("pid").and_then(Value::as_i64);
        let by_tid = req.get("tid").and_then(Value::as_i64);
        let (id, whole) = match (by_pid, by_tid) {
            (Some(p), _) => (p, true),
            (None, Some(t)) => (t, false),
            _ => {
                return Err(fail(
                    "bad-request",
                    "`pid` or `tid` (an integer) is required",
                ))
            }
        };
        let id = i32::try_from(id)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| fail("bad-request", "bad pid"))?;
        if id == sys::getpid() || self.wd.as_ref().is_some_and(|w| w.pid() == id) {
            return Err(fail(
                "refused",
                "the daemon and its watchdog cannot be managed",
            ));
        }
        let tids = if whole {
            enforce::proc_threads(id).map_err(|_| fail("not-found", format!("no process {id}")))?
        } else {
            vec![id]
        };
        for &t in &tids {
            self.may_touch(peer, t)?;
        }
        if !peer.privileged {
            let held = self
                .threads
                .keys()
                .filter(|&&t| enforce::proc_uid(t) == Some(peer.uid))
                .count();
            if held + tids.len() > authz::MAX_USER_THREADS {
                return Err(fail(
                    "refused",
                    format!(
                        "uid {} would manage {} threads; an unprivileged user may have at most {}",
                        peer.uid,
                        held + tids.len(),
                        authz::MAX_USER_THREADS
                    ),
                ));
            }
        }
        let target = req.get("scheduler").and_then(Value::as_str);
        let params = params_from_json(req.get("params"))?;
        if !params.is_empty() || !self.is_default(target) {
            let shown = match target {
                Some(to) => format!("`attach` to `{to}`"),
                None => "`attach`".to_string(),
            };
            self.authorize(peer, &params, &shown, None)?;
        }
        let sched = match target {
            Some(s) => {
                hierarchy::instance(&self.hsi, s).map_err(|e| fail("not-found", e.to_string()))?
            }
            None => self
                .hsi
                .default_instance()
                .ok_or_else(|| fail("bad-request", "no default scheduler: give `scheduler`"))?,
        };
        let comm = std::fs::read_to_string(format!("/proc/{id}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| format!("pid{id}"));
        let base = match req.get("name") {
            None | Some(Value::Null) => {
                // A process's own name may be anyone's: unique by its pid
                // when taken.
                let comm: String = comm.chars().filter(|c| !c.is_control()).collect();
                if self.threads.values().any(|m| m.name == comm) {
                    format!("{comm}-{id}")
                } else {
                    comm
                }
            }
            Some(Value::String(n)) => {
                authz::check_name(n).map_err(|e| fail("bad-request", e))?;
                if self.threads.values().any(|m| &m.name == n) {
                    return Err(fail(
                        "refused",
                        format!(
                            "a managed thread is already named {n:?}; names are unique per daemon"
                        ),
                    ));
                }
                n.clone()
            }
            Some(_) => return Err(fail("bad-request", "`name` must be a string")),
        };
        let gi = self.groups.len();
        self.groups.push(crate::daemon::Group {
            name: base.clone(),
            pid: id,
            launched: false,
            exit_status: None,
            slot: None,
            spec: None,
            cpu_ns: None,
        });
        let mut attached = Vec::new();
        for (k, &t) in tids.iter().enumerate() {
            if self.threads.contains_key(&t) {
                continue;
            }
            let orig =
                Original::capture(t).map_err(|e| fail("not-found", format!("thread {t}: {e}")))?;
            if orig.attr.policy == libc::SCHED_DEADLINE as u32 {
                return Err(fail("refused", format!("thread {t} uses SCHED_DEADLINE; hsched does not take over deadline threads")));
            }
            let fds = self
                .obs
                .follow(t)
                .map_err(|e| fail("internal", format!("perf events on {t}: {e}")))?;
            let name = if k == 0 {
                base.clone()
            } else {
                format!("{base}/{t}")
            };
            let now = sys::now_ns();
            self.adopt(t, name, gi, orig, sched, params.clone(), false, now)
                .map_err(|e| fail("refused", e.to_string()))?;
            let runnable = enforce::proc_state(t) == Some('R');
            if let Some(m) = self.threads.get_mut(&t) {
                m.fds = fds;
                if runnable {
                    let h = m.hsi;
                    let at = hsched_core::Instant(now.saturating_sub(self.epoch));
                    let _ = self.hsi.wake(at, h);
                    self.touched.push(t);
                }
            }
            attached.push(t);
        }
        Ok(json!({"attached": attached}))
    }

    /// The live tree: instances with supply, threads with CPU.
    pub(crate) fn show(&mut self) -> Value {
        // Deadlines first: asking a policy needs the HSI mutably.
        let deadlines: BTreeMap<i32, Option<u64>> = self
            .threads
            .values()
            .map(|m| {
                let vp = self.hsi.thread_vp(m.hsi);
                (m.tid, self.hsi.vp_deadline(vp).map(|d| d.0))
            })
            .collect();
        let hsi = &self.hsi;
        let node_name = |n: hsched_core::Node| match n {
            hsched_core::Node::Top => "top".to_string(),
            hsched_core::Node::Instance(i) => hsi.instance_name(i).to_string(),
            hsched_core::Node::Thread(t) => hsi.thread_name(t).to_string(),
        };
        let state = |s: VpState| match s {
            VpState::Waiting => "waiting".to_string(),
            VpState::Ready => "ready".to_string(),
            VpState::Running(c) => format!("running(cpu{})", c.0),
        };
        let instances: Vec<Value> = hsi
            .instances()
            .map(|i| {
                let parents: Vec<Value> = hsi
                    .instance_parents(i)
                    .iter()
                    .map(|&vp| {
                        let v = hsi.vp_info(vp);
                        json!({"parent": node_name(v.parent), "state": state(v.state), "received_ns": v.received.as_nanos(), "params": params_to_json(&v.params)})
                    })
                    .collect();
                let p = hsi.instance_policy(i);
                json!({"name": hsi.instance_name(i), "policy": p.map_or("", |p| p.policy_name()), "describe": p.map(|p| p.describe()).unwrap_or_default(),
                    "supply_ns": hsi.instance_supply(i).as_nanos(), "parents": parents, "children": hsi.instance_children(i).len()})
            })
            .collect();
        let now = sys::now_ns();
        let threads: Vec<Value> = self
            .threads
            .values()
            .map(|m| {
                let v = hsi.vp_info(hsi.thread_vp(m.hsi));
                let cpu = match v.state {
                    VpState::Running(c) => json!(self.cpus.get(c.index())),
                    _ => Value::Null,
                };
                // A built-in workload counts its own jobs and misses.
                let probe = self.groups[m.group].slot.and_then(|i| self.slots.get(i));
                json!({"name": m.name, "tid": m.tid, "pid": m.orig.tgid, "scheduler": hsi.instance_name(hsi.thread_parent(m.hsi)),
                    "params": params_to_json(&v.params), "runnable": hsi.thread_runnable(m.hsi), "cpu": cpu, "frozen": m.frozen,
                    "received_ns": hsi.thread_received(m.hsi).as_nanos(), "cpu_ns": enforce::proc_cpu_ns(m.tid).unwrap_or(m.cpu_ns),
                    "deadline_ns": deadlines.get(&m.tid).copied().flatten(), "stolen_ns": m.stolen_ns,
                    "jobs": probe.map(|p| p.jobs.load(Ordering::Relaxed)), "deadline_misses": probe.map(|p| p.misses_at(now))})
            })
            .collect();
        let mut lat = self
            .stats
            .latency
            .iter()
            .rev()
            .take(10_000)
            .copied()
            .collect::<Vec<_>>();
        let d = crate::report::Dist::of(&mut lat);
        json!({
            "now_ns": now.saturating_sub(self.epoch),
            "cpus": self.cpus,
            "default": hsi.default_instance().map(|i| hsi.instance_name(i).to_string()),
            "instances": instances,
            "threads": threads,
            "stolen_ns": if self.stats.stolen_fed_ns.is_empty() { vec![0u64; self.cpus.len()] } else { self.stats.stolen_fed_ns.clone() },
            "stolen_source": self.opts.stolen.name(),
            "stats": {"wakes": self.stats.wakes, "blocks": self.stats.blocks, "freezes": self.stats.freezes, "thaws": self.stats.thaws,
                "lost_events": self.obs.lost, "protocol_errors": self.stats.protocol_errors, "daemon_cpu_ns": self.daemon_cpu_ns(), "pump_cpu_ns": self.stats.pump_cpu_ns,
                "notification_latency": {"median_ns": d.median_ns, "p99_ns": d.p99_ns, "count": d.count}},
        })
    }
}

/// The principal an unprivileged uid acts as when no `[[principal]]` has
/// its `uid`: a user of its own, named for the uid.
fn uid_principal(uid: u32) -> String {
    format!("uid {uid}")
}

fn request_json(r: &hsched_rm::Request) -> Value {
    json!({"id": r.id, "thread": r.thread, "principal": r.principal, "guarantee": r.guarantee.to_string(), "value": r.value})
}

fn received_json(g: &hsched_rm::Grant) -> Value {
    json!({"id": g.request.id, "thread": g.request.thread, "state": "granted", "scheduler": g.scheduler, "received": g.received.to_string()})
}

impl Daemon {
    /// The resource manager, made from the hierarchy file at the first
    /// request: its principals, `[rm]` rules and delegations, and the
    /// daemon's own limits as system rules (the minimum period and amount
    /// always; the per-user share of reservations unless the file caps
    /// every user itself).
    fn rm_live(&mut self) -> Result<&mut RmLive, Fail> {
        let limits = self.opts.control_limits;
        let h = &self.h;
        let Some(server) = self.server.as_mut() else {
            return Err(fail("refused", "the daemon has no control socket"));
        };
        if server.rm.is_none() {
            let mut manager = hsched_rm::from_config(h)
                .map_err(|e| fail("refused", format!("resource manager: {e}")))?;
            manager.add_rule_first(hsched_rm::RuleEntry::system(hsched_rm::rules::Minimum {
                period: limits.min_period,
                amount: limits.min_amount,
            }));
            let capped = h.rm.rules.iter().any(|r| {
                r.owner.is_none()
                    && matches!(
                        r.kind,
                        hsched_config::rm::RmRuleKind::Cap {
                            principal: None,
                            ..
                        }
                    )
            });
            if !capped {
                manager.add_rule(hsched_rm::RuleEntry::system(hsched_rm::rules::Cap {
                    principal: None,
                    max: limits.user_utilization / self.cpus.len().max(1) as f64,
                }));
            }
            server.rm = Some(RmLive {
                manager,
                reqs: BTreeMap::new(),
                ruled: std::collections::BTreeSet::new(),
                ruled_at: 0,
            });
        }
        server
            .rm
            .as_mut()
            .ok_or_else(|| fail("refused", "no resource manager"))
    }

    /// Who `peer` acts as: a privileged peer as the `principal` it names
    /// (the system by default), any other as the principal of its uid.
    fn rm_principal(&mut self, req: &Value, peer: &Peer) -> Result<String, Fail> {
        let named = match req.get("principal") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(fail("bad-request", "`principal` must be a string")),
        };
        let rm = self.rm_live()?;
        if peer.privileged {
            return Ok(named.unwrap_or_else(|| hsched_rm::SYSTEM.to_string()));
        }
        let own = match rm.manager.principal_of_uid(peer.uid) {
            Some(p) => p.name.clone(),
            None => {
                let name = uid_principal(peer.uid);
                if rm.manager.principal(&name).is_none() {
                    rm.manager
                        .add_principal(hsched_rm::Principal::user(&name, Some(peer.uid)))
                        .map_err(|e| fail(e.code, e.message))?;
                }
                name
            }
        };
        match named {
            Some(n) if n != own => Err(fail(
                "unauthorized",
                format!("uid {} acts as principal `{own}`, not `{n}`", peer.uid),
            )),
            _ => Ok(own),
        }
    }

    /// `request`: a guarantee for a managed thread of the peer's, through
    /// the resource manager (Regehr 2001, §8.3).
    fn rm_request(&mut self, req: &Value, peer: &Peer) -> Result<Value, Fail> {
        let (tid, _) = self.thread_ref(req, "thread")?;
        self.may_touch(peer, tid)?;
        let text = str_arg(req, "guarantee")?;
        let g: hsched_guarantee::Guarantee = text
            .parse()
            .map_err(|e| fail("bad-request", format!("guarantee {text:?}: {e}")))?;
        let value = match req.get("value") {
            None => 0.0,
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| fail("bad-request", "`value` must be a number"))?,
        };
        let scheduler = match req.get("scheduler") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(fail("bad-request", "`scheduler` must be a string")),
        };
        // Without rules of the administrator's ([rm] in the file), nothing
        // grants an unprivileged user more than Linux would.
        if !peer.privileged && !self.h.rm.enabled && authz::rtprio_limit(peer.pid) == 0 {
            return Err(fail(
                "unauthorized",
                format!("uid {}: RLIMIT_RTPRIO is 0 and the hierarchy file has no [rm] section whose rules could grant a reservation", peer.uid),
            ));
        }
        let principal = self.rm_principal(req, peer)?;
        let name = self
            .threads
            .get(&tid)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| tid.to_string());
        let mut new = hsched_rm::NewRequest::new(&principal, &name, g).value(value);
        new.scheduler = scheduler;
        let rm = self.rm_live()?;
        let (id, outcome, notices) = rm
            .manager
            .request(new)
            .map_err(|e| fail(e.code, e.message))?;
        if !matches!(outcome, hsched_rm::Outcome::Refused { .. }) {
            rm.reqs.insert(id, (tid, Some(peer.conn)));
        }
        let result = match outcome {
            hsched_rm::Outcome::Granted(grant) => match self.rm_put(&grant) {
                Ok(()) => Ok(received_json(&grant)),
                Err(why) => {
                    self.rm_drop(id);
                    Err(fail("refused", why))
                }
            },
            hsched_rm::Outcome::Pending { id, rule, reason } => Ok(
                json!({"id": id, "thread": name, "state": "pending", "rule": rule, "reason": reason}),
            ),
            hsched_rm::Outcome::Refused { rule, reason } => Err(fail(
                "refused",
                format!("refused by rule `{rule}`: {reason}"),
            )),
        };
        self.rm_notices(notices);
        result
    }

    /// `release`: ends a request (by `request` number or `thread`), as its
    /// principal or as the system (privileged peers).
    fn rm_release(&mut self, req: &Value, peer: &Peer) -> Result<Value, Fail> {
        let by = if peer.privileged {
            hsched_rm::SYSTEM.to_string()
        } else {
            self.rm_principal(&json!({}), peer)?
        };
        let id = match (req.get("request"), req.get("thread")) {
            (Some(v), _) => v
                .as_u64()
                .ok_or_else(|| fail("bad-request", "`request` must be a request number"))?,
            (None, Some(_)) => {
                let (tid, _) = self.thread_ref(req, "thread")?;
                let rm = self.rm_live()?;
                rm.reqs
                    .iter()
                    .find(|(_, (t, _))| *t == tid)
                    .map(|(id, _)| *id)
                    .ok_or_else(|| fail("not-found", format!("thread {tid} has no request")))?
            }
            (None, None) => {
                return Err(fail(
                    "bad-request",
                    "`request` (a number) or `thread` is required",
                ))
            }
        };
        let rm = self.rm_live()?;
        let was_granted = rm.manager.granted().iter().any(|g| g.request.id == id);
        let (ended, notices) = rm
            .manager
            .release(&by, id)
            .map_err(|e| fail(e.code, e.message))?;
        let tid = rm.reqs.remove(&id).map(|(t, _)| t);
        if was_granted {
            self.rm_take(tid);
        }
        self.rm_notices(notices);
        Ok(json!({"released": ended.id, "thread": ended.thread}))
    }

    /// `requests`: the granted and pending requests (a privileged peer's
    /// view is everyone's; any other peer sees its principal's).
    fn rm_list(&mut self, peer: &Peer) -> Result<Value, Fail> {
        let me = if peer.privileged {
            None
        } else {
            Some(self.rm_principal(&json!({}), peer)?)
        };
        let rm = self.rm_live()?;
        let mine = |p: &str| me.as_deref().is_none_or(|m| m == p);
        let granted: Vec<Value> = rm
            .manager
            .granted()
            .iter()
            .filter(|g| mine(&g.request.principal))
            .map(|g| {
                let mut v = request_json(&g.request);
                v["scheduler"] = json!(g.scheduler);
                v["received"] = json!(g.received.to_string());
                v
            })
            .collect();
        let pending: Vec<Value> = rm
            .manager
            .pending()
            .iter()
            .filter(|r| mine(&r.principal))
            .map(request_json)
            .collect();
        Ok(json!({"granted": granted, "pending": pending}))
    }

    /// Puts a grant in force: the thread begins its reservation at the
    /// scheduler the manager chose. `Err` says why the HSI refused.
    fn rm_put(&mut self, g: &hsched_rm::Grant) -> Result<(), String> {
        let tid = self
            .server
            .as_ref()
            .and_then(|s| s.rm.as_ref())
            .and_then(|rm| rm.reqs.get(&g.request.id))
            .map(|(t, _)| *t);
        let Some(t) = tid.and_then(|t| self.threads.get(&t)).map(|m| m.hsi) else {
            return Err(format!(
                "thread `{}` is no longer managed",
                g.request.thread
            ));
        };
        let to = hierarchy::instance(&self.hsi, &g.scheduler).map_err(|e| e.to_string())?;
        let now = self.inst(sys::now_ns());
        self.hsi
            .begin_reservation(now, t, to, g.params())
            .map_err(|e| format!("scheduler `{}` refused: {e}", g.scheduler))
    }

    /// Ends the reservation a grant put in force, if its thread is still
    /// managed.
    fn rm_take(&mut self, tid: Option<i32>) {
        let Some(t) = tid.and_then(|t| self.threads.get(&t)).map(|m| m.hsi) else {
            return;
        };
        let now = self.inst(sys::now_ns());
        let _ = self.hsi.end_reservation(now, t);
    }

    /// Forgets request `id` in the manager (its grant could not be put in
    /// force), applying what that frees.
    fn rm_drop(&mut self, id: hsched_rm::RequestId) {
        let Ok(rm) = self.rm_live() else { return };
        rm.reqs.remove(&id);
        if let Ok((_, n)) = rm.manager.release(hsched_rm::SYSTEM, id) {
            self.rm_notices(n);
        }
    }

    /// Applies the manager's notices and sends each to the connection
    /// that made the request, as an event line (docs/live-mode.md,
    /// "Requests").
    fn rm_notices(&mut self, notices: Vec<hsched_rm::Notice>) {
        let mut queue: std::collections::VecDeque<hsched_rm::Notice> = notices.into();
        // Each grant that fails to apply ends a request, so this ends.
        while let Some(n) = queue.pop_front() {
            let (id, event) = match &n {
                hsched_rm::Notice::Granted(g) => match self.rm_put(g) {
                    Ok(()) => (g.request.id, {
                        let mut v = received_json(g);
                        v["event"] = json!("granted");
                        v
                    }),
                    Err(why) => {
                        let id = g.request.id;
                        let conn = self.rm_conn(id);
                        if let Ok(rm) = self.rm_live() {
                            rm.reqs.remove(&id);
                            if let Ok((_, more)) = rm.manager.release(hsched_rm::SYSTEM, id) {
                                queue.extend(more);
                            }
                        }
                        let v = json!({"event": "refused", "id": id, "thread": g.request.thread, "rule": "scheduler", "reason": why});
                        self.rm_send(conn, &v);
                        continue;
                    }
                },
                hsched_rm::Notice::Revoked {
                    request,
                    rule,
                    reason,
                } => {
                    let tid = self.rm_tid(request.id);
                    self.rm_take(tid);
                    (
                        request.id,
                        json!({"event": "revoked", "id": request.id, "thread": request.thread, "rule": rule, "reason": reason}),
                    )
                }
                hsched_rm::Notice::Refused {
                    request,
                    rule,
                    reason,
                } => (
                    request.id,
                    json!({"event": "refused", "id": request.id, "thread": request.thread, "rule": rule, "reason": reason}),
                ),
            };
            let conn = self.rm_conn(id);
            if !matches!(n, hsched_rm::Notice::Granted(_)) {
                if let Some(rm) = self.server.as_mut().and_then(|s| s.rm.as_mut()) {
                    rm.reqs.remove(&id);
                }
            }
            self.rm_send(conn, &event);
        }
    }

    fn rm_conn(&self, id: hsched_rm::RequestId) -> Option<u64> {
        self.server
            .as_ref()
            .and_then(|s| s.rm.as_ref())
            .and_then(|rm| rm.reqs.get(&id))
            .and_then(|(_, c)| *c)
    }

    fn rm_tid(&self, id: hsched_rm::RequestId) -> Option<i32> {
        self.server
            .as_ref()
            .and_then(|s| s.rm.as_ref())
            .and_then(|rm| rm.reqs.get(&id))
            .map(|(t, _)| *t)
    }

    fn rm_send(&mut self, conn: Option<u64>, event: &Value) {
        let Some(id) = conn else { return };
        let mut v = event.clone();
        v["v"] = json!(PROTOCOL_VERSION);
        if let Some(c) = self.conns.get_mut(&id) {
            c.outbuf.extend_from_slice(v.to_string().as_bytes());
            c.outbuf.push(b'\n');
            self.flush_conn(id, false);
        }
    }

    /// Requests on behalf of unmodified programs (Regehr 2001, §8.5.2): a
    /// thread a managed program created that a `[[rule]]` with a
    /// `guarantee` matches gets a request, as the principal of the uid
    /// that runs it, at the rule's scheduler. Runs at timer wake-ups, at
    /// most every [`RULE_SCAN_NS`] for threads no rule matched yet.
    fn rm_rules(&mut self) {
        if self.server.is_none() || !self.h.rules.iter().any(|r| r.guarantee.is_some()) {
            return;
        }
        let now = sys::now_ns();
        let Ok(rm) = self.rm_live() else { return };
        if now.saturating_sub(rm.ruled_at) < RULE_SCAN_NS {
            return;
        }
        rm.ruled_at = now;
        let ruled = rm.ruled.clone();
        let fresh: Vec<(i32, i32, String)> = self
            .threads
            .values()
            .filter(|m| m.by_rules && !ruled.contains(&m.tid))
            .map(|m| (m.tid, m.orig.tgid, m.name.clone()))
            .collect();
        for (tid, tgid, name) in fresh {
            let (Some(thread), Some(program)) = (enforce::proc_comm(tid), enforce::proc_comm(tgid))
            else {
                continue;
            };
            let Some((i, rule)) = (self.h.rules.iter().enumerate())
                .find(|(_, r)| r.matches(&thread, &program))
                .map(|(i, r)| (i, r.clone()))
            else {
                continue;
            };
            if let Ok(rm) = self.rm_live() {
                rm.ruled.insert(tid);
            }
            let Some(text) = rule.guarantee else { continue };
            let Ok(g) = text.parse::<hsched_guarantee::Guarantee>() else {
                continue;
            };
            let uid = enforce::proc_uid(tid).unwrap_or(0);
            let principal = if uid == 0 {
                hsched_rm::SYSTEM.to_string()
            } else {
                let peer = Peer {
                    pid: tgid,
                    uid,
                    gid: uid,
                    privileged: false,
                    conn: u64::MAX,
                };
                match self.rm_principal(&json!({}), &peer) {
                    Ok(p) => p,
                    Err(_) => continue,
                }
            };
            let new = hsched_rm::NewRequest::new(&principal, &name, g).at(&rule.scheduler);
            let Ok(rm) = self.rm_live() else { return };
            let decided = rm.manager.request(new);
            let (id, outcome, notices) = match decided {
                Ok(d) => d,
                Err(e) => {
                    self.warn(
                        &format!("rule-request-{tid}"),
                        format!("rule #{} could not ask for `{name}`: {e}", i + 1),
                    );
                    continue;
                }
            };
            match outcome {
                hsched_rm::Outcome::Granted(grant) => {
                    if let Ok(rm) = self.rm_live() {
                        rm.reqs.insert(id, (tid, None));
                    }
                    if let Err(why) = self.rm_put(&grant) {
                        self.rm_drop(id);
                        self.warn(
                            &format!("rule-request-{tid}"),
                            format!("rule #{} for `{name}`: {why}", i + 1),
                        );
                    }
                }
                hsched_rm::Outcome::Pending { .. } => {
                    if let Ok(rm) = self.rm_live() {
                        rm.reqs.insert(id, (tid, None));
                    }
                }
                hsched_rm::Outcome::Refused { rule: by, reason } => self.warn(
                    &format!("rule-request-{tid}"),
                    format!(
                        "rule #{}: the request for `{name}` was refused by rule `{by}`: {reason}",
                        i + 1
                    ),
                ),
            }
            self.rm_notices(notices);
        }
    }

    /// Ends the requests of threads that are no longer managed (§8.2: a
    /// request lasts until it is cancelled or its thread exits), granting
    /// what that frees. Runs at every timer wake-up.
    fn rm_sync(&mut self) {
        self.rm_rules();
        let Some(rm) = self.server.as_ref().and_then(|s| s.rm.as_ref()) else {
            return;
        };
        let gone: Vec<hsched_rm::RequestId> = rm
            .reqs
            .iter()
            .filter(|(_, (t, _))| !self.threads.contains_key(t))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            let Ok(rm) = self.rm_live() else { return };
            rm.reqs.remove(&id);
            if let Ok((_, n)) = rm.manager.release(hsched_rm::SYSTEM, id) {
                self.rm_notices(n);
            }
        }
    }
}

/// Parses a request line, refusing an object with a key twice: a JSON
/// parser keeps one of them silently, and a request must mean one thing.
///
/// # Errors
/// Not JSON, or a duplicated key, in words.
pub fn parse_request(line: &[u8]) -> Result<Value, String> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(line);
    let v = Strict
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| format!("not JSON: {e}"))?;
    Ok(v)
}

/// A JSON value, built by a visitor that refuses duplicate keys.
struct Strict;

impl<'de> serde::de::DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::from(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::from(u))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Value::from(f))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(Strict)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element_seed(Strict)? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(serde::de::Error::custom(format!(
                    "the key {k:?} appears twice"
                )));
            }
            let v = map.next_value_seed(Strict)?;
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_socket_is_replaced_and_any_other_file_kept() {
        let dir = std::env::temp_dir().join(format!("hsched-bind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("not-a-socket");
        std::fs::write(&file, "keep me").unwrap();
        let e = Server::bind(&file, None)
            .err()
            .expect("a regular file is refused");
        assert!(e.to_string().contains("is not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
        let sock = dir.join("s.sock");
        drop(UnixListener::bind(&sock).unwrap());
        let s = Server::bind(&sock, None).expect("a stale socket is replaced");
        assert!(Server::bind(&sock, None).is_err(), "a live one is not");
        s.remove();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_request_with_a_key_twice_is_refused() {
        let e = parse_request(br#"{"op":"show","op":"shutdown"}"#).unwrap_err();
        assert!(e.contains("\"op\" appears twice"), "{e}");
        // Also inside nested objects, and spelled with an escape.
        assert!(parse_request(br#"{"op":"move","params":{"a":1,"a":2}}"#).is_err());
        assert!(parse_request(br#"{"v":1,"\u0076":1}"#).is_err());
        let v = parse_request(br#"{"v":1,"op":"show","x":[1,2.5,null,true,{"y":"z"}]}"#).unwrap();
        assert_eq!(v["x"][4]["y"], "z");
        assert!(parse_request(b"{} {}").is_err(), "one value per line");
    }
}
