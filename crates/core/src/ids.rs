//! Distinct id newtypes, so a CPU number can never be passed where a thread
//! id is expected.

use std::fmt;

macro_rules! id {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as an index into dense tables.
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    };
}

id!(
    /// A physical processor, numbered `0..n` (Regehr 2001, §4.3.1.1).
    CpuId,
    "cpu"
);
id!(
    /// A thread known to the HSI (a leaf of the hierarchy). Never reused.
    ThreadId,
    "thread"
);
id!(
    /// A scheduler instance. Never reused.
    InstanceId,
    "inst"
);
id!(
    /// A virtual processor. Slots are reused after a VP is unregistered, so a
    /// policy must forget a VP when it receives `unregister_vp`.
    VpId,
    "vp"
);

/// One side of a virtual processor.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Node {
    /// The top scheduler: glue with one VP per physical CPU (Regehr 2001, §9.3.5).
    Top,
    /// A scheduler instance.
    Instance(InstanceId),
    /// A thread, through its bottom scheduler (Regehr 2001, §9.3.6).
    Thread(ThreadId),
}
