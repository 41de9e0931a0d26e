//! The instances' timers: one per instance (Regehr 2001, §4.3.2), kept in an
//! indexed binary min-heap ordered by (deadline, instance id).
//!
//! Policies re-arm their timer on most notifications, usually to a later
//! time (a quantum or budget that restarts), and the HSI disarms each timer
//! as it fires, just before the policy usually re-arms it. Both are made
//! lazy: the heap keeps each instance's entry at a key no later than its
//! armed deadline (`due`, `NEVER` once disarmed), and only the root entry
//! must carry its exact, armed deadline. Every key is at most its own
//! deadline and at least the root's, so the root is the true
//! (deadline, instance id) minimum and `first` is O(1). Moving an entry
//! later or disarming it costs O(1) unless it is the root; the sift it
//! would have needed happens when (if ever) the stale entry reaches the
//! root, at most once per change. Moving an entry earlier is O(log n).

use crate::ids::InstanceId;
use crate::time::Instant;

const ABSENT: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// (key, instance), heap-ordered; each key is at most the instance's
    /// `due`, and equal to it at the root (see `settle`).
    heap: Vec<(Instant, InstanceId)>,
    /// Per instance: where it is and when it is due, side by side so that
    /// the common re-arm checks one table.
    slots: Vec<Slot>,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The instance's index in `heap`, or `ABSENT`.
    pos: u32,
    /// Its armed deadline, `NEVER` when disarmed.
    due: Instant,
}

impl Slot {
    const EMPTY: Slot = Slot {
        pos: ABSENT,
        due: Instant::NEVER,
    };
}

impl Timers {
    /// The armed deadline of `inst`, if any.
    #[inline]
    pub fn get(&self, inst: InstanceId) -> Option<Instant> {
        self.slots
            .get(inst.index())
            .map(|s| s.due)
            .filter(|&at| at != Instant::NEVER)
    }

    /// The earliest (deadline, instance). Exact whenever the root is
    /// settled: after every operation here except [`Timers::disarm_first`].
    #[inline]
    pub fn first(&self) -> Option<(Instant, InstanceId)> {
        self.heap.first().copied()
    }

    /// Arms (or re-arms) `inst`'s timer; `NEVER` disarms it.
    #[inline]
    pub fn set(&mut self, inst: InstanceId, at: Instant) {
        if let Some(s) = self.slots.get_mut(inst.index()) {
            // Unchanged: a no-op. An armed entry is in the heap (`pos` is
            // cleared only once `due` is `NEVER`) with a key at most `due`
            // and equal to it at the root, except for a root disarmed by
            // `disarm_first`, whose `due` is `NEVER`: that only matches
            // `at == NEVER`, and disarming a disarmed timer does nothing.
            if s.due == at {
                return;
            }
            // The common re-arm: a later deadline. Below the root the key
            // stays (lazily correct); the root moves down at once.
            let p = s.pos;
            if p != ABSENT && at != Instant::NEVER && at >= self.heap[p as usize].0 {
                s.due = at;
                if p == 0 {
                    self.root_later(at);
                }
                return;
            }
        }
        self.set_slow(inst, at);
    }

    fn set_slow(&mut self, inst: InstanceId, at: Instant) {
        if at == Instant::NEVER {
            return self.cancel(inst);
        }
        let k = inst.index();
        if self.slots.len() <= k {
            self.slots.resize(k + 1, Slot::EMPTY);
        }
        self.slots[k].due = at;
        let p = self.slots[k].pos;
        if p == ABSENT {
            self.heap.push((at, inst));
            self.up(self.heap.len() - 1);
        } else if at < self.heap[p as usize].0 {
            self.heap[p as usize].0 = at;
            self.up(p as usize);
        } else if p == 0 {
            self.settle();
        }
        // Otherwise the key stays below the new deadline: lazily correct.
    }

    /// Disarms `inst`'s timer.
    pub fn cancel(&mut self, inst: InstanceId) {
        let k = inst.index();
        if self.slots.get(k).is_none_or(|s| s.due == Instant::NEVER) {
            return;
        }
        self.slots[k].due = Instant::NEVER;
        if self.slots[k].pos == 0 {
            self.settle();
        }
    }

    /// Disarms the earliest timer (it is firing) without settling the
    /// root, so that a re-arm from its own callback, the usual case, costs
    /// no sift. [`Timers::first`] is wrong until [`Timers::settle`] runs.
    pub fn disarm_first(&mut self) {
        if let Some(&(_, inst)) = self.heap.first() {
            self.slots[inst.index()].due = Instant::NEVER;
        }
    }

    /// The root, armed, moved later to `at`: the first step of `settle`,
    /// without its checks. The root usually still comes first (no child is
    /// earlier), and then it is exact and nothing moves; otherwise it goes
    /// down, and `settle` handles a stale entry that may have come up.
    /// Kept out of line so that `set` stays small enough to be inlined.
    #[inline(never)]
    fn root_later(&mut self, at: Instant) {
        self.heap[0].0 = at;
        let root = self.heap[0];
        let child_earlier = |i: usize| self.heap.get(i).is_some_and(|&c| c < root);
        if child_earlier(1) || child_earlier(2) {
            self.down(0);
            self.settle();
        }
    }

    /// Makes the root exact: drops disarmed roots and moves stale ones to
    /// their deadline, until the root is an armed entry at its deadline.
    /// The usual case, a root that already is exact, is checked inline.
    #[inline]
    pub fn settle(&mut self) {
        if let Some(&(key, inst)) = self.heap.first() {
            if key != self.slots[inst.index()].due {
                self.settle_slow();
            }
        }
    }

    /// [`Timers::settle`] once the root is known not to be exact.
    #[inline(never)]
    fn settle_slow(&mut self) {
        while let Some(&(key, inst)) = self.heap.first() {
            let due = self.slots[inst.index()].due;
            if key == due {
                return;
            }
            if due == Instant::NEVER {
                self.slots[inst.index()].pos = ABSENT;
                let last = self.heap.pop().expect("the heap is not empty");
                if self.heap.is_empty() {
                    return;
                }
                self.heap[0] = last;
            } else {
                self.heap[0].0 = due;
            }
            self.down(0);
        }
    }

    /// Moves the entry at `i` towards the root while it is smaller than its
    /// parent, moving the parents down into the hole.
    fn up(&mut self, mut i: usize) {
        let e = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            let pe = self.heap[parent];
            if e >= pe {
                break;
            }
            self.heap[i] = pe;
            self.slots[pe.1.index()].pos = i as u32;
            i = parent;
        }
        self.heap[i] = e;
        self.slots[e.1.index()].pos = i as u32;
    }

    /// Moves the entry at `i` away from the root while a child is smaller,
    /// moving the children up into the hole.
    fn down(&mut self, mut i: usize) {
        let n = self.heap.len();
        let e = self.heap[i];
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let mut m = l;
            if l + 1 < n && self.heap[l + 1] < self.heap[l] {
                m = l + 1;
            }
            let me = self.heap[m];
            if me >= e {
                break;
            }
            self.heap[i] = me;
            self.slots[me.1.index()].pos = i as u32;
            i = m;
        }
        self.heap[i] = e;
        self.slots[e.1.index()].pos = i as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The earliest armed (deadline, instance) of a plain list.
    fn model_first(model: &[Option<Instant>]) -> Option<(Instant, InstanceId)> {
        model
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.map(|a| (a, InstanceId(i as u32))))
            .min()
    }

    #[test]
    fn keeps_one_entry_per_instance_in_deadline_order() {
        let mut t = Timers::default();
        // A deterministic shuffle of sets, re-arms, cancels and firings
        // (disarm the first, maybe re-arm it, settle), checked against a
        // plain list.
        let mut model: Vec<Option<Instant>> = vec![None; 20];
        let mut x: u64 = 7;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let inst = ((x >> 33) % 20) as usize;
            let at = Instant((x >> 40) % 1000);
            match (x >> 20) % 8 {
                0 | 1 => {
                    t.cancel(InstanceId(inst as u32));
                    model[inst] = None;
                }
                2 => {
                    if let Some((_, first)) = t.first() {
                        t.disarm_first();
                        model[first.index()] = None;
                        assert_eq!(t.get(first), None);
                        if (x >> 50).is_multiple_of(2) {
                            t.set(first, at);
                            model[first.index()] = Some(at);
                        }
                        if (x >> 52).is_multiple_of(2) {
                            t.set(InstanceId(inst as u32), at);
                            model[inst] = Some(at);
                        }
                        t.settle();
                    }
                }
                _ => {
                    t.set(InstanceId(inst as u32), at);
                    model[inst] = Some(at);
                }
            }
            assert_eq!(t.first(), model_first(&model));
            assert_eq!(t.get(InstanceId(inst as u32)), model[inst]);
            assert!(t.heap.len() <= model.len());
        }
    }

    #[test]
    fn rearming_at_the_armed_time_changes_nothing() {
        let mut t = Timers::default();
        for i in 0..8u32 {
            t.set(InstanceId(i), Instant(100 + u64::from(i) * 10));
        }
        // A stale key below the root.
        t.set(InstanceId(3), Instant(500));
        let heap = t.heap.clone();
        let pos: Vec<u32> = t.slots.iter().map(|s| s.pos).collect();
        for i in 0..8u32 {
            let at = t.get(InstanceId(i)).expect("armed");
            t.set(InstanceId(i), at);
        }
        assert_eq!(t.heap, heap);
        assert_eq!(t.slots.iter().map(|s| s.pos).collect::<Vec<_>>(), pos);
        // The firing root, re-armed at the deadline it fired at, is armed.
        t.disarm_first();
        t.set(InstanceId(0), Instant(100));
        t.settle();
        assert_eq!(t.first(), Some((Instant(100), InstanceId(0))));
        // The root moved later goes down at once; a second disarm is a no-op.
        t.set(InstanceId(0), Instant(135));
        assert_eq!(t.first(), Some((Instant(110), InstanceId(1))));
        t.set(InstanceId(5), Instant::NEVER);
        t.set(InstanceId(5), Instant::NEVER);
        assert_eq!(t.get(InstanceId(5)), None);
        let mut fired = Vec::new();
        while let Some((at, inst)) = t.first() {
            t.disarm_first();
            t.settle();
            fired.push((at.0, inst.0));
        }
        assert_eq!(
            fired,
            [
                (110, 1),
                (120, 2),
                (135, 0),
                (140, 4),
                (160, 6),
                (170, 7),
                (500, 3)
            ]
        );
    }

    #[test]
    fn later_rearms_stay_lazy_but_fire_in_order() {
        // Each instance keeps moving its timer later (the common re-arm),
        // which leaves stale keys in the heap; firing in order must still
        // give (deadline, instance id) order.
        let mut t = Timers::default();
        for i in 0..16u32 {
            t.set(InstanceId(i), Instant(u64::from(i)));
        }
        for round in 1..50u64 {
            for i in 0..16u32 {
                t.set(InstanceId(i), Instant(round * 100 + u64::from(15 - i) / 2));
            }
        }
        let mut fired = Vec::new();
        while let Some((at, inst)) = t.first() {
            t.disarm_first();
            t.settle();
            fired.push((at, inst));
        }
        let mut expect: Vec<_> = (0..16u32)
            .map(|i| (Instant(4900 + u64::from(15 - i) / 2), InstanceId(i)))
            .collect();
        expect.sort();
        assert_eq!(fired, expect);
        assert!(t.heap.is_empty());
    }
}
