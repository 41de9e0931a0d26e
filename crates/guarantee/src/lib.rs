//! Guarantees for hierarchical soft real-time scheduling (Regehr 2001, the HLS
//! dissertation, chapters 5 and 6).
//!
//! A *guarantee* is a contract on the CPU time a virtual processor receives
//! (`RESBH 10 33`: 10 ms in every 33 ms period, and no more). This crate
//! answers the questions a hierarchy of schedulers raises:
//!
//! * [`types`], [`parse`] — the guarantee kinds of §5.2.2 and their text
//!   syntax (`"RESBS 10ms 20ms".parse::<Guarantee>()`).
//! * [`convert`](mod@convert) — the rewrite rules of Table 5.2 with Theorems 5.2–5.7:
//!   which guarantee can stand for which, with the parameters, or why not.
//! * [`mapping`] — what each policy accepts and provides (Table 5.1): FP,
//!   Join, Limit, PS/SFQ (Equation 5.2), Rez (EDF admission), TS and a
//!   generic best-effort mapping, by lowercase policy name.
//! * [`declared`] — mappings declared as data by policies loaded at run time
//!   (plug-ins): what they need, what each child gets, their cap.
//! * [`compose`](mod@compose) — the composition check over an abstract hierarchy: every
//!   instance and thread gets an acceptable guarantee, or a diagnostic
//!   naming the path, what was received and what would be acceptable.
//! * [`rta`] — static-priority response-time analysis with release jitter
//!   (Eq 6.1/6.2) and the EDF utilization test.
//! * [`ghost`] — a reservation for a multithreaded application (Theorem 6.2,
//!   the search heuristic of §6.1.2, the parameter space of Fig 6.2).
//! * [`sbf`] — supply-bound functions of every guarantee and of the periodic
//!   resource model, with exact EDF (`dbf ≤ sbf`) and static-priority tests
//!   under any guarantee.
//!
//! Times are [`Duration`]s (nanoseconds); in guarantee text bare numbers are
//! milliseconds, as in the dissertation. Utilizations are absolute fractions
//! of one processor (§5.2.1).
//!
//! # Example
//!
//! ```
//! use hsched_guarantee::{convert, satisfies, ConvertParams, Guarantee, GuaranteeKind};
//!
//! // §5.3.3.1: an SFQ scheduler receiving RESCS 10 20 sees PSBE 0.5 5 (Theorem 5.4).
//! let r: Guarantee = "RESCS 10 20".parse().unwrap();
//! let psbe = convert(&r, GuaranteeKind::Psbe, &ConvertParams::default()).unwrap();
//! assert_eq!(psbe.to_string(), "PSBE 0.5 5");
//!
//! // Equation 5.2: its thread of weight 0.5 among six, 10 ms quantum.
//! let t1 = hsched_guarantee::mapping::sfq_child(0.5, hsched_core::time::Duration::from_millis(5), 0.5, 6,
//!     hsched_core::time::Duration::from_millis(10));
//! assert_eq!(t1.to_string(), "PSBE 0.25 75");
//!
//! // Theorem 5.7: over 400 ms that is RESCS 25 400.
//! let want: Guarantee = "RESCS 25 400".parse().unwrap();
//! assert!(satisfies(&t1, &want).is_ok());
//! // Soft cannot become hard (Table 5.2, Theorem 5.3).
//! assert!(satisfies(&"RESBS 10 33".parse().unwrap(), &"RESBH 10 33".parse().unwrap()).is_err());
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compose;
pub mod convert;
pub mod declared;
pub mod ghost;
pub mod mapping;
pub mod parse;
pub mod rta;
pub mod sbf;
pub mod types;

pub use compose::{
    compose, compose_with, Composition, Diagnostic, Hierarchy, ParentRef, ParentSpec,
    SchedulerSpec, ThreadSpec,
};
pub use convert::{
    can_convert, convert, rule, satisfies, ConversionError, ConvertParams, Rule, Unsatisfied,
};
pub use hsched_core::time::Duration;
pub use mapping::{EdgeParams, InstanceParams, Mapping, Registry};
pub use parse::ParseGuaranteeError;
pub use rta::{AnalysisError, Task};
pub use sbf::{PeriodicResource, Supply};
pub use types::{Guarantee, GuaranteeKind, InvalidGuarantee};
