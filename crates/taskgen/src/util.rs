//! Utilization vectors: n non-negative numbers with a given sum.

use crate::rng::Rng;
use crate::Error;

/// UUniFast (Bini & Buttazzo 2005): `n` utilizations summing to `total`,
/// uniformly distributed over that simplex. Meant for `total <= 1`; for a
/// multiprocessor total use [`uunifast_discard`] or [`randfixedsum`],
/// which keep every task at most `max`.
///
/// # Errors
/// `n` is zero or `total` is not a finite positive number.
pub fn uunifast(n: usize, total: f64, rng: &mut Rng) -> Result<Vec<f64>, Error> {
    check_common(n, total)?;
    let mut out = Vec::with_capacity(n);
    let mut sum = total;
    for i in 1..n {
        let next = sum * rng.uniform().powf(1.0 / (n - i) as f64);
        out.push(sum - next);
        sum = next;
    }
    out.push(sum);
    Ok(out)
}

/// How many draws [`uunifast_discard`] makes before it gives up.
pub const DISCARD_LIMIT: usize = 100_000;

/// UUniFast-discard (Davis & Burns 2009): UUniFast draws, discarding any
/// with a task above `max` (1.0: one processor's worth), so that the sets
/// it returns are uniform over the part of the simplex inside the cube.
///
/// # Errors
/// As [`uunifast`]; `total > n × max` (no such set exists); or
/// [`DISCARD_LIMIT`] draws were all discarded (a total close to `n × max`
/// makes acceptance vanishingly rare: [`randfixedsum`] has no such limit).
pub fn uunifast_discard(n: usize, total: f64, max: f64, rng: &mut Rng) -> Result<Vec<f64>, Error> {
    check_common(n, total)?;
    check_bounds(n, total, 0.0, max)?;
    for _ in 0..DISCARD_LIMIT {
        let u = uunifast(n, total, rng)?;
        if u.iter().all(|&x| x <= max) {
            return Ok(u);
        }
    }
    Err(Error::new(format!(
        "UUniFast-discard drew {DISCARD_LIMIT} sets of {n} utilizations summing to {total} and every one had a task above {max}\n  = hint: use Randfixedsum (`--method randfixedsum`), which draws from the same distribution without discarding"
    )))
}

/// Stafford's Randfixedsum: `n` numbers in `[min, max]` summing to
/// `total`, uniformly distributed over that part of the hyperplane, with
/// no rejection. Emberson, Stafford & Davis 2010 propose it for task-set
/// generation; this follows Stafford's 2006 algorithm: a table of
/// transition probabilities between the unit cube's simplices, then one
/// walk down it per set.
///
/// # Errors
/// As [`uunifast`]; `min > max`, a negative `min`, or `total` outside
/// `[n × min, n × max]`.
pub fn randfixedsum(
    n: usize,
    total: f64,
    min: f64,
    max: f64,
    rng: &mut Rng,
) -> Result<Vec<f64>, Error> {
    check_common(n, total)?;
    check_bounds(n, total, min, max)?;
    if n == 1 {
        return Ok(vec![total]);
    }
    if max - min <= 0.0 {
        return Ok(vec![min; n]);
    }
    // Rescale to the unit cube.
    let nf = n as f64;
    let s = ((total - nf * min) / (max - min)).clamp(0.0, nf);
    let k = (s.floor() as usize).min(n - 1);
    let s = s.clamp(k as f64, k as f64 + 1.0);
    // s1[q] = s - (k - q), s2[q] = (k + n - q) - s: never negative.
    let s1: Vec<f64> = (0..n).map(|q| s - (k as f64 - q as f64)).collect();
    let s2: Vec<f64> = (0..n).map(|q| (k + n - q) as f64 - s).collect();
    // w[i][j]: scaled volumes; t[i][j]: the probability of staying in the
    // same simplex column on the way down. f64::MAX keeps the scaled
    // volumes inside the range of a double for large n.
    let mut w = vec![vec![0.0f64; n + 1]; n];
    w[0][1] = f64::MAX;
    let mut t = vec![vec![0.0f64; n]; n - 1];
    let tiny = f64::from_bits(1); // the smallest positive double
    for i in 2..=n {
        let fi = i as f64;
        for q in 1..=i {
            let tmp1 = w[i - 2][q] * s1[q - 1] / fi;
            let tmp2 = w[i - 2][q - 1] * s2[n - i + q - 1] / fi;
            w[i - 1][q] = tmp1 + tmp2;
            let tmp3 = w[i - 1][q] + tiny;
            t[i - 2][q - 1] = if s2[n - i + q - 1] > s1[q - 1] {
                tmp2 / tmp3
            } else {
                1.0 - tmp1 / tmp3
            };
        }
    }
    let mut x = vec![0.0f64; n];
    let mut s = s;
    let mut j = k + 1; // 1-based column in t
    let mut sm = 0.0;
    let mut pr = 1.0;
    for i in (1..n).rev() {
        let e = rng.uniform() <= t[i - 1][j - 1];
        let sx = rng.uniform().powf(1.0 / i as f64);
        sm += (1.0 - sx) * pr * s / (i as f64 + 1.0);
        pr *= sx;
        x[n - i - 1] = sm + pr * if e { 1.0 } else { 0.0 };
        if e {
            s -= 1.0;
            j -= 1;
        }
    }
    x[n - 1] = sm + pr * s;
    rng.shuffle(&mut x);
    let mut out: Vec<f64> = x.iter().map(|&v| min + (max - min) * v).collect();
    // Rounding leaves the sum a few ulps off: put the difference on the
    // element with the most room, which keeps every bound.
    let err = total - out.iter().sum::<f64>();
    if let Some(best) = (0..n).max_by(|&a, &b| {
        let room = |v: f64| if err > 0.0 { max - v } else { v - min };
        room(out[a]).total_cmp(&room(out[b]))
    }) {
        out[best] = (out[best] + err).clamp(min, max);
    }
    Ok(out)
}

fn check_common(n: usize, total: f64) -> Result<(), Error> {
    if n == 0 {
        return Err(Error::new("a task set needs at least one task (n = 0)"));
    }
    if !(total.is_finite() && total > 0.0) {
        return Err(Error::new(format!(
            "the total utilization must be a finite number above 0 (got {total})"
        )));
    }
    Ok(())
}

fn check_bounds(n: usize, total: f64, min: f64, max: f64) -> Result<(), Error> {
    if !(min.is_finite() && max.is_finite() && min >= 0.0 && max > 0.0 && min <= max) {
        return Err(Error::new(format!(
            "per-task utilization bounds must satisfy 0 <= min <= max, max > 0 (got min {min}, max {max})"
        )));
    }
    let nf = n as f64;
    // A relative slack: `n × max` computed in floating point.
    let eps = 1e-12 * nf.max(1.0);
    if total > nf * max + eps || total < nf * min - eps {
        return Err(Error::new(format!(
            "{n} tasks with utilizations in [{min}, {max}] cannot sum to {total}: the total must lie in [{}, {}]",
            nf * min,
            nf * max
        )));
    }
    Ok(())
}
