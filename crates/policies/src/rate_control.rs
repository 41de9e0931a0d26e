//! The real-rate controller of Steere et al. 1998, §3.2–§3.3, apart from
//! any dispatcher: the progress metrics of one child, its pressure, the PID
//! of Fig 3, the too-generous test and Fig 4's allocation step, squishing
//! under overload and quality exceptions.
//!
//! Two dispatchers drive it. The `realrate` policy (its module documents
//! the controller's rules and parameters) feeds it the budget a child left
//! unused while blocked, from its own reservation periods. The kernel
//! backend's adaptive reservations (`hsched-linux`, `kernel::adapt`) feed
//! it the allocation less the CPU time the kernel measured, and write the
//! proportions it returns into each thread's `SCHED_DEADLINE` runtime. The
//! arithmetic is the same in both, step for step, so a change here changes
//! both.

use crate::realrate::{Class, RealRateConfig};
use hsched_core::{Duration, Instant, ParamError, ParamValue, Params, PolicyError};

/// Role of a thread on a queue (Fig 3's R).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Fills the queue: R = −1.
    Producer,
    /// Drains the queue: R = +1.
    Consumer,
}

#[derive(Clone, Debug)]
struct Queue {
    name: String,
    fill: f64,
    size: f64,
    role: Role,
}

fn param_err(key: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Param(ParamError {
        key: key.to_string(),
        message: message.into(),
    })
}

/// The controller's state for one child.
#[derive(Clone, Debug)]
pub struct Feedback {
    queues: Vec<Queue>,
    /// The low-pass filtered pressure.
    pub filtered: f64,
    integral: f64,
    prev: Option<f64>,
    /// What the controller asked for before squishing.
    pub wanted: f64,
    /// Too-generous window: start, allocation and unused budget in it.
    win_start: Instant,
    win_alloc: f64,
    win_unused: f64,
    generous: bool,
    qex_armed: bool,
    /// Quality exceptions raised for this child.
    pub qex: u64,
}

impl Feedback {
    /// A child registered at `now` with `proportion`.
    pub fn new(now: Instant, proportion: f64) -> Feedback {
        Feedback {
            queues: Vec::new(),
            filtered: 0.0,
            integral: 0.0,
            prev: None,
            wanted: proportion,
            win_start: now,
            win_alloc: 0.0,
            win_unused: 0.0,
            generous: false,
            qex_armed: true,
            qex: 0,
        }
    }

    /// Applies a `progress` message (§3.2): registers or updates one queue,
    /// or forgets it with `remove = true`. Returns whether the child now
    /// reports a metric through it (false for a removal), which makes a
    /// child of inferred class real-rate (Fig 2).
    ///
    /// # Errors
    /// An unknown key or a missing or malformed field; nothing changes.
    pub fn progress(&mut self, p: &Params) -> Result<bool, PolicyError> {
        let known = ["queue", "fill", "size", "role", "remove"];
        if let Some(k) = p.unknown_keys(&known).next() {
            return Err(PolicyError::Unsupported(format!(
                "a progress message has no parameter `{k}`; it accepts: {}",
                known.join(", ")
            )));
        }
        let name = match p.get("queue") {
            Some(ParamValue::Str(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => return Err(param_err("queue", "is required (the queue's name)")),
        };
        if p.bool("remove")?.unwrap_or(false) {
            self.queues.retain(|q| q.name != name);
            return Ok(false);
        }
        let fill = p
            .f64("fill")?
            .ok_or_else(|| param_err("fill", "is required"))?;
        let size = p
            .f64("size")?
            .ok_or_else(|| param_err("size", "is required"))?;
        if size <= 0.0 || fill < 0.0 {
            return Err(param_err(
                "size",
                format!("need size > 0 and fill >= 0, found {fill}/{size}"),
            ));
        }
        let role = match p.str("role")? {
            Some("producer") => Role::Producer,
            Some("consumer") => Role::Consumer,
            other => {
                return Err(param_err(
                    "role",
                    format!("expected \"producer\" or \"consumer\", found {other:?}"),
                ))
            }
        };
        match self.queues.iter_mut().find(|q| q.name == name) {
            Some(q) => {
                q.fill = fill;
                q.size = size;
                q.role = role;
            }
            None => self.queues.push(Queue {
                name,
                fill,
                size,
                role,
            }),
        }
        Ok(true)
    }

    /// Whether the child reports a progress metric through some queue.
    pub fn reports(&self) -> bool {
        !self.queues.is_empty()
    }

    /// Counts `secs` of allocation the child did not use while it did not
    /// ask for the processor. A negative amount (a child that ran past its
    /// allocation, as a kernel server may by a tick) takes some back.
    pub fn unused(&mut self, secs: f64) {
        self.win_unused += secs;
    }

    /// One controller tick at `now`, `dt` seconds after the last, for a
    /// child of `class` holding `proportion` with reservation period
    /// `period`: closes the too-generous window when it is due (at least
    /// one period and four ticks), runs the PID of Fig 3 on the filtered
    /// pressure and Fig 4's step, and leaves the proportion the child
    /// wants, before squishing, in [`Feedback::wanted`].
    pub fn step(
        &mut self,
        cfg: &RealRateConfig,
        class: Class,
        proportion: f64,
        period: Duration,
        now: Instant,
        dt: f64,
    ) {
        self.win_alloc += proportion * dt;
        let window = period.max(cfg.control_period.mul_div(4, 1));
        let closed = now.saturating_since(self.win_start) >= window;
        if closed {
            self.generous = self.win_alloc > 0.0 && self.win_unused > cfg.generous * self.win_alloc;
            self.win_start = now;
            self.win_alloc = 0.0;
            self.win_unused = 0.0;
        }
        // A too-generous verdict shrinks once, when its window closes, and
        // holds the allocation until the next window: growing on the ticks
        // in between would settle an allocation nobody uses at the level
        // where growth and shrinking balance.
        let cut = if closed { 1.0 - cfg.shrink } else { 1.0 };
        let p = proportion;
        let next = match class {
            Class::RealRate => {
                let raw: f64 = self
                    .queues
                    .iter()
                    .map(|q| {
                        let f = (q.fill / q.size).clamp(0.0, 1.0) - 0.5;
                        match q.role {
                            Role::Producer => -f,
                            Role::Consumer => f,
                        }
                    })
                    .sum();
                self.filtered = cfg.filter * raw + (1.0 - cfg.filter) * self.filtered;
                let e = self.filtered;
                self.integral =
                    (self.integral + e * dt).clamp(-cfg.integral_limit, cfg.integral_limit);
                let d = e - self.prev.unwrap_or(e);
                self.prev = Some(e);
                let q = cfg.kp * e * dt + cfg.ki * self.integral * dt + cfg.kd * d;
                if self.generous && q >= 0.0 {
                    p * cut
                } else {
                    p + q
                }
            }
            _ => {
                if self.generous {
                    p * cut
                } else {
                    p + cfg.kp * cfg.misc_pressure * dt
                }
            }
        };
        self.wanted = next.clamp(cfg.floor, 1.0);
    }

    /// Whether a real-rate child granted `granted` after squishing raises a
    /// quality exception: it is far behind (pressure at `qex_level`) and
    /// held below what it asked for. Fires once per episode, re-armed when
    /// the pressure falls below half the level.
    pub fn quality(&mut self, cfg: &RealRateConfig, granted: f64) -> bool {
        let behind = self.filtered >= cfg.qex_level;
        if behind && self.qex_armed && granted + 1e-9 < self.wanted {
            self.qex_armed = false;
            self.qex += 1;
            return true;
        }
        if self.filtered < cfg.qex_level / 2.0 {
            self.qex_armed = true;
        }
        false
    }
}

/// Squishes the adaptive children's wanted proportions into `room` (§3.3
/// "Responding to Overload"): `wanted` holds (index, wanted, importance);
/// cuts are proportional to allocation / importance, never below `floor`,
/// and what a child at its floor cannot give is spread over the others
/// (water filling). Returns (index, granted).
pub fn squish(floor: f64, room: f64, wanted: &[(usize, f64, f64)]) -> Vec<(usize, f64)> {
    let mut out: Vec<(usize, f64, f64)> = wanted
        .iter()
        .map(|&(i, w, imp)| (i, w.min(room.max(floor)), imp))
        .collect();
    let mut free: Vec<bool> = vec![true; out.len()];
    for _ in 0..=out.len() {
        let sum: f64 = out.iter().map(|o| o.1).sum();
        let excess = sum - room;
        if excess <= 1e-12 {
            break;
        }
        let weight: f64 = out
            .iter()
            .zip(&free)
            .filter(|(_, f)| **f)
            .map(|(o, _)| (o.1 - floor).max(0.0) / o.2)
            .sum();
        if weight <= 0.0 {
            break;
        }
        let mut pinned = false;
        for (o, f) in out.iter_mut().zip(free.iter_mut()) {
            if !*f {
                continue;
            }
            let cut = excess * ((o.1 - floor).max(0.0) / o.2) / weight;
            if o.1 - cut <= floor {
                o.1 = floor;
                *f = false;
                pinned = true;
            } else {
                o.1 -= cut;
            }
        }
        if !pinned {
            break;
        }
    }
    out.into_iter().map(|(i, g, _)| (i, g)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(fill: f64, role: &str) -> Params {
        Params::new()
            .with("queue", ParamValue::Str("q".into()))
            .with("fill", ParamValue::Float(fill))
            .with("size", ParamValue::Float(100.0))
            .with("role", ParamValue::Str(role.into()))
    }

    #[test]
    fn a_full_input_queue_raises_a_consumers_proportion_and_an_empty_one_lowers_it() {
        let cfg = RealRateConfig::default();
        let ms = Duration::from_millis;
        for (fill, up) in [(90.0, true), (10.0, false)] {
            let mut f = Feedback::new(Instant::ZERO, 0.2);
            assert!(f.progress(&msg(fill, "consumer")).unwrap());
            f.step(
                &cfg,
                Class::RealRate,
                0.2,
                ms(30),
                Instant::ZERO + ms(10),
                0.01,
            );
            assert_eq!(f.wanted > 0.2, up, "fill {fill}: wanted {}", f.wanted);
        }
    }

    #[test]
    fn an_allocation_left_unused_shrinks_when_its_window_closes() {
        let cfg = RealRateConfig::default();
        let ms = Duration::from_millis;
        let mut f = Feedback::new(Instant::ZERO, 0.5);
        let mut p = 0.5;
        for k in 1..=4u64 {
            // Uses nothing of its allocation.
            f.unused(p * 0.01);
            f.step(
                &cfg,
                Class::Misc,
                p,
                ms(30),
                Instant::ZERO + ms(10 * k),
                0.01,
            );
            if k < 4 {
                assert!(f.wanted > p, "tick {k}: constant pressure grows it");
            }
            p = f.wanted;
        }
        assert!(f.wanted < 0.5, "the closed window shrank it: {}", f.wanted);
    }

    #[test]
    fn squishing_keeps_the_sum_in_the_room_and_every_child_at_its_floor() {
        let g = squish(0.05, 0.5, &[(0, 0.6, 1.0), (1, 0.3, 1.0), (2, 0.06, 1.0)]);
        let sum: f64 = g.iter().map(|x| x.1).sum();
        assert!((sum - 0.5).abs() < 1e-9, "{g:?}");
        assert!(g.iter().all(|x| x.1 >= 0.05 - 1e-12), "{g:?}");
        assert!(g[0].1 > g[1].1, "{g:?}");
        assert!(
            (squish(0.05, 0.5, &[(0, 0.2, 1.0)])[0].1 - 0.2).abs() < 1e-12,
            "no cut within the room"
        );
    }

    #[test]
    fn a_bad_progress_message_is_refused_and_changes_nothing() {
        let mut f = Feedback::new(Instant::ZERO, 0.2);
        let bad = msg(10.0, "consumer").with("size", ParamValue::Float(0.0));
        assert!(f.progress(&bad).is_err());
        assert!(f.progress(&msg(10.0, "neither")).is_err());
        assert!(f.queues.is_empty());
    }
}
