//! `hsched generate`: every file it writes is one `hsched check` accepts,
//! the same options give the same file, and bad options are input errors.

use std::process::Command;

fn hsched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hsched"))
        .args(args)
        .output()
        .expect("run hsched")
}

#[test]
fn every_generated_file_checks() {
    let dir = std::env::temp_dir().join(format!("hsched-generate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases: &[&[&str]] = &[
        &["--tasks", "10", "--utilization", "0.7"],
        &["--tasks", "1", "--utilization", "1"],
        &[
            "--tasks",
            "16",
            "--utilization",
            "3.2",
            "--cpus",
            "4",
            "--method",
            "randfixedsum",
        ],
        &[
            "--tasks",
            "6",
            "--utilization",
            "2.5",
            "--cpus",
            "3",
            "--method",
            "uunifast-discard",
            "--deadlines",
            "arbitrary:2",
        ],
        &[
            "--tasks",
            "8",
            "--utilization",
            "0.6",
            "--deadlines",
            "constrained:0.5",
            "--jitter",
            "0.05",
            "--granularity",
            "0",
        ],
        &[
            "--tasks",
            "40",
            "--utilization",
            "0.95",
            "--period-min",
            "1ms",
            "--period-max",
            "10s",
            "--granularity",
            "250us",
        ],
        &[
            "--tasks",
            "5",
            "--utilization",
            "0.5",
            "--min-task-util",
            "0.05",
            "--max-task-util",
            "0.2",
            "--method",
            "randfixedsum",
        ],
    ];
    for (k, case) in cases.iter().enumerate() {
        for seed in ["0", "1", "2", "17"] {
            let out = dir.join(format!("set{k}-{seed}.toml"));
            let mut args = case.to_vec();
            args.extend(["--seed", seed, "-o", out.to_str().unwrap()]);
            let mut gen = vec!["generate"];
            gen.extend(args);
            let g = hsched(&gen);
            assert!(
                g.status.success(),
                "{gen:?}: {}",
                String::from_utf8_lossy(&g.stderr)
            );
            let c = hsched(&["check", out.to_str().unwrap()]);
            assert!(
                c.status.success(),
                "{gen:?}: {}{}",
                String::from_utf8_lossy(&c.stdout),
                String::from_utf8_lossy(&c.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_same_options_give_the_same_file() {
    let a = hsched(&["generate", "-n", "12", "-u", "0.8", "--seed", "9"]);
    let b = hsched(&["generate", "-n", "12", "-u", "0.8", "--seed", "9"]);
    let c = hsched(&["generate", "-n", "12", "-u", "0.8", "--seed", "10"]);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    assert_ne!(a.stdout, c.stdout);
}

#[test]
fn threads_go_under_the_named_scheduler() {
    let g = hsched(&[
        "generate",
        "-n",
        "3",
        "-u",
        "0.4",
        "--scheduler",
        "app",
        "--priorities",
    ]);
    assert!(g.status.success());
    let text = String::from_utf8(g.stdout).unwrap();
    assert_eq!(text.matches("scheduler = \"app\"").count(), 3);
    assert_eq!(text.matches("priority = ").count(), 3);
    assert!(!text.contains("[[scheduler]]"));
}

#[test]
fn bad_options_are_input_errors() {
    for (args, says) in [
        (
            &["generate", "-n", "3", "-u", "1.5"][..],
            "uunifast-discard",
        ),
        (&["generate", "-n", "0", "-u", "0.5"][..], "out of range"),
        (&["generate", "-n", "3", "-u", "-1"][..], "above 0"),
        (
            &["generate", "-n", "3", "-u", "5", "--method", "randfixedsum"][..],
            "cannot sum",
        ),
        (
            &["generate", "-n", "3", "-u", "0.5", "--deadlines", "later"][..],
            "implicit",
        ),
        (
            &[
                "generate",
                "-n",
                "3",
                "-u",
                "0.5",
                "--period-min",
                "2s",
                "--period-max",
                "1s",
            ][..],
            "min <= max",
        ),
    ] {
        let o = hsched(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
