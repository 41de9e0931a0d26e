//! The live measurements of docs/measurements/live-mode.md, one command each:
//!
//! ```text
//! hsched-live bench frames     [--duration 3s] [--only RESBS]  Table 10.5 live
//! hsched-live bench isolation  [--duration 2s]   Table 10.4 live
//! hsched-live bench switch     [--duration 2s]   Table 10.2 / Fig 10.3 live
//! hsched-live bench ctl        [--reps 200]      Table 10.1 live
//! hsched-live bench overhead   [--duration 5s]   notification latency, daemon CPU
//! hsched-live bench mechanisms [--switches 1000] stop/freeze/FIFO switch cost
//! ```
//!
//! Every run manages only the last online CPU and is bounded by its
//! duration; everything is restored after each run. The bench holds every
//! CPU's lock ([`crate::cpulock`]) throughout, so no other daemon shares the
//! machine with a measurement (exit status 3 when one manages a CPU).

use crate::{run, RunOptions};
use hsched_core::Duration;
use std::fmt::Write as _;

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn secs(args: &[String], default: f64) -> f64 {
    flag(args, "--duration")
        .and_then(|d| hsched_core::time::parse_duration(&d, None).ok())
        .map_or(default, |d| d.as_nanos() as f64 / 1e9)
}

fn last_cpu() -> usize {
    *crate::sys::online_cpus().last().unwrap_or(&0)
}

fn run_text(
    text: &str,
    secs: f64,
    command: Option<Vec<String>>,
    enforce: crate::kernel::Enforce,
) -> Result<crate::Report, String> {
    let h = hsched_config::parse_str(text, "bench.toml").map_err(|e| e.to_string())?;
    let opts = RunOptions {
        cpus: Some(vec![last_cpu()]),
        duration: Some(Duration::from_millis_f64(secs * 1e3)),
        command,
        enforce,
        ..RunOptions::default()
    };
    run(&h, opts).map_err(|e| e.to_string())
}

/// `--enforce user|kernel|auto` of `bench switch` and `bench overhead`.
fn enforce_of(args: &[String]) -> Result<crate::kernel::Enforce, String> {
    flag(args, "--enforce").map_or(Ok(crate::kernel::Enforce::User), |v| v.parse())
}

fn enforce_name(e: crate::kernel::Enforce) -> &'static str {
    match e {
        crate::kernel::Enforce::User => "user",
        crate::kernel::Enforce::Kernel => "kernel",
        crate::kernel::Enforce::Auto => "auto",
    }
}

fn hogs(n: usize, sched: &str, principal: Option<&str>) -> String {
    let mut s = String::new();
    for i in 0..n {
        let p = principal.map_or(String::new(), |p| format!("principal = \"{p}\"\n"));
        let _ = write!(s, "[[thread]]\nname = \"hog{i}\"\nscheduler = \"{sched}\"\n{p}workload = {{ kind = \"cpu-bound\" }}\n");
    }
    s
}

/// Regehr 2001, Table 10.5: the frame renderer under RESBH 10 33, RESBS 10 33
/// and no reservation, with 0, 1 and 10 CPU-bound background threads.
fn frames(args: &[String]) -> Result<String, String> {
    let enforce = enforce_of(args)?;
    let d = secs(args, 3.0);
    // `--only TEXT`: just the rows whose label contains TEXT (e.g. RESBS).
    let only = flag(args, "--only").map(|o| o.to_lowercase());
    let base = "[machine]\ncpus = 1\n[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n[[scheduler]]\nname = \"rez\"\npolicy = \"rez\"\nparent = \"root\"\nparams = { priority = 10 }\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\nparent = \"root\"\nparams = { priority = 1 }\n";
    let mut out = String::from("| renderer under | background hogs | CPU % | frames/s | misses (deadlines passed) | daemon timer lateness p50 / p99 / max (us) | timers > 0.2 / > 0.5 ms late (of N) | daemon CPU % |\n|---|---|---|---|---|---|---|---|\n");
    for (label, extra, sched, params) in [
        ("RESBH 10 33 (Rez)", "", "rez", "params = { amount = \"10ms\", period = \"33ms\" }\n"),
        ("RESBH 10.5 33 (Rez, 5% margin)", "", "rez", "params = { amount = \"10500us\", period = \"33ms\" }\n"),
        (
            "RESBS 10 33 (Join of Rez and TS)",
            "[[scheduler]]\nname = \"soft\"\npolicy = \"join\"\nparents = [ { name = \"rez\", amount = \"10ms\", period = \"33ms\" }, { name = \"ts\" } ]\n",
            "soft",
            "",
        ),
        ("no reservation (TS)", "", "ts", ""),
    ] {
        if only
            .as_ref()
            .is_some_and(|o| !label.to_lowercase().contains(o))
        {
            continue;
        }
        for n in [0usize, 1, 10] {
            let text = format!(
                "{base}{extra}[[thread]]\nname = \"renderer\"\nscheduler = \"{sched}\"\n{params}workload = {{ kind = \"frame-renderer\", work = \"10ms\", miss_gap = \"33ms\" }}\n{}",
                hogs(n, "ts", None)
            );
            let r = run_text(&text, d, None, enforce)?;
            let p = r.program("renderer").ok_or("no renderer")?;
            let mut late = r.stats.timer_late_ns.clone();
            late.sort_unstable();
            let q = |f: f64| {
                late.get(((late.len() as f64 * f) as usize).min(late.len().saturating_sub(1)))
                    .map_or(0, |&v| v / 1_000)
            };
            let _ = writeln!(
                out,
                "| {label} | {n} | {:.1} | {:.1} | {} | {} / {} / {} | {} / {} ({}) | {:.2} |",
                p.cpu_ns as f64 / r.duration_ns as f64 * 100.0,
                p.jobs.unwrap_or(0) as f64 / (r.duration_ns as f64 / 1e9),
                p.deadline_misses.unwrap_or(0),
                q(0.5),
                q(0.99),
                late.last().map_or(0, |&v| v / 1_000),
                late.iter().filter(|&&v| v > 200_000).count(),
                late.iter().filter(|&&v| v > 500_000).count(),
                late.len(),
                r.stats.daemon_cpu_ns as f64 / r.duration_ns as f64 * 100.0
            );
        }
    }
    Ok(out)
}

/// Regehr 2001, Table 10.4: one thread of principal 1 against N CPU-bound
/// threads of principal 2, under one PS instance and under one PS instance
/// per principal (a root PS with equal shares).
fn isolation(args: &[String]) -> Result<String, String> {
    let enforce = enforce_of(args)?;
    let d = secs(args, 2.0);
    let mut out = String::from("| N threads of principal 2 | principal 1 share, one PS | principal 1 share, PS per principal |\n|---|---|---|\n");
    for n in [1usize, 4, 16, 64] {
        let mut cells = Vec::new();
        for per_principal in [false, true] {
            let mut text = String::from("[machine]\ncpus = 1\n[[principal]]\nname = \"p1\"\n[[principal]]\nname = \"p2\"\n[[scheduler]]\nname = \"root\"\npolicy = \"ps\"\n");
            let (s1, s2) = if per_principal {
                text.push_str("[[scheduler]]\nname = \"a\"\npolicy = \"ps\"\nparent = \"root\"\nparams = { share = 1 }\n[[scheduler]]\nname = \"b\"\npolicy = \"ps\"\nparent = \"root\"\nparams = { share = 1 }\n");
                ("a", "b")
            } else {
                ("root", "root")
            };
            let _ = write!(text, "[[thread]]\nname = \"one\"\nscheduler = \"{s1}\"\nprincipal = \"p1\"\nworkload = {{ kind = \"cpu-bound\" }}\n");
            text.push_str(&hogs(n, s2, Some("p2")));
            let r = run_text(&text, d, None, enforce)?;
            let p1 = r.principals.iter().find(|p| p.0 == "p1").map_or(0, |p| p.1);
            let p2 = r.principals.iter().find(|p| p.0 == "p2").map_or(0, |p| p.1);
            cells.push(format!(
                "{:.1} %",
                p1 as f64 / (p1 + p2).max(1) as f64 * 100.0
            ));
        }
        let _ = writeln!(out, "| {n} | {} | {} |", cells[0], cells[1]);
    }
    Ok(out)
}

fn poll_once(
    cmd: Vec<String>,
    text: Option<&str>,
    d: f64,
    enforce: crate::kernel::Enforce,
) -> Result<(u64, u64, u64), String> {
    let out = std::env::temp_dir().join(format!("hsched-bench-poll-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let shell = format!("exec {} > {}", cmd.join(" "), out.display());
    match text {
        Some(t) => {
            run_text(
                t,
                d + 2.0,
                Some(vec!["sh".into(), "-c".into(), shell]),
                enforce,
            )?;
        }
        None => {
            let st = std::process::Command::new("sh")
                .args(["-c", &shell])
                .status()
                .map_err(|e| e.to_string())?;
            if !st.success() {
                return Err("probe failed".into());
            }
        }
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&out);
    let g = |k: &str| v[k].as_u64().unwrap_or(0);
    Ok((g("switches"), g("median_ns"), g("p99_ns")))
}

/// Regehr 2001, Table 10.2 / Fig 10.3: 10 threads poll the clock on one CPU;
/// the gap between one thread's last reading and the next thread's first.
fn switch(args: &[String]) -> Result<String, String> {
    let enforce = enforce_of(args)?;
    let d = secs(args, 2.0);
    let me = std::env::current_exe()
        .map_err(|e| e.to_string())?
        .display()
        .to_string();
    let cpu = last_cpu();
    let probe = |pin: bool| {
        let mut v = vec![
            me.clone(),
            "probe".into(),
            "poll".into(),
            "--threads".into(),
            "10".into(),
            "--duration".into(),
            format!("{}ms", (d * 1e3) as u64),
        ];
        if pin {
            v.extend(["--cpu".to_string(), cpu.to_string()]);
        }
        v
    };
    let mut out = String::from(
        "| scheduler | switches | median gap (us) | p99 gap (us) |\n|---|---|---|---|\n",
    );
    let (n, m, p) = poll_once(probe(true), None, d, enforce)?;
    let _ = writeln!(
        out,
        "| native Linux CFS (pinned to CPU {cpu}) | {n} | {:.1} | {:.1} |",
        m as f64 / 1e3,
        p as f64 / 1e3
    );
    for depth in [1usize, 2, 4, 8] {
        let mut text = String::from("[machine]\ncpus = 1\n");
        let mut parent: Option<String> = None;
        for k in 0..depth - 1 {
            let _ = write!(text, "[[scheduler]]\nname = \"fp{k}\"\npolicy = \"fp\"\n");
            if let Some(p) = &parent {
                let _ = write!(text, "parent = \"{p}\"\nparams = {{ priority = 1 }}\n");
            }
            parent = Some(format!("fp{k}"));
        }
        let _ = write!(
            text,
            "[[scheduler]]\nname = \"leaf\"\npolicy = \"ts\"\nquantum = \"1ms\"\n"
        );
        if let Some(p) = &parent {
            let _ = write!(text, "parent = \"{p}\"\nparams = {{ priority = 1 }}\n");
        }
        text.push_str("default = \"leaf\"\n");
        let text = format!(
            "default = \"leaf\"\n{}",
            text.replace("default = \"leaf\"\n", "")
        );
        let (n, m, p) = poll_once(probe(false), Some(&text), d, enforce)?;
        let _ = writeln!(
            out,
            "| hsched --enforce {}, depth {depth} (TS rr 1 ms at the leaf) | {n} | {:.1} | {:.1} |",
            enforce_name(enforce),
            m as f64 / 1e3,
            p as f64 / 1e3
        );
    }
    Ok(out)
}

/// Regehr 2001, Table 10.1: control operations over the socket.
fn ctl_ops(args: &[String]) -> Result<String, String> {
    let reps: usize = flag(args, "--reps")
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir();
    let file = dir.join(format!("hsched-bench-ctl-{}.toml", std::process::id()));
    let sock = dir.join(format!("hsched-bench-ctl-{}.sock", std::process::id()));
    std::fs::write(
        &file,
        "default = \"ts\"\n[machine]\ncpus = 1\n[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n[[scheduler]]\nname = \"rez\"\npolicy = \"rez\"\nparent = \"root\"\nparams = { priority = 10 }\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\nparent = \"root\"\nparams = { priority = 1 }\n[[thread]]\nname = \"t\"\nworkload = { kind = \"periodic\", period = \"10ms\", exec = \"1ms\" }\n",
    )
    .map_err(|e| e.to_string())?;
    let mut daemon = std::process::Command::new(&me)
        .arg("run")
        .arg(&file)
        .args([
            "--cpus",
            &last_cpu().to_string(),
            "--duration",
            "120s",
            "--socket",
        ])
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let t0 = std::time::Instant::now();
    let mut c = loop {
        if let Ok(c) = crate::ctl::Client::connect(&sock) {
            break c;
        }
        if t0.elapsed().as_secs() > 10 {
            let _ = daemon.kill();
            return Err("daemon did not start".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    use serde_json::json;
    let mut times: Vec<(&str, Vec<u64>)> = vec![
        ("create instance", vec![]),
        ("destroy instance", vec![]),
        ("move thread", vec![]),
        ("begin reservation", vec![]),
        ("end reservation", vec![]),
        ("show (whole tree)", vec![]),
    ];
    let time = |c: &mut crate::ctl::Client,
                k: usize,
                op: &str,
                a: serde_json::Value,
                times: &mut Vec<(&str, Vec<u64>)>|
     -> Result<(), String> {
        let t = crate::sys::now_ns();
        c.request(op, a).map_err(|e| format!("{op}: {e}"))?;
        times[k].1.push(crate::sys::now_ns() - t);
        Ok(())
    };
    let res = (|| -> Result<(), String> {
        for i in 0..reps {
            let name = format!("x{i}");
            time(
                &mut c,
                0,
                "create",
                json!({"name": name, "policy": "ts", "parent": "root", "parent_params": {"priority": 5}}),
                &mut times,
            )?;
            time(
                &mut c,
                2,
                "move",
                json!({"thread": "t", "to": name}),
                &mut times,
            )?;
            c.request("move", json!({"thread": "t", "to": "ts"}))
                .map_err(|e| e.to_string())?;
            time(&mut c, 1, "destroy", json!({"name": name}), &mut times)?;
            time(
                &mut c,
                3,
                "begin-reservation",
                json!({"thread": "t", "scheduler": "rez", "params": {"amount": "2ms", "period": "10ms"}}),
                &mut times,
            )?;
            time(
                &mut c,
                4,
                "end-reservation",
                json!({"thread": "t"}),
                &mut times,
            )?;
            time(&mut c, 5, "show", json!({}), &mut times)?;
        }
        Ok(())
    })();
    let _ = c.request("shutdown", json!({}));
    let _ = daemon.wait();
    let _ = std::fs::remove_file(&file);
    res?;
    let mut out =
        String::from("| operation (client round trip) | median (us) | p99 (us) |\n|---|---|---|\n");
    for (name, mut v) in times {
        let (m, p) = crate::probe::median_p99(&mut v);
        let _ = writeln!(
            out,
            "| {name} | {:.1} | {:.1} |",
            m as f64 / 1e3,
            p as f64 / 1e3
        );
    }
    Ok(out)
}

/// Notification latency and the daemon's CPU use, idle and with 100
/// managed periodic threads.
fn overhead(args: &[String]) -> Result<String, String> {
    let enforce = enforce_of(args)?;
    let d = secs(args, 5.0);
    let mut out = String::from("| run | managed threads | HSI inputs | notification latency median / p99 (us) | daemon CPU (% of one CPU): thread / in pumps |\n|---|---|---|---|---|\n");
    let idle = "default = \"ts\"\n[machine]\ncpus = 1\n[[scheduler]]\nname = \"ts\"\npolicy = \"ts\"\n[[thread]]\nname = \"sleeper\"\nworkload = { kind = \"periodic\", period = \"1s\", exec = \"1us\" }\n";
    let mut busy = String::from(
        "default = \"ps\"\n[machine]\ncpus = 1\n[[scheduler]]\nname = \"ps\"\npolicy = \"ps\"\n",
    );
    busy.push_str("[[thread]]\nname = \"p\"\ncount = 100\nworkload = { kind = \"periodic\", period = \"20ms\", exec = \"100us\" }\n");
    for (label, text, n) in [
        (
            "idle (one thread waking once a second)",
            idle.to_string(),
            1,
        ),
        ("100 periodic threads (20 ms, 0.1 ms each)", busy, 100),
    ] {
        let r = run_text(&text, d, None, enforce)?;
        let l = r.notification_latency;
        let _ = writeln!(
            out,
            "| {label}, --enforce {} | {n} | {} | {:.1} / {:.1} | {:.2} / {:.2} |",
            enforce_name(enforce),
            r.events,
            l.median_ns as f64 / 1e3,
            l.p99_ns as f64 / 1e3,
            r.stats.daemon_cpu_ns as f64 / r.duration_ns as f64 * 100.0,
            r.stats.pump_cpu_ns as f64 / r.duration_ns as f64 * 100.0
        );
    }
    Ok(out)
}

/// How fast each enforcement mechanism switches which of two CPU-bound
/// processes runs on one CPU: the gap between the last clock reading of
/// the one stopped and the first of the one started, and the cost of the
/// controller's system calls. The controller runs at SCHED_FIFO 50 on
/// another CPU, switching every 2 ms.
fn mechanisms(args: &[String]) -> Result<String, String> {
    use crate::sys;
    let n: usize = flag(args, "--switches")
        .and_then(|r| r.parse().ok())
        .unwrap_or(1000);
    let online = sys::online_cpus();
    if online.len() < 2 {
        return Err("needs two CPUs".into());
    }
    let (work, ctl) = (online[online.len() - 1], online[0]);
    let mut out = String::from("| mechanism | switch gap median (us) | p90 (us) | p99 (us) | controller cost median (us) |\n|---|---|---|---|---|\n");
    for mech in [
        "SIGSTOP/SIGCONT",
        "cgroup-v1 freezer",
        "SCHED_FIFO priorities",
    ] {
        let slots = sys::Slots::new(2).map_err(|e| e.to_string())?;
        // Each worker logs its gaps into a shared file-backed buffer: use
        // pipes to return them at the end.
        let mut pids = Vec::new();
        let mut pipes = Vec::new();
        let end = sys::now_ns() + (n as u64 + 50) * 2_000_000;
        for _ in 0..2 {
            let (r, w) = sys::pipe().map_err(|e| e.to_string())?;
            let wfd = std::os::fd::AsRawFd::as_raw_fd(&w);
            let pid = sys::spawn_fn(&[0, 1, 2, wfd], move || {
                let _ = sys::set_affinity(0, &sys::CpuMask::single(work));
                let g = crate::probe::poll_gaps(2_000, end, 1 << 16);
                let mut b = Vec::with_capacity(g.len() * 16);
                for (a, z) in g {
                    b.extend_from_slice(&a.to_ne_bytes());
                    b.extend_from_slice(&z.to_ne_bytes());
                }
                let _ = sys::write_all(wfd, &b);
                0
            })
            .map_err(|e| e.to_string())?;
            drop(w);
            pids.push(pid);
            pipes.push(r);
        }
        let _ = &slots;
        let cg = if mech.starts_with("cgroup") {
            let f = crate::enforce::Freezer::new().map_err(|e| e.to_string())?;
            let a = f.adopt(pids[0]).map_err(|e| e.to_string())?;
            let b = f.adopt(pids[1]).map_err(|e| e.to_string())?;
            Some((f, [a, b]))
        } else {
            None
        };
        // Workers run at SCHED_FIFO 1 as granted threads do in live mode,
        // so other load on the CPU does not blur the measurement.
        for &p in &pids {
            let _ = sys::sched_setattr(p, &sys::SchedAttr::fifo(1));
        }
        let self_attr = sys::sched_getattr(0).map_err(|e| e.to_string())?;
        let self_mask = sys::get_affinity(0).map_err(|e| e.to_string())?;
        let _ = sys::set_affinity(0, &sys::CpuMask::single(ctl));
        let _ = sys::sched_setattr(0, &sys::SchedAttr::fifo(50));
        let act = |i: usize, run: bool| match (mech, &cg) {
            ("SIGSTOP/SIGCONT", _) => {
                let _ = sys::kill(pids[i], if run { libc::SIGCONT } else { libc::SIGSTOP });
            }
            (_, Some((_, c))) => {
                let _ = if run { c[i].thaw() } else { c[i].freeze() };
            }
            _ => {
                let _ = sys::sched_setattr(pids[i], &sys::SchedAttr::fifo(if run { 2 } else { 1 }));
            }
        };
        act(1, false);
        act(0, true);
        let mut stamps = Vec::with_capacity(n);
        let mut cost = Vec::with_capacity(n);
        let mut cur = 0;
        for _ in 0..n {
            sys::sleep_until(sys::now_ns() + 2_000_000);
            let t = sys::now_ns();
            if mech.starts_with("SCHED") {
                act(1 - cur, true);
                act(cur, false);
            } else {
                act(cur, false);
                act(1 - cur, true);
            }
            cost.push(sys::now_ns() - t);
            stamps.push((t, cur));
            cur = 1 - cur;
        }
        let _ = sys::sched_setattr(0, &self_attr);
        let _ = sys::set_affinity(0, &self_mask);
        for (i, &p) in pids.iter().enumerate() {
            act(i, true);
            let _ = sys::kill(p, libc::SIGCONT);
            let _ = sys::sched_setattr(p, &sys::SchedAttr::other());
        }
        let mut logs: Vec<Vec<(u64, u64)>> = Vec::new();
        for r in &pipes {
            let mut b = Vec::new();
            let mut buf = [0u8; 65536];
            while let Ok(k) = sys::read(std::os::fd::AsRawFd::as_raw_fd(r), &mut buf) {
                if k == 0 {
                    break;
                }
                b.extend_from_slice(&buf[..k]);
            }
            logs.push(
                b.chunks_exact(16)
                    .map(|c| {
                        (
                            u64::from_ne_bytes(c[..8].try_into().unwrap_or([0; 8])),
                            u64::from_ne_bytes(c[8..].try_into().unwrap_or([0; 8])),
                        )
                    })
                    .collect(),
            );
        }
        for &p in &pids {
            let _ = sys::wait_pid(p);
        }
        if let Some((f, c)) = cg {
            for (i, cgi) in c.iter().enumerate() {
                f.release(pids[i], cgi);
            }
            f.cleanup(std::time::Duration::from_millis(500));
        }
        let mut gaps = Vec::new();
        for &(t, a) in &stamps {
            let b = 1 - a;
            let st = logs[a]
                .iter()
                .find(|g| g.0 <= t + 200_000 && g.1 > t)
                .map(|g| g.0);
            let en = logs[b].iter().find(|g| g.0 <= t && g.1 >= t).map(|g| g.1);
            if let (Some(s), Some(e)) = (st, en) {
                gaps.push(e.saturating_sub(s));
            }
        }
        let (gm, gp) = crate::probe::median_p99(&mut gaps);
        let g90 = gaps.get(gaps.len() * 9 / 10).copied().unwrap_or(0);
        let (cm, _) = crate::probe::median_p99(&mut cost);
        let _ = writeln!(
            out,
            "| {mech} | {:.1} | {:.1} | {:.1} | {:.1} |",
            gm as f64 / 1e3,
            g90 as f64 / 1e3,
            gp as f64 / 1e3,
            cm as f64 / 1e3
        );
    }
    Ok(out)
}

/// `hsched-live bench NAME`.
pub fn bench_main(args: &[String]) -> i32 {
    if let Err(e) = crate::check_support() {
        crate::diag!("hsched-live bench: {e}");
        return 3;
    }
    // Every CPU is this process's for the whole bench (cpulock.rs): its runs
    // (in this process) and `bench ctl`'s daemon (a child) use the locks, no
    // other daemon can. All of them, not only the measured one: a daemon
    // managing another CPU runs its own loop (SCHED_FIFO 80) on the CPUs it
    // does not manage, the measured one included (seen with ftrace).
    let _cpus = match crate::cpulock::CpuLocks::try_acquire(
        &crate::sys::online_cpus(),
        crate::cpulock::Sharing::WithChildren,
    ) {
        Ok(l) => l,
        Err(e) => {
            crate::diag!("hsched-live bench: {e}");
            return 3;
        }
    };
    let rest = args.get(1..).unwrap_or(&[]);
    let r = match args.first().map(String::as_str) {
        Some("frames") => frames(rest),
        Some("isolation") => isolation(rest),
        Some("switch") => switch(rest),
        Some("ctl") => ctl_ops(rest),
        Some("overhead") => overhead(rest),
        Some("mechanisms") => mechanisms(rest),
        _ => Err("usage: hsched-live bench frames|isolation|switch|ctl|overhead|mechanisms [--duration D] [--enforce user|kernel|auto]".into()),
    };
    match r {
        Ok(t) => crate::out::print_stdout(&t),
        Err(e) => {
            crate::diag!("hsched-live bench: {e}");
            1
        }
    }
}
