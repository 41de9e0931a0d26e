//! The resource manager live (Regehr 2001, ch. 8): a root daemon with a
//! control socket, two system users made for the test, each capped at
//! 30 % of reservations; their applications ask for reservations through
//! `request` in turn, some wait, and are granted (with an event line on
//! the asking connection) as others exit or release. Needs root; skips
//! without. Run under `flock /tmp/hsched-live.lock`.

mod support;
use hsched_linux::ctl::Client;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support::{bin, coop_staticlib, TestUser};

static SERIAL: Mutex<()> = Mutex::new(());

struct LiveGuard {
    _cpus: hsched_linux::cpulock::CpuLocks,
    _serial: std::sync::MutexGuard<'static, ()>,
}

fn live() -> Option<LiveGuard> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = hsched_linux::check_support() {
        eprintln!("SKIPPED: {e}");
        return None;
    }
    if Command::new("python3").arg("-c").arg("1").status().is_err() {
        eprintln!("SKIPPED: python3 is needed to connect as the test users");
        return None;
    }
    let cpus = hsched_linux::sys::online_cpus();
    let l = hsched_linux::cpulock::CpuLocks::acquire_wait(
        &cpus,
        hsched_linux::cpulock::Sharing::WithChildren,
        Duration::from_secs(120),
    )
    .unwrap_or_else(|e| panic!("the live tests need CPUs {cpus:?} to themselves: {e}"));
    Some(LiveGuard {
        _cpus: l,
        _serial: g,
    })
}

fn test_cpu() -> usize {
    *hsched_linux::sys::online_cpus().last().unwrap()
}

/// One connection to the socket held by a process of the user's: lines
/// written go to the daemon, every line the daemon sends comes back.
struct Conn {
    child: Child,
    to: ChildStdin,
    from: Receiver<String>,
    events: Vec<Value>,
    next_id: u64,
}

const RELAY: &str = "import socket,sys,threading\n\
s=socket.socket(socket.AF_UNIX)\n\
s.connect(sys.argv[1])\n\
def rd():\n  f=s.makefile('r')\n  for l in f:\n    print(l.strip(),flush=True)\n\
threading.Thread(target=rd,daemon=True).start()\n\
for l in sys.stdin:\n  s.sendall(l.encode())\n";

impl Conn {
    fn open(user: &TestUser, sock: &Path) -> Conn {
        let mut child = user
            .command("python3")
            .args(["-c", RELAY])
            .arg(sock)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, from) = channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Conn {
            child,
            to,
            from,
            events: Vec::new(),
            next_id: 1,
        }
    }

    fn line(&mut self, wait: Duration) -> Option<Value> {
        let l = self.from.recv_timeout(wait).ok()?;
        Some(serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l}: {e}")))
    }

    /// Sends `op` with `args`; the response (events read on the way are
    /// kept for [`Conn::event`]).
    fn call(&mut self, op: &str, args: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut req = json!({"v": 1, "id": id, "op": op});
        for (k, v) in args.as_object().unwrap() {
            req[k] = v.clone();
        }
        writeln!(self.to, "{req}").unwrap();
        loop {
            let v = self
                .line(Duration::from_secs(5))
                .unwrap_or_else(|| panic!("no response to {req}"));
            if v.get("event").is_some() {
                self.events.push(v);
                continue;
            }
            assert_eq!(v["id"], id, "{v}");
            return v;
        }
    }

    /// The next event line, waiting at most `wait`.
    fn event(&mut self, wait: Duration) -> Option<Value> {
        if !self.events.is_empty() {
            return Some(self.events.remove(0));
        }
        let v = self.line(wait)?;
        assert!(v.get("event").is_some(), "not an event: {v}");
        Some(v)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsched-rm-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn start_daemon(file: &Path, sock: &Path) -> Child {
    let _ = std::fs::remove_file(sock);
    let child = Command::new(bin())
        .arg("run")
        .arg(file)
        .args(["--cpus", &test_cpu().to_string(), "--socket"])
        .arg(sock)
        .args(["--duration", "60s"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while Client::connect(sock).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no daemon socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn ok(v: &Value) -> &Value {
    assert_eq!(v["ok"], true, "{v}");
    &v["result"]
}

fn refused<'a>(v: &'a Value, code: &str) -> &'a str {
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    v["error"]["message"].as_str().unwrap()
}

fn scheduler_of(root: &mut Client, thread: &str) -> String {
    let tree = root.request("show", json!({})).unwrap();
    tree["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == thread)
        .map(|t| t["scheduler"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no thread {thread} in {tree}"))
}

fn scenario_file(alice: u32, bob: u32) -> String {
    format!(
        r#"
default = "ts"
[machine]
cpus = 1
[[principal]]
name = "alice"
uid = {alice}
[[principal]]
name = "bob"
uid = {bob}
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = {{ priority = 2 }}
cap = 0.45
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = {{ priority = 1 }}
[[thread]]
name = "tick"
scheduler = "ts"
workload = {{ kind = "periodic", period = "100ms", exec = "1ms" }}
[rm]
[[rm.rule]]
rule = "cap"
max = 0.3
"#
    )
}

#[test]
fn two_capped_users_get_reservations_in_turn_through_the_resource_manager() {
    let Some(_g) = live() else { return };
    let (Some(alice), Some(bob)) = (TestUser::create("rma"), TestUser::create("rmb")) else {
        return;
    };
    let f = write_file("rm.toml", &scenario_file(alice.uid, bob.uid));
    let sock = std::env::temp_dir().join(format!("hsched-rm-{}.sock", std::process::id()));
    let mut daemon = start_daemon(&f, &sock);
    let mut root = Client::connect(&sock).unwrap();
    let mut a = Conn::open(&alice, &sock);
    let mut b = Conn::open(&bob, &sock);

    // Each application, attached by its own user under its name.
    let mut hogs = Vec::new();
    for (whose, name) in [(0, "a1"), (0, "a2"), (0, "a3"), (1, "b1"), (1, "b2")] {
        let (user, conn) = if whose == 0 {
            (&alice, &mut a)
        } else {
            (&bob, &mut b)
        };
        let h = user.hog();
        ok(&conn.call("attach", json!({"pid": h.id(), "name": name})));
        hogs.push((name, h));
    }

    let ask =
        |c: &mut Conn, t: &str, g: &str| c.call("request", json!({"thread": t, "guarantee": g}));

    // Unprivileged users change the hierarchy only through requests.
    let e = refused(
        &b.call(
            "begin-reservation",
            json!({"thread": "b1", "scheduler": "rez", "params": {"amount": "1ms", "period": "10ms"}}),
        ),
        "unauthorized",
    )
    .to_string();
    assert!(e.contains("ask with `request`"), "{e}");
    // And only for their own threads.
    let e = refused(
        &b.call(
            "request",
            json!({"thread": "a1", "guarantee": "RESBS 1ms 10ms"}),
        ),
        "unauthorized",
    )
    .to_string();
    assert!(e.contains("not yours"), "{e}");
    // Malformed requests: an error code, nothing kept.
    refused(&ask(&mut a, "a1", "RESBS 1ms"), "bad-request");
    let e = refused(&ask(&mut a, "a1", "RESBS 1us 2us"), "refused").to_string();
    assert!(e.contains("minimum period"), "{e}");

    // 1. a1 (alice 20 %): granted at rez, and in force when the reply comes.
    let r = ok(&ask(&mut a, "a1", "RESBS 2ms 10ms")).clone();
    assert_eq!(
        (r["state"].as_str(), r["scheduler"].as_str()),
        (Some("granted"), Some("rez")),
        "{r}"
    );
    assert_eq!(scheduler_of(&mut root, "a1"), "rez");
    // 2. b1 (bob 30 %): rez admits 45 % and holds 20 %: pending.
    let r = ok(&ask(&mut b, "b1", "RESBS 3ms 10ms")).clone();
    assert_eq!(r["state"], "pending", "{r}");
    assert_eq!(r["rule"], "admission", "{r}");
    let b1 = r["id"].as_u64().unwrap();
    // 3. a2 (alice 20 % more): alice's cap: pending.
    let r = ok(&ask(&mut a, "a2", "RESBS 2ms 10ms")).clone();
    assert_eq!(
        (r["state"].as_str(), r["rule"].as_str()),
        (Some("pending"), Some("cap 30% per user")),
        "{r}"
    );
    // 4. a3 (alice 40 %): more than her cap at all: refused, naming it.
    let e = refused(&ask(&mut a, "a3", "RESBS 4ms 10ms"), "refused").to_string();
    assert!(e.contains("cap 30% per user"), "{e}");
    assert_eq!(scheduler_of(&mut root, "a3"), "ts");
    // Bob cannot end alice's request.
    let a1_id = root.request("requests", json!({})).unwrap()["granted"][0]["id"]
        .as_u64()
        .unwrap();
    refused(
        &b.call("release", json!({"request": a1_id})),
        "unauthorized",
    );

    // 5. a1 exits: its request ends; b1 is granted and bob is told.
    let (_, mut h) = hogs.remove(0);
    let _ = h.kill();
    let _ = h.wait();
    let ev = b
        .event(Duration::from_secs(5))
        .expect("bob is told of b1's grant");
    assert_eq!(
        (ev["event"].as_str(), ev["id"].as_u64()),
        (Some("granted"), Some(b1)),
        "{ev}"
    );
    assert_eq!(scheduler_of(&mut root, "b1"), "rez");
    // a2 still waits (rez: 30 % + 20 % > 45 %); alice hears nothing yet.
    assert!(a.event(Duration::from_millis(300)).is_none());
    // 6. bob releases b1: a2 is granted and alice is told.
    ok(&b.call("release", json!({"thread": "b1"})));
    assert_eq!(scheduler_of(&mut root, "b1"), "ts");
    let ev = a
        .event(Duration::from_secs(5))
        .expect("alice is told of a2's grant");
    assert_eq!(
        (ev["event"].as_str(), ev["thread"].as_str()),
        (Some("granted"), Some("a2")),
        "{ev}"
    );
    assert_eq!(scheduler_of(&mut root, "a2"), "rez");
    // 7. b2 (bob 10 %): granted at once.
    let r = ok(&ask(&mut b, "b2", "RESBS 1ms 10ms")).clone();
    assert_eq!(r["state"], "granted", "{r}");

    // Each user sees its own requests; root sees all.
    let mine = ok(&a.call("requests", json!({}))).clone();
    assert_eq!(mine["granted"].as_array().unwrap().len(), 1, "{mine}");
    let all = root.request("requests", json!({})).unwrap();
    let held: Vec<&str> = all["granted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["thread"].as_str().unwrap())
        .collect();
    assert_eq!(held, ["a2", "b2"], "{all}");

    root.request("shutdown", json!({})).unwrap();
    let t0 = Instant::now();
    while daemon.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = daemon.kill();
            panic!("the daemon did not shut down");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for (_, mut h) in hogs {
        let _ = h.kill();
        let _ = h.wait();
    }
    let _ = std::fs::remove_file(&sock);
}

/// §8.5.2: a `[[rule]]` with a guarantee asks on behalf of a program that
/// knows nothing of hsched: the thread a managed shell starts for it is
/// granted a reservation at the rule's scheduler.
#[test]
fn a_rule_asks_for_an_unmodified_program() {
    let Some(_g) = live() else { return };
    let dir = std::env::temp_dir().join(format!("hsched-rm-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A program named for the rule: a copy of sleep(1).
    let prog = dir.join("hsched-rm-aud");
    std::fs::copy("/bin/sleep", &prog).unwrap();
    let f = write_file(
        "rule.toml",
        &format!(
            r#"
default = "ts"
[[scheduler]]
name = "fp"
policy = "fp"
[[scheduler]]
name = "rez"
policy = "rez"
parent = "fp"
params = {{ priority = 2 }}
[[scheduler]]
name = "ts"
policy = "ts"
parent = "fp"
params = {{ priority = 1 }}
[[rule]]
program = "hsched-rm-aud"
scheduler = "rez"
guarantee = "RESBS 1ms 10ms"
[[thread]]
name = "launcher"
scheduler = "ts"
exec = ["sh", "-c", "{} 30 & wait"]
[rm]
"#,
            prog.display()
        ),
    );
    let sock = std::env::temp_dir().join(format!("hsched-rm-rule-{}.sock", std::process::id()));
    let mut daemon = start_daemon(&f, &sock);
    let mut root = Client::connect(&sock).unwrap();
    let t0 = Instant::now();
    let granted = loop {
        let r = root.request("requests", json!({})).unwrap();
        if let Some(g) = r["granted"].as_array().and_then(|a| a.first()).cloned() {
            break g;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "no request was made for the program: {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(granted["principal"], "system", "{granted}");
    assert_eq!(granted["scheduler"], "rez", "{granted}");
    let thread = granted["thread"].as_str().unwrap().to_string();
    assert_eq!(scheduler_of(&mut root, &thread), "rez");
    // The launcher itself matches no rule and stays where it was.
    assert_eq!(scheduler_of(&mut root, "launcher"), "ts");
    root.request("shutdown", json!({})).unwrap();
    let t0 = Instant::now();
    while daemon.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = daemon.kill();
            panic!("the daemon did not shut down");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("pkill")
        .args(["-KILL", "-x", "hsched-rm-aud"])
        .status();
    let _ = std::fs::remove_file(&sock);
}

/// The C library's request API: an ordinary user's C program asks for a
/// reservation for its own thread (attaching itself), gets it in force,
/// and releases it.
#[test]
fn a_c_program_asks_for_its_own_reservation_without_root() {
    let Some(_g) = live() else { return };
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no C compiler (cc)");
        return;
    }
    let Some(lib) = coop_staticlib() else {
        panic!("building libhsched_coop.a failed");
    };
    let Some(user) = TestUser::create("rmc") else {
        return;
    };
    let coop = Path::new(env!("CARGO_MANIFEST_DIR")).join("../coop");
    let dir = std::env::temp_dir().join(format!("hsched-rm-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("rm_request_c");
    let status = Command::new("cc")
        .args([
            "-std=c99",
            "-D_DEFAULT_SOURCE",
            "-Wall",
            "-Werror",
            "-O1",
            "-I",
        ])
        .arg(coop.join("include"))
        .arg(coop.join("tests/c/request.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .status()
        .expect("cc runs");
    assert!(status.success(), "compiling request.c failed");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = write_file("c.toml", &scenario_file(user.uid, user.uid + 1));
    let sock = std::env::temp_dir().join(format!("hsched-rm-c-{}.sock", std::process::id()));
    let mut daemon = start_daemon(&f, &sock);
    let mut root = Client::connect(&sock).unwrap();
    let mut prog = user
        .command(exe.to_str().unwrap())
        .arg(&sock)
        .arg("RESBS 2ms 10ms")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = prog.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let first = lines.next().expect("a line").unwrap();
    assert!(first.ends_with("state 1"), "{first}");
    // In force: the program's thread is under rez, as the user's principal.
    let all = root.request("requests", json!({})).unwrap();
    let g = &all["granted"][0];
    assert_eq!(g["principal"], "alice", "{all}");
    let thread = g["thread"].as_str().unwrap().to_string();
    assert_eq!(scheduler_of(&mut root, &thread), "rez");
    let last = lines.next().expect("a line").unwrap();
    assert_eq!(last, "released 0");
    assert!(prog.wait().unwrap().success());
    let all = root.request("requests", json!({})).unwrap();
    assert_eq!(all["granted"].as_array().map(Vec::len), Some(0), "{all}");
    root.request("shutdown", json!({})).unwrap();
    let t0 = Instant::now();
    while daemon.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = daemon.kill();
            panic!("the daemon did not shut down");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(&sock);
}
