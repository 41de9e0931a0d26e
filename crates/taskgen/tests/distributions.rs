//! Statistical sanity of the generators, with fixed seeds: sums exact,
//! bounds kept, and marginal distributions where theory says they are.

use hsched_taskgen::{
    generate, log_uniform_periods, randfixedsum, uunifast, uunifast_discard, Config, Deadlines,
    Method, Rng,
};

const SETS: usize = 20_000;

fn sum(v: &[f64]) -> f64 {
    v.iter().sum()
}

#[test]
fn uunifast_sums_exactly_and_is_uniform_on_the_simplex() {
    let mut rng = Rng::new(1);
    let n = 4;
    let mut below_half = 0;
    let mut mean0 = 0.0;
    for _ in 0..SETS {
        let u = uunifast(n, 0.8, &mut rng).unwrap();
        assert_eq!(u.len(), n);
        assert!((sum(&u) - 0.8).abs() < 1e-12);
        assert!(u.iter().all(|&x| x >= 0.0));
        mean0 += u[0];
        if u[0] <= 0.4 {
            below_half += 1;
        }
    }
    // Uniform on the simplex: u0/0.8 ~ Beta(1, n-1), mean 1/n,
    // P(u0 <= 0.4) = 1 - (1/2)^(n-1) = 0.875.
    mean0 /= SETS as f64;
    assert!((mean0 - 0.2).abs() < 0.005, "mean {mean0}");
    let p = below_half as f64 / SETS as f64;
    assert!((p - 0.875).abs() < 0.01, "P {p}");
}

#[test]
fn uunifast_discard_keeps_every_task_below_the_cap() {
    let mut rng = Rng::new(2);
    for _ in 0..2000 {
        let u = uunifast_discard(8, 3.0, 1.0, &mut rng).unwrap();
        assert!((sum(&u) - 3.0).abs() < 1e-12);
        assert!(u.iter().all(|&x| (0.0..=1.0).contains(&x)));
    }
    assert!(uunifast_discard(2, 2.5, 1.0, &mut rng).is_err());
}

#[test]
fn randfixedsum_keeps_bounds_and_sum() {
    let mut rng = Rng::new(3);
    for &(n, total, lo, hi) in &[
        (10, 3.5, 0.0, 1.0),
        (5, 1.0, 0.1, 0.3),
        (3, 2.9, 0.5, 1.0),
        (50, 10.0, 0.0, 0.5),
        (2, 1.0, 0.0, 1.0),
    ] {
        for _ in 0..2000 {
            let u = randfixedsum(n, total, lo, hi, &mut rng).unwrap();
            assert_eq!(u.len(), n);
            assert!((sum(&u) - total).abs() < 1e-9, "{u:?}");
            assert!(u.iter().all(|&x| x >= lo && x <= hi), "{u:?}");
        }
    }
    assert!(randfixedsum(3, 3.5, 0.0, 1.0, &mut rng).is_err());
    assert!(randfixedsum(3, 0.2, 0.1, 1.0, &mut rng).is_err());
}

#[test]
fn randfixedsum_matches_uunifast_without_binding_bounds() {
    // With bounds [0, total] both are uniform on the simplex: the
    // marginals agree (Beta(1, n-1) scaled by the total).
    let (n, total) = (3, 1.0);
    let mut rng = Rng::new(4);
    let mut p = 0;
    let mut m = 0.0;
    for _ in 0..SETS {
        let u = randfixedsum(n, total, 0.0, total, &mut rng).unwrap();
        m += u[1];
        if u[1] <= 0.5 {
            p += 1;
        }
    }
    let (m, p) = (m / SETS as f64, p as f64 / SETS as f64);
    assert!((m - 1.0 / 3.0).abs() < 0.006, "mean {m}");
    assert!((p - 0.75).abs() < 0.01, "P {p}");
}

#[test]
fn randfixedsum_is_uniform_inside_the_cube() {
    // n = 2, total 1.5, bounds [0, 1]: x0 is uniform on [0.5, 1].
    let mut rng = Rng::new(5);
    let mut bins = [0usize; 5];
    for _ in 0..SETS {
        let u = randfixedsum(2, 1.5, 0.0, 1.0, &mut rng).unwrap();
        let b = (((u[0] - 0.5) / 0.5) * 5.0).floor().clamp(0.0, 4.0) as usize;
        bins[b] += 1;
    }
    for b in bins {
        let f = b as f64 / SETS as f64;
        assert!((f - 0.2).abs() < 0.015, "{bins:?}");
    }
}

#[test]
fn periods_are_log_uniform_and_rounded() {
    let mut rng = Rng::new(6);
    let p = log_uniform_periods(SETS, 10_000_000, 1_000_000_000, 0, &mut rng).unwrap();
    assert!(p.iter().all(|&x| (10_000_000..=1_000_000_000).contains(&x)));
    // Log-uniform over two decades: half below the geometric mean, 100 ms.
    let below = p.iter().filter(|&&x| x < 100_000_000).count() as f64 / SETS as f64;
    assert!((below - 0.5).abs() < 0.015, "{below}");
    let q = log_uniform_periods(1000, 10_000_000, 1_000_000_000, 5_000_000, &mut rng).unwrap();
    assert!(q
        .iter()
        .all(|&x| x % 5_000_000 == 0 && (10_000_000..=1_000_000_000).contains(&x)));
    assert!(log_uniform_periods(3, 1_000_001, 1_999_999, 1_000_000, &mut rng).is_err());
    assert!(log_uniform_periods(3, 0, 10, 0, &mut rng).is_err());
}

#[test]
fn generate_is_deterministic_and_respects_deadline_options() {
    let cfg = Config {
        n: 20,
        utilization: 0.9,
        seed: 42,
        jitter: 0.1,
        deadlines: Deadlines::Constrained { min_fraction: 0.5 },
        ..Config::default()
    };
    let a = generate(&cfg).unwrap();
    assert_eq!(a, generate(&cfg).unwrap());
    assert_ne!(
        a,
        generate(&Config {
            seed: 43,
            ..cfg.clone()
        })
        .unwrap()
    );
    assert!((a.utilization() - 0.9).abs() < 20.0 * 1e-6);
    for t in &a.tasks {
        assert!(t.deadline_ns <= t.period_ns && t.deadline_ns >= t.exec_ns);
        assert!(t.deadline_ns * 2 >= t.period_ns || t.deadline_ns == t.exec_ns);
        assert_eq!(t.jitter_ns, (t.period_ns as f64 * 0.1).round() as u64);
    }
    let arb = generate(&Config {
        deadlines: Deadlines::Arbitrary { max_factor: 2.0 },
        ..cfg.clone()
    })
    .unwrap();
    assert!(arb.tasks.iter().all(|t| t.deadline_ns <= 2 * t.period_ns));
    assert!(arb.tasks.iter().any(|t| t.deadline_ns > t.period_ns));
    let p = a.dm_priorities();
    let mut sorted = p.clone();
    sorted.sort();
    assert_eq!(sorted, (1..=20).collect::<Vec<i64>>());
}

#[test]
fn bad_parameters_are_refused_with_a_reason() {
    let bad = |cfg: Config| generate(&cfg).unwrap_err().message;
    assert!(bad(Config {
        n: 0,
        ..Config::default()
    })
    .contains("number of tasks"));
    assert!(bad(Config {
        utilization: 1.5,
        ..Config::default()
    })
    .contains("uunifast-discard"));
    assert!(bad(Config {
        utilization: f64::NAN,
        ..Config::default()
    })
    .contains("finite"));
    assert!(bad(Config {
        jitter: 1.0,
        ..Config::default()
    })
    .contains("jitter"));
    assert!(bad(Config {
        method: Method::Randfixedsum,
        utilization: 20.0,
        ..Config::default()
    })
    .contains("cannot sum"));
    assert!(Method::parse("uunifast-discard").is_ok());
    assert!(Method::parse("rand")
        .unwrap_err()
        .message
        .contains("randfixedsum"));
}
