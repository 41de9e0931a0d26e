//! The per-application reservation of §6.1.3: finds a basic reservation for
//! the Media Player task set of Table 6.1 and writes the parameter space of
//! Fig 6.2.
//!
//! ```text
//! cargo run -p hsched-guarantee --example media_player            # summary
//! cargo run -p hsched-guarantee --example media_player -- svg > fig6_2.svg
//! cargo run -p hsched-guarantee --example media_player -- csv > fig6_2.csv
//! ```

use hsched_guarantee::ghost::{
    media_player, parameter_space, search_reservation, Grid, SearchConfig,
};
use hsched_guarantee::rta;
use hsched_guarantee::Duration;

fn main() {
    let app = media_player();
    let choice = match search_reservation(&app, &SearchConfig::for_tasks(&app)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("search failed: {e}");
            std::process::exit(1);
        }
    };
    let grid = Grid::square(Duration::from_millis(20), Duration::from_micros(200));
    let space = match parameter_space(&app, &grid) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("parameter space failed: {e}");
            std::process::exit(1);
        }
    };
    match std::env::args().nth(1).as_deref() {
        Some("svg") => print!("{}", space.to_svg(Some((choice.amount, choice.period)))),
        Some("csv") => print!("{}", space.to_csv()),
        _ => {
            println!(
                "Table 6.1 task set: {} threads, utilization {:.1}%",
                app.len(),
                rta::utilization(&app) * 100.0
            );
            println!(
                "reservation: {} (utilization {:.1}%, smallest found {:.1}%, {} periods tested)",
                choice.request(),
                choice.utilization * 100.0,
                choice.min_utilization * 100.0,
                choice.periods_tested
            );
            let gap = choice.request().max_gap().unwrap_or_default();
            println!("longest gap of that reservation: {gap}");
        }
    }
}
