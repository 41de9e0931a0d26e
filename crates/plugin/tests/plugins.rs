//! Plug-ins built from C with clang-14: loading, bad modules, the example
//! FP under the simulator, and faults that must unload the plug-in without
//! stopping the run.
//!
//! Without `clang-14` on PATH these tests say so and pass, unless
//! `HSCHED_REQUIRE_CLANG=1` (CI sets it) makes that a failure.

mod common;

use common::compile;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    common::repo()
}

fn out_dir() -> PathBuf {
    common::scratch("build")
}

fn fp() -> Option<PathBuf> {
    compile(&root().join("sdk/examples/fp.c"), "fp", &[])
}

fn faulty(mode: u32) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/faulty.c");
    compile(&src, &format!("faulty{mode}"), &[&format!("-DMODE={mode}")])
}

fn load_err(path: &Path) -> String {
    hsched_plugin::load(path, hsched_plugin::Limits::default())
        .map(|_| ())
        .unwrap_err()
        .to_string()
}

#[test]
fn the_example_loads_with_its_descriptor() {
    let Some(p) = fp() else { return };
    let m = hsched_plugin::load(&p, hsched_plugin::Limits::default()).unwrap();
    assert_eq!(m.descriptor.name, "fp-wasm");
    assert_eq!(m.descriptor.child_params[0].key, "priority");
    assert_eq!(
        m.descriptor.guarantee.as_ref().unwrap().gives,
        "top:priority"
    );
}

#[test]
fn bad_modules_are_refused_naming_the_file_and_the_problem() {
    let dir = out_dir();
    let not = dir.join("not.wasm");
    std::fs::write(&not, b"hello").unwrap();
    let e = load_err(&not);
    assert!(
        e.contains("not.wasm") && e.contains("is not a WebAssembly module"),
        "{e}"
    );
    let trunc = dir.join("trunc.wasm");
    std::fs::write(&trunc, b"\0asm\x01\0\0\0\x01").unwrap();
    assert!(load_err(&trunc).contains("is not a valid WebAssembly module"));

    let c = |name: &str, body: &str| -> Option<PathBuf> {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, body).unwrap();
        compile(&src, name, &[])
    };
    let hooks = "HS_EXPORT(hs_register_vp) hs_i32 hs_register_vp(hs_vp v){(void)v;return 0;}\n\
        HS_EXPORT(hs_unregister_vp) void hs_unregister_vp(hs_vp v){(void)v;}\n\
        HS_EXPORT(hs_request) void hs_request(hs_vp v){(void)v;}\n\
        HS_EXPORT(hs_release) void hs_release(hs_vp v){(void)v;}\n\
        HS_EXPORT(hs_grant) void hs_grant(hs_vp p, hs_cpu c){(void)p;(void)c;}\n\
        HS_EXPORT(hs_revoke) void hs_revoke(hs_vp p, hs_i32 r){(void)p;(void)r;}\n";
    let Some(v2) = c(
        "v2",
        &format!("#include \"hsched_policy.h\"\nHS_EXPORT(hs_abi_version) hs_i32 hs_abi_version(void){{return 2;}}\nHS_EXPORT(hs_descriptor) const char *hs_descriptor(void){{return \"{{}}\";}}\n{hooks}"),
    ) else {
        return;
    };
    let e = load_err(&v2);
    assert!(
        e.contains("ABI version 2") && e.contains("version 1"),
        "{e}"
    );

    let missing = c(
        "missing",
        "#include \"hsched_policy.h\"\nHS_PLUGIN(\"{\\\"abi\\\":1,\\\"name\\\":\\\"m\\\"}\")\n",
    )
    .unwrap();
    let e = load_err(&missing);
    assert!(e.contains("does not export `hs_register_vp`"), "{e}");

    let wasi = c(
        "wasi",
        &format!("#include \"hsched_policy.h\"\n__attribute__((import_module(\"wasi_snapshot_preview1\"), import_name(\"proc_exit\"))) void px(int);\nHS_PLUGIN(\"{{\\\"abi\\\":1,\\\"name\\\":\\\"w\\\"}}\")\n{}", hooks.replace("{(void)v;}\nHS_EXPORT(hs_release)", "{(void)v;px(1);}\nHS_EXPORT(hs_release)")),
    )
    .unwrap();
    let e = load_err(&wasi);
    assert!(
        e.contains("imports `wasi_snapshot_preview1.proc_exit`"),
        "{e}"
    );

    let json = c(
        "json",
        &format!("#include \"hsched_policy.h\"\nHS_PLUGIN(\"{{abi: 1\")\n{hooks}"),
    )
    .unwrap();
    let e = load_err(&json);
    assert!(e.contains("descriptor: not valid JSON"), "{e}");
}

/// A hierarchy with plug-in `policy` under a built-in FP root, threads
/// under it, and a time-sharing default to fall back to.
fn fault_hierarchy(plugin: &Path) -> String {
    format!(
        r#"default = "ts"
[machine]
cpus = 1
[sim]
duration = "1s"
seed = 1
[[scheduler]]
name = "root"
policy = "fp"
[[scheduler]]
name = "p"
policy = "{}"
parent = "root"
params = {{ priority = 2 }}
[[scheduler]]
name = "ts"
policy = "ts"
parent = "root"
params = {{ priority = 1 }}
[[thread]]
name = "w"
count = 3
scheduler = "p"
workload = {{ kind = "periodic", period = "10ms", exec = "2ms" }}
[[thread]]
name = "bg"
scheduler = "ts"
workload = {{ kind = "cpu-bound" }}
"#,
        plugin.display()
    )
}

/// Runs the fault hierarchy with `plugin`; the report as JSON.
fn run(plugin: &Path) -> serde_json::Value {
    let text = fault_hierarchy(plugin);
    let policies = hsched_plugin::policies_for(None, &text).unwrap();
    let h = hsched_config::parse_str_with_policies(&text, "faults.toml", &policies).unwrap();
    let opts = hsched_sim::SimOptions {
        check_protocol: true,
        ..Default::default()
    };
    let report = hsched_sim::run_with_policies(&h, opts, &policies)
        .unwrap_or_else(|e| panic!("the run stopped: {e}"));
    serde_json::to_value(&report).unwrap()
}

#[test]
fn a_well_behaved_plugin_runs_its_threads_without_faults() {
    let Some(p) = faulty(0) else { return };
    let r = run(&p);
    // An empty list is left out of the report.
    assert!(
        r.get("unloaded")
            .is_none_or(|u| u == &serde_json::json!([])),
        "{r}"
    );
    let w0 = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "w.0")
        .unwrap();
    assert!(w0["cpu_ns"].as_u64().unwrap() > 150_000_000, "{w0}");
}

fn assert_unloaded(mode: u32, what: &str) {
    let Some(p) = faulty(mode) else { return };
    let r = run(&p);
    let u = r["unloaded"].as_array().expect("the report lists unloads");
    assert_eq!(u.len(), 1, "mode {mode}: {u:?}");
    assert_eq!(u[0]["scheduler"], "p");
    let text = u[0]["what"].as_str().unwrap_or_else(|| panic!("{u:?}"));
    assert!(text.contains(what), "mode {mode}: {text}");
    assert!(text.contains(&format!("faulty{mode}.wasm")), "{text}");
    // The threads went on under the fallback.
    let moved = u[0]["moved"].as_array().unwrap();
    assert_eq!(moved.len(), 3, "{u:?}");
    // And kept running there: each periodic thread asks for 2 ms in 10 ms
    // of a 1 s run, about 200 ms, and the fault comes at its fifth request.
    for t in r["threads"].as_array().unwrap() {
        if t["name"].as_str().is_some_and(|n| n.starts_with("w.")) {
            let cpu = t["cpu_ns"].as_u64().unwrap_or(0);
            assert!(cpu > 150_000_000, "mode {mode}: {t}");
        }
    }
}

#[test]
fn a_plugin_that_loops_forever_is_unloaded() {
    assert_unloaded(1, "ran out of fuel");
}

#[test]
fn a_plugin_that_traps_is_unloaded() {
    assert_unloaded(2, "trapped");
}

#[test]
fn a_plugin_that_allocates_without_bound_is_unloaded() {
    assert_unloaded(3, "trapped");
}

#[test]
fn a_plugin_that_passes_garbage_is_unloaded() {
    assert_unloaded(4, "is not a child VP of this instance");
}

#[test]
fn a_plugin_that_breaks_the_protocol_is_unloaded() {
    assert_unloaded(5, "granted it to no child");
}

#[test]
fn a_plugin_that_revokes_for_a_reason_that_does_not_exist_is_unloaded() {
    assert_unloaded(6, "no revoke reason 99");
}

#[test]
fn a_plugin_that_passes_a_string_past_its_memory_is_unloaded() {
    assert_unloaded(7, "lie outside memory");
}

#[test]
fn a_plugin_that_sends_a_nan_is_unloaded() {
    assert_unloaded(8, "NaN is not a finite number");
}

#[test]
fn a_plugin_that_rearms_its_timer_at_the_same_instant_is_unloaded() {
    assert_unloaded(9, "times in a row: time would never advance");
}

#[test]
fn a_plugin_that_returns_no_hs_result_is_unloaded() {
    assert_unloaded(10, "returned 42, which is not an hs_result");
}

#[test]
fn a_descriptor_outside_memory_or_without_its_nul_is_refused_at_load() {
    let dir = out_dir();
    let hooks = "HS_EXPORT(hs_abi_version) hs_i32 hs_abi_version(void){return 1;}\n\
        HS_EXPORT(hs_register_vp) hs_i32 hs_register_vp(hs_vp v){(void)v;return 0;}\n\
        HS_EXPORT(hs_unregister_vp) void hs_unregister_vp(hs_vp v){(void)v;}\n\
        HS_EXPORT(hs_request) void hs_request(hs_vp v){(void)v;}\n\
        HS_EXPORT(hs_release) void hs_release(hs_vp v){(void)v;}\n\
        HS_EXPORT(hs_grant) void hs_grant(hs_vp p, hs_cpu c){(void)p;(void)c;}\n\
        HS_EXPORT(hs_revoke) void hs_revoke(hs_vp p, hs_i32 r){(void)p;(void)r;}\n";
    let cases = [
        (
            "desc_outside",
            "return (const char *)0xfffffff0u;",
            "points outside memory",
        ),
        (
            // The last byte of memory, not NUL, with nothing after it.
            "desc_unterminated",
            "char *p = (char *)(__builtin_wasm_memory_size(0) * 65536 - 1); *p = 'x'; return p;",
            "is not NUL-terminated",
        ),
    ];
    for (name, body, what) in cases {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(
            &src,
            format!("#include \"hsched_policy.h\"\nHS_EXPORT(hs_descriptor) const char *hs_descriptor(void){{{body}}}\n{hooks}"),
        )
        .unwrap();
        let Some(p) = compile(&src, name, &[]) else {
            return;
        };
        let e = load_err(&p);
        assert!(
            e.contains(&format!("{name}.wasm")) && e.contains(what),
            "{e}"
        );
    }
}
