//! `hsched sim --csv DIR`: the report's per-thread and per-scheduler
//! tables as CSV files (`threads.csv`, `schedulers.csv`), one row per
//! thread or instance, the columns named as in the JSON report
//! (docs/metrics.md) with each distribution spread into one column per
//! statistic (`lateness_ns` becomes `lateness_count`, `lateness_min_ns`,
//! ..., `lateness_p999_ns`), as the Python package's data frames name them.
//! With `--job-records`, also `jobs.csv`: one row per job with a deadline
//! ([`hsched_sim::JobRecord`]), a job that did not finish leaving its
//! completion, response and lateness cells empty.

use hsched_sim::Report;
use serde_json::Value;

/// The statistics of a distribution, in the report's order.
const DIST: [&str; 8] = ["count", "min", "max", "mean", "p50", "p90", "p99", "p999"];

/// The report's distributions (`null` for a thread without samples).
const DIST_FIELDS: [&str; 2] = ["lateness_ns", "dispatch_latency_ns"];

/// `threads.csv`.
pub fn threads(report: &Report) -> String {
    table(
        report
            .threads
            .iter()
            .map(|t| serde_json::to_string(t).unwrap_or_default()),
    )
}

/// `schedulers.csv`.
pub fn schedulers(report: &Report) -> String {
    table(
        report
            .schedulers
            .iter()
            .map(|s| serde_json::to_string(s).unwrap_or_default()),
    )
}

/// The columns of `jobs.csv`, the fields of [`hsched_sim::JobRecord`].
pub const JOB_COLUMNS: &str =
    "thread,job,release_ns,deadline_ns,completion_ns,response_ns,lateness_ns,missed";

/// `jobs.csv`: the header, then one row per job (none when the report
/// kept no records).
pub fn jobs(report: &Report) -> String {
    let opt = |v: Option<String>| v.unwrap_or_default();
    let mut out = String::with_capacity(64 * (report.jobs.len() + 1));
    out.push_str(JOB_COLUMNS);
    out.push('\n');
    for j in &report.jobs {
        let cells = [
            quote(&j.thread),
            j.job.to_string(),
            j.release_ns.to_string(),
            j.deadline_ns.to_string(),
            opt(j.completion_ns.map(|v| v.to_string())),
            opt(j.response_ns.map(|v| v.to_string())),
            opt(j.lateness_ns.map(|v| v.to_string())),
            j.missed.to_string(),
        ];
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// One row per object (its JSON text); the columns are the first row's
/// fields in the order the report declares them.
fn table(rows: impl Iterator<Item = String>) -> String {
    let rows: Vec<Vec<(String, String)>> = rows.map(|t| flatten(&t)).collect();
    let Some(first) = rows.first() else {
        return String::new();
    };
    let mut out = String::new();
    let header: Vec<String> = first.iter().map(|(k, _)| quote(k)).collect();
    out.push_str(&header.join(","));
    out.push('\n');
    for row in &rows {
        let cells: Vec<String> = row.iter().map(|(_, v)| quote(v)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// `(column, cell)` pairs of one object's JSON text. A parsed map sorts
/// its keys, so the columns follow where each key appears in the text,
/// which serializes the fields in declaration order (`"key":` cannot occur
/// inside a string value, whose quotes are escaped).
fn flatten(text: &str) -> Vec<(String, String)> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by_key(|k| text.find(&format!("\"{k}\":")).unwrap_or(usize::MAX));
    let mut out = Vec::new();
    for k in keys {
        let x = &map[k];
        if DIST_FIELDS.contains(&k.as_str()) {
            let base = k.trim_end_matches("_ns");
            for s in DIST {
                let col = if s == "count" {
                    format!("{base}_count")
                } else {
                    format!("{base}_{s}_ns")
                };
                out.push((col, x.get(s).map(cell).unwrap_or_default()));
            }
        } else {
            out.push((k.clone(), cell(x)));
        }
    }
    out
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A CSV field, quoted when it holds a comma, quote or line break.
fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
