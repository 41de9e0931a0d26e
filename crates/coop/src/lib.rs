//! hsched-coop: the event loop of cooperative polling (Sinha 2007,
//! §2.1.1–2.1.3, Figs 2.1–2.4).
//!
//! An application is a sequence of short, non-blocking *events* run one at
//! a time by a per-thread dispatcher. Two kinds exist:
//! - **deadline events** carry a *release time* (the thesis calls it a
//!   "deadline"): they are not eligible before it, and once eligible they
//!   outrank every best-effort event;
//! - **best-effort events** ("asap" events) are ordered by priority (a
//!   *larger* number is more important; the thesis leaves the direction
//!   open) and then by timestamp (earlier first), then by submission order.
//!
//! [`EventLoop::run`] dispatches until [`Handle::stop`] is called or nothing
//! is left. When no event is eligible it *yields*:
//! - non-cooperative mode (Fig 2.3): sleep until the next deadline event,
//!   or stop when there is none;
//! - cooperative mode (Fig 2.4): cancel the two proxy events, pass the
//!   earliest own deadline event and the most important own best-effort
//!   event to [`CoopPoll::coop_poll`] (IN), and submit the two proxy events
//!   built from its answer (OUT): a deadline proxy at the time by which the
//!   process must yield again, and a best-effort proxy with the priority
//!   and timestamp of the most important best-effort event of the other
//!   members of the domain. Both proxies call `yield` again, so events run
//!   across processes in the order one global dispatcher would use. In
//!   cooperative mode the loop also yields when a proxy reaches the head.
//!
//! The library never reads a clock itself: it takes a [`Clock`], so the
//! same loop runs in tests, in the simulator and (through
//! [`SystemClock`] and the C ABI in [`ffi`]) in real programs. Under
//! `hsched run`, [`live::LivePoll`] is the [`CoopPoll`] that reaches the
//! daemon's `coop` policy through shared memory and a futex.
//!
//! ```
//! use hsched_coop::{Clock, EventLoop, ManualClock, When};
//! let mut l = EventLoop::new(ManualClock::new(0));
//! let tick = l.event(|h| h.stop());
//! l.submit(tick, When::Deadline(5_000));
//! l.run();
//! assert_eq!(l.clock().now_ns(), 5_000);
//! ```
// `unsafe` only in `ffi`, `live` and `request`, each block with its reason.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// A library inside applications: it never prints with `eprintln!`, which
// panics when stderr is closed.
#![cfg_attr(not(test), deny(clippy::print_stderr, clippy::print_stdout))]

mod event_loop;
pub mod ffi;
pub mod live;
pub mod request;

pub use event_loop::{
    BestEffortKey, Clock, CoopPoll, EventId, EventLoop, Handle, Handler, ManualClock, PollIn,
    PollOut, RunStats, SystemClock, When,
};
