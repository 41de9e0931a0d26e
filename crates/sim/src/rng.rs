//! A small seeded pseudo-random generator whose output is the same on every
//! platform: xoshiro256++ seeded through SplitMix64, plus distributions built
//! only from IEEE-exact operations (`+ - * /`, `sqrt`). The logarithm is our
//! own series rather than the platform's libm, whose last bit may differ
//! between systems; that keeps reports and traces byte-identical everywhere.

/// xoshiro256++ (Blackman and Vigna), 256 bits of state.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a string: a stable way to give each thread its own stream.
pub fn stream_of(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

impl Rng {
    /// A generator for `stream` (e.g. [`stream_of`] a thread name) under
    /// the run's `seed`. Different streams are independent for practical
    /// purposes, so adding a thread does not change the others' draws.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut x = seed ^ stream.rotate_left(17) ^ 0x5851_F42D_4C95_7F2D;
        let s = [
            splitmix(&mut x),
            splitmix(&mut x),
            splitmix(&mut x),
            splitmix(&mut x),
        ];
        Rng { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[0]
            .wrapping_add(self.s[3])
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in `[0, n)` without modulo bias (Lemire); 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let m = (self.next_u64() as u128) * (n as u128);
        // The threshold is below `n`, so a low half of at least `n` is
        // accepted without the division that computes it (Lemire's early
        // exit: the same draws and the same results).
        if (m as u64) >= n {
            return (m >> 64) as u64;
        }
        self.below_slow(n, m)
    }

    /// [`below`](Self::below) when the first draw's low half is under `n`.
    #[cold]
    fn below_slow(&mut self, n: u64, mut m: u128) -> u64 {
        let threshold = n.wrapping_neg() % n;
        loop {
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
            m = (self.next_u64() as u128) * (n as u128);
        }
    }

    /// Uniform in `[lo, hi]` (inclusive); `lo` when `hi <= lo`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        lo + self.below(span + 1)
    }

    /// Uniform in `(0, 1]` with 53 bits of precision.
    pub fn unit_open(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponentially distributed with the given mean, rounded to whole
    /// nanoseconds.
    pub fn exp(&mut self, mean: u64) -> u64 {
        // A draw of `unit_open` is a normal number (at least 2⁻⁵³), so the
        // special cases of `ln` cannot arise.
        let v = -(mean as f64) * ln_normal(self.unit_open(), 0);
        to_u64(v)
    }

    /// A standard normal deviate (Marsaglia's polar method).
    pub fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.unit_open() - 1.0;
            let v = 2.0 * self.unit_open() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * ln(s) / s).sqrt();
            }
        }
    }
}

/// Rounds a non-negative float to nanoseconds, saturating; NaN and negative
/// values give zero.
#[inline]
pub fn to_u64(v: f64) -> u64 {
    // Rust's float-to-integer cast saturates and maps NaN to 0, and
    // `v + 0.5` is below 1 for every `v <= 0` and at least 2⁶⁴ for every
    // `v >= 2⁶⁴`, so the cast alone gives those cases too.
    (v + 0.5) as u64
}

/// Natural logarithm of a positive normal number, from basic operations only
/// (range reduction to [√½, √2) and the atanh series), accurate to a few
/// ulps. Non-positive input gives negative infinity.
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    // Subnormals: scale into the normal range first.
    if x < f64::MIN_POSITIVE {
        ln_normal(x * (1u64 << 54) as f64, -54)
    } else {
        ln_normal(x, 0)
    }
}

/// `ln(x) + e·ln 2` for a positive normal `x` (what [`ln`] computes once
/// it has ruled out the special cases).
#[inline]
fn ln_normal(x: f64, mut e: i64) -> f64 {
    let bits = x.to_bits();
    e += ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    // 2·atanh(s) = 2(s + s³/3 + s⁵/5 + ...); |s| < 0.172, so 12 terms reach
    // below 1e-19 relative.
    let mut acc = 1.0 / 25.0;
    let mut k = 23.0;
    while k > 0.0 {
        acc = acc * s2 + 1.0 / k;
        k -= 2.0;
    }
    e as f64 * std::f64::consts::LN_2 + 2.0 * s * acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_matches_the_platform_closely() {
        for &x in &[
            1e-300, 1e-10, 0.001, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 10.0, 12345.678, 1e300,
        ] {
            let ours = ln(x);
            let libm = x.ln();
            assert!(
                (ours - libm).abs() <= 4.0 * f64::EPSILON * libm.abs().max(1.0),
                "ln({x}) = {ours} vs {libm}"
            );
        }
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let mut a = Rng::new(7, stream_of("a"));
        let mut a2 = Rng::new(7, stream_of("a"));
        let mut b = Rng::new(7, stream_of("b"));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| a2.next_u64()).collect();
        let zs: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn bounded_draws_stay_in_range_and_cover_it() {
        let mut r = Rng::new(1, 2);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let v = r.between(10, 14);
            assert!((10..=14).contains(&v));
            seen[(v - 10) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.between(5, 5), 5);
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn rounding_and_exponential_draws_are_what_the_checked_versions_gave() {
        // `to_u64` and `exp` as they were, with every special case tested.
        fn old_to_u64(v: f64) -> u64 {
            if v.is_nan() || v <= 0.0 {
                0
            } else if v >= u64::MAX as f64 {
                u64::MAX
            } else {
                (v + 0.5) as u64
            }
        }
        for v in [
            f64::NAN,
            f64::NEG_INFINITY,
            -1e30,
            -0.7,
            -0.5,
            -0.3,
            -0.0,
            0.0,
            0.3,
            0.5,
            0.7,
            1.5,
            2.5,
            1e18,
            u64::MAX as f64 * 0.999_999,
            u64::MAX as f64,
            1e30,
            f64::INFINITY,
        ] {
            assert_eq!(to_u64(v), old_to_u64(v), "{v}");
        }
        let (mut a, mut b) = (Rng::new(11, 3), Rng::new(11, 3));
        for k in 0..20_000u64 {
            let mean = [1, 1000, 30_000_000, u64::MAX / 3, u64::MAX][k as usize % 5];
            let old = old_to_u64(-(mean as f64) * ln(b.unit_open()));
            assert_eq!(a.exp(mean), old, "mean {mean}");
        }
        assert_eq!(ln_normal(1e-300, 0), ln(1e-300));
        assert_eq!(ln(f64::MIN_POSITIVE / 8.0), {
            let x = f64::MIN_POSITIVE / 8.0;
            ln_normal(x * (1u64 << 54) as f64, -54)
        });
    }

    #[test]
    fn below_draws_what_the_always_dividing_version_drew() {
        // Lemire's method computing the threshold up front, as before.
        fn old_below(r: &mut Rng, n: u64) -> u64 {
            if n == 0 {
                return 0;
            }
            let threshold = n.wrapping_neg() % n;
            loop {
                let m = (r.next_u64() as u128) * (n as u128);
                if (m as u64) >= threshold {
                    return (m >> 64) as u64;
                }
            }
        }
        // Large bounds reject often (near 2^63 about half the draws).
        let bounds = [
            1,
            2,
            3,
            7,
            1000,
            1 << 40,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        let (mut a, mut b) = (Rng::new(9, 1), Rng::new(9, 1));
        for k in 0..20_000 {
            let n = bounds[k % bounds.len()];
            assert_eq!(a.below(n), old_below(&mut b, n), "n = {n}");
        }
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn exponential_and_normal_have_the_right_moments() {
        let mut r = Rng::new(3, 4);
        let n = 200_000u64;
        let mean: f64 = (0..n).map(|_| r.exp(1_000_000) as f64).sum::<f64>() / n as f64;
        assert!((mean - 1e6).abs() < 1e6 * 0.01, "exp mean {mean}");
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        assert!(m.abs() < 0.01, "normal mean {m}");
        assert!((v - 1.0).abs() < 0.02, "normal variance {v}");
    }
}
