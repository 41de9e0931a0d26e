//! Randomly mutated hierarchy and rt-app files never make the parsers
//! panic. A seeded mutator deletes, duplicates and swaps lines, flips and
//! inserts characters, splices tokens and truncates, starting from every
//! file under tests/valid, tests/corpus and tests/rtapp.
//!
//! `HSCHED_FUZZ_ITERS` sets the number of mutants per run (default 3000)
//! and `HSCHED_FUZZ_SEED` the first seed; a failure prints the seed and the
//! input that panicked.

use std::path::Path;

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const TOKENS: &[&str] = &[
    "\"",
    "'",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    ",",
    ".",
    "#",
    "\n",
    "\\",
    "-",
    "0",
    "-1",
    "1e309",
    "nan",
    "inf",
    "\"\"",
    "\"10ms\"",
    "\"0ms\"",
    "\"-5ms\"",
    "\"1e30s\"",
    "99999999999999999999",
    "true",
    "[]",
    "{}",
    "é",
    "\u{0}",
    "\t",
    "parent = \"x\"",
    "cpus = [0, 0]",
    "count = 100000",
    "policy = \"join\"",
    "op = \"destroy-scheduler\"",
    "name = \"root\"",
    "kind = \"program\"",
    "steps = []",
    "\"run\": 0",
    "\"loop\": -1",
    "\"instance\": 99999",
    "\"timer\": {}",
    "\"phases\": {}",
    "/*",
    "*/",
    "//",
    ":",
    "null",
    "[[at]]\ntime = \"0s\"\n",
    "[[thread]]\nname = \"z\"\n",
    "[[scheduler]]\nname = \"z\"\npolicy = \"ts\"\n",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let n = lines.len();
        match rng.below(8) {
            0 if n > 0 => {
                lines.remove(rng.below(n));
            }
            1 if n > 0 => {
                let i = rng.below(n);
                let l = lines[i].clone();
                lines.insert(rng.below(n + 1), l);
            }
            2 if n > 1 => {
                let (a, b) = (rng.below(n), rng.below(n));
                lines.swap(a, b);
            }
            3 | 4 if n > 0 => {
                // Replace or insert a token inside a line, at a char boundary.
                let i = rng.below(n);
                let chars: Vec<char> = lines[i].chars().collect();
                let at = rng.below(chars.len() + 1);
                let tok = TOKENS[rng.below(TOKENS.len())];
                let cut = if rng.below(2) == 0 {
                    at + rng.below(3).min(chars.len() - at)
                } else {
                    at
                };
                let mut s: String = chars[..at].iter().collect();
                s.push_str(tok);
                s.extend(&chars[cut..]);
                lines[i] = s;
            }
            5 if n > 0 => {
                // Flip one character to any char.
                let i = rng.below(n);
                let mut chars: Vec<char> = lines[i].chars().collect();
                if !chars.is_empty() {
                    let at = rng.below(chars.len());
                    chars[at] = char::from_u32(rng.below(0x250) as u32).unwrap_or('?');
                    lines[i] = chars.into_iter().collect();
                }
            }
            6 => {
                let tok = TOKENS[rng.below(TOKENS.len())];
                lines.insert(rng.below(n + 1), tok.to_string());
            }
            _ => {
                // Truncate.
                let s = lines.join("\n");
                let chars: Vec<char> = s.chars().collect();
                let at = rng.below(chars.len() + 1);
                lines = chars[..at]
                    .iter()
                    .collect::<String>()
                    .lines()
                    .map(str::to_string)
                    .collect();
            }
        }
    }
    lines.join("\n")
}

fn seeds() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut out = Vec::new();
    for dir in ["valid", "corpus", "rtapp"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let ext = f
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_string();
            if ext == "toml" || ext == "json" {
                out.push((ext, std::fs::read_to_string(&f).unwrap()));
            }
        }
    }
    out
}

/// Runs every entry point that takes text on `input`.
fn exercise(kind: &str, input: &str) {
    if kind == "toml" {
        if let Ok(mut h) = hsched_config::parse_str(input, "fuzz.toml") {
            let _ = h.check_simulatable();
            let _ = h.clone();
            // Attach a small workload: exercises the rules and the timeline.
            let w = hsched_config::parse_rtapp(r#"{"tasks": {"video": {"run": 10, "sleep": 10}, "w": {"policy": "SCHED_FIFO", "run": 1, "sleep": 1}}}"#, "w.json").unwrap();
            let _ = hsched_config::attach_rtapp(&mut h, w);
        }
    } else {
        let _ = hsched_config::parse_rtapp(input, "fuzz.json");
        // JSON text fed to the TOML parser, and the other way round.
        let _ = hsched_config::parse_str(input, "fuzz.toml");
    }
}

#[test]
fn mutated_inputs_never_panic() {
    let iters: usize = std::env::var("HSCHED_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let first: u64 = std::env::var("HSCHED_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let seeds = seeds();
    assert!(seeds.len() > 20);
    // Quiet the default hook: a panic is reported below with its seed.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure = None;
    for k in 0..iters as u64 {
        let seed = first.wrapping_add(k);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let (kind, text) = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, text);
        let kind2 = kind.clone();
        let inp = input.clone();
        if std::panic::catch_unwind(move || exercise(&kind2, &inp)).is_err() {
            failure = Some((seed, kind.clone(), input));
            break;
        }
    }
    std::panic::set_hook(hook);
    if let Some((seed, kind, input)) = failure {
        // Run it again with the hook on, for the message.
        eprintln!("repro: HSCHED_FUZZ_SEED={seed} HSCHED_FUZZ_ITERS=1 cargo test -p hsched-config --test fuzz\n--- {kind} input ---\n{input}\n---");
        exercise(&kind, &input);
        panic!("seed {seed} panicked");
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xdead_beef);
    for _ in 0..2000 {
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
        let text = String::from_utf8_lossy(&bytes).to_string();
        exercise("toml", &text);
        exercise("json", &text);
    }
}
