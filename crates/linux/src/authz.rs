//! Who may do what through the control socket, beyond owning a thread.
//!
//! A peer is *privileged* when it is root or in the daemon's control group;
//! every other user is an unprivileged principal, identified by uid
//! (Regehr 2001, §8.2: users are resource principals). The daemon enforces
//! every thread it manages at `SCHED_FIFO` while granted, so handing an
//! unprivileged user a place in the hierarchy with a priority, a
//! reservation or a share is handing it real-time capacity. The rules here
//! keep that within what Linux would let the user take by itself, and
//! within limits that protect the daemon:
//!
//! - **Real-time capacity** (a scheduler other than the default, or any
//!   child parameters: `move`, `attach`, `begin-reservation`, `set-params`,
//!   `set-share`) needs `RLIMIT_RTPRIO` above 0, as `chrt -f` would
//!   (`ulimit -r`); an fp `priority` may be at most that limit.
//! - **Reservations** of unprivileged users together stay within
//!   [`ControlLimits::user_utilization`] of one processor per uid across
//!   all schedulers (§8.4's "no user above 30 % of reservations").
//! - **Every** reservation asked for over the socket, by anyone, has a
//!   period of at least [`ControlLimits::min_period`] and an amount of at
//!   least [`ControlLimits::min_amount`]: each period costs the daemon a
//!   grant and a revocation, and 1 µs every 2 µs would take a processor.
//! - An unprivileged uid holds at most [`MAX_USER_CONNECTIONS`] connections
//!   and [`MAX_USER_THREADS`] managed threads; root can always connect
//!   ([`ROOT_RESERVED_CONNECTIONS`] slots are kept for it).
//! - A name given to a managed thread is at most [`MAX_NAME`] bytes, has no
//!   control or formatting characters, and is not another thread's.
//!
//! Every refusal says which rule refused, so that a user knows what would
//! work.

use hsched_core::time::Duration;
use hsched_core::Params;

/// The longest name `attach` takes.
pub const MAX_NAME: usize = 64;
/// Connections one unprivileged uid may hold.
pub const MAX_USER_CONNECTIONS: usize = 8;
/// Connections kept for root beyond the general limit.
pub const ROOT_RESERVED_CONNECTIONS: usize = 8;
/// Managed threads one unprivileged uid may hold at once.
pub const MAX_USER_THREADS: usize = 64;

/// The daemon's limits on control requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ControlLimits {
    /// The shortest reservation period anyone may ask for.
    pub min_period: Duration,
    /// The smallest reservation amount anyone may ask for.
    pub min_amount: Duration,
    /// The most of one processor an unprivileged uid's reservations may
    /// add up to.
    pub user_utilization: f64,
}

impl Default for ControlLimits {
    fn default() -> ControlLimits {
        ControlLimits {
            min_period: Duration::from_millis(1),
            min_amount: Duration::from_micros(100),
            user_utilization: 0.3,
        }
    }
}

/// `RLIMIT_RTPRIO` of process `pid` (its soft limit, the one `sched_setscheduler`
/// checks), from `/proc/PID/limits`; 0 when it cannot be read.
pub fn rtprio_limit(pid: i32) -> u64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/limits")) else {
        return 0;
    };
    text.lines()
        .find_map(|l| l.strip_prefix("Max realtime priority"))
        .and_then(|rest| rest.split_whitespace().next())
        .map_or(0, |soft| {
            if soft == "unlimited" {
                u64::MAX
            } else {
                soft.parse().unwrap_or(0)
            }
        })
}

/// The reservation `(amount, period)` in `params`, if they name one.
///
/// # Errors
/// An amount or period that is not a duration.
pub fn reservation(params: &Params) -> Result<Option<(Duration, Duration)>, String> {
    let amount = params.duration("amount").map_err(|e| e.to_string())?;
    let period = params.duration("period").map_err(|e| e.to_string())?;
    Ok(amount.zip(period))
}

/// Checks a reservation against the minimums.
///
/// # Errors
/// Which minimum it is below.
pub fn check_minimums(limits: &ControlLimits, params: &Params) -> Result<(), String> {
    let amount = params.duration("amount").map_err(|e| e.to_string())?;
    let period = params.duration("period").map_err(|e| e.to_string())?;
    if let Some(p) = period.filter(|p| *p < limits.min_period) {
        return Err(format!(
            "a reservation period of {p} is below the daemon's minimum of {} (each period costs the daemon a grant and a revocation)",
            limits.min_period
        ));
    }
    if let Some(a) = amount.filter(|a| a.as_nanos() > 0 && *a < limits.min_amount) {
        return Err(format!(
            "a reservation amount of {a} is below the daemon's minimum of {}",
            limits.min_amount
        ));
    }
    Ok(())
}

/// Checks that an unprivileged peer with `RLIMIT_RTPRIO` `rtprio` may ask
/// for `params` (any at all: they place the thread above best effort).
///
/// # Errors
/// The rule that refuses.
pub fn check_capacity(uid: u32, rtprio: u64, params: &Params, what: &str) -> Result<(), String> {
    if rtprio == 0 {
        return Err(format!(
            "{what} gives real-time capacity, which uid {uid} may not take: its RLIMIT_RTPRIO is 0 (`ulimit -r`), as `chrt -f` would also refuse; root or the daemon's control group can"
        ));
    }
    if let Ok(Some(p)) = params.i64("priority") {
        if p > 0 && p as u64 > rtprio {
            return Err(format!(
                "priority {p} is above uid {uid}'s RLIMIT_RTPRIO of {rtprio}"
            ));
        }
    }
    Ok(())
}

/// Checks that an unprivileged uid holding reservations `held` may add
/// `asked` (each `(amount, period)`) within its share of one processor.
///
/// # Errors
/// The totals, and the limit.
pub fn check_user_utilization(
    limits: &ControlLimits,
    uid: u32,
    held: &[(Duration, Duration)],
    asked: (Duration, Duration),
) -> Result<(), String> {
    let u = |(a, p): (Duration, Duration)| a.as_nanos() as f64 / p.as_nanos().max(1) as f64;
    let total: f64 = held.iter().copied().map(u).sum();
    let after = total + u(asked);
    if after > limits.user_utilization + 1e-9 {
        return Err(format!(
            "uid {uid} would hold reservations of {:.1}% of a processor; an unprivileged user may hold at most {:.1}% (it holds {:.1}%)",
            after * 100.0,
            limits.user_utilization * 100.0,
            total * 100.0
        ));
    }
    Ok(())
}

/// Whether `name` may name a managed thread: short, printable, not empty.
///
/// # Errors
/// What is wrong with it.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a thread name may not be empty".into());
    }
    if name.len() > MAX_NAME {
        return Err(format!(
            "a thread name may be at most {MAX_NAME} bytes, this one has {}",
            name.len()
        ));
    }
    if let Some(c) = name.chars().find(|c| {
        c.is_control()
            || matches!(*c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{00AD}' | '\u{FEFF}')
    }) {
        return Err(format!(
            "a thread name may not contain {:?} (U+{:04X})",
            c, c as u32
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsched_core::ParamValue;

    fn params(pairs: &[(&str, ParamValue)]) -> Params {
        let mut p = Params::new();
        for (k, v) in pairs {
            p.insert(k, v.clone());
        }
        p
    }

    #[test]
    fn minimums_apply_to_period_and_amount() {
        let l = ControlLimits::default();
        let res = |a: &str, p: &str| {
            params(&[
                ("amount", ParamValue::Str(a.into())),
                ("period", ParamValue::Str(p.into())),
            ])
        };
        assert!(check_minimums(&l, &res("2ms", "10ms")).is_ok());
        let e = check_minimums(&l, &res("1us", "2us")).unwrap_err();
        assert!(
            e.contains("period of 2us") && e.contains("minimum of 1ms"),
            "{e}"
        );
        let e = check_minimums(&l, &res("10us", "10ms")).unwrap_err();
        assert!(e.contains("amount of 10us"), "{e}");
        assert!(check_minimums(&l, &Params::new()).is_ok());
    }

    #[test]
    fn capacity_needs_rtprio_and_stays_below_it() {
        let prio = |p: i64| params(&[("priority", ParamValue::Int(p))]);
        let e = check_capacity(1000, 0, &prio(1), "`move` to fp").unwrap_err();
        assert!(e.contains("RLIMIT_RTPRIO is 0"), "{e}");
        assert!(check_capacity(1000, 10, &prio(10), "x").is_ok());
        let e = check_capacity(1000, 10, &prio(1000), "x").unwrap_err();
        assert!(e.contains("priority 1000 is above"), "{e}");
    }

    #[test]
    fn a_user_stays_within_its_share_of_reservations() {
        let l = ControlLimits::default();
        let ms = Duration::from_millis;
        assert!(check_user_utilization(&l, 1000, &[], (ms(3), ms(10))).is_ok());
        let e = check_user_utilization(&l, 1000, &[], (Duration::from_micros(5400), ms(10)))
            .unwrap_err();
        assert!(e.contains("54.0%") && e.contains("at most 30.0%"), "{e}");
        let held = [(ms(2), ms(10)), (ms(1), ms(20))];
        let e = check_user_utilization(&l, 1000, &held, (ms(1), ms(10))).unwrap_err();
        assert!(e.contains("it holds 25.0%"), "{e}");
        assert!(check_user_utilization(&l, 1000, &held, (ms(1), ms(20))).is_ok());
    }

    #[test]
    fn names_are_short_and_printable() {
        assert!(check_name("renderer").is_ok());
        assert!(check_name(&"x".repeat(MAX_NAME + 1)).is_err());
        assert!(check_name("a\u{1b}[31m").is_err());
        assert!(check_name("evil\u{202E}txt").is_err());
        assert!(check_name("").is_err());
    }

    #[test]
    fn rtprio_is_read_from_procfs() {
        // The test process's own limit: a number or unlimited, never a panic.
        let _ = rtprio_limit(std::process::id() as i32);
        assert_eq!(rtprio_limit(-1), 0);
    }
}
