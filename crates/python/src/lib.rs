//! `hsched._native`: the Rust side of the Python package. Each function
//! is a thin call into the library crates — `hsched-config` reads
//! hierarchies, `hsched-cli`'s verbs check and analyze them, `hsched-sim`
//! runs them, `hsched-taskgen` generates task sets — so Python sees exactly
//! what the `hsched` command sees. The Python layer (python/hsched/)
//! turns the JSON reports into data frames and adds the sweeps.
//!
//! Errors: a file the parser refuses raises `HierarchyError` (a
//! `ValueError`) with `file`, `line`, `col`, `expected`, `hint` and
//! `errors` (every problem as a dict) and the CLI's rendering as its
//! message; a run that fails raises `SimulationError` (a `RuntimeError`);
//! generator parameters out of range raise `GenerateError` (a
//! `ValueError`).
#![forbid(unsafe_code)]

use hsched_cli::{analysis, cmd};
use hsched_config::{ConfigErrors, Hierarchy};
use hsched_core::Duration;
use hsched_guarantee::convert::ConvertParams;
use hsched_guarantee::mapping::{ChildRequest, MappingContext};
use hsched_guarantee::{EdgeParams, Guarantee, GuaranteeKind, InstanceParams, Registry};
use hsched_policies::PolicyInfo;
use hsched_sim::{GanttColor, GanttRequest, SimError, SimOptions};
use hsched_taskgen::{Config, Deadlines, Method, TaskSet};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

create_exception!(
    _native,
    HierarchyError,
    PyValueError,
    "A hierarchy or rt-app file hsched cannot use; carries file, line, col, expected, hint and errors."
);
create_exception!(
    _native,
    SimulationError,
    PyRuntimeError,
    "A simulation that could not run to its end (a stuck workload, a protocol violation, an output that cannot be written)."
);
create_exception!(
    _native,
    GenerateError,
    PyValueError,
    "Task-set generator parameters out of range."
);

/// The `HierarchyError` for `e`: the CLI's rendering, and each problem as
/// data.
fn config_error(py: Python<'_>, e: &ConfigErrors) -> PyErr {
    let err = HierarchyError::new_err(e.to_string().trim_end().to_string());
    let fill = || -> PyResult<()> {
        let value = err.value(py);
        let list = PyList::empty(py);
        for c in &e.0 {
            let d = PyDict::new(py);
            d.set_item("file", &c.file)?;
            d.set_item("line", c.line)?;
            d.set_item("col", c.col)?;
            d.set_item("message", &c.message)?;
            d.set_item("expected", &c.expected)?;
            d.set_item("hint", &c.hint)?;
            list.append(d)?;
        }
        let first = e.0.first();
        value.setattr("file", first.map(|c| c.file.clone()))?;
        value.setattr("line", first.map(|c| c.line))?;
        value.setattr("col", first.map(|c| c.col))?;
        value.setattr("message", first.map(|c| c.message.clone()))?;
        value.setattr("expected", first.and_then(|c| c.expected.clone()))?;
        value.setattr("hint", first.and_then(|c| c.hint.clone()))?;
        value.setattr("errors", list)?;
        Ok(())
    };
    match fill() {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// A `HierarchyError` without a position (a hierarchy that parsed but
/// cannot be built), with the same attributes.
fn plain_hierarchy_error(py: Python<'_>, file: &str, message: String) -> PyErr {
    let mut e = hsched_config::ConfigError::new(file, 0, 0, message);
    e.hint = None;
    config_error(py, &ConfigErrors::one(e))
}

/// A parsed, validated hierarchy.
#[pyclass(module = "hsched._native", frozen)]
struct NativeHierarchy {
    h: Arc<Hierarchy>,
    /// The name errors and reports give it (its path, or the name given).
    file: String,
    /// Its text, to quote lines in guarantee problems.
    text: Option<String>,
    /// Parsed against, and run with, the reference policies too.
    reference: bool,
}

/// The policies a hierarchy is parsed and run against: the registry, or
/// with `reference` also `hsched_sim::reference`'s yardsticks.
fn policy_table(reference: bool) -> Vec<PolicyInfo> {
    if reference {
        hsched_sim::reference::policies()
    } else {
        hsched_policies::registry().to_vec()
    }
}

/// Reads and validates a hierarchy file (and the rt-app file it names,
/// or `workload` in its place); `reference_policies` also accepts the
/// reference policies of `hsched_sim::reference`.
#[pyfunction]
#[pyo3(signature = (path, workload=None, reference_policies=false))]
fn load(
    py: Python<'_>,
    path: &str,
    workload: Option<&str>,
    reference_policies: bool,
) -> PyResult<NativeHierarchy> {
    let p = Path::new(path);
    // The plug-ins the file names (`policy = "x.wasm"`), relative to it.
    if let Ok(text) = hsched_config::read_text(p, hsched_config::MAX_FILE_BYTES) {
        hsched_plugin::load_named(Some(p), &text)
            .map_err(|e| plain_hierarchy_error(py, path, e.to_string()))?;
    }
    let h = match (workload, reference_policies) {
        (None, false) => hsched_config::load(p).map_err(|e| config_error(py, &e))?,
        (None, true) => hsched_config::load_with_policies(p, &policy_table(true))
            .map_err(|e| config_error(py, &e))?,
        (Some(_), true) => {
            return Err(PyValueError::new_err(
                "reference_policies: not available with workload=; load the file without it",
            ))
        }
        (Some(w), false) => {
            let mut h = hsched_config::load_without_rtapp(p).map_err(|e| config_error(py, &e))?;
            attach(py, &mut h, w)?;
            h
        }
    };
    Ok(NativeHierarchy {
        h: Arc::new(h),
        file: path.to_string(),
        text: std::fs::read_to_string(p).ok(),
        reference: reference_policies,
    })
}

/// The rt-app file `path` attached to `h`, as `hsched sim --workload`
/// attaches it.
fn attach(py: Python<'_>, h: &mut Hierarchy, path: &str) -> PyResult<()> {
    let text =
        hsched_config::read_text(Path::new(path), hsched_config::MAX_FILE_BYTES).map_err(|e| {
            plain_hierarchy_error(py, path, format!("cannot read the rt-app file: {e}"))
        })?;
    let w = hsched_config::parse_rtapp(&text, path).map_err(|e| config_error(py, &e))?;
    hsched_config::attach_rtapp(h, w).map_err(|mut e| {
        e.fill_source(path, &text);
        config_error(py, &e)
    })
}

/// Parses and validates hierarchy text; `name` is the file name errors
/// give.
#[pyfunction]
#[pyo3(signature = (text, name="<string>", workload=None, reference_policies=false))]
fn parse(
    py: Python<'_>,
    text: &str,
    name: &str,
    workload: Option<&str>,
    reference_policies: bool,
) -> PyResult<NativeHierarchy> {
    // Plug-ins named in text are relative to the working directory.
    hsched_plugin::load_named(None, text)
        .map_err(|e| plain_hierarchy_error(py, name, e.to_string()))?;
    let mut h =
        hsched_config::parse_str_with_policies(text, name, &policy_table(reference_policies))
            .map_err(|e| config_error(py, &e))?;
    if let Some(w) = workload {
        attach(py, &mut h, w)?;
    }
    Ok(NativeHierarchy {
        h: Arc::new(h),
        file: name.to_string(),
        text: Some(text.to_string()),
        reference: reference_policies,
    })
}

#[pymethods]
impl NativeHierarchy {
    /// The name it is reported under.
    #[getter]
    fn file(&self) -> &str {
        &self.file
    }

    /// `1 CPU, 8 schedulers, 8 threads`, as `hsched check` says it.
    fn summary(&self) -> String {
        cmd::check::summary(&self.h)
    }

    /// Processors.
    #[getter]
    fn cpus(&self) -> usize {
        self.h.machine.cpus
    }

    /// (name, policy, parents) of each scheduler, in file order.
    fn schedulers(&self) -> Vec<(String, String, Vec<String>)> {
        self.h
            .schedulers
            .iter()
            .map(|s| {
                let parents = s.parents.iter().map(|p| p.name.clone()).collect();
                (s.name.clone(), s.policy.clone(), parents)
            })
            .collect()
    }

    /// (name, scheduler) of each thread, in file order.
    fn threads(&self) -> Vec<(String, String)> {
        self.h
            .threads
            .iter()
            .map(|t| (t.name.clone(), t.scheduler.clone()))
            .collect()
    }

    /// The guarantee problems `hsched check` reports, each a dict (code,
    /// headline, details, node kind and name, line, col, text as the CLI
    /// prints it), and the analysis notes. Raises `HierarchyError` when a
    /// thread's rt-app task is missing, as `hsched check` does.
    fn check<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, Vec<String>)> {
        self.h
            .check_rtapp_attached()
            .map_err(|e| config_error(py, &e))?;
        let a = analysis::analyze(&self.h);
        let list = PyList::empty(py);
        for p in cmd::check::composition(&a) {
            let d = PyDict::new(py);
            d.set_item("code", p.finding.code)?;
            d.set_item("headline", &p.finding.headline)?;
            let details: Vec<(&str, String)> = p.finding.details.clone();
            d.set_item("details", details)?;
            let (kind, name) = match &p.finding.node {
                Some(analysis::NodeRef::Scheduler(s)) => (Some("scheduler"), Some(s.clone())),
                Some(analysis::NodeRef::Thread(t)) => (Some("thread"), Some(t.clone())),
                None => (None, None),
            };
            d.set_item("kind", kind)?;
            d.set_item("node", name)?;
            d.set_item("file", &self.file)?;
            d.set_item("line", p.span.map(|s| s.line))?;
            d.set_item("col", p.span.map(|s| s.col))?;
            d.set_item(
                "text",
                analysis::render(&p.finding, &self.file, self.text.as_deref(), p.span),
            )?;
            list.append(d)?;
        }
        Ok((list, a.notes()))
    }

    /// `hsched analyze --json`'s report as JSON text.
    #[pyo3(signature = (tolerance=0.01, horizon_ns=3_600_000_000_000))]
    fn analyze(&self, py: Python<'_>, tolerance: f64, horizon_ns: u64) -> String {
        let h = Arc::clone(&self.h);
        let file = self.file.clone();
        py.allow_threads(move || {
            let v = cmd::analyze::report_json(&h, &file, tolerance, Duration(horizon_ns));
            serde_json::to_string(&v).unwrap_or_default()
        })
    }

    /// Simulates the hierarchy; returns the report as JSON text
    /// (docs/metrics.md). The GIL is released while it runs.
    /// With `jobs`, the report carries its per-job records (`jobs`).
    #[pyo3(signature = (duration_ns=None, seed=None, check_protocol=false, trace=None, gantt=None, window_ns=None, gantt_color="cpu", jobs=false))]
    // The keyword arguments of Python's `Hierarchy.sim`, one for one.
    #[allow(clippy::too_many_arguments)]
    fn sim(
        &self,
        py: Python<'_>,
        duration_ns: Option<u64>,
        seed: Option<u64>,
        check_protocol: bool,
        trace: Option<String>,
        gantt: Option<String>,
        window_ns: Option<(u64, u64)>,
        gantt_color: &str,
        jobs: bool,
    ) -> PyResult<String> {
        let color = match gantt_color {
            "cpu" => GanttColor::Cpu,
            "thread" => GanttColor::Thread,
            other => {
                return Err(PyValueError::new_err(format!(
                    "gantt_color: `{other}` is not one of cpu, thread"
                )))
            }
        };
        self.h
            .check_simulatable()
            .map_err(|e| config_error(py, &e))?;
        let h = Arc::clone(&self.h);
        let source = self.file.clone();
        let reference = self.reference;
        let result = py.allow_threads(move || -> Result<String, (bool, String)> {
            let create = |p: &str| {
                File::create(p)
                    .map(BufWriter::new)
                    .map_err(|e| (false, format!("cannot create `{p}`: {e}")))
            };
            let window = window_ns.map(|(a, b)| (Duration(a), Duration(b)));
            let mut opts = SimOptions {
                duration: duration_ns.map(Duration),
                seed,
                check_protocol,
                source: Some(source),
                job_records: jobs,
                ..SimOptions::default()
            };
            if let Some(p) = &trace {
                opts.trace = Some(Box::new(create(p)?));
                opts.trace_window = window;
            }
            if let Some(p) = &gantt {
                let (from, to) = window.unwrap_or((Duration::ZERO, Duration::from_secs(1)));
                opts.gantt = Some(GanttRequest {
                    from,
                    to,
                    out: Box::new(create(p)?),
                    color,
                });
            }
            let run = if reference {
                hsched_sim::run_with_policies(&h, opts, &policy_table(true))
            } else {
                hsched_sim::run(&h, opts)
            };
            match run {
                Ok(r) => Ok(r.to_json()),
                Err(SimError::Build { message }) => Err((true, message)),
                Err(e) => Err((false, e.to_string())),
            }
        });
        result.map_err(|(build, message)| {
            if build {
                plain_hierarchy_error(py, &self.file, message)
            } else {
                SimulationError::new_err(message)
            }
        })
    }

    /// The run length `sim` uses without a duration: the file's, else 10 s.
    fn default_duration_ns(&self) -> u64 {
        hsched_sim::run_duration(&self.h, None).as_nanos()
    }
}

/// A generated task set.
#[pyclass(module = "hsched._native", frozen)]
struct NativeTaskSet {
    set: TaskSet,
}

#[pymethods]
impl NativeTaskSet {
    /// Each task as a dict (name, utilization, period_ns, exec_ns,
    /// deadline_ns, jitter_ns, priority).
    fn tasks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (t, p) in self.set.tasks.iter().zip(self.set.dm_priorities()) {
            let d = PyDict::new(py);
            d.set_item("name", &t.name)?;
            d.set_item("utilization", t.utilization)?;
            d.set_item("period_ns", t.period_ns)?;
            d.set_item("exec_ns", t.exec_ns)?;
            d.set_item("deadline_ns", t.deadline_ns)?;
            d.set_item("jitter_ns", t.jitter_ns)?;
            d.set_item("priority", p)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The total utilization as rounded to whole nanoseconds.
    fn utilization(&self) -> f64 {
        self.set.utilization()
    }

    /// A hierarchy file: an `fp` root with deadline-monotonic priorities.
    #[pyo3(signature = (cpus=1))]
    fn to_hierarchy(&self, cpus: usize) -> String {
        self.set.to_hierarchy(cpus)
    }

    /// Only the `[[thread]]` tables, under `scheduler`.
    #[pyo3(signature = (scheduler, priorities=false))]
    fn to_threads(&self, scheduler: &str, priorities: bool) -> String {
        self.set.to_threads(scheduler, priorities)
    }
}

/// Generates one task set (`hsched generate`).
#[pyfunction]
#[pyo3(signature = (n, utilization, method="uunifast", min_task_utilization=0.0, max_task_utilization=1.0, period_min_ns=10_000_000, period_max_ns=1_000_000_000, granularity_ns=1_000_000, deadlines="implicit", deadline_factor=None, jitter=0.0, seed=0))]
#[allow(clippy::too_many_arguments)]
fn generate(
    n: usize,
    utilization: f64,
    method: &str,
    min_task_utilization: f64,
    max_task_utilization: f64,
    period_min_ns: u64,
    period_max_ns: u64,
    granularity_ns: u64,
    deadlines: &str,
    deadline_factor: Option<f64>,
    jitter: f64,
    seed: u64,
) -> PyResult<NativeTaskSet> {
    let gen_err = |m: String| GenerateError::new_err(m);
    let method = Method::parse(method).map_err(|e| gen_err(format!("method: {e}")))?;
    let deadlines = match (deadlines, deadline_factor) {
        ("implicit", None) => Deadlines::Implicit,
        ("constrained", f) => Deadlines::Constrained {
            min_fraction: f.unwrap_or(0.0),
        },
        ("arbitrary", f) => Deadlines::Arbitrary {
            max_factor: f.unwrap_or(2.0),
        },
        ("implicit", Some(_)) => {
            return Err(gen_err(
                "deadline_factor: implicit deadlines take no factor".into(),
            ))
        }
        (other, _) => {
            return Err(gen_err(format!(
                "deadlines: `{other}` is not one of implicit, constrained, arbitrary"
            )))
        }
    };
    let cfg = Config {
        n,
        utilization,
        method,
        min_task_utilization,
        max_task_utilization,
        period_min_ns,
        period_max_ns,
        granularity_ns,
        deadlines,
        jitter,
        seed,
    };
    let set = hsched_taskgen::generate(&cfg).map_err(|e| gen_err(e.message))?;
    Ok(NativeTaskSet { set })
}

/// One run of the adaptive-player experiment of Sinha 2007, Table 3.1
/// (`hsched_sim::player`, what `cargo run -p hsched-coop --example
/// table31` prints): `players` players under `sched` (`"coop"`,
/// `"fair-share"`, `"ts"`, `"single"`; `period_ns` for the first two).
#[pyfunction]
#[pyo3(signature = (players, sched, period_ns=20_000_000, seed=1))]
fn run_players<'py>(
    py: Python<'py>,
    players: usize,
    sched: &str,
    period_ns: u64,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    use hsched_sim::player::{PlayerExperiment, PlayerSched};
    if players == 0 || players > 1000 {
        return Err(PyValueError::new_err(format!(
            "players: {players} is out of range: give 1 to 1000"
        )));
    }
    if period_ns == 0 {
        return Err(PyValueError::new_err(
            "period_ns: the period must be longer than zero",
        ));
    }
    let sched = match sched {
        "coop" => PlayerSched::Coop { period: period_ns },
        "fair-share" => PlayerSched::FairShare { period: period_ns },
        "ts" => PlayerSched::Ts,
        "single" => PlayerSched::Single,
        other => {
            return Err(PyValueError::new_err(format!(
                "sched: `{other}` is not one of coop, fair-share, ts, single"
            )))
        }
    };
    let mut e = PlayerExperiment::new(players, sched);
    e.seed = seed;
    let r = py
        .allow_threads(move || hsched_sim::player::run_players(&e))
        .map_err(SimulationError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("worst_tardiness_ms", r.worst_tardiness_ms)?;
    d.set_item("mean_interval_worst_ms", r.mean_interval_worst_ms)?;
    d.set_item("switches_per_s", r.switches_per_s)?;
    d.set_item("fps_total", r.fps_total)?;
    d.set_item("fps", r.fps)?;
    d.set_item("jain", r.jain)?;
    d.set_item("polls_per_s", r.polls_per_s)?;
    d.set_item("dropped_per_s", r.dropped_per_s)?;
    d.set_item("policed", r.policed)?;
    Ok(d)
}

// ----- guarantees (Regehr 2001, ch. 5): the analysis chain as functions ---

/// `text` as a guarantee (`"RESCS 10 20"`, `"PSBE 0.5 5"`), or a
/// `ValueError` naming `arg`.
fn guarantee_arg(arg: &str, text: &str) -> PyResult<Guarantee> {
    text.parse()
        .map_err(|e| PyValueError::new_err(format!("{arg}: `{text}` is not a guarantee: {e}")))
}

/// Converts a guarantee into another kind by the rules of Table 5.2
/// (`period_ns`: the target reservation's period); returns the guarantee
/// and the rule used (`"PSBE → RESCS (Theorem 5.7: ...)"`).
#[pyfunction]
#[pyo3(signature = (guarantee, to, period_ns=None))]
fn guarantee_convert(
    guarantee: &str,
    to: &str,
    period_ns: Option<u64>,
) -> PyResult<(String, String)> {
    let from = guarantee_arg("guarantee", guarantee)?;
    let kind: GuaranteeKind = to
        .parse()
        .map_err(|e| PyValueError::new_err(format!("to: `{to}` is not a guarantee kind: {e}")))?;
    let params = period_ns.map_or_else(ConvertParams::default, |p| {
        ConvertParams::period(Duration(p))
    });
    let rule = hsched_guarantee::convert::rule(from.kind(), kind)
        .map_err(|e| PyValueError::new_err(format!("to: {e}")))?;
    let g = hsched_guarantee::convert(&from, kind, &params)
        .map_err(|e| PyValueError::new_err(format!("guarantee: {e}")))?;
    Ok((g.to_string(), rule.to_string()))
}

/// Whether `received` promises at least `required` (Table 5.2's rules):
/// `(True, the received guarantee as the required kind)` or `(False,
/// why not)`.
#[pyfunction]
fn guarantee_satisfies(received: &str, required: &str) -> PyResult<(bool, String)> {
    let r = guarantee_arg("received", received)?;
    let q = guarantee_arg("required", required)?;
    Ok(match hsched_guarantee::satisfies(&r, &q) {
        Ok(s) => (true, s.via.to_string()),
        Err(u) => (false, u.reason),
    })
}

/// What scheduler `policy` (with instance parameter `quantum_ns` for
/// `ps`, `cap` for `rez`) makes of the guarantee it `received` (the
/// guarantee it uses it as), and what it gives each child: `children`
/// is a list of dicts with the edge parameters `share`, `priority`,
/// `amount_ns`, `period_ns`. Returns (accepted, [(guarantee, rule)]).
#[pyfunction]
#[pyo3(signature = (policy, received, children, quantum_ns=None, cap=None))]
fn guarantee_provide(
    policy: &str,
    received: &str,
    children: Vec<std::collections::HashMap<String, f64>>,
    quantum_ns: Option<u64>,
    cap: Option<f64>,
) -> PyResult<(String, Vec<(String, String)>)> {
    let g = guarantee_arg("received", received)?;
    let params = InstanceParams {
        quantum: quantum_ns.map(Duration),
        cap,
        ..InstanceParams::default()
    };
    let m = Registry::builtin()
        .build(policy, &params, &MappingContext { cpus: 1 })
        .map_err(|e| PyValueError::new_err(format!("policy: {e}")))?;
    let accepted = m
        .accepts(&g)
        .map_err(|e| PyValueError::new_err(format!("received: {policy} cannot use {g}: {e}")))?;
    let mut edges = Vec::with_capacity(children.len());
    for (i, c) in children.iter().enumerate() {
        let mut e = EdgeParams::default();
        for (k, v) in c {
            match k.as_str() {
                "share" => e.share = Some(*v),
                "priority" => e.priority = Some(*v as i64),
                "amount_ns" => e.amount = Some(Duration(*v as u64)),
                "period_ns" => e.period = Some(Duration(*v as u64)),
                other => {
                    return Err(PyValueError::new_err(format!(
                    "children[{i}]: `{other}` is not one of share, priority, amount_ns, period_ns"
                )))
                }
            }
        }
        edges.push(e);
    }
    let names: Vec<String> = (0..edges.len()).map(|i| format!("child{i}")).collect();
    let requests: Vec<ChildRequest<'_>> = edges
        .iter()
        .zip(&names)
        .map(|(params, name)| ChildRequest {
            name,
            is_thread: true,
            params,
            request: None,
            multiprocessor: false,
        })
        .collect();
    let mut out = Vec::with_capacity(requests.len());
    for (i, p) in m
        .child_guarantees(&[accepted], &requests)
        .into_iter()
        .enumerate()
    {
        let p = p.map_err(|e| PyValueError::new_err(format!("children[{i}]: {e}")))?;
        let g = p
            .options
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        out.push((g, p.rule.to_string()));
    }
    Ok((accepted.to_string(), out))
}

/// The PSBE share that yields `amount_ns` every `period_ns` with error
/// `error_ns` (Theorem 5.7 solved for s: (amount + error) / period).
#[pyfunction]
fn psbe_share_for(amount_ns: u64, period_ns: u64, error_ns: u64) -> f64 {
    hsched_guarantee::convert::psbe_share_for(
        Duration(amount_ns),
        Duration(period_ns),
        Duration(error_ns),
    )
}

/// The largest PSBE error (a quantum, for EEVDF) with which share `share`
/// still yields `amount_ns` every `period_ns`; None if none does.
#[pyfunction]
fn psbe_error_for(amount_ns: u64, period_ns: u64, share: f64) -> Option<u64> {
    hsched_guarantee::convert::psbe_error_for(Duration(amount_ns), Duration(period_ns), share)
        .map(Duration::as_nanos)
}

/// The shortest reservation period at which PSBE `share` `error_ns` is
/// pessimistic by at most `pessimism` (a fraction of the share).
#[pyfunction]
fn period_for_pessimism(share: f64, error_ns: u64, pessimism: f64) -> Option<u64> {
    hsched_guarantee::convert::period_for_pessimism(share, Duration(error_ns), pessimism)
        .map(Duration::as_nanos)
}

/// Parses a duration as hierarchy files write it (`"10ms"`), in ns.
#[pyfunction]
fn parse_duration(text: &str) -> PyResult<u64> {
    hsched_core::time::parse_duration(text, None)
        .map(Duration::as_nanos)
        .map_err(|e| PyValueError::new_err(e.message))
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(parse, m)?)?;
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(run_players, m)?)?;
    m.add_function(wrap_pyfunction!(guarantee_convert, m)?)?;
    m.add_function(wrap_pyfunction!(guarantee_satisfies, m)?)?;
    m.add_function(wrap_pyfunction!(guarantee_provide, m)?)?;
    m.add_function(wrap_pyfunction!(psbe_share_for, m)?)?;
    m.add_function(wrap_pyfunction!(psbe_error_for, m)?)?;
    m.add_function(wrap_pyfunction!(period_for_pessimism, m)?)?;
    m.add_class::<NativeHierarchy>()?;
    m.add_class::<NativeTaskSet>()?;
    m.add("HierarchyError", m.py().get_type::<HierarchyError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add("GenerateError", m.py().get_type::<GenerateError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
