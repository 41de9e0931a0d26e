//! The table of policies hsched knows, by the name used in hierarchy files.

use hsched_core::{ParamSpec, Params, Policy, PolicyError};

/// What hsched knows about one policy without building it.
#[derive(Clone, Copy)]
pub struct PolicyInfo {
    /// Name in hierarchy files (`"fp"`).
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// The sections of its source document it implements, cited as
    /// docs/references.md does (`"Regehr 2001, §9.3.1"`); `hsched policies`
    /// prints them after `implements:`.
    pub source: &'static str,
    /// Parameters of the instance itself (`[[scheduler]]` keys besides
    /// name, policy and parent).
    pub instance_params: &'static [ParamSpec],
    /// Parent-side parameters a child VP registers with (a thread's or a
    /// child instance's `params`).
    pub child_params: &'static [ParamSpec],
    /// Keys a `SetParams` about a child may give besides `child_params`:
    /// they change the instance itself (Limit's cap), so a child neither
    /// registers with them nor keeps them in its parameters.
    pub change_params: &'static [ParamSpec],
    /// Most children an instance takes at once (`None`: any number); it
    /// refuses one more.
    pub max_children: Option<usize>,
    /// Fewest parents an instance may have (Join needs two).
    pub min_parents: usize,
    /// Most parents an instance may have.
    pub max_parents: usize,
    /// Builds an instance from its parameters.
    pub build: fn(&Params) -> Result<Box<dyn Policy>, PolicyError>,
    /// Checks a child's parent-side parameters as `register_vp` reads
    /// them, without an instance (so without admission control): a file
    /// is checked before a run creates the child, which may be long after
    /// it was read. [`no_child_check`] for a policy whose child parameters
    /// `child_params` describes completely.
    pub check_child: fn(&Params) -> Result<(), PolicyError>,
    /// What no two children of one instance may hold together, if
    /// anything: from the instance's parameters and a child's parent-side
    /// ones, the name and value of what the child holds (fp under
    /// `unique_priorities`: `("priority", 3)`), or `None` when it holds
    /// nothing. `register_vp` and a `SetParams` refuse a child whose value
    /// another child holds. `None` for a policy without such a rule.
    pub exclusive: Option<Exclusive>,
    /// Admission control by load (rez's utilizations, realrate's
    /// proportions), for a checker to replay; `None` for a policy without
    /// it.
    pub admission: Option<Admission>,
    /// A child's parameters after a `SetParams` of `change`, as `msg`
    /// merges them into `current`. [`merge_change`] (the keys of `change`
    /// replace those of `current`) unless a change also drops keys
    /// (realrate's change to an adaptive class drops `proportion`).
    pub merge_change: fn(&Params, &Params) -> Params,
}

impl PolicyInfo {
    /// A policy called `name`, built by `build`, with nothing else
    /// declared: no parameters, one parent, any number of children, no
    /// rule among children and no admission control. Fill in the rest
    /// with struct update syntax (`PolicyInfo { child_params: …,
    /// ..PolicyInfo::new("mine", build) }`), so that a field added later
    /// takes its default here rather than breaking the literal.
    pub const fn new(
        name: &'static str,
        build: fn(&Params) -> Result<Box<dyn Policy>, PolicyError>,
    ) -> PolicyInfo {
        PolicyInfo {
            name,
            summary: "",
            source: "",
            instance_params: &[],
            child_params: &[],
            change_params: &[],
            max_children: None,
            min_parents: 1,
            max_parents: 1,
            build,
            check_child: no_child_check,
            exclusive: None,
            admission: None,
            merge_change,
        }
    }
}

/// A [`PolicyInfo::check_child`] with nothing to check beyond the declared
/// keys and kinds.
pub fn no_child_check(_: &Params) -> Result<(), PolicyError> {
    Ok(())
}

/// See [`PolicyInfo::exclusive`].
pub type Exclusive = fn(&Params, &Params) -> Option<(&'static str, i64)>;

/// Admission control by load: each child adds its `load`, and an instance
/// refuses a child (`PolicyError::AdmissionRefused`), or a `SetParams`,
/// that would take the sum of its children's loads over its `cap` (plus
/// `per_child` for each child). Loads are in the policy's own exact units,
/// `one` to the whole processor, so a checker adds them as the policy
/// does. The policy may count a child for more for a while (rez: the
/// larger of its old and new reservation until a change applies), never
/// for less: a sum over the cap is a sure refusal.
#[derive(Clone, Copy)]
pub struct Admission {
    /// The most an instance with these parameters admits (parameters a
    /// checker has accepted).
    pub cap: fn(&Params) -> u128,
    /// The instance parameter that sets the cap, for messages.
    pub cap_key: &'static str,
    /// What a child with these parent-side parameters adds under an
    /// instance with those (parameters a checker has accepted).
    pub load: fn(&Params, &Params) -> u128,
    /// How far over the cap the sum may go per child: loads rounded up
    /// would otherwise refuse children whose exact sum is the cap.
    pub per_child: u128,
    /// The load of the whole processor.
    pub one: u128,
}

/// A [`PolicyInfo::merge_change`]: `current` with the keys of `change`
/// replaced.
pub fn merge_change(current: &Params, change: &Params) -> Params {
    let mut out = current.clone();
    for (k, v) in change.iter() {
        out.insert(k, v.clone());
    }
    out
}

impl std::fmt::Debug for PolicyInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyInfo")
            .field("name", &self.name)
            .finish()
    }
}

/// The built-in policies, in the order the docs list them.
pub fn builtin() -> &'static [PolicyInfo] {
    static ALL: &[PolicyInfo] = &[
        crate::fp::INFO,
        crate::ts::INFO,
        crate::rez::INFO,
        crate::ps::INFO,
        crate::join::INFO,
        crate::limit::INFO,
        crate::best::INFO,
        crate::best_rate::INFO,
        crate::linux24::INFO,
        crate::coop::INFO,
        crate::realrate::INFO,
        crate::dl::INFO,
    ];
    ALL
}

/// The built-in policies and then every policy [`install`]ed in this
/// process (loaded plug-ins), in the order they came. Hierarchy files,
/// the simulator and the live daemon look names up here, so a policy
/// loaded once is known to all of them, as a scheduler driver loaded into
/// a kernel is (Regehr 2001, §4.2).
pub fn registry() -> &'static [PolicyInfo] {
    let loaded = LOADED.read().unwrap_or_else(|e| e.into_inner());
    loaded.unwrap_or(builtin())
}

/// Every policy known, when one was installed; `None` means only the
/// built-ins. Each [`install`] leaks one new table, which bounds the leak
/// by the number of policies loaded (a few dozen at most: the plug-in
/// host has 32 slots).
static LOADED: std::sync::RwLock<Option<&'static [PolicyInfo]>> = std::sync::RwLock::new(None);

/// Adds `info` to [`registry`] for the rest of the process. Installing
/// the same entry again (same name, same builder) does nothing.
///
/// # Errors
/// Another policy already has the name: a built-in one, or a plug-in
/// loaded from another file under the same name.
pub fn install(info: PolicyInfo) -> Result<(), String> {
    let mut loaded = LOADED.write().unwrap_or_else(|e| e.into_inner());
    let current = loaded.unwrap_or(builtin());
    if let Some(p) = current.iter().find(|p| p.name == info.name) {
        if std::ptr::fn_addr_eq(p.build, info.build) {
            return Ok(());
        }
        return Err(if builtin().iter().any(|b| b.name == info.name) {
            format!("`{}` is the name of a built-in policy", info.name)
        } else {
            format!(
                "`{}` already names another loaded policy in this process",
                info.name
            )
        });
    }
    let mut all = current.to_vec();
    all.push(info);
    *loaded = Some(Box::leak(all.into_boxed_slice()));
    Ok(())
}

/// [`install`], except that an entry of the same name that is not a
/// built-in (an earlier version of a plug-in, loaded again into a running
/// daemon) gives way to `info`. Instances built from the old entry keep
/// running it. Returns whether an entry gave way.
///
/// # Errors
/// `info.name` is the name of a built-in policy.
pub fn install_replacing(info: PolicyInfo) -> Result<bool, String> {
    if builtin().iter().any(|b| b.name == info.name) {
        return Err(format!("`{}` is the name of a built-in policy", info.name));
    }
    let mut loaded = LOADED.write().unwrap_or_else(|e| e.into_inner());
    let mut all = loaded.unwrap_or(builtin()).to_vec();
    let replaced = match all.iter_mut().find(|p| p.name == info.name) {
        Some(p) if std::ptr::fn_addr_eq(p.build, info.build) => return Ok(false),
        Some(p) => {
            *p = info;
            true
        }
        None => {
            all.push(info);
            false
        }
    };
    *loaded = Some(Box::leak(all.into_boxed_slice()));
    Ok(replaced)
}

/// The policy named `name`.
pub fn lookup(name: &str) -> Option<&'static PolicyInfo> {
    registry().iter().find(|p| p.name == name)
}

/// Builds an instance of policy `name` after checking that every parameter
/// is one the policy declares.
///
/// # Errors
/// Unknown policy, unknown parameter, or a bad value.
pub fn build(name: &str, params: &Params) -> Result<Box<dyn Policy>, PolicyError> {
    let info = lookup(name).ok_or_else(|| {
        let known: Vec<_> = registry().iter().map(|p| p.name).collect();
        PolicyError::Unsupported(format!(
            "unknown policy `{name}`; known policies: {}",
            known.join(", ")
        ))
    })?;
    let keys: Vec<&str> = info.instance_params.iter().map(|s| s.key).collect();
    if let Some(k) = params.unknown_keys(&keys).next() {
        return Err(PolicyError::Unsupported(format!(
            "policy `{name}` has no parameter `{k}`; it accepts: {}",
            if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(", ")
            }
        )));
    }
    (info.build)(params)
}

/// Checks that `params` only uses the child-side keys `info` declares.
///
/// # Errors
/// The first unknown key, with the accepted ones.
pub fn check_child_params(info: &PolicyInfo, params: &Params) -> Result<(), PolicyError> {
    let keys: Vec<&str> = info.child_params.iter().map(|s| s.key).collect();
    let unknown = params.unknown_keys(&keys).next().map(str::to_string);
    match unknown {
        None => Ok(()),
        Some(k) => Err(PolicyError::Unsupported(format!(
            "a child of a `{}` scheduler has no parameter `{k}`; it accepts: {}",
            info.name,
            if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(", ")
            }
        ))),
    }
}
