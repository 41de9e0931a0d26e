//! The scenario of Regehr 2001, ch. 8 on the simulator: two users, each
//! capped, several applications asking for reservations in turn; some
//! wait and are granted as others exit; the sequence of grants and
//! refusals is the resource manager's, applied as reservation operations.

use hsched_sim::{run, SimOptions};

const FILE: &str = include_str!("../../../examples/resource-manager.toml");

fn decisions() -> (Vec<String>, hsched_sim::Report) {
    let h = hsched_config::parse_str(FILE, "resource-manager.toml").expect("the example parses");
    let r = run(&h, SimOptions::default()).expect("the example runs");
    // Keep "time #id thread: verdict[, rule]" and drop the reasons.
    let short = r
        .requests
        .iter()
        .map(|l| match l.split_once(": ") {
            Some((head, rest)) => {
                let verdict = rest.split(':').next().unwrap_or(rest);
                let verdict = verdict.split(" (").next().unwrap_or(verdict);
                format!("{head}: {verdict}")
            }
            None => l.clone(),
        })
        .collect();
    (short, r)
}

#[test]
fn grants_refusals_and_pending_requests_follow_chapter_8() {
    let (d, _) = decisions();
    assert_eq!(
        d,
        [
            "1s #1 a1: granted at rez",
            "1s #2 b1: pending, admission",
            "2s #3 a2: pending, cap 30% per user",
            "3s #4 a3: refused, cap 30% per user",
            "4s #1 a1: ended",
            "4s #2 b1: granted at rez",
            "5s #2 b1: ended",
            "5s #3 a2: granted at rez",
            "6s #5 b2: granted at rez",
        ]
    );
}

#[test]
fn the_decisions_are_what_the_threads_receive() {
    let (_, r) = decisions();
    let t = |n: &str| r.threads.iter().find(|t| t.name == n).expect(n);
    // Granted and still held at the end: under rez.
    assert_eq!(t("a2").scheduler, "rez");
    assert_eq!(t("b2").scheduler, "rez");
    // Refused, released: back under (or never left) ts.
    assert_eq!(t("a3").scheduler, "ts");
    assert_eq!(t("b1").scheduler, "ts");
    // a2 holds 2 ms every 10 ms from 5 s to 8 s: at least 0.6 s of CPU
    // there, whatever time sharing gave it before.
    assert!(
        t("a2").cpu_ns >= 600_000_000,
        "a2 got {} ns",
        t("a2").cpu_ns
    );
}

#[test]
fn a_file_without_requests_runs_as_before() {
    let stripped: String = FILE
        .split("[[rm.request]]")
        .next()
        .expect("text before the requests")
        .to_string();
    let h = hsched_config::parse_str(&stripped, "no-requests.toml").expect("parses");
    let r = run(&h, SimOptions::default()).expect("runs");
    assert!(r.requests.is_empty());
    assert!(r.threads.iter().all(|t| t.scheduler == "ts"));
}

#[test]
fn a_request_before_its_thread_starts_is_an_error_not_a_panic() {
    let text = FILE.replace(
        "[[thread]]\nname = \"b2\"\nscheduler = \"ts\"",
        "[[thread]]\nname = \"b2\"\nscheduler = \"ts\"\nstart = \"7s\"",
    );
    let h = hsched_config::parse_str(&text, "late.toml").expect("parses");
    let e = run(&h, SimOptions::default()).expect_err("the request at 6 s precedes the thread");
    assert!(e.to_string().contains("before the thread starts"), "{e}");
}
