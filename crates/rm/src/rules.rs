//! Processor allocation rules (Regehr 2001, §8.4) and the events that run
//! them (§8.2, §8.4.3).
//!
//! A rule is code the resource manager calls when an event it is attached
//! to is signalled. Rules see the manager's state through a [`View`] (the
//! granted and pending requests, the principals) and answer with a
//! [`Verdict`] for a new request or [`Action`]s for other events. Rules
//! here are trusted and built in, parameterized from the hierarchy file
//! (§8.4.2 envisions "a number of predefined, parameterizable rules"):
//!
//! | rule | § | effect |
//! |---|---|---|
//! | [`Cap`] | 8.4.1, 8.1 | a principal's (or every user's) reservations across all schedulers stay under a fraction of the machine |
//! | [`Keep`] | 8.4.1 | principals outside a group cannot take the last share of the machine ("interactive users keep 10 %") |
//! | [`FairShare`] | 8.4.4.2, Fig 8.2 | each user at most `1/n` of the machine, `n` the users with requests |
//! | [`MostImportant`] | 8.4.4.1, Fig 8.1 | a user's more important request ends that user's less important guarantees when it would not fit otherwise |
//! | [`Minimum`] | — | a shortest period and smallest amount (short periods cost every user switches, §8.4.4.2) |
//!
//! Utilizations add linearly, as the rules of Figures 8.1 and 8.2 assume;
//! the schedulers' own admission tests (run after the rules, §8.3) are
//! exact.

use std::fmt;

use hsched_core::time::Duration;
use hsched_guarantee::Guarantee;

use crate::principal::{Principal, SYSTEM};

/// A request's number, unique per manager.
pub type RequestId = u64;

/// The built-in event signalled for every new request (and again for each
/// pending request when capacity frees).
pub const NEW_REQUEST: &str = "NEW_REQUEST";
/// The built-in event signalled when a granted or pending request ends.
pub const REQUEST_ENDING: &str = "REQUEST_ENDING";

/// A request for a guarantee (§8.2), as rules see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Its number.
    pub id: RequestId,
    /// The principal making it (for an application: who ran it).
    pub principal: String,
    /// The thread the guarantee is for.
    pub thread: String,
    /// The guarantee asked for.
    pub guarantee: Guarantee,
    /// User-specified importance (higher is more important), for rules
    /// that choose between requests in overload.
    pub value: f64,
    /// A scheduler the requester prefers, if it named one.
    pub scheduler: Option<String>,
}

/// A granted request: where it went and what the thread receives.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    /// The request.
    pub request: Request,
    /// The scheduler that gave the guarantee.
    pub scheduler: String,
    /// What the thread receives there (converts into the request).
    pub received: Guarantee,
}

/// What rules can read of the manager's state (§8.4.2: "reflective
/// information about the current set of pending and granted requests, the
/// current set of resource principals, and the scheduling hierarchy").
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// Processors of the machine.
    pub cpus: u32,
    /// Principals, the system first.
    pub principals: &'a [Principal],
    /// Granted requests, in the order granted.
    pub granted: &'a [Grant],
    /// Pending requests, in arrival order.
    pub pending: &'a [Request],
}

impl View<'_> {
    /// The principal named `name`.
    pub fn principal(&self, name: &str) -> Option<&Principal> {
        self.principals.iter().find(|p| p.name == name)
    }

    /// Whether the requests of `who` count toward `target`: it is
    /// `target`, or a member of the group `target`.
    pub fn counts_toward(&self, who: &str, target: &str) -> bool {
        who == target
            || self
                .principal(who)
                .is_some_and(|p| p.groups.iter().any(|g| g == target))
    }

    /// The utilization (fraction of one processor) held by `target` and,
    /// for a group, its members.
    pub fn held_by(&self, target: &str) -> f64 {
        self.granted
            .iter()
            .filter(|g| self.counts_toward(&g.request.principal, target))
            .map(|g| g.request.guarantee.rate())
            .sum()
    }

    /// The utilization held by every principal together.
    pub fn held(&self) -> f64 {
        self.granted
            .iter()
            .map(|g| g.request.guarantee.rate())
            .sum()
    }

    /// Users with a granted or pending request, and `also` (the requester).
    pub fn active_users(&self, also: &str) -> usize {
        let mut names: Vec<&str> = self
            .granted
            .iter()
            .map(|g| g.request.principal.as_str())
            .chain(self.pending.iter().map(|r| r.principal.as_str()))
            .chain(std::iter::once(also))
            .filter(|n| self.principal(n).is_some_and(Principal::is_user))
            .collect();
        names.sort_unstable();
        names.dedup();
        names.len()
    }
}

/// A rule's answer to a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The rule does not reject the request.
    Pass,
    /// Not now: the request stays pending and is tried again when a
    /// request ends (the reason says what would have to free).
    Wait(String),
    /// Never: the request cannot be granted under this rule whatever
    /// ends.
    Refuse(String),
    /// The request passes if these guarantees are ended first (§8.4.4.1:
    /// the victims are chosen before any is revoked, so a request that
    /// still does not fit revokes nothing).
    PassIfRevoked(Vec<RequestId>, String),
}

/// Something a rule does when an event other than a new request runs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// End a granted guarantee (the manager revokes; only rules the
    /// system owns, or the owner of the guarantee, may).
    Revoke {
        /// The request whose guarantee ends.
        id: RequestId,
        /// Why, for the notification.
        reason: String,
    },
    /// Signal a custom event (its rules run next, §8.4.3).
    Signal(String),
}

/// A processor allocation rule (§8.4).
pub trait Rule: fmt::Debug + Send {
    /// How refusals name it (`cap 30% for user alice`).
    fn name(&self) -> String;

    /// Runs for a new request (at `NEW_REQUEST` or a custom event raised
    /// while the request is decided).
    fn admit(&self, _view: &View<'_>, _req: &Request) -> Verdict {
        Verdict::Pass
    }

    /// Runs at any other event (`REQUEST_ENDING`, a custom one signalled
    /// on its own); `ending` is the request that ends, if any.
    fn react(&self, _view: &View<'_>, _ending: Option<&Request>) -> Vec<Action> {
        Vec::new()
    }
}

fn pct(x: f64) -> String {
    let p = x * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

const EPS: f64 = 1e-9;

/// A cap on reservations across all schedulers: "no user above 30 % of
/// reservations" (system rule, `principal` = `None`, every user) or a cap
/// for one principal (a group's cap counts its members together). The
/// fraction is of the whole machine (all its processors).
#[derive(Clone, Debug, PartialEq)]
pub struct Cap {
    /// Whose requests it limits; `None`: every user, each on its own.
    pub principal: Option<String>,
    /// The most they may hold, as a fraction of the machine.
    pub max: f64,
}

impl Rule for Cap {
    fn name(&self) -> String {
        match &self.principal {
            Some(p) => format!("cap {} for `{p}`", pct(self.max)),
            None => format!("cap {} per user", pct(self.max)),
        }
    }
    fn admit(&self, view: &View<'_>, req: &Request) -> Verdict {
        let target = match &self.principal {
            Some(p) if view.counts_toward(&req.principal, p) => p.clone(),
            Some(_) => return Verdict::Pass,
            None if view
                .principal(&req.principal)
                .is_some_and(Principal::is_user) =>
            {
                req.principal.clone()
            }
            None => return Verdict::Pass,
        };
        let machine = f64::from(view.cpus.max(1));
        let want = req.guarantee.rate() / machine;
        let held = view.held_by(&target) / machine;
        if want > self.max + EPS {
            Verdict::Refuse(format!(
                "{} asks {} of the machine, more than the {} cap of `{target}` allows at all",
                req.guarantee,
                pct(want),
                pct(self.max)
            ))
        } else if held + want > self.max + EPS {
            Verdict::Wait(format!(
                "`{target}` holds {} of its {} cap and {} asks {}",
                pct(held),
                pct(self.max),
                req.guarantee,
                pct(want)
            ))
        } else {
            Verdict::Pass
        }
    }
}

/// "Interactive users keep 10 %": requests of principals that do not
/// count toward `principal` may not bring the machine's reservations above
/// `1 − share`; members of `principal` may use that last share.
#[derive(Clone, Debug, PartialEq)]
pub struct Keep {
    /// Who keeps the share (a group or a user).
    pub principal: String,
    /// The share kept, as a fraction of the machine.
    pub share: f64,
}

impl Rule for Keep {
    fn name(&self) -> String {
        format!("`{}` keep {}", self.principal, pct(self.share))
    }
    fn admit(&self, view: &View<'_>, req: &Request) -> Verdict {
        if view.counts_toward(&req.principal, &self.principal) || req.principal == SYSTEM {
            return Verdict::Pass;
        }
        let machine = f64::from(view.cpus.max(1));
        let want = req.guarantee.rate() / machine;
        // What the others hold: the kept share is not theirs to fill.
        let others: f64 = view
            .granted
            .iter()
            .filter(|g| !view.counts_toward(&g.request.principal, &self.principal))
            .map(|g| g.request.guarantee.rate())
            .sum::<f64>()
            / machine;
        let room = 1.0 - self.share;
        if want > room + EPS {
            Verdict::Refuse(format!(
                "{} asks {} of the machine; only {} may go to principals outside `{}`",
                req.guarantee,
                pct(want),
                pct(room),
                self.principal
            ))
        } else if others + want > room + EPS {
            Verdict::Wait(format!(
                "principals outside `{}` hold {} of the {} they may take, and {} asks {}",
                self.principal,
                pct(others),
                pct(room),
                req.guarantee,
                pct(want)
            ))
        } else {
            Verdict::Pass
        }
    }
}

/// Fairness between users (Figure 8.2): a user's reservations stay within
/// `1/n` of the machine, `n` being the users with a granted or pending
/// request. At the custom event it is attached to for recalculation
/// (`RECALCULATE_SHARES` in §8.4.4.2), it revokes the newest guarantees of
/// users above their new share.
#[derive(Clone, Debug, PartialEq)]
pub struct FairShare;

impl Rule for FairShare {
    fn name(&self) -> String {
        "fair share per user".to_string()
    }
    fn admit(&self, view: &View<'_>, req: &Request) -> Verdict {
        if !view
            .principal(&req.principal)
            .is_some_and(Principal::is_user)
        {
            return Verdict::Pass;
        }
        let machine = f64::from(view.cpus.max(1));
        let n = view.active_users(&req.principal).max(1);
        let share = 1.0 / n as f64;
        let want = req.guarantee.rate() / machine;
        let held = view.held_by(&req.principal) / machine;
        if want > 1.0 + EPS {
            Verdict::Refuse(format!("{} asks more than the machine", req.guarantee))
        } else if held + want > share + EPS {
            Verdict::Wait(format!(
                "`{}` holds {} and {} asks {}, above its fair share {} among {n} users",
                req.principal,
                pct(held),
                req.guarantee,
                pct(want),
                pct(share)
            ))
        } else {
            Verdict::Pass
        }
    }
    fn react(&self, view: &View<'_>, _ending: Option<&Request>) -> Vec<Action> {
        let machine = f64::from(view.cpus.max(1));
        let users: Vec<&Principal> = view
            .principals
            .iter()
            .filter(|p| p.is_user() && view.held_by(&p.name) > 0.0)
            .collect();
        let n = view.active_users(SYSTEM).max(1);
        let share = 1.0 / n as f64;
        let mut out = Vec::new();
        for u in users {
            let mut held = view.held_by(&u.name) / machine;
            for g in view.granted.iter().rev() {
                if held <= share + EPS {
                    break;
                }
                if g.request.principal == u.name {
                    held -= g.request.guarantee.rate() / machine;
                    out.push(Action::Revoke {
                        id: g.request.id,
                        reason: format!(
                            "`{}` is above its fair share {} among {n} users",
                            u.name,
                            pct(share)
                        ),
                    });
                }
            }
        }
        out
    }
}

/// Running the most important applications (Figure 8.1), a per-user rule:
/// when the user's reservations and the new request exceed `limit`, the
/// user's least important guarantees of lower value than the request are
/// chosen for revocation until it fits; if they do not suffice, the
/// request waits and nothing is revoked.
#[derive(Clone, Debug, PartialEq)]
pub struct MostImportant {
    /// The user (or group) whose requests it ranks.
    pub principal: String,
    /// The most they hold together, as a fraction of the machine.
    pub limit: f64,
}

impl Rule for MostImportant {
    fn name(&self) -> String {
        format!(
            "most important first within {} for `{}`",
            pct(self.limit),
            self.principal
        )
    }
    fn admit(&self, view: &View<'_>, req: &Request) -> Verdict {
        if !view.counts_toward(&req.principal, &self.principal) {
            return Verdict::Pass;
        }
        let machine = f64::from(view.cpus.max(1));
        let want = req.guarantee.rate() / machine;
        let mut held = view.held_by(&self.principal) / machine;
        if held + want <= self.limit + EPS {
            return Verdict::Pass;
        }
        let mut victims: Vec<&Grant> = view
            .granted
            .iter()
            .filter(|g| {
                view.counts_toward(&g.request.principal, &self.principal)
                    && g.request.value < req.value
            })
            .collect();
        // Least important first; among equals the newest.
        victims.sort_by(|a, b| {
            a.request
                .value
                .total_cmp(&b.request.value)
                .then(b.request.id.cmp(&a.request.id))
        });
        let mut chosen = Vec::new();
        for v in victims {
            if held + want <= self.limit + EPS {
                break;
            }
            held -= v.request.guarantee.rate() / machine;
            chosen.push(v.request.id);
        }
        if held + want <= self.limit + EPS {
            Verdict::PassIfRevoked(
                chosen,
                format!("a request of value {} needs the room", req.value),
            )
        } else {
            Verdict::Wait(format!(
                "`{}` would hold {} of {} even without its less important guarantees",
                self.principal,
                pct(held + want),
                pct(self.limit)
            ))
        }
    }
}

/// A shortest period and a smallest amount for reservation requests.
#[derive(Clone, Debug, PartialEq)]
pub struct Minimum {
    /// Shortest period accepted.
    pub period: Duration,
    /// Smallest amount accepted.
    pub amount: Duration,
}

impl Rule for Minimum {
    fn name(&self) -> String {
        format!("minimum period {} and amount {}", self.period, self.amount)
    }
    fn admit(&self, _view: &View<'_>, req: &Request) -> Verdict {
        let Some((amount, period)) = req.guarantee.amount_period() else {
            return Verdict::Pass;
        };
        if period < self.period {
            Verdict::Refuse(format!(
                "period {period} is shorter than the shortest allowed, {}",
                self.period
            ))
        } else if amount < self.amount {
            Verdict::Refuse(format!(
                "amount {amount} is smaller than the smallest allowed, {}",
                self.amount
            ))
        } else {
            Verdict::Pass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, who: &str, g: &str, value: f64) -> Request {
        Request {
            id,
            principal: who.into(),
            thread: format!("t{id}"),
            guarantee: g.parse().unwrap(),
            value,
            scheduler: None,
        }
    }

    fn grant(r: Request) -> Grant {
        let received = r.guarantee;
        Grant {
            request: r,
            scheduler: "rez".into(),
            received,
        }
    }

    fn people() -> Vec<Principal> {
        vec![
            Principal::system(),
            Principal::user("alice", Some(1001)).in_group("interactive"),
            Principal::user("bob", Some(1002)),
            Principal::group("interactive", None),
        ]
    }

    #[test]
    fn a_cap_waits_when_held_refuses_when_alone_too_big() {
        let ps = people();
        let granted = vec![grant(req(1, "alice", "RESBS 2 10", 0.0))];
        let v = View {
            cpus: 1,
            principals: &ps,
            granted: &granted,
            pending: &[],
        };
        let cap = Cap {
            principal: None,
            max: 0.3,
        };
        assert_eq!(
            cap.admit(&v, &req(2, "alice", "RESBS 1 10", 0.0)),
            Verdict::Pass
        );
        assert!(matches!(
            cap.admit(&v, &req(2, "alice", "RESBS 2 10", 0.0)),
            Verdict::Wait(_)
        ));
        assert!(matches!(
            cap.admit(&v, &req(2, "bob", "RESBS 4 10", 0.0)),
            Verdict::Refuse(_)
        ));
        // The system is no user.
        assert_eq!(
            cap.admit(&v, &req(2, SYSTEM, "RESBS 9 10", 0.0)),
            Verdict::Pass
        );
        // A group cap counts its members together.
        let g = Cap {
            principal: Some("interactive".into()),
            max: 0.25,
        };
        assert!(matches!(
            g.admit(&v, &req(2, "alice", "RESBS 1 10", 0.0)),
            Verdict::Wait(_)
        ));
        assert_eq!(
            g.admit(&v, &req(2, "bob", "RESBS 1 10", 0.0)),
            Verdict::Pass
        );
    }

    #[test]
    fn the_kept_share_is_only_for_its_group() {
        let ps = people();
        let granted = vec![grant(req(1, "bob", "RESBS 8 10", 0.0))];
        let v = View {
            cpus: 1,
            principals: &ps,
            granted: &granted,
            pending: &[],
        };
        let keep = Keep {
            principal: "interactive".into(),
            share: 0.1,
        };
        assert!(matches!(
            keep.admit(&v, &req(2, "bob", "RESBS 1.5 10", 0.0)),
            Verdict::Wait(_)
        ));
        assert_eq!(
            keep.admit(&v, &req(2, "bob", "RESBS 1 10", 0.0)),
            Verdict::Pass
        );
        assert_eq!(
            keep.admit(&v, &req(2, "alice", "RESBS 1.5 10", 0.0)),
            Verdict::Pass
        );
        assert!(matches!(
            keep.admit(&v, &req(2, "bob", "RESBS 9.5 10", 0.0)),
            Verdict::Refuse(_)
        ));
    }

    #[test]
    fn fair_share_divides_among_active_users_and_revokes_above_it() {
        let ps = people();
        let granted = vec![
            grant(req(1, "alice", "RESBS 3 10", 0.0)),
            grant(req(2, "alice", "RESBS 3 10", 0.0)),
        ];
        let v = View {
            cpus: 1,
            principals: &ps,
            granted: &granted,
            pending: &[],
        };
        // Alone, alice may hold everything.
        assert_eq!(
            FairShare.admit(&v, &req(3, "alice", "RESBS 3 10", 0.0)),
            Verdict::Pass
        );
        // With bob asking, each may hold half.
        assert_eq!(
            FairShare.admit(&v, &req(3, "bob", "RESBS 5 10", 0.0)),
            Verdict::Pass
        );
        assert!(matches!(
            FairShare.admit(&v, &req(3, "bob", "RESBS 6 10", 0.0)),
            Verdict::Wait(_)
        ));
        let pending = vec![req(3, "bob", "RESBS 2 10", 0.0)];
        let v = View {
            pending: &pending,
            ..v
        };
        // Alice holds 60% > 50%: her newest guarantee goes.
        let acts = FairShare.react(&v, None);
        assert_eq!(acts.len(), 1);
        assert!(matches!(acts[0], Action::Revoke { id: 2, .. }));
    }

    #[test]
    fn most_important_picks_victims_first_and_revokes_nothing_when_short() {
        let ps = people();
        let granted = vec![
            grant(req(1, "alice", "RESBS 2 10", 1.0)),
            grant(req(2, "alice", "RESBS 2 10", 5.0)),
            grant(req(3, "alice", "RESBS 1 10", 2.0)),
        ];
        let v = View {
            cpus: 1,
            principals: &ps,
            granted: &granted,
            pending: &[],
        };
        let rule = MostImportant {
            principal: "alice".into(),
            limit: 0.5,
        };
        // 50% held, 2 more asked by value 3: request 1 (value 1) is enough.
        assert!(matches!(
            rule.admit(&v, &req(4, "alice", "RESBS 2 10", 3.0)),
            Verdict::PassIfRevoked(ref ids, _) if ids == &vec![1]
        ));
        // 3 asked by value 3: 1 and 3 go (value 1, then 2).
        assert!(matches!(
            rule.admit(&v, &req(4, "alice", "RESBS 3 10", 3.0)),
            Verdict::PassIfRevoked(ref ids, _) if ids == &vec![1, 3]
        ));
        // Value 1.5 can only displace request 1: not enough for 3.
        assert!(matches!(
            rule.admit(&v, &req(4, "alice", "RESBS 3 10", 1.5)),
            Verdict::Wait(_)
        ));
        assert_eq!(
            rule.admit(&v, &req(4, "bob", "RESBS 9 10", 0.0)),
            Verdict::Pass
        );
    }

    #[test]
    fn minimum_refuses_short_periods_and_tiny_amounts() {
        let ps = people();
        let v = View {
            cpus: 1,
            principals: &ps,
            granted: &[],
            pending: &[],
        };
        let m = Minimum {
            period: Duration::from_millis(1),
            amount: Duration::from_micros(100),
        };
        assert!(matches!(
            m.admit(&v, &req(1, "bob", "RESBS 0.001 0.002", 0.0)),
            Verdict::Refuse(_)
        ));
        assert!(matches!(
            m.admit(&v, &req(1, "bob", "RESBS 0.05 5", 0.0)),
            Verdict::Refuse(_)
        ));
        assert_eq!(m.admit(&v, &req(1, "bob", "RESBS 1 5", 0.0)), Verdict::Pass);
        assert_eq!(m.admit(&v, &req(1, "bob", "PS 0.5", 0.0)), Verdict::Pass);
    }
}
