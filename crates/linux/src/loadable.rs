//! Loadable policies in a running daemon: the `load`, `unload` and
//! `replace` operations of the control socket (Vassal's load and unload of
//! a scheduler beside the native one, Candea and Jones 1998, §4; Regehr
//! 2001, §4.2 on loading a scheduler into a running kernel), and the
//! unload that follows when a plug-in faults (it traps, runs out of fuel
//! or memory, or breaks the protocol): its threads go to the default
//! scheduler and the report says what happened and when, as in the
//! simulator.
//!
//! A loaded plug-in runs sandboxed in the daemon (hsched-plugin), so only
//! root and the control group may load one: a plug-in decides who gets
//! the managed processors, real-time capacity included.

use crate::control::{fail, params_to_json, str_arg, Fail};
use crate::daemon::Daemon;
use crate::sys;
use hsched_core::{Instant, Params, Unloaded};
use serde_json::{json, Value};
use std::path::Path;

/// One change of the running hierarchy's policies, for the report.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyChange {
    /// When, ns since the run began.
    pub at_ns: u64,
    /// `fault` (a plug-in failed and was unloaded), `unload`, `replace`
    /// or `load`.
    pub kind: &'static str,
    /// The scheduler (for `load`, the policy name).
    pub scheduler: String,
    /// What happened, in one line.
    pub line: String,
}

impl PolicyChange {
    /// The change as JSON, for the report.
    pub fn to_json(&self) -> Value {
        json!({"at_ns": self.at_ns, "kind": self.kind, "scheduler": self.scheduler, "line": self.line})
    }
}

impl Daemon {
    /// Unloads every scheduler whose policy failed since the last call
    /// (after each pump and each control request), saying so on stderr
    /// and in the report. Its threads keep running under the fallback.
    pub(crate) fn unload_failed(&mut self) {
        if !self.hsi.faults_pending() {
            return;
        }
        let now = sys::now_ns();
        for u in self.hsi.unload_faulted(self.inst(now)) {
            let mut line = format!(
                "scheduler '{}' ({}) failed: {}",
                u.fault.name, u.policy, u.fault.what
            );
            match &u.result {
                Ok(done) => line.push_str(&format!("; {}", self.unloaded_line(done))),
                Err(e) => line.push_str(&format!(
                    "; not unloaded: {e}; its threads receive no processor time"
                )),
            }
            crate::diag!("hsched: {line}");
            self.record_change(now, "fault", &u.fault.name, line);
        }
    }

    fn record_change(&mut self, now: u64, kind: &'static str, scheduler: &str, line: String) {
        self.stats.policy_changes.push(PolicyChange {
            at_ns: now.saturating_sub(self.epoch),
            kind,
            scheduler: scheduler.to_string(),
            line,
        });
    }

    fn unloaded_line(&self, done: &Unloaded) -> String {
        let mut s = format!(
            "unloaded ({}), {} thread(s) moved to '{}'",
            done.destroyed.join(", "),
            done.moved.len(),
            done.fallback
        );
        for (t, why) in &done.reset {
            s.push_str(&format!(
                "; thread '{}' took its defaults: {why}",
                self.hsi.thread_name(*t)
            ));
        }
        s
    }

    /// `load`: loads the plug-in file `path` (absolute: the daemon's
    /// working directory is not the client's) under the policy name `name`
    /// (default: the path), for `create` and `replace` to use.
    pub(crate) fn ctl_load(&mut self, req: &Value) -> Result<Value, Fail> {
        let path = str_arg(req, "path")?;
        let name = req.get("name").and_then(Value::as_str).unwrap_or(path);
        let (policy, module, replaced) = self.load_plugin(name, path)?;
        let d = &module.descriptor;
        let keys = |v: &[hsched_plugin::Param]| v.iter().map(|p| p.key.clone()).collect::<Vec<_>>();
        let line = format!(
            "loaded plug-in `{}` from {} as policy `{policy}`{}",
            d.name,
            module.path.display(),
            if replaced {
                " (a changed file: instances running the earlier version keep it)"
            } else {
                ""
            }
        );
        self.record_change(sys::now_ns(), "load", &policy, line);
        Ok(json!({
            "policy": policy, "plugin": d.name, "file": module.path.display().to_string(),
            "replaced_version": replaced, "instance_params": keys(&d.instance_params),
            "child_params": keys(&d.child_params), "guarantee": d.guarantee.is_some(),
        }))
    }

    /// Loads `path` under `name` when `path` names a plug-in file.
    fn load_plugin(
        &mut self,
        name: &str,
        path: &str,
    ) -> Result<(String, std::sync::Arc<hsched_plugin::Module>, bool), Fail> {
        if !hsched_plugin::is_plugin_name(path) {
            return Err(fail(
                "bad-request",
                format!("`path` must name a WebAssembly plug-in (a `.wasm` file), not {path:?}"),
            ));
        }
        if !Path::new(path).is_absolute() {
            return Err(fail(
                "bad-request",
                format!("`path` must be absolute ({path:?} is not): the daemon does not run in the client's directory (`hsched ctl` makes paths absolute)"),
            ));
        }
        let (info, module, replaced) = hsched_plugin::load_as(name, Path::new(path))
            .map_err(|e| fail("refused", e.to_string()))?;
        Ok((info.name.to_string(), module, replaced))
    }

    /// The policy a `create` or `replace` names: a loaded or built-in
    /// policy name, or a plug-in file, loaded now under its path.
    pub(crate) fn policy_named(&mut self, policy: &str) -> Result<String, Fail> {
        if hsched_plugin::is_plugin_name(policy) {
            return self.load_plugin(policy, policy).map(|(name, _, _)| name);
        }
        Ok(policy.to_string())
    }

    /// `unload`: the scheduler's threads (and those of the schedulers
    /// below it) go to the default scheduler, and it and the schedulers
    /// below it are destroyed.
    pub(crate) fn ctl_unload(&mut self, req: &Value, now: Instant) -> Result<Value, Fail> {
        let name = str_arg(req, "scheduler")?;
        let id = self
            .hsi
            .instance(name)
            .ok_or_else(|| fail("not-found", format!("no scheduler named `{name}`")))?;
        let done = self
            .hsi
            .unload(now, id)
            .map_err(|e| fail("refused", format!("`{name}` stays: {e}")))?;
        let line = format!(
            "scheduler '{name}' {} (ctl unload)",
            self.unloaded_line(&done)
        );
        self.record_change(sys::now_ns(), "unload", name, line);
        let names = |v: &[hsched_core::ThreadId]| {
            v.iter()
                .map(|&t| self.hsi.thread_name(t).to_string())
                .collect::<Vec<_>>()
        };
        Ok(json!({
            "fallback": done.fallback, "destroyed": done.destroyed, "moved": names(&done.moved),
            "reset": done.reset.iter().map(|(t, why)| json!({"thread": self.hsi.thread_name(*t), "why": why})).collect::<Vec<_>>(),
        }))
    }

    /// `replace`: the scheduler's policy becomes `policy` (a policy name or
    /// a plug-in file) while its threads run, with `params`, or else the
    /// parameters the hierarchy file gave the scheduler when the new
    /// policy takes them, or else its defaults.
    pub(crate) fn ctl_replace(&mut self, req: &Value, now: Instant) -> Result<Value, Fail> {
        let t0 = sys::now_ns();
        let name = str_arg(req, "scheduler")?.to_string();
        let id = self
            .hsi
            .instance(&name)
            .ok_or_else(|| fail("not-found", format!("no scheduler named `{name}`")))?;
        let policy = self.policy_named(str_arg(req, "policy")?)?;
        let given = req.get("params").is_some();
        let params = if given {
            crate::control::params_from_json(req.get("params"))?
        } else {
            self.file_params(&name)
        };
        let refused =
            |e: hsched_core::PolicyError| fail("refused", format!("policy `{policy}`: {e}"));
        let (policy_box, params) = match hsched_policies::build(&policy, &params) {
            Ok(p) => (p, params),
            Err(e) if given || params.is_empty() => return Err(refused(e)),
            // The file's parameters do not fit the new policy: its own.
            Err(_) => (
                hsched_policies::build(&policy, &Params::new()).map_err(refused)?,
                Params::new(),
            ),
        };
        let old = self
            .hsi
            .instance_policy(id)
            .map_or("", |p| p.policy_name())
            .to_string();
        let done = self
            .hsi
            .replace(now, id, policy_box)
            .map_err(|e| fail("refused", format!("`{name}` stays `{old}`: {e}")))?;
        let took_ns = sys::now_ns().saturating_sub(t0);
        let moved: Vec<String> = done
            .moved
            .iter()
            .map(|&t| self.hsi.thread_name(t).to_string())
            .collect();
        let mut line = format!(
            "scheduler '{name}' replaced: `{old}` by `{policy}`, {} thread(s) moved (ctl replace)",
            moved.len()
        );
        for (t, why) in &done.reset {
            line.push_str(&format!(
                "; thread '{}' took its defaults: {why}",
                self.hsi.thread_name(*t)
            ));
        }
        self.record_change(sys::now_ns(), "replace", &name, line);
        Ok(json!({
            "scheduler": name, "old": old, "policy": policy, "params": params_to_json(&params),
            "moved": moved, "took_ns": took_ns,
            "reset": done.reset.iter().map(|(t, why)| json!({"thread": self.hsi.thread_name(*t), "why": why})).collect::<Vec<_>>(),
        }))
    }

    /// The instance parameters the hierarchy file gave scheduler `name`
    /// (none for one created later).
    fn file_params(&self, name: &str) -> Params {
        self.h
            .schedulers
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.params.clone())
            .unwrap_or_default()
    }
}
