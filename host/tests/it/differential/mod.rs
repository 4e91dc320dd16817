//! The component and the natively linked core, driven by the same random
//! command sequences on the same clock readings, must agree on every result,
//! every event and every snapshot byte.

mod commands;

use commands::{Cmd, CONTEXTS, GROUP_NAMES, GROUP_SETS, KINDS, LABEL_SETS, LIMIT_SETS, SELECTORS, VALUES};
use proptest::prelude::*;
use repute_host::{FailureKind, Policy, RateLimit, Strategy as Pick, TenantConfig, SECOND};

fn resource() -> impl Strategy<Value = usize> {
    0..KINDS.len() * VALUES.len()
}

fn kind_strategy() -> impl Strategy<Value = Option<FailureKind>> {
    prop_oneof![
        3 => Just(None),
        1 => proptest::sample::select(FailureKind::ALL.to_vec()).prop_map(Some),
    ]
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        4 => proptest::sample::select(vec![0, 1_000_000, SECOND, 10 * SECOND, 31 * SECOND, 400 * SECOND, 4000 * SECOND])
            .prop_map(Cmd::Advance),
        3 => (resource(), 1u32..4).prop_map(|(r, p)| Cmd::Register(r, p)),
        2 => (resource(), 1u32..4, 0..LABEL_SETS.len(), any::<bool>())
            .prop_map(|(r, p, l, s)| Cmd::RegisterWith(r, p, l, s)),
        2 => (resource(), 1u32..4, 0..LIMIT_SETS.len()).prop_map(|(r, p, l)| Cmd::RegisterLimited(r, p, l)),
        2 => (resource(), 1u32..4, 0..GROUP_SETS.len()).prop_map(|(r, p, g)| Cmd::RegisterGrouped(r, p, g)),
        2 => (0..GROUP_NAMES.len(), 0usize..6).prop_map(|(g, l)| Cmd::SetGroup(g, l)),
        1 => (resource(), any::<bool>()).prop_map(|(r, f)| Cmd::Unregister(r, f)),
        5 => (0..CONTEXTS.len()).prop_map(Cmd::Acquire),
        4 => (0..CONTEXTS.len(), 0..SELECTORS).prop_map(|(c, s)| Cmd::AcquireWith(c, s)),
        1 => (resource(), 0..CONTEXTS.len()).prop_map(|(r, c)| Cmd::AcquireForProbe(r, c)),
        2 => (0usize..16, any::<bool>()).prop_map(|(i, s)| Cmd::Renew(i, s)),
        3 => (0usize..16, any::<bool>()).prop_map(|(i, s)| Cmd::Release(i, s)),
        1 => (0usize..16, proptest::sample::select(vec![0u64, 5, 60, 200])).prop_map(|(i, u)| Cmd::Reconcile(i, u)),
        6 => (resource(), 0..CONTEXTS.len(), kind_strategy(), 0.0f64..5000.0)
            .prop_map(|(r, c, k, l)| Cmd::Report(r, c, k, l)),
        2 => (0usize..16, any::<bool>(), kind_strategy(), 0.0f64..5000.0)
            .prop_map(|(i, s, k, l)| Cmd::ReportAndRelease(i, s, k, l)),
        1 => (
            resource(),
            proptest::option::of(0..CONTEXTS.len()),
            proptest::option::of(proptest::sample::select(vec![SECOND, 60 * SECOND])),
            proptest::option::of(Just("manual")),
        )
            .prop_map(|(r, c, d, why)| Cmd::Block(r, c, d, why)),
        1 => (resource(), proptest::option::of(0..CONTEXTS.len())).prop_map(|(r, c)| Cmd::Unblock(r, c)),
        2 => (0usize..8).prop_map(Cmd::Inspect),
        1 => any::<bool>().prop_map(Cmd::SnapshotRestore),
        1 => any::<bool>().prop_map(Cmd::Checkpoint),
        1 => (0usize..4).prop_map(Cmd::BadInput),
    ]
}

fn policy() -> impl Strategy<Value = (Policy, u64)> {
    (
        proptest::sample::select(vec![Pick::Classic, Pick::Thompson, Pick::First]),
        any::<u64>(),
        proptest::option::of(Just(RateLimit { rate: 2.0, burst: 3 })),
        proptest::option::of(2u32..5),
    )
        .prop_map(|(strategy, seed, rate_limit, max_resources)| {
            let policy = Policy { strategy, rate_limit, max_resources, ..Policy::default() };
            (policy, seed)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn component_matches_native(
        (policy, seed) in policy(),
        durable in any::<bool>(),
        cmds in proptest::collection::vec(cmd(), 1..60),
    ) {
        let disagreement = commands::differ(TenantConfig { policy, seed, durable }, &cmds);
        prop_assert!(disagreement.is_none(), "{}", disagreement.unwrap_or_default());
    }
}

/// The core's benchmark workload inside the guest (`guest-bench`) and
/// natively: the same resources chosen with the same tokens, pair for pair,
/// so the guest's arithmetic (the square roots of Thompson sampling
/// included) matches the native build's bit for bit.
#[test]
fn the_guest_workload_chooses_as_the_native_one() {
    for strategy in [Pick::Classic, Pick::Thompson] {
        let mut guest = repute_host::GuestWorkload::new(300, strategy).unwrap();
        let mut native = repute_core::workload::Workload::new(300, strategy);
        for count in [1, 999, 3000] {
            assert_eq!(guest.pairs(count).unwrap(), native.pairs(count), "{strategy:?}, after {count} more pairs");
        }
    }
}
