//! Parameters a plug-in refuses (issue #36, bad input): each error, as the
//! hierarchy parser reports it to the CLI, names the parameter and points
//! into the hierarchy file; a refusal by `hs_create`, a missing required
//! parameter and an unknown key also name the plug-in file. A value of the
//! wrong kind is reported, by hsched-config, with its scheduler or thread
//! but without the policy's file.

mod common;

use std::path::Path;

/// A hierarchy with a `misbehaving` plug-in (instance keys `inst`) and an
/// FP plug-in child of it (the thread's keys `child`).
fn hierarchy(misbehaving: &Path, fp: &Path, inst: &str, child: &str) -> String {
    format!(
        r#"[machine]
cpus = 1
[[scheduler]]
name = "root"
policy = "{fp}"
[[scheduler]]
name = "m"
policy = "{mis}"
parent = "root"
params = {{ priority = 1 }}
{inst}
[[thread]]
name = "t"
scheduler = "root"
params = {{ {child} }}
workload = {{ kind = "cpu-bound" }}
"#,
        fp = fp.display(),
        mis = misbehaving.display(),
    )
}

/// The parser's error for the hierarchy, which must be refused.
fn refused(inst: &str, child: &str) -> Option<(String, String, String)> {
    let mis = common::example("misbehaving")?;
    let fp = common::example("fp")?;
    let text = hierarchy(&mis, &fp, inst, child);
    let policies = hsched_plugin::policies_for(None, &text).unwrap();
    let e = match hsched_config::parse_str_with_policies(&text, "refused.toml", &policies) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    };
    Some((e, mis.display().to_string(), fp.display().to_string()))
}

fn assert_names(e: &str, file: &str, key: &str, what: &str) {
    assert!(e.contains(file), "the error does not name {file}: {e}");
    assert_says(e, key, what);
}

/// For errors of a value's kind, which the parser reports at the value
/// with the scheduler or thread it belongs to, without the policy.
fn assert_says(e: &str, key: &str, what: &str) {
    assert!(
        e.contains(&format!("`{key}`")),
        "the error does not name `{key}`: {e}"
    );
    assert!(e.contains(what), "the error does not say `{what}`: {e}");
    assert!(
        e.contains("refused.toml:"),
        "the error does not point into the file: {e}"
    );
}

#[test]
fn a_value_hs_create_refuses_is_an_error_naming_the_file_and_the_parameter() {
    let Some((e, mis, _)) = refused("fault = \"sometimes\"", "priority = 1") else {
        return;
    };
    assert_names(&e, &mis, "fault", "sometimes");
}

#[test]
fn an_instance_parameter_of_the_wrong_kind_is_an_error() {
    let Some((e, _, _)) = refused("fault = 3", "priority = 1") else {
        return;
    };
    assert_says(&e, "fault", "must be a string");
}

#[test]
fn a_missing_required_parameter_is_an_error() {
    let Some((e, mis, _)) = refused("at = \"1s\"", "priority = 1") else {
        return;
    };
    assert_names(&e, &mis, "fault", "need");
}

#[test]
fn an_unknown_key_is_an_error() {
    let Some((e, mis, _)) = refused("fault = \"none\"\ncolour = 1", "priority = 1") else {
        return;
    };
    assert_names(&e, &mis, "colour", "unknown key");
}

#[test]
fn a_child_parameter_of_the_wrong_kind_is_an_error() {
    let Some((e, _, _)) = refused("fault = \"none\"", "priority = \"high\"") else {
        return;
    };
    assert_says(&e, "priority", "must be an integer, found `high`");
}
