//! [`VpTable`]: per-VP policy data without maps. The table stores each
//! entry's index in the VP's tag, so lookups are O(1) and iteration is in a
//! deterministic order.

use crate::ctx::Ctx;
use crate::ids::VpId;

/// Which tag of the VP the table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Entries for this instance's child VPs (the usual case).
    Child,
    /// Entries for this instance's parent VPs.
    Parent,
}

/// Policy data for a set of VPs, indexed through the VP tags.
#[derive(Clone, Debug)]
pub struct VpTable<T> {
    side: Side,
    items: Vec<(VpId, T)>,
}

impl<T> VpTable<T> {
    /// An empty table for VPs on `side`.
    pub fn new(side: Side) -> Self {
        VpTable {
            side,
            items: Vec::new(),
        }
    }

    fn tag(&self, ctx: &Ctx<'_>, vp: VpId) -> u32 {
        match self.side {
            Side::Child => ctx.child_tag(vp),
            Side::Parent => ctx.parent_tag(vp),
        }
    }

    fn set_tag(&self, ctx: &mut Ctx<'_>, vp: VpId, tag: u32) {
        match self.side {
            Side::Child => ctx.set_child_tag(vp, tag),
            Side::Parent => ctx.set_parent_tag(vp, tag),
        }
    }

    /// Adds an entry for `vp` and returns its index.
    pub fn insert(&mut self, ctx: &mut Ctx<'_>, vp: VpId, value: T) -> usize {
        let i = self.items.len();
        self.items.push((vp, value));
        self.set_tag(ctx, vp, i as u32);
        i
    }

    /// The index of `vp`'s entry.
    pub fn index_of(&self, ctx: &Ctx<'_>, vp: VpId) -> Option<usize> {
        let i = self.tag(ctx, vp) as usize;
        (i < self.items.len() && self.items[i].0 == vp).then_some(i)
    }

    /// Removes `vp`'s entry (the last entry takes its index).
    pub fn remove(&mut self, ctx: &mut Ctx<'_>, vp: VpId) -> Option<T> {
        let i = self.index_of(ctx, vp)?;
        let (_, v) = self.items.swap_remove(i);
        if let Some(&(moved, _)) = self.items.get(i) {
            self.set_tag(ctx, moved, i as u32);
        }
        self.set_tag(ctx, vp, u32::MAX);
        Some(v)
    }

    /// `vp`'s entry.
    pub fn get(&self, ctx: &Ctx<'_>, vp: VpId) -> Option<&T> {
        self.index_of(ctx, vp).map(|i| &self.items[i].1)
    }

    /// `vp`'s entry, mutably.
    pub fn get_mut(&mut self, ctx: &Ctx<'_>, vp: VpId) -> Option<&mut T> {
        self.index_of(ctx, vp).map(|i| &mut self.items[i].1)
    }

    /// Entry by index.
    pub fn at(&self, i: usize) -> (VpId, &T) {
        let (vp, v) = &self.items[i];
        (*vp, v)
    }

    /// Entry by index, mutably.
    pub fn at_mut(&mut self, i: usize) -> (VpId, &mut T) {
        let (vp, v) = &mut self.items[i];
        (*vp, v)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Entries in index order.
    pub fn iter(&self) -> impl Iterator<Item = (VpId, &T)> {
        self.items.iter().map(|(vp, v)| (*vp, v))
    }

    /// Entries in index order, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (VpId, &mut T)> {
        self.items.iter_mut().map(|(vp, v)| (*vp, v))
    }
}
