//! The hsched resource manager: a layer beside the scheduling hierarchy
//! that maps requests for guarantees onto schedulers under rules set by
//! users and the administrator (Regehr 2001, ch. 8). The hierarchy alone
//! cannot limit "the aggregate CPU usage of a user across all schedulers";
//! the resource manager can, and gives no scheduling behaviour of its own.
//!
//! Sans-IO and deterministic: the simulator and the live daemon both drive
//! one [`Manager`] with requests and releases and apply the grants it
//! returns as HSI operations (`begin_reservation` with [`Grant::params`]).
//!
//! | part | Regehr 2001 | here |
//! |---|---|---|
//! | the manager is reactive, not a planner; rules are trusted code; no built-in policy beyond the schedulers' own | §8.1 | [`Manager`] decides each request with the state of the moment; with no rules it only runs the schedulers' admission tests |
//! | resource principals (users, groups, the system) | §8.2 | [`Principal`], [`PrincipalKind`], [`SYSTEM`] |
//! | each guarantee owned by one principal; the system owns the top's `ALL` and what flows from it unless delegated; only the system revokes others' guarantees | §8.2 | [`Manager::owner_of`], [`Manager::delegate`], [`Manager::release`] |
//! | requests, malformed ones refused with an error code, others granted or pending until cancelled or their thread exits | §8.2 | [`NewRequest`], [`RequestError`], [`Outcome`], [`Manager::thread_exited`] |
//! | events `NEW_REQUEST`, `REQUEST_ENDING` and custom ones run rules | §8.2, §8.4.3 | [`rules::NEW_REQUEST`], [`rules::REQUEST_ENDING`], [`RuleEntry::then`], [`Manager::signal`] |
//! | guarantee acquisition: rules first, then candidate schedulers that advertise the requested kind and whose guarantee the requester may use, then each scheduler's admission test in turn | §8.3 | [`Manager::request`]: candidates found from the policies' guarantee mappings (Table 5.1), admission by the composition check of `hsched_guarantee` with the thread added |
//! | per-user and system allocation rules: caps across all schedulers, fairness between users, the most important applications, kept shares | §8.4 | [`rules`]: [`rules::Cap`], [`rules::Keep`], [`rules::FairShare`] (Fig 8.2), [`rules::MostImportant`] (Fig 8.1), [`rules::Minimum`] |
//! | a pending request is granted when a guarantee ends, most important first, with a notification | §8.4.4.1 | [`Notice::Granted`] from [`Manager::release`] |
//! | requests made on behalf of unmodified applications | §8.5.2 | callers make a [`NewRequest`] for the program's principal (the hierarchy file's `[[rm.request]]` in the simulator, the daemon's `request` operation live) |
//! | the hierarchy file as the store of rules and principals | §8.4.2, §8.5.2 | [`from_config()`] reads the `[[principal]]` and `[rm]` sections |
//!
//! Utilizations in rules add linearly (as Figures 8.1 and 8.2 assume);
//! the schedulers' admission tests, run after the rules, are those of the
//! guarantee mappings.
//!
//! # Example
//!
//! ```
//! use hsched_guarantee::{Hierarchy, ParentSpec, SchedulerSpec};
//! use hsched_rm::{rules::Cap, Manager, NewRequest, Outcome, Principal, RuleEntry};
//!
//! let mut h = Hierarchy::new(1);
//! h.add_scheduler(SchedulerSpec::new("fp", "fp").under(ParentSpec::top()));
//! h.add_scheduler(SchedulerSpec::new("rez", "rez").under(ParentSpec::scheduler("fp").priority(2)));
//! h.add_scheduler(SchedulerSpec::new("ts", "ts").under(ParentSpec::scheduler("fp").priority(1)));
//! let mut rm = Manager::new(h);
//! rm.add_principal(Principal::user("alice", Some(1001))).unwrap();
//! rm.add_rule(RuleEntry::system(Cap { principal: None, max: 0.3 }));
//!
//! let ask = |t: &str, g: &str| NewRequest::new("alice", t, g.parse().unwrap());
//! let (_, first, _) = rm.request(ask("a1", "RESBS 2ms 10ms")).unwrap();
//! assert!(matches!(first, Outcome::Granted(ref g) if g.scheduler == "rez"));
//! // 20% held, 20% more asked: above the 30% cap, so it waits.
//! let (_, second, _) = rm.request(ask("a2", "RESBS 2ms 10ms")).unwrap();
//! assert!(matches!(second, Outcome::Pending { ref rule, .. } if rule == "cap 30% per user"));
//! // a1 exits: a2 is granted, and the notice says so.
//! let notices = rm.thread_exited("a1");
//! assert!(matches!(&notices[..], [hsched_rm::Notice::Granted(g)] if g.request.thread == "a2"));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod manager;
pub mod principal;
pub mod rules;
pub mod sim;

pub use config::{from_config, ConfigError};
pub use manager::{
    LogEntry, Manager, NewRequest, Notice, Outcome, RequestError, RuleEntry, ADMISSION,
    NO_CANDIDATE,
};
pub use principal::{Principal, PrincipalKind, SYSTEM};
pub use rules::{Grant, Request, RequestId, Rule};
