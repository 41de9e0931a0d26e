//! The engine's queue of timed events (thread creation, control
//! operations, workload timers, thread exits).
//!
//! Events are ordered by (time, class, sequence number), the sequence
//! number being the order in which they were queued. Each event is packed
//! into one `u128` whose integer order is exactly that order:
//!
//! ```text
//! bits 127..64  time (ns)
//! bits  63..62  class
//! bits  61..24  sequence number (38 bits)
//! bits  23..0   target: thread or operation index (24 bits)
//! ```
//!
//! Sequence numbers are unique, so the target bits never decide an order.
//! A 16-byte key compared as one integer keeps the binary heap's moves and
//! comparisons cheap (it is on the path of every workload timer). Should
//! the sequence numbers run out (2³⁸ events), [`EventQueue::renumber`]
//! gives the queued events fresh ones in the same order.
//!
//! The event [`EventQueue::pop`] hands out stays at the heap's root until
//! the queue is next touched. Handling a workload timer usually arms the
//! thread's next one (periodic and sporadic releases), and that push then
//! takes the old event's place at the root and sinks from there: one pass
//! down the heap instead of a pop's pass (down to the bottom and back up)
//! and a push's pass up. Keys are unique, so the heap's shape never
//! decides the order: the events come out exactly as they would with an
//! eager pop.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bits of the target (thread or operation index).
const TARGET_BITS: u32 = 24;
/// Bits of the sequence number.
const SEQ_BITS: u32 = 38;
/// Largest thread or operation index an event can carry.
pub(crate) const MAX_TARGET: usize = (1 << TARGET_BITS) - 1;
/// Largest sequence number.
pub(crate) const MAX_SEQ: u64 = (1 << SEQ_BITS) - 1;
const TARGET_MASK: u64 = (1 << TARGET_BITS) - 1;

/// A queued event, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ev {
    /// When it is due.
    pub at: u64,
    /// Its class (creation, operation, workload timer, exit).
    pub class: u8,
    /// Its sequence number (≥ 1).
    pub seq: u64,
    /// Thread index (creation, workload timer, exit) or operation index.
    pub target: u32,
}

fn pack(ev: Ev) -> u128 {
    let low = (ev.class as u64) << 62 | ev.seq << TARGET_BITS | ev.target as u64;
    (ev.at as u128) << 64 | low as u128
}

fn unpack(key: u128) -> Ev {
    let low = key as u64;
    Ev {
        at: (key >> 64) as u64,
        class: (low >> 62) as u8,
        seq: (low >> TARGET_BITS) & MAX_SEQ,
        target: (low & TARGET_MASK) as u32,
    }
}

/// A min-queue of events (see the module docs).
#[derive(Debug)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Reverse<u128>>,
    /// The root was handed out by [`pop`](Self::pop) and is no longer in
    /// the queue; the next push or read removes it (see the module docs).
    taken: bool,
    /// Last sequence number given out.
    seq: u64,
    /// Sequence numbers are renumbered past this (tests lower it).
    limit: u64,
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            taken: false,
            seq: 0,
            limit: MAX_SEQ,
        }
    }

    /// Sets the last usable sequence number (tests exercise renumbering
    /// with a small one).
    #[cfg(test)]
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit.min(MAX_SEQ);
    }

    /// Whether the next [`push`](Self::push) needs a [`renumber`](Self::renumber) first.
    pub fn exhausted(&self) -> bool {
        self.seq >= self.limit
    }

    /// Queues an event; returns its sequence number. `target` is at most
    /// [`MAX_TARGET`] and `class` below 4 (the engine checks the first when
    /// it is built); the caller renumbers when [`exhausted`](Self::exhausted).
    #[inline]
    pub fn push(&mut self, at: u64, class: u8, target: u32) -> u64 {
        debug_assert!(target as usize <= MAX_TARGET && class < 4 && self.seq < MAX_SEQ);
        self.seq += 1;
        let seq = self.seq;
        let key = pack(Ev {
            at,
            class,
            seq,
            target,
        });
        if std::mem::take(&mut self.taken) {
            if let Some(mut root) = self.heap.peek_mut() {
                // The taken root has left the queue: the new key takes its
                // place and sinks to where it belongs (`PeekMut` sifts it
                // down when dropped), whatever its order.
                *root = Reverse(key);
                return seq;
            }
        }
        self.heap.push(Reverse(key));
        seq
    }

    /// Removes the root handed out by the last [`pop`](Self::pop), unless
    /// a push has replaced it.
    #[inline]
    fn drop_taken(&mut self) {
        if std::mem::take(&mut self.taken) {
            self.heap.pop();
        }
    }

    /// When the earliest event is due ([`crate::machine::NEVER`] if none).
    #[inline]
    pub fn next_at(&mut self) -> u64 {
        self.drop_taken();
        self.heap
            .peek()
            .map_or(crate::machine::NEVER, |k| (k.0 >> 64) as u64)
    }

    /// Takes the earliest event (it leaves the heap lazily, see the module
    /// docs).
    #[inline]
    pub fn pop(&mut self) -> Option<Ev> {
        self.drop_taken();
        let key = self.heap.peek()?.0;
        self.taken = true;
        Some(unpack(key))
    }

    /// Gives the queued events the sequence numbers 1, 2, … in their
    /// order, and returns (old, new) pairs in that order.
    pub fn renumber(&mut self) -> Vec<(Ev, u64)> {
        self.drop_taken();
        let mut all: Vec<u128> = std::mem::take(&mut self.heap)
            .into_iter()
            .map(|k| k.0)
            .collect();
        all.sort_unstable();
        let mut out = Vec::with_capacity(all.len());
        for (k, key) in all.iter_mut().enumerate() {
            let old = unpack(*key);
            let seq = k as u64 + 1;
            *key = pack(Ev { seq, ..old });
            out.push((old, seq));
        }
        self.seq = all.len() as u64;
        self.heap = all.into_iter().map(Reverse).collect();
        out
    }

    /// Number of queued events.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len() - usize::from(self.taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_and_orders_like_the_tuple() {
        let evs = [
            Ev {
                at: 5,
                class: 2,
                seq: 7,
                target: MAX_TARGET as u32,
            },
            Ev {
                at: 5,
                class: 0,
                seq: MAX_SEQ,
                target: 0,
            },
            Ev {
                at: u64::MAX,
                class: 3,
                seq: 1,
                target: 12,
            },
            Ev {
                at: 4,
                class: 3,
                seq: 9,
                target: 3,
            },
            Ev {
                at: 5,
                class: 2,
                seq: 6,
                target: 1,
            },
        ];
        for &e in &evs {
            assert_eq!(unpack(pack(e)), e);
        }
        for &a in &evs {
            for &b in &evs {
                assert_eq!(
                    pack(a).cmp(&pack(b)),
                    (a.at, a.class, a.seq).cmp(&(b.at, b.class, b.seq)),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    /// Pops and pushes in random order, with and without a push while an
    /// event is being handled (the replaced root), against a sorted set.
    #[test]
    fn the_lazy_pop_gives_the_eager_order() {
        let mut rng = crate::rng::Rng::new(3, 17);
        for round in 0..40 {
            let mut q = EventQueue::new();
            let mut reference = std::collections::BTreeSet::new();
            let mut now = 0;
            for _ in 0..2_000 {
                match rng.below(4) {
                    // Pop, maybe followed by pushes at or after its time.
                    0 | 1 => {
                        let got = q.pop();
                        let want = reference.pop_first();
                        assert_eq!(got.map(|e| (e.at, e.class, e.seq)), want, "round {round}");
                        let Some(ev) = got else { continue };
                        now = ev.at;
                        for _ in 0..rng.below(3) {
                            let at = now + rng.below(3) * rng.below(50);
                            let class = rng.below(4) as u8;
                            let seq = q.push(at, class, 1);
                            reference.insert((at, class, seq));
                        }
                    }
                    _ => {
                        let at = now + rng.below(100);
                        let class = rng.below(4) as u8;
                        let seq = q.push(at, class, 2);
                        reference.insert((at, class, seq));
                    }
                }
                assert_eq!(q.len(), reference.len());
                let first = reference.first().map_or(crate::machine::NEVER, |e| e.0);
                if rng.below(2) == 0 {
                    assert_eq!(q.next_at(), first);
                }
            }
        }
    }

    #[test]
    fn pops_in_time_class_sequence_order_across_a_renumbering() {
        let mut q = EventQueue::new();
        q.set_limit(6);
        let mut seqs = Vec::new();
        for (at, class, target) in [(30, 2, 1), (10, 3, 2), (10, 2, 3), (20, 0, 4), (10, 2, 5)] {
            seqs.push(q.push(at, class, target));
        }
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        assert_eq!(q.next_at(), 10);
        assert_eq!(q.pop().map(|e| e.target), Some(3));
        q.push(10, 2, 6);
        assert!(q.exhausted());
        let map = q.renumber();
        // (old target, new seq) in queue order.
        let order: Vec<(u32, u64, u64)> = map.iter().map(|(e, s)| (e.target, e.seq, *s)).collect();
        assert_eq!(
            order,
            [(5, 5, 1), (6, 6, 2), (2, 2, 3), (4, 4, 4), (1, 1, 5)]
        );
        assert!(!q.exhausted());
        assert_eq!(q.push(10, 2, 7), 6);
        let rest: Vec<u32> = std::iter::from_fn(|| q.pop().map(|e| e.target)).collect();
        assert_eq!(rest, [5, 6, 7, 2, 4, 1]);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next_at(), crate::machine::NEVER);
    }
}
