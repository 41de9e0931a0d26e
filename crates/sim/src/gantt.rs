//! An SVG Gantt chart of a time window: one row per thread, a bar for each
//! stretch it ran, colored by processor (or, asked, by thread, each bar
//! then naming its processor in a tooltip); deadline misses are red marks;
//! stolen time gets a row per processor at the bottom. Only what falls in
//! the window is kept, so memory is bounded by the window, not the run;
//! a window holding more than [`MAX_MARKS`] bars and marks (an SVG no
//! viewer could open) stops the chart, and the run fails with a clear
//! error rather than growing without bound.

use hsched_core::Duration;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Asks for a Gantt chart of `[from, to)` written to `out` at the end of
/// the run.
pub struct GanttRequest {
    /// Window start (simulated time).
    pub from: Duration,
    /// Window end.
    pub to: Duration,
    /// Where the SVG goes.
    pub out: Box<dyn Write>,
    /// What a bar's color tells.
    pub color: GanttColor,
}

/// What the colors of a Gantt chart's bars tell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GanttColor {
    /// The processor a stretch ran on (a legend of processors on top).
    #[default]
    Cpu,
    /// The thread: one color per row, so a thread's runs stand out in
    /// a busy chart; each bar's tooltip names its processor.
    Thread,
}

impl std::fmt::Debug for GanttRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GanttRequest")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("color", &self.color)
            .finish_non_exhaustive()
    }
}

/// Colors for processors 0, 1, ... (repeating).
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
    "#bab0ac", "#e15759",
];

/// Most bars and marks one chart holds (about 100 MB of SVG).
pub const MAX_MARKS: usize = 1_000_000;

pub(crate) struct Gantt {
    /// More than [`MAX_MARKS`] fell in the window: nothing more is kept.
    full: bool,
    from: u64,
    to: u64,
    out: Box<dyn Write>,
    color: GanttColor,
    /// (thread, cpu, start, end), clipped to the window.
    runs: Vec<(u32, u32, u64, u64)>,
    /// (thread, time).
    misses: Vec<(u32, u64)>,
    /// (cpu, start, end).
    stolen: Vec<(u32, u64, u64)>,
}

impl Gantt {
    pub fn new(req: GanttRequest) -> Self {
        let from = req.from.as_nanos();
        let to = req.to.as_nanos().max(from + 1);
        Gantt {
            full: false,
            from,
            to,
            out: req.out,
            color: req.color,
            runs: Vec::new(),
            misses: Vec::new(),
            stolen: Vec::new(),
        }
    }

    fn clip(&self, s: u64, e: u64) -> Option<(u64, u64)> {
        let (s, e) = (s.max(self.from), e.min(self.to));
        (s < e).then_some((s, e))
    }

    /// Whether the window held more than [`MAX_MARKS`] bars and marks.
    pub fn full(&self) -> bool {
        self.full
    }

    /// Counts one more bar or mark; past the limit, drops what is kept.
    fn room(&mut self) -> bool {
        if self.full {
            return false;
        }
        if self.runs.len() + self.misses.len() + self.stolen.len() < MAX_MARKS {
            return true;
        }
        self.full = true;
        self.runs = Vec::new();
        self.misses = Vec::new();
        self.stolen = Vec::new();
        false
    }

    pub fn run(&mut self, thread: u32, cpu: u32, s: u64, e: u64) {
        if let Some((s, e)) = self.clip(s, e) {
            if self.room() {
                self.runs.push((thread, cpu, s, e));
            }
        }
    }

    pub fn miss(&mut self, thread: u32, at: u64) {
        if at >= self.from && at < self.to && self.room() {
            self.misses.push((thread, at));
        }
    }

    pub fn stolen(&mut self, cpu: u32, s: u64, e: u64) {
        if let Some((s, e)) = self.clip(s, e) {
            if self.room() {
                self.stolen.push((cpu, s, e));
            }
        }
    }

    /// Writes the chart.
    pub fn write(mut self, threads: &[String], cpus: usize) -> io::Result<()> {
        const LEFT: f64 = 170.0;
        const WIDTH: f64 = 1000.0;
        const ROW: f64 = 18.0;
        const TOP: f64 = 48.0;
        let span = (self.to - self.from) as f64;
        let x = |t: u64| LEFT + (t - self.from) as f64 * WIDTH / span;
        let stolen_rows = if self.stolen.is_empty() { 0 } else { cpus };
        let rows = threads.len() + stolen_rows;
        let height = TOP + rows as f64 * ROW + 30.0;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{height:.0}\" font-family=\"monospace\" font-size=\"11\">",
            LEFT + WIDTH + 20.0
        );
        let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
        let _ = writeln!(
            s,
            "<text x=\"4\" y=\"14\">hsched sim: {} .. {}</text>",
            Duration(self.from),
            Duration(self.to)
        );
        // Legend: the processors' colors (a thread's color is its row's).
        let legend = if self.color == GanttColor::Cpu {
            cpus
        } else {
            0
        };
        for c in 0..legend.min(16) {
            let lx = LEFT + c as f64 * 60.0;
            let _ = writeln!(
                s,
                "<rect x=\"{lx:.1}\" y=\"4\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"13\">cpu{c}</text>",
                PALETTE[c % PALETTE.len()],
                lx + 13.0
            );
        }
        // Time axis: about ten ticks at a round step.
        let step = nice_step((self.to - self.from) / 10);
        let mut t = self.from.div_ceil(step) * step;
        while t <= self.to {
            let tx = x(t);
            let _ = writeln!(
                s,
                "<line x1=\"{tx:.2}\" y1=\"{:.1}\" x2=\"{tx:.2}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{tx:.2}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                TOP - 6.0,
                TOP + rows as f64 * ROW,
                TOP - 10.0,
                Duration(t)
            );
            t += step;
        }
        for (i, name) in threads.iter().enumerate() {
            let y = TOP + i as f64 * ROW;
            let _ = write!(s, "<text x=\"4\" y=\"{:.1}\">", y + 13.0);
            xml_escape(&mut s, name);
            let _ = writeln!(s, "</text>");
        }
        for c in 0..stolen_rows {
            let y = TOP + (threads.len() + c) as f64 * ROW;
            let _ = writeln!(
                s,
                "<text x=\"4\" y=\"{:.1}\">cpu{c} stolen</text>",
                y + 13.0
            );
        }
        self.runs.sort_unstable();
        for &(th, cpu, a, b) in &self.runs {
            let y = TOP + th as f64 * ROW + 2.0;
            let (w, h) = ((x(b) - x(a)).max(0.3), ROW - 4.0);
            match self.color {
                GanttColor::Cpu => {
                    let _ = writeln!(
                        s,
                        "<rect x=\"{:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{h:.1}\" fill=\"{}\"/>",
                        x(a),
                        PALETTE[cpu as usize % PALETTE.len()]
                    );
                }
                GanttColor::Thread => {
                    let _ = writeln!(
                        s,
                        "<rect x=\"{:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{h:.1}\" fill=\"{}\"><title>cpu{cpu}</title></rect>",
                        x(a),
                        PALETTE[th as usize % PALETTE.len()]
                    );
                }
            }
        }
        for &(cpu, a, b) in &self.stolen {
            let y = TOP + (threads.len() + cpu as usize) as f64 * ROW + 2.0;
            let _ = writeln!(
                s,
                "<rect x=\"{:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"#555\"/>",
                x(a),
                (x(b) - x(a)).max(0.3),
                ROW - 4.0
            );
        }
        for &(th, at) in &self.misses {
            let (mx, y) = (x(at), TOP + th as f64 * ROW);
            let _ = writeln!(
                s,
                "<path d=\"M{:.2} {y:.1} L{:.2} {y:.1} L{mx:.2} {:.1} Z\" fill=\"red\"><title>deadline miss at {}</title></path>",
                mx - 4.0,
                mx + 4.0,
                y + 8.0,
                Duration(at)
            );
        }
        s.push_str("</svg>\n");
        self.out.write_all(s.as_bytes())?;
        self.out.flush()
    }
}

fn xml_escape(s: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '&' => s.push_str("&amp;"),
            '"' => s.push_str("&quot;"),
            c => s.push(c),
        }
    }
}

/// The smallest of 1, 2, 5 × 10^k nanoseconds at or above `raw`.
fn nice_step(raw: u64) -> u64 {
    let mut p = 1u64;
    loop {
        for m in [1, 2, 5] {
            if let Some(v) = p.checked_mul(m) {
                if v >= raw.max(1) {
                    return v;
                }
            }
        }
        match p.checked_mul(10) {
            Some(n) => p = n,
            None => return u64::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(0), 1);
        assert_eq!(nice_step(3), 5);
        assert_eq!(nice_step(3_300_000), 5_000_000);
        assert_eq!(nice_step(10_000_000), 10_000_000);
    }

    /// The chart of two threads that each ran on both processors.
    fn chart(color: GanttColor) -> String {
        #[derive(Clone, Default)]
        struct Buf(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.borrow_mut().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let mut g = Gantt::new(GanttRequest {
            from: Duration(0),
            to: Duration(100),
            out: Box::new(buf.clone()),
            color,
        });
        g.run(0, 0, 0, 10);
        g.run(0, 1, 20, 30);
        g.run(1, 1, 10, 20);
        g.run(1, 0, 30, 40);
        g.write(&["a".into(), "b".into()], 2).unwrap();
        let out = buf.0.borrow().clone();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn bars_take_the_color_of_their_processor_or_of_their_thread() {
        let fill = |svg: &str, c: &str| svg.matches(&format!("fill=\"{c}\"")).count();
        let (cpu0, cpu1) = (PALETTE[0], PALETTE[1]);
        // By processor: two bars each plus one legend box each.
        let by_cpu = chart(GanttColor::Cpu);
        assert_eq!((fill(&by_cpu, cpu0), fill(&by_cpu, cpu1)), (3, 3));
        assert!(!by_cpu.contains("<title>cpu"));
        // By thread: thread 0's two bars in the first color, thread 1's in
        // the second, no processor legend, each bar naming its processor.
        let by_thread = chart(GanttColor::Thread);
        assert_eq!((fill(&by_thread, cpu0), fill(&by_thread, cpu1)), (2, 2));
        assert!(!by_thread.contains(">cpu0</text>"));
        assert_eq!(by_thread.matches("<title>cpu1</title>").count(), 2);
    }
}
