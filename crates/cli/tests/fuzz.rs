//! The `hsched` binary on randomly mutated inputs: the examples, their
//! rt-app file and the recorded traces, each mutated by a seeded RNG and
//! given to `check`, a short `sim`, `check --workload` and `import` (and
//! what `import` writes back to `check`). Every case must end within its
//! time limit with status 0, 1 or 2, never a panic, and every status 2
//! must come with an `error:` message.
//!
//! Bounded for CI: `HSCHED_FUZZ_CASES` cases (default 1000, about 20 s in a debug build) from seed
//! `HSCHED_FUZZ_SEED` (default 39). For a longer search:
//!
//! ```sh
//! HSCHED_FUZZ_CASES=20000 HSCHED_FUZZ_SEED=1000 cargo test --release -p hsched-cli --test fuzz
//! ```
//!
//! A failure names the seed of its case and keeps its input under the
//! test's temporary directory.

use hsched_core::testing::SplitMix;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a single command may take (a debug build on a busy machine).
const LIMIT: Duration = Duration::from_secs(30);

const TOKENS: &[&str] = &[
    "\"",
    "[",
    "]",
    "{",
    "}",
    "=",
    ",",
    "#",
    "\n",
    "\\",
    "-",
    "0",
    "-1",
    "1e309",
    "nan",
    "inf",
    "1e-300",
    "\"0\"",
    "\"10ms\"",
    "\"1ns\"",
    "\"2562048h\"",
    "99999999999999999999",
    "true",
    "\u{1b}[2J",
    "\u{202e}",
    "\u{200b}",
    "\u{ad}",
    "é",
    "\u{0}",
    "count = 100000",
    "cpus = [0, 0]",
    "policy = \"join\"",
    "parent = \"nosuch\"",
    "op = \"set-default\"",
    "\"instance\": 3",
    "\"loop\": -1",
    "\"run\": 0",
    " 18446744073.709551: ",
    " 0.000001: ",
    "prev_state=R",
    "prev_state=Z",
    "next_pid=0",
    "pid=-1",
];

fn mutate(rng: &mut SplitMix, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut pick = |n: usize| rng.below(n as u64) as usize;
    for _ in 0..1 + pick(4) {
        let n = lines.len();
        match pick(7) {
            0 if n > 0 => {
                lines.remove(pick(n));
            }
            1 if n > 0 => {
                let l = lines[pick(n)].clone();
                lines.insert(pick(n + 1), l);
            }
            2 if n > 1 => lines.swap(pick(n), pick(n)),
            3 | 4 if n > 0 => {
                // A token in place of up to two characters.
                let i = pick(n);
                let chars: Vec<char> = lines[i].chars().collect();
                let at = pick(chars.len() + 1);
                let cut = at + pick(3).min(chars.len() - at);
                let mut s: String = chars[..at].iter().collect();
                s.push_str(TOKENS[pick(TOKENS.len())]);
                s.extend(&chars[cut..]);
                lines[i] = s;
            }
            5 if n > 0 => {
                // One digit changed, where numbers and times live.
                let i = pick(n);
                let mut chars: Vec<char> = lines[i].chars().collect();
                let digits: Vec<usize> = (0..chars.len())
                    .filter(|&k| chars[k].is_ascii_digit())
                    .collect();
                if !digits.is_empty() {
                    chars[digits[pick(digits.len())]] = char::from(b'0' + pick(10) as u8);
                    lines[i] = chars.into_iter().collect();
                }
            }
            _ => lines.truncate(pick(n + 1)),
        }
    }
    lines.join("\n") + "\n"
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `hsched ARGS`; its status, and stderr, or why it failed the test.
fn hsched(args: &[&str]) -> Result<(i32, String), String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz");
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_hsched"))
        .current_dir(root())
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("hsched {args:?} still running after {LIMIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = String::from_utf8_lossy(&std::fs::read(&err).unwrap()).into_owned();
    let code = status
        .code()
        .ok_or(format!("hsched {args:?} killed by a signal"))?;
    if !matches!(code, 0..=2) || stderr.contains("panicked") {
        return Err(format!("hsched {args:?}: status {code}\n{stderr}"));
    }
    if code == 2 && !stderr.contains("error") {
        return Err(format!(
            "hsched {args:?}: status 2 without an error\n{stderr}"
        ));
    }
    Ok((code, stderr))
}

/// One case: `input`, a mutant of a file of kind `ext`, through the verbs
/// that read that kind.
fn case(ext: &str, input: &Path) -> Result<(), String> {
    let file = input.to_str().unwrap();
    match ext {
        "toml" => {
            let (code, _) = hsched(&["check", file])?;
            if code != 2 {
                hsched(&["sim", file, "--duration", "20ms"])?;
            }
        }
        "json" => {
            hsched(&["check", "examples/rtapp-tasks.toml", "--workload", file])?;
        }
        _ => {
            let (code, _) = hsched(&["import", file])?;
            if code == 0 {
                // Every thread of the trace, written and read back.
                let json = input.with_extension("json");
                let (code, _) = hsched(&[
                    "import",
                    file,
                    "--comm",
                    "python3",
                    "-o",
                    json.to_str().unwrap(),
                ])?;
                if code == 0 {
                    let w = json.to_str().unwrap();
                    let (code, err) =
                        hsched(&["check", "examples/rtapp-tasks.toml", "--workload", w])?;
                    if code == 2 {
                        return Err(format!("check refuses what import wrote:\n{err}"));
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn mutated_files_end_cleanly() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let cases = env("HSCHED_FUZZ_CASES", 1000);
    let first = env("HSCHED_FUZZ_SEED", 39);
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml" || e == "json"))
        .collect();
    seeds.push(root().join("examples/traces/busy-sleep.trace"));
    seeds.sort();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz");
    std::fs::create_dir_all(&dir).unwrap();
    for seed in first..first + cases {
        let mut rng = SplitMix(seed);
        let from = &seeds[rng.below(seeds.len() as u64) as usize];
        let ext = from.extension().unwrap().to_str().unwrap();
        let input = dir.join(format!("case.{ext}"));
        let text = std::fs::read_to_string(from).unwrap();
        std::fs::write(&input, mutate(&mut rng, &text)).unwrap();
        if let Err(e) = case(ext, &input) {
            let kept = dir.join(format!("failed-{seed}.{ext}"));
            std::fs::copy(&input, &kept).unwrap();
            panic!(
                "seed {seed} (a mutant of {}, kept as {}):\n{e}\n\
                 again: HSCHED_FUZZ_SEED={seed} HSCHED_FUZZ_CASES=1 cargo test -p hsched-cli --test fuzz",
                from.display(),
                kept.display()
            );
        }
    }
}
