//! Resource principals (Regehr 2001, §8.2): the entities whose aggregate
//! CPU use is controlled. Principals are not hierarchical; a user may be a
//! member of groups, which rules use to count the members' guarantees
//! together.

use std::fmt;

/// The name of the system principal, which owns the `ALL` guarantee of the
/// top and every guarantee not delegated away.
pub const SYSTEM: &str = "system";

/// What a principal stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrincipalKind {
    /// The system: owns the top's guarantees; may revoke any guarantee.
    System,
    /// A user, with its Linux uid when it has one (live mode).
    User {
        /// The uid that acts as this principal.
        uid: Option<u32>,
    },
    /// A group of users (an administrative or accounting domain).
    Group {
        /// The Linux gid whose members belong to it, if any.
        gid: Option<u32>,
    },
}

/// A resource principal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// Unique name (`alice`).
    pub name: String,
    /// What it is.
    pub kind: PrincipalKind,
    /// Groups this principal is a member of, by name.
    pub groups: Vec<String>,
}

impl Principal {
    /// The system principal.
    pub fn system() -> Principal {
        Principal {
            name: SYSTEM.to_string(),
            kind: PrincipalKind::System,
            groups: Vec::new(),
        }
    }

    /// A user named `name` with `uid`.
    pub fn user(name: &str, uid: Option<u32>) -> Principal {
        Principal {
            name: name.to_string(),
            kind: PrincipalKind::User { uid },
            groups: Vec::new(),
        }
    }

    /// A group named `name` with `gid`.
    pub fn group(name: &str, gid: Option<u32>) -> Principal {
        Principal {
            name: name.to_string(),
            kind: PrincipalKind::Group { gid },
            groups: Vec::new(),
        }
    }

    /// With membership of `group`.
    pub fn in_group(mut self, group: &str) -> Principal {
        self.groups.push(group.to_string());
        self
    }

    /// Whether this is a user.
    pub fn is_user(&self) -> bool {
        matches!(self.kind, PrincipalKind::User { .. })
    }

    /// Whether this is the system.
    pub fn is_system(&self) -> bool {
        self.kind == PrincipalKind::System
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PrincipalKind::System => f.write_str("the system"),
            PrincipalKind::User { .. } => write!(f, "user `{}`", self.name),
            PrincipalKind::Group { .. } => write!(f, "group `{}`", self.name),
        }
    }
}
