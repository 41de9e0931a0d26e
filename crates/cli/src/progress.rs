//! A progress bar on stderr for long simulations.
//!
//! It appears only when stderr is a terminal and the run has already taken
//! [`SHOW_AFTER`], so quick runs and scripts (pipes, CI logs) never see it.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Runs shorter than this never show a bar.
pub const SHOW_AFTER: Duration = Duration::from_secs(2);
/// The bar is redrawn at most this often.
const REDRAW_EVERY: Duration = Duration::from_millis(100);
const WIDTH: usize = 30;

/// The state of the bar; [`Progress::update`] takes the fraction done.
#[derive(Debug)]
pub struct Progress {
    started: Instant,
    last_draw: Option<Instant>,
    enabled: bool,
}

impl Progress {
    /// A bar that draws only if stderr is a terminal.
    pub fn for_stderr() -> Self {
        Progress {
            started: Instant::now(),
            last_draw: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Reports that `fraction` (0 to 1) of the run is done.
    pub fn update(&mut self, fraction: f64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let elapsed = now.duration_since(self.started);
        if elapsed < SHOW_AFTER {
            return;
        }
        if self
            .last_draw
            .is_some_and(|t| now.duration_since(t) < REDRAW_EVERY)
        {
            return;
        }
        self.last_draw = Some(now);
        let line = render(fraction, elapsed);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}");
        let _ = err.flush();
    }

    /// Erases the bar if it was drawn.
    pub fn finish(&mut self) {
        if self.last_draw.take().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:width$}\r", "", width = WIDTH + 40);
            let _ = err.flush();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// One line: `simulating [#######.......]  42%  3s, about 4s left`.
pub fn render(fraction: f64, elapsed: Duration) -> String {
    let f = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let filled = (f * WIDTH as f64).round() as usize;
    let bar: String = "#".repeat(filled) + &".".repeat(WIDTH - filled);
    let secs = elapsed.as_secs_f64();
    let left = if f > 0.01 {
        format!(", about {:.0}s left", secs * (1.0 - f) / f)
    } else {
        String::new()
    };
    format!("simulating [{bar}] {:3.0}%  {secs:.0}s{left}", f * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_is_proportional_and_clamped() {
        let half = render(0.5, Duration::from_secs(4));
        assert!(
            half.contains(&format!("[{}{}]", "#".repeat(15), ".".repeat(15))),
            "{half}"
        );
        assert!(half.contains(" 50%"));
        assert!(half.contains("about 4s left"));
        let over = render(3.0, Duration::from_secs(1));
        assert!(over.contains(&"#".repeat(WIDTH)));
        let nan = render(f64::NAN, Duration::from_secs(1));
        assert!(nan.contains(&".".repeat(WIDTH)));
    }
}
