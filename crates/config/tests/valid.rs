//! Every sample under tests/valid/ parses, builds into an HSI and runs:
//! threads are created at their start, woken, driven for a while, and the
//! timed operations are applied at their times without error.

use hsched_config::*;
use hsched_core::testing::{Behaviour, Driver};
use hsched_core::{Duration, Instant, ThreadId};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn samples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/valid");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    assert!(
        v.len() >= 3,
        "expected at least three samples in {}",
        dir.display()
    );
    v
}

/// Runs `h` for `horizon`: creates threads at their start, applies the
/// operations at their times, exits threads at their exit times.
fn run(h: &Hierarchy, horizon: Duration) -> Result<usize, String> {
    let hsi = build_hsi(h).map_err(|e| e.to_string())?;
    let mut d = Driver::new(hsi);
    #[derive(Debug)]
    enum Ev<'a> {
        Create(&'a ThreadSpec),
        Op(&'a OpSpec),
        Exit(&'a str),
    }
    let mut evs: Vec<(Duration, u8, Ev<'_>)> = Vec::new();
    for t in &h.threads {
        evs.push((t.start, 0, Ev::Create(t)));
        if let Some(x) = t.exit {
            evs.push((x, 2, Ev::Exit(&t.name)));
        }
    }
    for op in &h.operations {
        evs.push((op.at, 1, Ev::Op(&op.op)));
    }
    evs.sort_by_key(|(t, p, _)| (*t, *p));
    let mut ids: BTreeMap<String, ThreadId> = BTreeMap::new();
    let mut applied = 0;
    for (at, _, ev) in evs {
        if at > horizon {
            break;
        }
        let now = Instant(at.as_nanos());
        d.run_until(now).map_err(|e| e.to_string())?;
        match ev {
            Ev::Create(t) => {
                let id = create_thread(&mut d.hsi, t, now).map_err(|e| e.to_string())?;
                ids.insert(t.name.clone(), id);
                let b = match (&t.workload, t.exit) {
                    (
                        Some(WorkloadSpec::Periodic {
                            period,
                            exec,
                            offset,
                            ..
                        }),
                        None,
                    ) => Behaviour::Periodic {
                        period: *period,
                        exec: *exec,
                        offset: *offset,
                    },
                    _ => Behaviour::CpuBound,
                };
                d.add(id, b).map_err(|e| e.to_string())?;
            }
            Ev::Op(op) => {
                apply_op(&mut d.hsi, op, now, &|n| ids.get(n).copied())
                    .map_err(|e| format!("{op:?}: {e}"))?;
                applied += 1;
            }
            Ev::Exit(n) => d.hsi.exit(now, ids[n]).map_err(|e| e.to_string())?,
        }
    }
    d.run_until(Instant(horizon.as_nanos()))
        .map_err(|e| e.to_string())?;
    Ok(applied)
}

#[test]
fn every_valid_sample_parses_builds_and_runs() {
    for path in samples() {
        let h = load(&path).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
        h.check_simulatable()
            .unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
        assert!(!h.threads.is_empty());
        let applied =
            run(&h, Duration::from_secs(3)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(applied, h.operations.len(), "{}", path.display());
    }
}
