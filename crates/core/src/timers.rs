//! The instances' timers: one per instance (seed 000 §4.3.2), kept in an
//! indexed binary min-heap ordered by (deadline, instance id). Re-arming or
//! cancelling moves or removes the instance's entry in O(log n), so the
//! heap never holds stale entries and `next` is O(1).

use crate::ids::InstanceId;
use crate::time::Instant;

const ABSENT: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: Vec<(Instant, InstanceId)>,
    /// Per instance: its index in `heap`, or `ABSENT`.
    pos: Vec<u32>,
}

impl Timers {
    /// The armed deadline of `inst`, if any.
    pub fn get(&self, inst: InstanceId) -> Option<Instant> {
        match self.pos.get(inst.index()) {
            Some(&p) if p != ABSENT => Some(self.heap[p as usize].0),
            _ => None,
        }
    }

    /// The earliest (deadline, instance).
    pub fn first(&self) -> Option<(Instant, InstanceId)> {
        self.heap.first().copied()
    }

    /// Arms (or re-arms) `inst`'s timer.
    pub fn set(&mut self, inst: InstanceId, at: Instant) {
        if self.pos.len() <= inst.index() {
            self.pos.resize(inst.index() + 1, ABSENT);
        }
        let p = self.pos[inst.index()];
        if p == ABSENT {
            self.heap.push((at, inst));
            let i = self.heap.len() - 1;
            self.pos[inst.index()] = i as u32;
            self.up(i);
        } else {
            let i = p as usize;
            let old = self.heap[i].0;
            self.heap[i].0 = at;
            if at < old {
                self.up(i);
            } else if at > old {
                self.down(i);
            }
        }
    }

    /// Disarms `inst`'s timer.
    pub fn cancel(&mut self, inst: InstanceId) {
        let Some(&p) = self.pos.get(inst.index()) else {
            return;
        };
        if p == ABSENT {
            return;
        }
        let i = p as usize;
        let last = self.heap.len() - 1;
        self.swap(i, last);
        self.heap.pop();
        self.pos[inst.index()] = ABSENT;
        if i < self.heap.len() {
            self.down(i);
            self.up(i);
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].1.index()] = a as u32;
        self.pos[self.heap[b].1.index()] = b as u32;
    }

    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[i] < self.heap[parent] {
                self.swap(i, parent);
                i = parent;
            } else {
                break;
            }
        }
    }

    fn down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.heap[l] < self.heap[m] {
                m = l;
            }
            if r < n && self.heap[r] < self.heap[m] {
                m = r;
            }
            if m == i {
                return;
            }
            self.swap(i, m);
            i = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_one_entry_per_instance_in_deadline_order() {
        let mut t = Timers::default();
        // A small deterministic shuffle of sets, re-arms and cancels,
        // checked against a plain list.
        let mut model: Vec<Option<Instant>> = vec![None; 20];
        let mut x: u64 = 7;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let inst = ((x >> 33) % 20) as usize;
            if (x >> 20).is_multiple_of(4) {
                t.cancel(InstanceId(inst as u32));
                model[inst] = None;
            } else {
                let at = Instant((x >> 40) % 1000);
                t.set(InstanceId(inst as u32), at);
                model[inst] = Some(at);
            }
            let expect = model
                .iter()
                .enumerate()
                .filter_map(|(i, a)| a.map(|a| (a, InstanceId(i as u32))))
                .min();
            assert_eq!(t.first(), expect);
            assert_eq!(t.get(InstanceId(inst as u32)), model[inst]);
        }
    }
}
