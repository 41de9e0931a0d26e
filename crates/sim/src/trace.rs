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

use std::io::{self, Write};

/// Process ids of the track groups.
pub const PID_CPUS: u32 = 1;
/// Scheduler instance tracks.
pub const PID_SCHEDULERS: u32 = 2;
/// Thread tracks.
pub const PID_THREADS: u32 = 3;
/// Offset of the stolen-time track ids.
pub const STOLEN_TID: u32 = 1000;

/// How much text gathers before it is written out.
const SPILL: usize = 1 << 16;

/// Writes trace events to a `Write` as they happen.
///
/// Events are formatted straight into one buffer with the helpers below
/// rather than `write!`: a traced run spends most of its time here, and
/// `core::fmt` took about three times as many instructions.
pub struct TraceWriter {
    out: Box<dyn Write>,
    buf: Vec<u8>,
    first: bool,
    err: Option<io::Error>,
    /// The window `[from, to)` events are kept in, ns; slices are clipped
    /// to it. The whole run when none was asked for.
    from: u64,
    to: u64,
}

/// The bytes a JSON string cannot hold as they are.
const ESCAPED: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Appends `s` as a JSON string literal.
pub fn json_str(buf: &mut Vec<u8>, s: &str) {
    buf.push(b'"');
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| ESCAPED[usize::from(b)]) {
        buf.extend_from_slice(bytes);
    } else {
        for &b in bytes {
            match b {
                b'"' => buf.extend_from_slice(b"\\\""),
                b'\\' => buf.extend_from_slice(b"\\\\"),
                b'\n' => buf.extend_from_slice(b"\\n"),
                b'\r' => buf.extend_from_slice(b"\\r"),
                b'\t' => buf.extend_from_slice(b"\\t"),
                b if b < 0x20 => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    buf.extend_from_slice(b"\\u00");
                    buf.push(HEX[usize::from(b >> 4)]);
                    buf.push(HEX[usize::from(b & 15)]);
                }
                // Bytes of multi-byte characters pass through unchanged.
                b => buf.push(b),
            }
        }
    }
    buf.push(b'"');
}

/// `s` as a JSON string literal, quotes included: names that are written
/// many times are escaped once (see [`TraceWriter::slice`]).
pub fn json_literal(s: &str) -> Box<[u8]> {
    let mut v = Vec::with_capacity(s.len() + 2);
    json_str(&mut v, s);
    v.into_boxed_slice()
}

/// Appends `v` in decimal, two digits per step. The digits are made
/// right-aligned in a scratch array and appended as a fixed 20 bytes, the
/// excess then cut: a copy of a variable length would call `memcpy`.
pub fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    if v < 10 {
        // Process and most track ids.
        buf.push(b'0' + v as u8);
        return;
    }
    // u64::MAX has 20 digits; they end at index 20.
    let mut digits = [0u8; 40];
    let mut i = 20;
    while v >= 100 {
        let p = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&PAIRS[p..p + 2]);
    }
    if v >= 10 {
        let p = v as usize * 2;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&PAIRS[p..p + 2]);
    } else {
        i -= 1;
        digits[i] = b'0' + v as u8;
    }
    let start = buf.len();
    let chunk: &[u8; 20] = digits[i..i + 20].try_into().expect("20 bytes");
    buf.extend_from_slice(chunk);
    buf.truncate(start + 20 - i);
}

/// Appends nanoseconds as microseconds with three decimals.
fn micros(buf: &mut Vec<u8>, ns: u64) {
    push_u64(buf, ns / 1000);
    let f = ns % 1000;
    let digit = |d: u64| b'0' + d as u8;
    buf.extend_from_slice(&[b'.', digit(f / 100), digit(f / 10 % 10), digit(f % 10)]);
}

impl TraceWriter {
    /// Starts a trace on `out` of the events in `[from, to)` ns (the
    /// tracks are named whatever the window).
    pub fn new(out: Box<dyn Write>, (from, to): (u64, u64)) -> Self {
        let mut t = TraceWriter {
            out,
            buf: Vec::with_capacity(SPILL + 1024),
            first: true,
            err: None,
            from,
            to,
        };
        t.buf
            .extend_from_slice(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        t.process(PID_CPUS, "processors", 0);
        t.process(PID_SCHEDULERS, "schedulers", 1);
        t.process(PID_THREADS, "threads", 2);
        t
    }

    /// Writes the buffer out once it is full. After a write error nothing
    /// more is written (and the buffer no longer grows); `finish` reports it.
    fn spill(&mut self, at_least: usize) {
        if self.buf.len() >= at_least {
            if self.err.is_none() {
                if let Err(e) = self.out.write_all(&self.buf) {
                    self.err = Some(e);
                }
            }
            self.buf.clear();
        }
    }

    /// Opens an event: the separator from the previous one, `{` and the
    /// fields up to the track. Inlined so that `head`'s length is known
    /// and its copy needs no `memcpy` call.
    #[inline(always)]
    fn open(&mut self, head: &[u8], pid: u32, tid: u32) {
        if !self.first {
            self.buf.extend_from_slice(b",\n");
        }
        self.first = false;
        self.buf.extend_from_slice(head);
        self.buf.extend_from_slice(b"\"pid\":");
        push_u64(&mut self.buf, pid.into());
        self.buf.extend_from_slice(b",\"tid\":");
        push_u64(&mut self.buf, tid.into());
    }

    /// Closes an event: its `args` if any, `}`, and a write if the buffer
    /// is full.
    fn close(&mut self, args: &[u8]) {
        if !args.is_empty() {
            self.buf.extend_from_slice(b",\"args\":{");
            self.buf.extend_from_slice(args);
            self.buf.push(b'}');
        }
        self.buf.push(b'}');
        self.spill(SPILL);
    }

    /// A metadata event of track `tid`: its `key` (a name or a sort index)
    /// set to the JSON value `value`.
    fn meta(&mut self, pid: u32, tid: u32, key: &str, arg: &str, value: &[u8]) {
        self.open(b"{\"ph\":\"M\",", pid, tid);
        self.buf.extend_from_slice(b",\"name\":");
        json_str(&mut self.buf, key);
        self.buf.extend_from_slice(b",\"args\":{");
        json_str(&mut self.buf, arg);
        self.buf.push(b':');
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(b"}}");
        self.spill(SPILL);
    }

    /// Names a track group and sets its place among the groups.
    fn process(&mut self, pid: u32, name: &str, sort: u32) {
        let mut v = Vec::new();
        json_str(&mut v, name);
        self.meta(pid, 0, "process_name", "name", &v);
        v.clear();
        push_u64(&mut v, sort.into());
        self.meta(pid, 0, "process_sort_index", "sort_index", &v);
    }

    /// Names a track.
    pub fn track(&mut self, pid: u32, tid: u32, name: &str) {
        let mut v = Vec::new();
        json_str(&mut v, name);
        self.meta(pid, tid, "thread_name", "name", &v);
        v.clear();
        push_u64(&mut v, tid.into());
        self.meta(pid, tid, "thread_sort_index", "sort_index", &v);
    }

    /// The window `[from, to)`, ns.
    pub fn window(&self) -> (u64, u64) {
        (self.from, self.to)
    }

    /// Whether an instant event at `at` is in the window (so that callers
    /// can skip building its arguments).
    #[inline(always)]
    pub fn covers(&self, at: u64) -> bool {
        self.from <= at && at < self.to
    }

    /// A duration slice `[start, end)` named `name`, a JSON string literal
    /// ([`json_literal`]), clipped to the window (a slice of no length is
    /// kept if it starts in the window); `args` is a JSON object's body
    /// (`"k":v,...`) or empty.
    pub fn slice(&mut self, pid: u32, tid: u32, name: &[u8], start: u64, end: u64, args: &[u8]) {
        if start >= self.to || (end <= self.from && start < self.from) {
            return;
        }
        let (start, end) = (start.max(self.from), end.min(self.to));
        self.open(b"{\"ph\":\"X\",", pid, tid);
        self.buf.extend_from_slice(b",\"ts\":");
        micros(&mut self.buf, start);
        self.buf.extend_from_slice(b",\"dur\":");
        micros(&mut self.buf, end.saturating_sub(start));
        self.buf.extend_from_slice(b",\"name\":");
        self.buf.extend_from_slice(name);
        self.close(args);
    }

    /// An instant event on one track, if in the window; `name` and `args`
    /// as for [`slice`](Self::slice).
    pub fn instant(&mut self, pid: u32, tid: u32, name: &[u8], at: u64, args: &[u8]) {
        if !self.covers(at) {
            return;
        }
        self.open(b"{\"ph\":\"i\",\"s\":\"t\",", pid, tid);
        self.buf.extend_from_slice(b",\"ts\":");
        micros(&mut self.buf, at);
        self.buf.extend_from_slice(b",\"name\":");
        self.buf.extend_from_slice(name);
        self.close(args);
    }

    /// Closes the JSON and flushes.
    ///
    /// # Errors
    /// The first write error of the whole trace.
    pub fn finish(mut self) -> io::Result<()> {
        self.buf.extend_from_slice(b"\n]}\n");
        self.spill(0);
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
        let mut t = TraceWriter::new(Box::new(buf.clone()), (0, u64::MAX));
        t.track(PID_CPUS, 0, "cpu0");
        t.slice(
            PID_CPUS,
            0,
            &json_literal("a \"quoted\"\nname"),
            1_500,
            12_345_678,
            b"\"k\":1",
        );
        t.instant(PID_THREADS, 3, b"\"miss\"", 2_000_001, b"");
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

    #[test]
    fn numbers_and_strings_read_as_written() {
        let mut powers: Vec<u64> = (0..20).map(|k| 10u64.pow(k)).collect();
        powers.extend((1..20).map(|k| 10u64.pow(k) - 1));
        for v in [0, 7, 101, 123_456_789, u64::MAX].into_iter().chain(powers) {
            // After other text, as in a trace.
            let mut b = b"ts:".to_vec();
            push_u64(&mut b, v);
            assert_eq!(String::from_utf8(b).unwrap(), format!("ts:{v}"));
        }
        for ns in [0, 5, 999, 1_000, 1_010, 931_000_931, u64::MAX] {
            let mut b = Vec::new();
            micros(&mut b, ns);
            let want = format!("{}.{:03}", ns / 1000, ns % 1000);
            assert_eq!(String::from_utf8(b).unwrap(), want);
        }
        for s in [
            "plain",
            "a\"b\\c\n\r\t\u{1}\u{1f}",
            "caf\u{e9} \u{1f3b5}",
            "",
        ] {
            let mut b = Vec::new();
            json_str(&mut b, s);
            let text = String::from_utf8(b).unwrap();
            assert_eq!(serde_json::from_str::<String>(&text).unwrap(), s);
            assert_eq!(text, serde_json::to_string(s).unwrap());
        }
    }
}
