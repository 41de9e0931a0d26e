//! Per-thread statistics with bounded memory. Distributions are kept in a
//! log-linear histogram (values below 64 ns exact, above that 32 buckets per
//! power of two: relative error under 1/32), so percentiles cost at most
//! 7.5 KiB per distribution however long the run, and 128 bytes per power
//! of two the samples span in practice. docs/metrics.md defines every
//! figure. Only the per-job records ([`JobLog`]), kept when asked, grow
//! with the run.

use serde::Serialize;

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this are their own bucket.
const EXACT: u64 = 2 * SUB;
const BUCKETS: usize = (EXACT + (63 - SUB_BITS as u64) * SUB) as usize;

fn bucket_of(v: u64) -> usize {
    if v < EXACT {
        v as usize
    } else {
        let e = 63 - v.leading_zeros() as u64; // >= SUB_BITS + 1
        let mantissa = (v >> (e - SUB_BITS as u64)) & (SUB - 1);
        (EXACT + (e - SUB_BITS as u64 - 1) * SUB + mantissa) as usize
    }
}

/// Smallest and largest value of a bucket.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < EXACT {
        (i, i)
    } else {
        let e = (i - EXACT) / SUB + SUB_BITS as u64 + 1;
        let mantissa = (i - EXACT) % SUB;
        let shift = e - SUB_BITS as u64;
        let lo = (SUB + mantissa) << shift;
        (lo, lo + ((1u64 << shift) - 1))
    }
}

/// Groups of [`SUB`] buckets: the exact values take the first two, each
/// power of two above them one.
const GROUPS: usize = BUCKETS / SUB as usize;

/// Bucket counts, allocated one group of [`SUB`] buckets at a time, on
/// the group's first sample. A distribution usually spans a few powers of
/// two, so it keeps a few hundred bytes rather than every bucket: with
/// tens of thousands of threads, each with several distributions, whole
/// arrays took most of a run's memory. Counts are 32-bit (a bucket
/// saturates at 4.29e9 samples) to keep the groups, which are touched at
/// random, small in the cache.
#[derive(Clone, Debug)]
struct Buckets {
    /// Per group, 1 + its position in `groups`; 0 while it has no sample.
    slot: [u8; GROUPS],
    groups: Vec<[u32; SUB as usize]>,
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets {
            slot: [0; GROUPS],
            groups: Vec::new(),
        }
    }
}

impl Buckets {
    /// Counts one sample in bucket `b`.
    #[inline]
    fn add(&mut self, b: usize) {
        let g = b / SUB as usize;
        let mut s = self.slot[g] as usize;
        if s == 0 {
            s = self.open(g);
        }
        let c = &mut self.groups[s - 1][b % SUB as usize];
        *c = c.saturating_add(1);
    }

    /// Allocates group `g`; returns its slot.
    #[cold]
    fn open(&mut self, g: usize) -> usize {
        self.groups.push([0; SUB as usize]);
        let s = self.groups.len();
        self.slot[g] = s as u8;
        s
    }

    /// The counts of group `g`, if it has any.
    fn group(&self, g: usize) -> Option<&[u32]> {
        match self.slot[g] as usize {
            0 => None,
            s => Some(&self.groups[s - 1]),
        }
    }

    /// The first bucket at which the running count, from the lowest
    /// bucket up, reaches `rank` (at least 1), if any.
    fn at_rank(&self, rank: u64) -> Option<usize> {
        self.at_rank_in(0..GROUPS, rank, bucket_at_rank)
    }

    /// [`Buckets::at_rank`] counting from the highest bucket down.
    fn at_rank_from_top(&self, rank: u64) -> Option<usize> {
        self.at_rank_in((0..GROUPS).rev(), rank, bucket_at_rank_from_top)
    }

    /// The search of both: groups in `order` are passed whole while their
    /// counts stay below `rank`; `within` finds the bucket in the group
    /// that reaches it.
    fn at_rank_in(
        &self,
        order: impl Iterator<Item = usize>,
        rank: u64,
        within: fn(&[u32], u64) -> Option<usize>,
    ) -> Option<usize> {
        let mut seen = 0u64;
        for g in order {
            let Some(counts) = self.group(g) else {
                continue;
            };
            let sum: u64 = counts.iter().map(|&c| u64::from(c)).sum();
            if seen + sum < rank {
                seen += sum;
                continue;
            }
            return within(counts, rank - seen).map(|k| g * SUB as usize + k);
        }
        None
    }
}

/// A histogram of non-negative values (see [`Buckets`]).
#[derive(Clone, Debug, Default)]
pub struct Hist {
    counts: Buckets,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Hist {
    /// Adds one sample.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts.add(bucket_of(v));
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.n += 1;
        self.sum += v as u128;
    }

    /// Adds one sample to the buckets and the count only: for the halves
    /// of a [`SignedHist`], which keeps the extremes itself and reads only
    /// the buckets and counts of its halves (and the sum of `pos`).
    #[inline]
    fn tally(&mut self, v: u64) {
        self.counts.add(bucket_of(v));
        self.n += 1;
    }

    /// The value at rank `ceil(q·n)`: the upper end of its bucket, clamped
    /// to the observed range, so the figure never understates.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        match self.counts.at_rank(rank_of(q, self.n)) {
            Some(i) => bucket_range(i).1.clamp(self.min, self.max),
            None => self.max,
        }
    }

    /// Summary, or `None` when there are no samples.
    pub fn summary(&self) -> Option<Dist> {
        (self.n > 0).then(|| Dist {
            count: self.n,
            min: self.min as i64,
            max: self.max as i64,
            mean: (self.sum as f64) / self.n as f64,
            p50: self.quantile(0.5) as i64,
            p90: self.quantile(0.9) as i64,
            p99: self.quantile(0.99) as i64,
            p999: self.quantile(0.999) as i64,
        })
    }
}

fn rank_of(q: f64, n: u64) -> u64 {
    let r = (q * n as f64).ceil();
    (r as u64).clamp(1, n.max(1))
}

/// Buckets summed at once by [`bucket_at_rank`].
const BLOCK: usize = 16;

/// The first bucket at which the running count reaches `rank`, if any.
/// Blocks of buckets that stay below it are passed with one sum each:
/// most buckets are empty, and this keeps a report's percentiles (a scan
/// each) cheap next to a short run.
fn bucket_at_rank(counts: &[u32], rank: u64) -> Option<usize> {
    let mut seen = 0u64;
    for (b, block) in counts.chunks(BLOCK).enumerate() {
        let sum: u64 = block.iter().map(|&c| u64::from(c)).sum();
        if seen + sum < rank {
            seen += sum;
            continue;
        }
        for (k, &c) in block.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return Some(b * BLOCK + k);
            }
        }
    }
    None
}

/// [`bucket_at_rank`] counting from the last bucket down.
fn bucket_at_rank_from_top(counts: &[u32], rank: u64) -> Option<usize> {
    let mut seen = 0u64;
    let mut end = counts.len();
    for block in counts.rchunks(BLOCK) {
        let start = end - block.len();
        let sum: u64 = block.iter().map(|&c| u64::from(c)).sum();
        if seen + sum < rank {
            seen += sum;
            end = start;
            continue;
        }
        for (k, &c) in block.iter().enumerate().rev() {
            seen += u64::from(c);
            if seen >= rank {
                return Some(start + k);
            }
        }
    }
    None
}

/// A histogram of signed values (lateness): magnitudes of negative and of
/// non-negative samples in two [`Hist`]s.
#[derive(Clone, Debug, Default)]
pub struct SignedHist {
    neg: Hist,
    pos: Hist,
    sum: i128,
    min: i64,
    max: i64,
}

impl SignedHist {
    /// Adds one sample. The halves get only their buckets and counts (and
    /// `pos` its sum, for [`mean_positive`](Self::mean_positive)): their
    /// own extremes are never read.
    pub fn record(&mut self, v: i64) {
        if self.count() == 0 {
            self.min = v;
            self.max = v;
        } else if v < self.min {
            self.min = v;
        } else if v > self.max {
            self.max = v;
        }
        self.sum += v as i128;
        if v < 0 {
            self.neg.tally(v.unsigned_abs());
        } else {
            self.pos.tally(v as u64);
            self.pos.sum += v as u128;
        }
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.neg.n + self.pos.n
    }

    /// Largest sample, if any.
    pub fn max(&self) -> Option<i64> {
        (self.count() > 0).then_some(self.max)
    }

    /// The value at rank `ceil(q·n)` in ascending order, rounded up to its
    /// bucket's end and clamped to the observed range.
    pub fn quantile(&self, q: f64) -> i64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = rank_of(q, n);
        let v = if rank <= self.neg.n {
            // Negative side, most negative first: walk magnitudes downwards.
            (self.neg.counts)
                .at_rank_from_top(rank)
                .map_or(0, |i| -(bucket_range(i).0 as i64))
        } else {
            (self.pos.counts)
                .at_rank(rank - self.neg.n)
                .map_or(self.max, |i| bucket_range(i).1.min(i64::MAX as u64) as i64)
        };
        v.clamp(self.min, self.max)
    }

    /// Summary, or `None` when there are no samples.
    pub fn summary(&self) -> Option<Dist> {
        let n = self.count();
        (n > 0).then(|| Dist {
            count: n,
            min: self.min,
            max: self.max,
            mean: self.sum as f64 / n as f64,
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
        })
    }

    /// Mean of `max(0, v)` over all samples (mean tardiness).
    pub fn mean_positive(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            0.0
        } else {
            self.pos.sum as f64 / n as f64
        }
    }
}

/// Summary of a distribution, in nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dist {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample (exact).
    pub min: i64,
    /// Largest sample (exact).
    pub max: i64,
    /// Mean (exact up to float rounding).
    pub mean: f64,
    /// Median (bucketed, see docs/metrics.md).
    pub p50: i64,
    /// 90th percentile.
    pub p90: i64,
    /// 99th percentile.
    pub p99: i64,
    /// 99.9th percentile.
    pub p999: i64,
}

/// What the engine and the workload models count for one thread.
#[derive(Clone, Debug, Default)]
pub struct ThreadStats {
    /// Useful CPU time: on a processor, not stolen, not switching.
    pub cpu_ns: u64,
    /// Time stolen while the thread held a processor.
    pub stolen_ns: u64,
    /// Context-switch time spent bringing this thread in.
    pub switch_ns: u64,
    /// Completed jobs (frames, bursts, periods, loop iterations).
    pub jobs: u64,
    /// Jobs that had a deadline and met it.
    pub hits: u64,
    /// Deadline misses (see docs/metrics.md for the renderer's count).
    pub misses: u64,
    /// Frames or jobs abandoned at their deadline.
    pub dropped: u64,
    /// Lateness of jobs with a deadline: finish − deadline.
    pub lateness: SignedHist,
    /// Wake-ups (blocked → runnable).
    pub wakeups: u64,
    /// Wake-up → first dispatch.
    pub dispatch_latency: Hist,
    /// Longest time runnable without a processor.
    pub max_gap: u64,
    /// Times put on a processor.
    pub switch_ins: u64,
    /// Times taken off a processor while still runnable.
    pub preemptions: u64,
    /// Per-job records, kept only when asked ([`crate::SimOptions::job_records`]).
    pub log: Option<Box<JobLog>>,
}

/// One job with a release and an absolute deadline, as the run saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobRow {
    /// When it was released.
    pub release: u64,
    /// Its absolute deadline.
    pub deadline: u64,
    /// When it finished; `None` when it did not (abandoned at its
    /// deadline, or unfinished when the run or the thread ended).
    pub completion: Option<u64>,
    /// Whether it missed its deadline.
    pub missed: bool,
}

/// A thread's per-job records: one row per job with a deadline, in
/// release order, and the release times of a periodic thread's jobs that
/// are released and not finished (its backlog).
#[derive(Clone, Debug, Default)]
pub struct JobLog {
    /// The rows so far.
    pub rows: Vec<JobRow>,
    /// Release times of the backlog, oldest first.
    pub pending: std::collections::VecDeque<u64>,
}

impl ThreadStats {
    /// A finished job with a deadline, `lateness` = finish − deadline.
    pub fn job_with_deadline(&mut self, lateness: i64) {
        self.jobs += 1;
        self.lateness.record(lateness);
        if lateness > 0 {
            self.misses += 1;
        } else {
            self.hits += 1;
        }
    }

    /// A finished job without a deadline.
    pub fn job(&mut self) {
        self.jobs += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size docs/metrics.md gives for a row kept during the run.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_job_row_takes_what_the_docs_say() {
        assert_eq!(std::mem::size_of::<JobRow>(), 40);
    }

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev_hi = None;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert!(lo <= hi);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "bucket {i}");
            }
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
            if lo >= EXACT {
                assert!((hi - lo) as f64 / lo as f64 <= 1.0 / SUB as f64);
            }
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
    }

    #[test]
    fn quantiles_are_close_and_never_understate() {
        let mut h = Hist::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        for (q, exact) in [(0.5, 5_000_000u64), (0.9, 9_000_000), (0.99, 9_900_000)] {
            let got = h.quantile(q);
            assert!(
                got >= exact && (got - exact) as f64 <= exact as f64 / 32.0,
                "q{q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.quantile(1.0), 10_000_000);
        assert_eq!(h.summary().unwrap().min, 1000);
    }

    /// The first bucket, from the lowest up, at which the running count
    /// reaches `rank`: the plain scan the faster searches must agree with.
    fn plain_up(counts: &[u32], rank: u64) -> Option<usize> {
        let mut seen = 0u64;
        (0..counts.len()).find(|&i| {
            seen += counts[i] as u64;
            seen >= rank
        })
    }

    /// [`plain_up`] from the highest bucket down.
    fn plain_down(counts: &[u32], rank: u64) -> Option<usize> {
        let mut seen = 0u64;
        (0..counts.len()).rev().find(|&i| {
            seen += counts[i] as u64;
            seen >= rank
        })
    }

    #[test]
    fn block_scans_find_the_bucket_a_plain_scan_finds() {
        let mut rng = crate::rng::Rng::new(5, 8);
        for len in [0, 1, 15, 16, 17, 40, BUCKETS] {
            for _ in 0..50 {
                // Sparse counts, some of them large.
                let counts: Vec<u32> = (0..len)
                    .map(|_| match rng.below(10) {
                        0 => rng.below(5) as u32,
                        1 => u32::MAX - rng.below(3) as u32,
                        _ => 0,
                    })
                    .collect();
                let total: u64 = counts.iter().map(|&c| c as u64).sum();
                for rank in [1, 2, total / 2, total.saturating_sub(1), total, total + 1] {
                    for rank in [rank, rng.below(total + 2)] {
                        assert_eq!(bucket_at_rank(&counts, rank), plain_up(&counts, rank));
                        assert_eq!(
                            bucket_at_rank_from_top(&counts, rank),
                            plain_down(&counts, rank)
                        );
                    }
                }
            }
        }
    }

    /// Groups allocated on demand find the bucket that a full array of
    /// the same counts finds, from either end.
    #[test]
    fn sparse_groups_rank_as_a_full_array() {
        let mut rng = crate::rng::Rng::new(6, 9);
        for samples in [0u64, 1, 2, 31, 500] {
            for _ in 0..40 {
                let mut b = Buckets::default();
                let mut full = vec![0u32; BUCKETS];
                for _ in 0..samples {
                    // Values clustered at a few magnitudes, as latencies are.
                    let magnitude = 1 << (4 * rng.below(16));
                    let v = rng.below(magnitude) + rng.below(3);
                    let i = bucket_of(v);
                    b.add(i);
                    full[i] += 1;
                }
                assert!(b.groups.len() <= GROUPS);
                for rank in 1..=samples + 1 {
                    assert_eq!(b.at_rank(rank), plain_up(&full, rank), "up {rank}");
                    assert_eq!(
                        b.at_rank_from_top(rank),
                        plain_down(&full, rank),
                        "down {rank}"
                    );
                }
            }
        }
    }

    #[test]
    fn signed_quantiles_cross_zero() {
        let mut h = SignedHist::default();
        for v in -50..50i64 {
            h.record(v * 1_000_000);
        }
        assert_eq!(h.count(), 100);
        let p10 = h.quantile(0.10);
        assert!((-41_000_000..=-39_000_000).contains(&p10), "{p10}");
        let p90 = h.quantile(0.90);
        assert!((39_000_000..=41_500_000).contains(&p90), "{p90}");
        assert_eq!(h.max(), Some(49_000_000));
        let p0 = h.quantile(0.0);
        assert!((-50_000_000..=-48_400_000).contains(&p0), "{p0}");
        // Mean tardiness: (1 + ... + 49) ms over 100 jobs.
        assert!((h.mean_positive() - 12_250_000.0).abs() < 1.0);
    }

    #[test]
    fn signed_extremes_and_sums_in_any_order() {
        let mut h = SignedHist::default();
        assert_eq!(h.summary(), None);
        for v in [5, -3, 7, -10, 0, 7, -10, 2] {
            h.record(v);
        }
        let d = h.summary().unwrap();
        assert_eq!((d.count, d.min, d.max), (8, -10, 7));
        assert!((d.mean - (-2.0 / 8.0)).abs() < 1e-12, "{}", d.mean);
        assert!((h.mean_positive() - 21.0 / 8.0).abs() < 1e-12);
        assert_eq!(h.quantile(0.0), -10);
        assert_eq!(h.quantile(1.0), 7);
        let mut one = SignedHist::default();
        one.record(-4);
        assert_eq!(one.max(), Some(-4));
        assert_eq!((one.quantile(0.5), one.summary().unwrap().min), (-4, -4));
    }
}
