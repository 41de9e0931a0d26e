//! What every policy of the registry shares.

mod common;
use common::*;
use hsched_core::{Instant, ParamValue, Params};
use hsched_policies::registry;

/// A child registering with a key its parent does not declare is refused
/// by every policy, as the file checker refuses it: a key no policy reads
/// would otherwise be dropped without a word.
#[test]
fn every_policy_refuses_an_unknown_child_key() {
    for info in registry() {
        if info.min_parents > 1 {
            continue; // Join: a root cannot have two parents; its tests cover it
        }
        let mut hsi = checked(1);
        let params = match info.name {
            "limit" => Params::new()
                .with("amount", ParamValue::Str("1ms".into()))
                .with("period", ParamValue::Str("10ms".into())),
            _ => Params::new(),
        };
        let parent = root(&mut hsi, info.name, params, 1);
        let odd = Params::new().with("no_such_key", ParamValue::Int(1));
        let e = hsi
            .create_thread(Instant(0), "t", parent, odd)
            .expect_err(info.name);
        assert!(
            e.to_string().contains("no parameter `no_such_key`"),
            "{}: {e}",
            info.name
        );
    }
}
