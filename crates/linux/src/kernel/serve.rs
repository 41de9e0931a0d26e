//! The kernel backend's side of the control socket: the same JSON-lines
//! protocol, peers and limits as the user backend's ([`crate::control`]),
//! carried over `poll` beside the kernel run's signal descriptor instead of
//! the user daemon's epoll. This module only moves lines; what a request
//! does is [`super::ops`].

use crate::authz;
use crate::control::{self, Peer, Server, MAX_CLIENTS, MAX_LINE, PROTOCOL_VERSION};
use crate::sys;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

/// A client idle this long is cut off, as under the user backend.
const IDLE_NS: u64 = 60_000_000_000;
/// A partial line held this long is cut off.
const PARTIAL_NS: u64 = 5_000_000_000;
/// Replies a client does not read, queued at most.
const MAX_OUT: usize = 4 << 20;

struct Conn {
    stream: UnixStream,
    peer: Peer,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    last_active: u64,
    partial_since: Option<u64>,
}

/// The listening socket and its connections.
pub struct Clients {
    server: Server,
    group: Option<u32>,
    conns: BTreeMap<u64, Conn>,
    next_id: u64,
}

/// One request line of one client, parsed or with what is wrong with it.
pub struct Line {
    /// The connection.
    pub conn: u64,
    /// Who sent it.
    pub peer: Peer,
    /// The request object, or why the line is not one.
    pub request: Result<Value, String>,
}

impl Clients {
    /// Serves `server`; members of `group` are privileged.
    pub fn new(server: Server, group: Option<u32>) -> Clients {
        Clients {
            server,
            group,
            conns: BTreeMap::new(),
            next_id: 0,
        }
    }

    /// The descriptors to poll: the listener, then every connection.
    pub fn fds(&self) -> Vec<RawFd> {
        let mut v = vec![self.server.fd()];
        v.extend(self.conns.values().map(|c| c.stream.as_raw_fd()));
        v
    }

    /// Accepts waiting clients and reads every connection; returns the
    /// complete request lines, in order per connection.
    pub fn read(&mut self) -> Vec<Line> {
        self.accept();
        let now = sys::now_ns();
        let mut lines = Vec::new();
        let mut dead = Vec::new();
        for (&id, c) in self.conns.iter_mut() {
            let mut buf = [0u8; 16384];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        dead.push(id);
                        break;
                    }
                    Ok(n) => {
                        c.inbuf.extend_from_slice(&buf[..n]);
                        c.last_active = now;
                        while let Some(pos) = c.inbuf.iter().position(|&b| b == b'\n') {
                            let line: Vec<u8> = c.inbuf.drain(..=pos).collect();
                            lines.push(Line {
                                conn: id,
                                peer: c.peer.clone(),
                                request: control::parse_request(&line),
                            });
                        }
                        if c.inbuf.len() > MAX_LINE {
                            let e = json!({"v": PROTOCOL_VERSION, "id": null, "ok": false, "error": {"code": "too-large", "message": format!("a request line may be at most {MAX_LINE} bytes")}});
                            c.outbuf.extend_from_slice(format!("{e}\n").as_bytes());
                            let _ = c.stream.write(&c.outbuf);
                            dead.push(id);
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        dead.push(id);
                        break;
                    }
                }
            }
            c.partial_since = if c.inbuf.is_empty() {
                None
            } else {
                c.partial_since.or(Some(now))
            };
        }
        // Lines read before a hang-up are still answered (and the answer
        // dropped): a request must not half-happen.
        for id in dead {
            self.conns.remove(&id);
        }
        lines
    }

    /// Queues `line` for connection `conn` and writes what it can.
    pub fn reply(&mut self, conn: u64, line: &str) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.outbuf.extend_from_slice(line.as_bytes());
            c.outbuf.push(b'\n');
        }
        self.flush(conn);
    }

    fn flush(&mut self, conn: u64) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let mut dead = c.outbuf.len() > MAX_OUT;
        while !dead && !c.outbuf.is_empty() {
            match c.stream.write(&c.outbuf) {
                Ok(0) => dead = true,
                Ok(n) => {
                    c.outbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => dead = true,
            }
        }
        if dead {
            self.conns.remove(&conn);
        }
    }

    /// Cuts off idle clients and those holding a partial line; writes what
    /// is queued. Called at every wake-up.
    pub fn expire(&mut self) {
        let now = sys::now_ns();
        self.conns.retain(|_, c| {
            now.saturating_sub(c.last_active) <= IDLE_NS
                && c.partial_since
                    .is_none_or(|p| now.saturating_sub(p) <= PARTIAL_NS)
        });
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.flush(id);
        }
    }

    /// Removes the socket file.
    pub fn close(self) {
        self.server.remove();
    }

    /// Takes the waiting connections, within the user backend's limits
    /// (root always gets in).
    fn accept(&mut self) {
        while let Some(stream) = self.server.accept() {
            let Ok((pid, uid, gid)) = sys::peer_cred(stream.as_raw_fd()) else {
                continue;
            };
            let others = self.conns.values().filter(|c| c.peer.uid != 0).count();
            let same = self.conns.values().filter(|c| c.peer.uid == uid).count();
            let busy = if uid == 0 {
                (self.conns.len() >= MAX_CLIENTS + authz::ROOT_RESERVED_CONNECTIONS)
                    .then(|| "too many clients".to_string())
            } else if others >= MAX_CLIENTS {
                Some("too many clients".to_string())
            } else if same >= authz::MAX_USER_CONNECTIONS {
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
            let privileged = uid == 0 || self.group.is_some_and(|g| control::in_group(pid, gid, g));
            let id = self.next_id;
            self.next_id += 1;
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
}
