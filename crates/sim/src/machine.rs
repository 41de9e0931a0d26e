//! The machine model: timer granularity and stolen time (Regehr 2001, §10.4 and
//! ch. 11).

use hsched_config::{StolenPattern, StolenSpec, TimerModel};

/// "Never" on the virtual clock.
pub const NEVER: u64 = u64::MAX;

/// When a scheduler timer armed for `at` fires, seen at time `now`.
///
/// Precise timers fire at `max(at, now)`. A periodic clock of `hz` fires
/// them at the first tick at or after that instant; tick `k` is at
/// `ceil(k · 10⁹ / hz)` ns, so the grid has no drift for any frequency.
pub fn timer_fire_time(model: TimerModel, at: u64, now: u64) -> u64 {
    let t = at.max(now);
    match model {
        TimerModel::Precise => t,
        TimerModel::Tick { hz } => {
            if hz == 0 || t == 0 {
                return t;
            }
            let hz = hz as u128;
            let k = ((t as u128 - 1) * hz) / 1_000_000_000 + 1;
            let tick = (k * 1_000_000_000).div_ceil(hz);
            tick.min(NEVER as u128) as u64
        }
    }
}

/// One source of stolen time on one processor: a sequence of disjoint
/// intervals, produced lazily.
#[derive(Clone, Debug)]
pub struct StealGen {
    /// The processor.
    pub cpu: usize,
    /// Inside an interval now.
    pub active: bool,
    /// Next time `active` flips, or [`NEVER`].
    pub next: u64,
    kind: Kind,
    /// Index of the current or next interval.
    k: u64,
}

#[derive(Clone, Debug)]
enum Kind {
    Periodic {
        every: u64,
        amount: u64,
        start: u64,
    },
    Burst {
        start: u64,
        end: u64,
        on: u64,
        slice: u64,
    },
    Trace {
        steals: Vec<(u64, u64)>,
    },
}

impl StealGen {
    /// Builds the generator for `spec` on a machine of `cpus` processors.
    ///
    /// # Errors
    /// A processor that does not exist, or a pattern that steals all the
    /// time or is not sorted.
    pub fn new(spec: &StolenSpec, cpus: usize) -> Result<StealGen, String> {
        if spec.cpu >= cpus {
            return Err(format!(
                "stolen time on cpu {}, but the machine has {cpus} processor(s)",
                spec.cpu
            ));
        }
        let kind = match &spec.pattern {
            StolenPattern::Periodic {
                every,
                amount,
                start,
            } => {
                let (every, amount) = (every.as_nanos(), amount.as_nanos());
                if every == 0 || amount >= every {
                    return Err(format!(
                        "stolen time on cpu {}: `amount` ({amount} ns) must be less than `every` ({every} ns)",
                        spec.cpu
                    ));
                }
                if amount == 0 {
                    Kind::Trace { steals: Vec::new() }
                } else {
                    Kind::Periodic {
                        every,
                        amount,
                        start: start.as_nanos(),
                    }
                }
            }
            StolenPattern::Burst {
                start,
                length,
                fraction,
                slice,
            } => {
                if !(*fraction > 0.0 && *fraction < 1.0) {
                    return Err(format!(
                        "stolen time on cpu {}: `fraction` must be in (0, 1), found {fraction}",
                        spec.cpu
                    ));
                }
                let slice = slice.as_nanos();
                // Each slice steals at least 1 ns and leaves at least 1 ns.
                if slice < 2 {
                    return Err(format!(
                        "stolen time on cpu {}: `slice` must be at least 2 ns, found {slice} ns",
                        spec.cpu
                    ));
                }
                let length = length.as_nanos();
                if slice > length && length > 0 {
                    return Err(format!(
                        "stolen time on cpu {}: the burst's `slice` ({slice} ns) is longer than its `length` ({length} ns)",
                        spec.cpu
                    ));
                }
                let on = crate::rng::to_u64(slice as f64 * fraction).clamp(1, slice - 1);
                let start = start.as_nanos();
                Kind::Burst {
                    start,
                    end: start.saturating_add(length),
                    on,
                    slice,
                }
            }
            StolenPattern::Trace { steals } => {
                let mut v = Vec::with_capacity(steals.len());
                let mut last_end = 0u64;
                for (i, (s, l)) in steals.iter().enumerate() {
                    let (s, l) = (s.as_nanos(), l.as_nanos());
                    if i > 0 && s < last_end {
                        return Err(format!(
                            "stolen time trace on cpu {}: entry {} starts at {s} ns, before the previous one ends ({last_end} ns)",
                            spec.cpu,
                            i + 1
                        ));
                    }
                    if l > 0 {
                        v.push((s, l));
                        last_end = s.saturating_add(l);
                    }
                }
                Kind::Trace { steals: v }
            }
        };
        let mut g = StealGen {
            cpu: spec.cpu,
            active: false,
            next: NEVER,
            kind,
            k: 0,
        };
        g.next = g.interval(0).map_or(NEVER, |(s, _)| s);
        Ok(g)
    }

    /// Interval `k` as (start, end), if it exists.
    fn interval(&self, k: u64) -> Option<(u64, u64)> {
        match &self.kind {
            Kind::Periodic {
                every,
                amount,
                start,
            } => {
                let s = start.checked_add(k.checked_mul(*every)?)?;
                Some((s, s.saturating_add(*amount)))
            }
            Kind::Burst {
                start,
                end,
                on,
                slice,
            } => {
                let s = start.checked_add(k.checked_mul(*slice)?)?;
                (s < *end).then(|| (s, s.saturating_add(*on).min(*end)))
            }
            Kind::Trace { steals } => {
                let &(s, l) = steals.get(usize::try_from(k).ok()?)?;
                Some((s, s.saturating_add(l)))
            }
        }
    }

    /// Flips state at `self.next` and computes the following flip.
    pub fn flip(&mut self) {
        if self.active {
            self.active = false;
            self.k += 1;
            self.next = self.interval(self.k).map_or(NEVER, |(s, _)| s);
        } else {
            self.active = true;
            self.next = self.interval(self.k).map_or(NEVER, |(_, e)| e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hsched_core::Duration as D;

    #[test]
    fn tick_rounding_has_no_drift() {
        let m = TimerModel::Tick { hz: 1000 };
        assert_eq!(timer_fire_time(m, 1_000_000, 0), 1_000_000);
        assert_eq!(timer_fire_time(m, 1_000_001, 0), 2_000_000);
        assert_eq!(timer_fire_time(m, 5, 3_000_000), 3_000_000);
        let m = TimerModel::Tick { hz: 1024 };
        // 1024 ticks make exactly one second.
        assert_eq!(timer_fire_time(m, 999_999_999, 0), 1_000_000_000);
        assert_eq!(timer_fire_time(m, 1, 0), 976_563);
        assert_eq!(timer_fire_time(TimerModel::Precise, 7, 3), 7);
    }

    fn run(g: &mut StealGen, until: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut start = 0;
        while g.next < until {
            let t = g.next;
            g.flip();
            if g.active {
                start = t;
            } else {
                out.push((start, t));
            }
        }
        out
    }

    #[test]
    fn patterns_produce_their_intervals() {
        let spec = StolenSpec {
            cpu: 0,
            pattern: StolenPattern::Periodic {
                every: D(10),
                amount: D(2),
                start: D(5),
            },
        };
        let mut g = StealGen::new(&spec, 1).unwrap();
        assert_eq!(run(&mut g, 40), vec![(5, 7), (15, 17), (25, 27), (35, 37)]);

        let spec = StolenSpec {
            cpu: 1,
            pattern: StolenPattern::Burst {
                start: D(100),
                length: D(25),
                fraction: 0.5,
                slice: D(10),
            },
        };
        let mut g = StealGen::new(&spec, 2).unwrap();
        assert_eq!(run(&mut g, 1000), vec![(100, 105), (110, 115), (120, 125)]);

        let spec = StolenSpec {
            cpu: 0,
            pattern: StolenPattern::Trace {
                steals: vec![(D(3), D(1)), (D(4), D(0)), (D(9), D(2))],
            },
        };
        let mut g = StealGen::new(&spec, 1).unwrap();
        assert_eq!(run(&mut g, 1000), vec![(3, 4), (9, 11)]);
    }

    #[test]
    fn bad_patterns_are_refused() {
        let bad = StolenSpec {
            cpu: 3,
            pattern: StolenPattern::Trace { steals: vec![] },
        };
        assert!(StealGen::new(&bad, 2).unwrap_err().contains("cpu 3"));
        let bad = StolenSpec {
            cpu: 0,
            pattern: StolenPattern::Periodic {
                every: D(10),
                amount: D(10),
                start: D(0),
            },
        };
        assert!(StealGen::new(&bad, 1).is_err());
        // A 1 ns slice has no room for both stealing and running (it once
        // panicked in `clamp`).
        for slice in [0, 1] {
            let bad = StolenSpec {
                cpu: 0,
                pattern: StolenPattern::Burst {
                    start: D(0),
                    length: D(100),
                    fraction: 0.5,
                    slice: D(slice),
                },
            };
            let e = StealGen::new(&bad, 1).unwrap_err();
            assert!(e.contains("`slice` must be at least 2 ns"), "{e}");
        }
        let bad = StolenSpec {
            cpu: 0,
            pattern: StolenPattern::Trace {
                steals: vec![(D(5), D(5)), (D(7), D(1))],
            },
        };
        assert!(StealGen::new(&bad, 1).is_err());
    }
}
