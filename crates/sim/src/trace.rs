//! Streaming Perfetto / Chrome trace-event JSON (the "JSON object format"
//! that ui.perfetto.dev and chrome://tracing open).
//!
//! Events are written as the run goes, so memory does not grow with the
//! run. Tracks:
//! - process 1 "processors": one track per CPU (tid = CPU number) with a
//!   duration slice per stretch a thread ran, and one track per CPU
//!   (tid = 1000 + CPU) with the stolen intervals;
//! - process 2 "schedulers": tid 0 for the top scheduler, tid `i + 1` for
//!   instance `i`; instant events for grants and revocations (on the
//!   granting parent's track) and policy events (replenishments, budget
//!   exhaustion, misses the policy saw, notes);
//! - process 3 "threads": one track per thread (tid = its index in the
//!   report) with an instant event per deadline miss the workload saw.
//!
//! Timestamps are microseconds with three decimals, written from integer
//! nanoseconds so the text is the same on every platform.

use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};

/// Process ids of the track groups.
pub const PID_CPUS: u32 = 1;
/// Scheduler instance tracks.
pub const PID_SCHEDULERS: u32 = 2;
/// Thread tracks.
pub const PID_THREADS: u32 = 3;
/// Offset of the stolen-time track ids.
pub const STOLEN_TID: u32 = 1000;

/// Writes trace events to a `Write` as they happen.
pub struct TraceWriter {
    out: BufWriter<Box<dyn Write>>,
    first: bool,
    err: Option<io::Error>,
    line: String,
}

/// Appends `s` as a JSON string literal.
pub fn json_str(buf: &mut String, s: &str) {
    buf.push('"');
    for c in s.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            '\n' => buf.push_str("\\n"),
            '\r' => buf.push_str("\\r"),
            '\t' => buf.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(buf, "\\u{:04x}", c as u32);
            }
            c => buf.push(c),
        }
    }
    buf.push('"');
}

/// Appends nanoseconds as microseconds with three decimals.
fn micros(buf: &mut String, ns: u64) {
    let _ = write!(buf, "{}.{:03}", ns / 1000, ns % 1000);
}

impl TraceWriter {
    /// Starts a trace on `out`.
    pub fn new(out: Box<dyn Write>) -> Self {
        let mut t = TraceWriter {
            out: BufWriter::with_capacity(1 << 16, out),
            first: true,
            err: None,
            line: String::new(),
        };
        t.raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        t.process(PID_CPUS, "processors", 0);
        t.process(PID_SCHEDULERS, "schedulers", 1);
        t.process(PID_THREADS, "threads", 2);
        t
    }

    fn raw(&mut self, s: &str) {
        if self.err.is_none() {
            if let Err(e) = self.out.write_all(s.as_bytes()) {
                self.err = Some(e);
            }
        }
    }

    fn emit(&mut self) {
        let mut line = std::mem::take(&mut self.line);
        if !self.first {
            self.raw(",\n");
        }
        self.first = false;
        self.raw(&line);
        line.clear();
        self.line = line;
    }

    fn process(&mut self, pid: u32, name: &str, sort: u32) {
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"name\":\"process_name\",\"args\":{{\"name\":"
        );
        json_str(&mut self.line, name);
        self.line.push_str("}}");
        self.emit();
        let _ = write!(
            self.line,
            "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"name\":\"process_sort_index\",\"args\":{{\"sort_index\":{sort}}}}}"
        );
        self.emit();
    }

    /// Names a track.
    pub fn track(&mut self, pid: u32, tid: u32, name: &str) {
        self.line.clear();
        let _ = write!(self.line, "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":");
        json_str(&mut self.line, name);
        self.line.push_str("}}");
        self.emit();
        let _ = write!(
            self.line,
            "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{tid}}}}}"
        );
        self.emit();
    }

    /// A duration slice `[start, end)` named `name`; `args` is a JSON
    /// object's body (`"k":v,...`) or empty.
    pub fn slice(&mut self, pid: u32, tid: u32, name: &str, start: u64, end: u64, args: &str) {
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":"
        );
        micros(&mut self.line, start);
        self.line.push_str(",\"dur\":");
        micros(&mut self.line, end.saturating_sub(start));
        self.line.push_str(",\"name\":");
        json_str(&mut self.line, name);
        if !args.is_empty() {
            let _ = write!(self.line, ",\"args\":{{{args}}}");
        }
        self.line.push('}');
        self.emit();
    }

    /// An instant event on one track.
    pub fn instant(&mut self, pid: u32, tid: u32, name: &str, at: u64, args: &str) {
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{tid},\"ts\":"
        );
        micros(&mut self.line, at);
        self.line.push_str(",\"name\":");
        json_str(&mut self.line, name);
        if !args.is_empty() {
            let _ = write!(self.line, ",\"args\":{{{args}}}");
        }
        self.line.push('}');
        self.emit();
    }

    /// Closes the JSON and flushes.
    ///
    /// # Errors
    /// The first write error of the whole trace.
    pub fn finish(mut self) -> io::Result<()> {
        self.raw("\n]}\n");
        if self.err.is_none() {
            if let Err(e) = self.out.flush() {
                self.err = Some(e);
            }
        }
        match self.err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_valid_json() {
        let buf = Shared::default();
        let mut t = TraceWriter::new(Box::new(buf.clone()));
        t.track(PID_CPUS, 0, "cpu0");
        t.slice(
            PID_CPUS,
            0,
            "a \"quoted\"\nname",
            1_500,
            12_345_678,
            "\"k\":1",
        );
        t.instant(PID_THREADS, 3, "miss", 2_000_001, "");
        t.finish().unwrap();
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let x = evs.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(x["ts"].as_f64().unwrap(), 1.5);
        assert_eq!(x["dur"].as_f64().unwrap(), 12_344.178);
        assert_eq!(x["name"], "a \"quoted\"\nname");
        assert!(text.contains("\"ts\":2000.001"));
    }
}
