//! Sinha 2007, Table 3.1 in simulation: N adaptive players under saturation,
//! scheduled by cooperative polling, by the pure fair-share scheduler at
//! 1 ms and 20 ms periods, and by plain time sharing.
//!
//! `cargo run --release -p hsched-coop --example table31 [-- N...]`
//! (default N = 4 6 8 10 12). Seconds 5–20 of each run are measured.

use hsched_sim::player::{run_players, PlayerExperiment, PlayerSched};

fn main() {
    let ns: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ns = if ns.is_empty() {
        vec![4, 6, 8, 10, 12]
    } else {
        ns
    };
    let scheds = [
        PlayerSched::Coop { period: 20_000_000 },
        PlayerSched::Coop { period: 1_000_000 },
        PlayerSched::FairShare { period: 1_000_000 },
        PlayerSched::FairShare { period: 20_000_000 },
        PlayerSched::Ts,
    ];
    println!(
        "| players | scheduler | worst tardiness ms | mean 1 s worst ms | switches/s | coop_poll/s | fps total | % of single | fps min–max | Jain | policed |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in &ns {
        let single = match run_players(&PlayerExperiment::new(n, PlayerSched::Single)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("single, {n} players: {e}");
                std::process::exit(1);
            }
        };
        let mut rows = vec![(PlayerSched::Single, single.clone())];
        for s in scheds {
            match run_players(&PlayerExperiment::new(n, s)) {
                Ok(r) => rows.push((s, r)),
                Err(e) => {
                    eprintln!("{}, {n} players: {e}", s.label());
                    std::process::exit(1);
                }
            }
        }
        for (s, r) in rows {
            let min = r.fps.iter().copied().fold(f64::INFINITY, f64::min);
            let max = r.fps.iter().copied().fold(0.0, f64::max);
            println!(
                "| {n} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.1} | {:.0}% | {:.1}–{:.1} | {:.3} | {} |",
                s.label(),
                r.worst_tardiness_ms,
                r.mean_interval_worst_ms,
                r.switches_per_s,
                r.polls_per_s,
                r.fps_total,
                100.0 * r.fps_total / single.fps_total.max(1e-9),
                min,
                max,
                r.jain,
                r.policed
            );
        }
    }
}
