//! hsched core: the hierarchical scheduler infrastructure (HSI) of Regehr's
//! *Hierarchical Loadable Schedulers* (Regehr 2001, ch. 4), sans-IO.
//!
//! Scheduler instances run [`Policy`] code and are linked by virtual
//! processors (VPs) into a hierarchy (a DAG once Join is used). Threads are
//! the leaves; the top scheduler offers one VP per physical processor. The
//! [`Hsi`] takes inputs (thread woke, blocked, exited, created; timer fired;
//! control operations), delivers notifications to policies, applies the
//! actions they ask for, checks the protocol, and tells the backend which
//! thread each processor runs. It never reads a clock or calls the OS: the
//! simulator and the live backend drive the same code.
//!
//! ```
//! use hsched_core::{Hsi, ParentLink, ParentRef, Params, CpuId, Instant};
//! use hsched_core::testing::Fifo;
//!
//! let mut hsi = Hsi::new(1);
//! let root = hsi
//!     .create_instance(Instant(0), "root", Box::new(Fifo::default()),
//!         vec![ParentLink { parent: ParentRef::Top { cpus: vec![CpuId(0)] }, params: Params::new() }])
//!     .unwrap();
//! let t = hsi.create_thread(Instant(0), "t1", root, Params::new()).unwrap();
//! hsi.wake(Instant(10), t).unwrap();
//! assert_eq!(hsi.running(CpuId(0)), Some(t));
//! hsi.block(Instant(20), t).unwrap();
//! assert_eq!(hsi.running(CpuId(0)), None);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod checker;
mod children;
mod ctx;
mod fault;
mod hsi;
mod ids;
mod params;
mod policy;
mod state;
pub mod testing;
pub mod time;
mod timers;
mod trace;
mod violation;

pub use children::{Side, VpTable};
pub use ctx::Ctx;
pub use fault::{Fault, ReplaceError, Replaced, UnloadError, Unloaded, Unloading};
pub use hsi::{Hsi, ParentLink, ParentRef, VpInfo};
pub use ids::{CpuId, InstanceId, Node, ThreadId, VpId};
pub use params::{ParamError, ParamSpec, ParamValue, Params};
pub use policy::{Msg, Policy, PolicyError, RevokeReason};
pub use state::VpState;
pub use time::{Duration, Instant};
pub use trace::{PolicyEvent, TraceEvent, TraceKind};
pub use violation::{HsiError, OpError, Rule, Violation};
