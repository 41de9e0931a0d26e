//! What `hsched` says about files it refuses or warns about: each problem
//! once, with a hint where a user needs one, and the same verdict from
//! `check`, `analyze` and `sim`.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Writes `text` to a file of its own and returns its path.
fn file(tag: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsched-cli-messages-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn hsched(args: &[&str], path: &PathBuf) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hsched"))
        .args(args)
        .arg(path)
        .output()
        .expect("hsched runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A `ps` that a lower priority of an `fp` promises nothing is told what
/// would work there.
#[test]
fn a_scheduler_given_null_is_told_what_would_work() {
    let path = file(
        "ps-under-fp",
        "[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n\
         [[scheduler]]\nname = \"ps\"\npolicy = \"ps\"\nparent = \"root\"\nparams = { priority = 1 }\n\
         [[thread]]\nname = \"a\"\nscheduler = \"ps\"\nparams = { share = 0.5 }\nworkload = { kind = \"cpu-bound\" }\n\
         [[thread]]\nname = \"hi\"\nscheduler = \"root\"\nparams = { priority = 2 }\nworkload = { kind = \"cpu-bound\" }\n",
    );
    let o = hsched(&["check"], &path);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("receives NULL, which PS cannot use"), "{out}");
    assert!(
        out.contains("= hint: fp 'root' promises it no time; a scheduler that needs no guarantee (`ts`) works here"),
        "{out}"
    );
    assert!(out.contains("the highest priority of the fp"), "{out}");
}

/// The second table of a scheduler name is reported once, and nothing is
/// checked against it: the thread under `root` is checked against the
/// first `root`, a `ts`.
#[test]
fn a_duplicate_scheduler_is_reported_once() {
    let path = file(
        "duplicate",
        "[[scheduler]]\nname = \"root\"\npolicy = \"ts\"\n\
         [[scheduler]]\nname = \"root\"\npolicy = \"rez\"\n\
         [[scheduler]]\nname = \"x\"\npolicy = \"ts\"\nparent = \"root\"\n\
         [[scheduler]]\nname = \"x\"\npolicy = \"ts\"\nparent = \"x\"\n\
         [[thread]]\nname = \"a\"\nscheduler = \"root\"\nworkload = { kind = \"cpu-bound\" }\n",
    );
    let o = hsched(&["check"], &path);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert_eq!(out.matches("error:").count(), 2, "{out}");
    assert!(out.contains("duplicate scheduler name `root`"), "{out}");
    assert!(out.contains("duplicate scheduler name `x`"), "{out}");
}

/// `fp` threads sharing a priority: a note where none asks for a
/// guarantee, so `check`, `analyze` and `sim` all accept the file; an
/// error where a guarantee depends on the order of the tie.
#[test]
fn a_priority_tie_is_a_note_unless_a_guarantee_depends_on_it() {
    let tie = "[sim]\nduration = \"100ms\"\n[[scheduler]]\nname = \"root\"\npolicy = \"fp\"\n\
        [[thread]]\nname = \"a\"\nscheduler = \"root\"\nparams = { priority = 1 }\n\
        workload = { kind = \"periodic\", period = \"10ms\", exec = \"2ms\" }\n\
        [[thread]]\nname = \"b\"\nscheduler = \"root\"\nparams = { priority = 1 }\n\
        workload = { kind = \"periodic\", period = \"10ms\", exec = \"3ms\" }\n";
    let path = file("tie", tie);
    for verb in ["check", "analyze", "sim"] {
        let o = hsched(&[verb], &path);
        assert_eq!(o.status.code(), Some(0), "{verb}: {}", text(&o));
    }
    let out = text(&hsched(&["check"], &path));
    assert!(
        out.contains("note: threads `a` and `b` share a priority with a sibling under `fp`"),
        "{out}"
    );
    let out = text(&hsched(&["analyze"], &path));
    assert!(out.contains("the guarantees compose"), "{out}");
    assert!(out.contains("under ALL: every deadline is met"), "{out}");
    // A guarantee asked at the tie cannot be given: an error in both.
    let path = file(
        "tie-asked",
        &tie.replace(
            "name = \"b\"\n",
            "name = \"b\"\nguarantee = \"RESBH 3 10\"\n",
        ),
    );
    for verb in ["check", "analyze"] {
        let o = hsched(&[verb], &path);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "{verb}: {out}");
        assert!(
            out.contains("fp 'root' cannot give thread 'b' a guarantee"),
            "{out}"
        );
        assert!(!out.contains("cannot give thread 'a'"), "{out}");
    }
}

/// The unit of a printed duration (`-2.400ms` → `ms`), `None` for `-`.
fn unit_of(cell: &str) -> Option<&'static str> {
    ["ns", "ms", "s"]
        .into_iter()
        .find(|u| cell.ends_with(u) && cell != "-")
}

/// In each table `sim` prints, a column of durations uses one unit
/// (`-2.400ms` beside `-24.200ms`, not beside `-0.024s`).
#[test]
fn each_table_column_reads_in_one_unit() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let o = Command::new(env!("CARGO_BIN_EXE_hsched"))
        .current_dir(&root)
        .args(["sim", "examples/home-computer.toml", "--duration", "5s"])
        .output()
        .expect("hsched runs");
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    // (heading, columns holding durations)
    for (heading, columns) in [
        ("thread ", &[1usize, 5, 6, 7][..]),
        ("scheduler ", &[2][..]),
    ] {
        let rows: Vec<Vec<&str>> = out
            .lines()
            .skip_while(|l| !l.starts_with(heading))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert!(rows.len() > 2, "{out}");
        for &c in columns {
            let mut units: Vec<&str> = rows.iter().filter_map(|r| unit_of(r[c])).collect();
            units.dedup();
            assert!(
                units.len() <= 1,
                "column {c} of the {heading}table mixes {units:?}:\n{out}"
            );
        }
    }
}
