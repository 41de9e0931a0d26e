//! Shared-memory queues whose fill level hsched's live monitor reads: the
//! "shared-queue library" of Steere et al. 1998, §3.2 (symbiotic interfaces), for
//! programs that can link a library, beside the pipes and FIFOs the monitor
//! reads from unmodified programs (`hsched-linux`, `progress.rs`).
//!
//! A queue is a bounded single-producer single-consumer byte ring in a file
//! `/dev/shm/hsched-progress/<pid>.<queue>`, created by the producer (`pid`
//! is the producer's process id; the naming convention is the
//! registration) and opened by the consumer, which records its own pid in
//! the header. The daemon reads only the header, every 10 ms, and sends
//! `progress { queue: "shm:<pid>.<queue>", fill, size, role }` for both
//! processes' threads under `realrate`: `fill = head − tail`, `size` the
//! capacity. Nothing is sent to the daemon; the file is the interface.
//!
//! # Header (64 bytes, little-endian, naturally aligned)
//! | offset | type | field |
//! |---:|---|---|
//! | 0 | u64 | [`MAGIC`] |
//! | 8 | u32 | [`VERSION`] |
//! | 12 | u32 | reserved (0) |
//! | 16 | u64 | capacity in bytes (data follows the header) |
//! | 24 | u64 | head: bytes ever written (producer only) |
//! | 32 | u64 | tail: bytes ever read (consumer only) |
//! | 40 | i32 | producer pid |
//! | 44 | i32 | consumer pid (0 until opened) |
//!
//! Head and tail only grow (wrapping at 2^64): each side stores its own
//! counter with release order after moving data, and loads the other's with
//! acquire order, so a reader of the header (the monitor) always sees
//! `0 ≤ head − tail ≤ capacity` up to one in-flight operation.
//!
//! ```no_run
//! use hsched_progress::{Consumer, Producer};
//! let p = Producer::create("frames", 1 << 16).unwrap();
//! let c = Consumer::open(std::process::id() as i32, "frames").unwrap();
//! assert_eq!(p.push(b"hello"), 5);
//! let mut buf = [0u8; 16];
//! assert_eq!(c.pop(&mut buf), 5);
//! ```
#![warn(missing_docs)]
// Only `map` uses unsafe code (mmap and atomics on the mapping); each block
// says why it is sound.
#![deny(unsafe_code)]

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

/// Directory of the queue files.
pub const DIR: &str = "/dev/shm/hsched-progress";
/// First header word: `"hschedPQ"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"hschedPQ");
/// Header layout version.
pub const VERSION: u32 = 1;
/// Header size in bytes; data starts here.
pub const HEADER: usize = 64;

/// The path of queue `name` of producer `pid`.
///
/// # Errors
/// A name that is empty or holds `/` or a NUL byte.
pub fn path(pid: i32, name: &str) -> io::Result<PathBuf> {
    if name.is_empty() || name.contains('/') || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad queue name {name:?}: non-empty, without `/`"),
        ));
    }
    Ok(PathBuf::from(format!("{DIR}/{pid}.{name}")))
}

/// A decoded header, as the monitor reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Capacity in bytes.
    pub size: u64,
    /// Bytes ever written.
    pub head: u64,
    /// Bytes ever read.
    pub tail: u64,
    /// Producer process.
    pub producer: i32,
    /// Consumer process (0: none yet).
    pub consumer: i32,
}

impl Header {
    /// Bytes queued, clamped to `[0, size]`.
    pub fn fill(&self) -> u64 {
        self.head.wrapping_sub(self.tail).min(self.size)
    }

    /// Decodes the first [`HEADER`] bytes of a queue file.
    ///
    /// # Errors
    /// Wrong magic or version, or a short buffer.
    pub fn decode(b: &[u8]) -> io::Result<Header> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
        if b.len() < HEADER {
            return Err(bad("short header"));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
        if u64_at(0) != MAGIC {
            return Err(bad("not an hsched-progress queue (magic)"));
        }
        if u32_at(8) != VERSION {
            return Err(bad("unsupported hsched-progress version"));
        }
        Ok(Header {
            size: u64_at(16),
            head: u64_at(24),
            tail: u64_at(32),
            producer: u32_at(40) as i32,
            consumer: u32_at(44) as i32,
        })
    }

    /// Reads the header of the queue file at `p` (no mapping).
    ///
    /// # Errors
    /// The file cannot be read or is not a queue.
    pub fn read(p: &std::path::Path) -> io::Result<Header> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(p)?;
        let mut b = [0u8; HEADER];
        f.read_exact_at(&mut b, 0)?;
        Header::decode(&b)
    }
}

#[allow(unsafe_code)]
mod map {
    use super::*;
    use std::os::fd::AsRawFd;

    /// A shared mapping of a whole queue file.
    pub struct Map {
        ptr: *mut u8,
        len: usize,
    }

    // SAFETY: the mapping is plain shared memory; all shared words are
    // accessed through atomics, and the data area is written only by the
    // single producer in bytes the consumer does not read until head moves.
    unsafe impl Send for Map {}

    impl Map {
        pub fn new(f: &std::fs::File, len: usize) -> io::Result<Map> {
            // SAFETY: a fresh shared mapping of an open file of at least
            // `len` bytes; the kernel chooses the address.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    f.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            Ok(Map { ptr: p.cast(), len })
        }

        pub fn u64(&self, off: usize) -> &AtomicU64 {
            assert!(off.is_multiple_of(8) && off + 8 <= HEADER);
            // SAFETY: in bounds (header), 8-aligned (page-aligned base), and
            // only ever accessed atomically while the mapping lives.
            unsafe { &*(self.ptr.add(off) as *const AtomicU64) }
        }

        pub fn i32(&self, off: usize) -> &AtomicI32 {
            assert!(off.is_multiple_of(4) && off + 4 <= HEADER);
            // SAFETY: as `u64`, 4-aligned.
            unsafe { &*(self.ptr.add(off) as *const AtomicI32) }
        }

        /// Copies `src` into the data area at ring offset `at`.
        pub fn write(&self, at: usize, src: &[u8]) {
            assert!(HEADER + at + src.len() <= self.len);
            // SAFETY: in bounds; the producer owns these bytes until it
            // publishes them by moving head.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(HEADER + at), src.len())
            }
        }

        /// Copies from the data area at ring offset `at` into `dst`.
        pub fn read(&self, at: usize, dst: &mut [u8]) {
            assert!(HEADER + at + dst.len() <= self.len);
            // SAFETY: in bounds; the consumer owns these bytes (published by
            // head, not yet released by tail).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.ptr.add(HEADER + at),
                    dst.as_mut_ptr(),
                    dst.len(),
                )
            }
        }
    }

    impl Drop for Map {
        fn drop(&mut self) {
            // SAFETY: unmaps exactly what `new` mapped; no reference into it
            // outlives `self`.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
        }
    }
}

use map::Map;

const OFF_SIZE: usize = 16;
const OFF_HEAD: usize = 24;
const OFF_TAIL: usize = 32;
const OFF_PRODUCER: usize = 40;
const OFF_CONSUMER: usize = 44;

fn ring_copy(len: u64, pos: u64, n: usize) -> [(usize, usize); 2] {
    let at = (pos % len) as usize;
    let first = n.min(len as usize - at);
    [(at, first), (0, n - first)]
}

/// The producer side: creates the queue file and writes.
pub struct Producer {
    map: Map,
    size: u64,
    path: PathBuf,
}

impl Producer {
    /// Creates queue `name` of `size` bytes for this process (replacing a
    /// stale file of the same name).
    ///
    /// # Errors
    /// A bad name or size, or the file cannot be created.
    pub fn create(name: &str, size: usize) -> io::Result<Producer> {
        if size == 0 || size > (1 << 40) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "size must be in 1..=2^40 bytes",
            ));
        }
        let pid = std::process::id() as i32;
        let path = path(pid, name)?;
        std::fs::create_dir_all(DIR)?;
        // Made under a hidden name (the monitor skips names starting with a
        // dot), then renamed: a reader never sees a half-made queue.
        let tmp = PathBuf::from(format!("{DIR}/.{pid}.{name}.tmp"));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.set_len((HEADER + size) as u64)?;
        let map = Map::new(&f, HEADER + size)?;
        map.u64(OFF_SIZE).store(size as u64, Ordering::Relaxed);
        map.i32(OFF_PRODUCER).store(pid, Ordering::Relaxed);
        // Magic and version last: a reader never sees a half-made header.
        map.u64(8).store(VERSION as u64, Ordering::Relaxed);
        map.u64(0).store(MAGIC, Ordering::Release);
        std::fs::rename(&tmp, &path)?;
        Ok(Producer {
            map,
            size: size as u64,
            path,
        })
    }

    /// Writes as much of `buf` as fits; returns the bytes written (0 when
    /// full). Never blocks.
    pub fn push(&self, buf: &[u8]) -> usize {
        let head = self.map.u64(OFF_HEAD).load(Ordering::Relaxed);
        let tail = self.map.u64(OFF_TAIL).load(Ordering::Acquire);
        let free = self.size - head.wrapping_sub(tail).min(self.size);
        let n = buf.len().min(free as usize);
        let mut done = 0;
        for (at, len) in ring_copy(self.size, head, n) {
            self.map.write(at, &buf[done..done + len]);
            done += len;
        }
        self.map
            .u64(OFF_HEAD)
            .store(head.wrapping_add(n as u64), Ordering::Release);
        n
    }

    /// Bytes queued.
    pub fn fill(&self) -> u64 {
        let head = self.map.u64(OFF_HEAD).load(Ordering::Relaxed);
        head.wrapping_sub(self.map.u64(OFF_TAIL).load(Ordering::Acquire))
            .min(self.size)
    }

    /// Capacity in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for Producer {
    /// Removes the queue file: the monitor forgets the queue.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The consumer side: opens a producer's queue and reads.
pub struct Consumer {
    map: Map,
    size: u64,
}

impl Consumer {
    /// Opens queue `name` of producer process `pid` and records this
    /// process as its consumer.
    ///
    /// # Errors
    /// No such queue, or a file that is not one.
    pub fn open(pid: i32, name: &str) -> io::Result<Consumer> {
        let p = path(pid, name)?;
        let h = Header::read(&p)?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)?;
        let len = f.metadata()?.len();
        if len < HEADER as u64 + h.size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "queue file shorter than its size",
            ));
        }
        let map = Map::new(&f, HEADER + h.size as usize)?;
        map.i32(OFF_CONSUMER)
            .store(std::process::id() as i32, Ordering::Release);
        Ok(Consumer { map, size: h.size })
    }

    /// Reads up to `buf.len()` bytes; returns how many (0 when empty).
    /// Never blocks.
    pub fn pop(&self, buf: &mut [u8]) -> usize {
        let tail = self.map.u64(OFF_TAIL).load(Ordering::Relaxed);
        let head = self.map.u64(OFF_HEAD).load(Ordering::Acquire);
        let n = buf
            .len()
            .min(head.wrapping_sub(tail).min(self.size) as usize);
        let mut done = 0;
        for (at, len) in ring_copy(self.size, tail, n) {
            self.map.read(at, &mut buf[done..done + len]);
            done += len;
        }
        self.map
            .u64(OFF_TAIL)
            .store(tail.wrapping_add(n as u64), Ordering::Release);
        n
    }

    /// Bytes queued.
    pub fn fill(&self) -> u64 {
        self.map
            .u64(OFF_HEAD)
            .load(Ordering::Acquire)
            .wrapping_sub(self.map.u64(OFF_TAIL).load(Ordering::Relaxed))
            .min(self.size)
    }

    /// Capacity in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_go_through_in_order_across_the_wrap() {
        let name = format!("test-{}", line!());
        let p = Producer::create(&name, 10).unwrap();
        let c = Consumer::open(std::process::id() as i32, &name).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 7];
        let data: Vec<u8> = (0..100u8).collect();
        let mut sent = 0;
        while out.len() < data.len() {
            sent += p.push(&data[sent..(sent + 4).min(data.len())]);
            assert!(p.fill() <= 10);
            let n = c.pop(&mut buf);
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, data);
        assert_eq!(c.fill(), 0);
    }

    #[test]
    fn the_header_shows_fill_size_and_both_pids() {
        let name = format!("test-{}", line!());
        let p = Producer::create(&name, 4096).unwrap();
        let me = std::process::id() as i32;
        let file = path(me, &name).unwrap();
        let h = Header::read(&file).unwrap();
        assert_eq!((h.size, h.fill(), h.producer, h.consumer), (4096, 0, me, 0));
        let c = Consumer::open(me, &name).unwrap();
        assert_eq!(p.push(&[1u8; 5000]), 4096, "a full queue takes no more");
        let mut b = [0u8; 1000];
        assert_eq!(c.pop(&mut b), 1000);
        let h = Header::read(&file).unwrap();
        assert_eq!((h.fill(), h.consumer), (3096, me));
        drop(c);
        drop(p);
        assert!(!file.exists(), "the producer removes its queue");
    }

    #[test]
    fn bad_names_and_files_are_refused() {
        assert!(path(1, "a/b").is_err());
        assert!(path(1, "").is_err());
        assert!(Header::decode(&[0u8; 64]).is_err());
        assert!(Header::decode(&[0u8; 10]).is_err());
        assert!(Consumer::open(1, "no-such-queue-here").is_err());
    }
}
