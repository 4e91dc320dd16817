//! Writes seed inputs for the snapshot targets: the binary and JSON
//! snapshots of pools driven into each state a snapshot can record (leases,
//! blocks, pauses, cooldowns, retired fences, a rate bucket, each strategy
//! and recovery), and a libFuzzer dictionary of the JSON form's keys.
//!
//! Usage: `repute-fuzz-seeds CORPUS_DIR DICT_DIR` (run by `scripts/fuzz.sh seeds`).

use std::collections::BTreeSet;
use std::path::Path;

use repute_core::{Context, FailureKind, Outcome, Policy, Pool, RateLimit, Recovery, ResourceId, Strategy, SECOND};
use serde_json::Value;

const NOW: u64 = 100 * SECOND;

fn id(kind: &str, value: &str) -> ResourceId {
    ResourceId::new(kind, value).expect("valid id")
}

fn ctx(name: &str) -> Context {
    Context::new(name).expect("valid context")
}

fn failure(kind: FailureKind, retry_after: Option<u64>) -> Outcome {
    Outcome::Failure { kind, latency_ms: 30.0, retry_after }
}

/// Pools in the states a snapshot records, by name.
fn pools() -> Vec<(&'static str, Pool)> {
    let mut out = Vec::new();
    out.push(("empty", Pool::new(Policy::default(), 1).expect("policy")));

    let mut p = Pool::new(Policy::default(), 2).expect("policy");
    p.register(id("proxy", "a"), 2, 1).expect("register");
    p.register(id("proxy", "b"), 1, 1).expect("register");
    p.acquire(&ctx("x.com"), 2).expect("acquire");
    p.acquire(&ctx("y.com"), 3).expect("acquire");
    p.report(&id("proxy", "a"), &ctx("x.com"), Outcome::Success { latency_ms: 12.0 }, 4).expect("report");
    out.push(("leases", p));

    let mut p = Pool::new(Policy::default(), 3).expect("policy");
    p.register(id("key", "k1"), 1, 1).expect("register");
    p.register(id("key", "k2"), 1, 1).expect("register");
    p.block(&id("key", "k1"), None, Some(60 * SECOND), Some("manual".into()), 2).expect("block");
    p.block(&id("key", "k2"), Some(&ctx("x.com")), None, None, 2).expect("block");
    out.push(("blocks", p));

    let mut p = Pool::new(Policy::default(), 4).expect("policy");
    p.register(id("proxy", "c"), 1, 1).expect("register");
    for t in 2..8 {
        let _ = p.report(&id("proxy", "c"), &ctx("x.com"), failure(FailureKind::Timeout, None), t);
    }
    let _ = p.report(&id("proxy", "c"), &ctx("y.com"), failure(FailureKind::RateLimited, Some(20 * SECOND)), 9);
    let _ = p.report(&id("proxy", "c"), &ctx("z.com"), failure(FailureKind::QuotaExhausted, Some(30 * SECOND)), 9);
    out.push(("cooling_paused", p));

    let policy = Policy { recovery: Recovery::Probe, strategy: Strategy::Thompson, ..Policy::default() };
    let mut p = Pool::new(policy, 5).expect("policy");
    p.register(id("proxy", "d"), 3, 1).expect("register");
    for t in 2..8 {
        let _ = p.report(&id("proxy", "d"), &ctx("x.com"), failure(FailureKind::ConnectionReset, None), t);
    }
    p.advance(NOW / 2);
    let _ = p.acquire_for_probe(&id("proxy", "d"), &ctx("x.com"), NOW / 2);
    out.push(("probe_thompson", p));

    let policy = Policy {
        strategy: Strategy::First,
        rate_limit: Some(RateLimit { rate: 2.0, burst: 3 }),
        max_resources: Some(4),
        max_cells: Some(16),
        fail_open: true,
        ..Policy::default()
    };
    let mut p = Pool::new(policy, 6).expect("policy");
    p.register(id("proxy", "e"), 1, 1).expect("register");
    p.register(id("proxy", "f"), 1, 1).expect("register");
    let lease = p.acquire(&ctx("x.com"), 2).expect("acquire");
    p.release(lease.id, lease.token, 3).expect("release");
    p.unregister(&id("proxy", "f"), false, 4).expect("unregister");
    out.push(("rate_caps_retired", p));

    let policy = Policy { strategy: Strategy::Classic, recovery: Recovery::Classic, ..Policy::default() };
    let mut p = Pool::new(policy, 7).expect("policy");
    p.register(id("proxy", "g"), 1, 1).expect("register");
    for t in 2..6 {
        let _ = p.report(&id("proxy", "g"), &ctx("x.com"), failure(FailureKind::Blocked, None), t);
    }
    out.push(("classic", p));
    out
}

fn keys(v: &Value, into: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                into.insert(k.clone());
                keys(v, into);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| keys(v, into)),
        Value::String(s) => {
            into.insert(s.clone());
        }
        _ => {}
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, corpus, dict] = &args[..] else {
        eprintln!("usage: repute-fuzz-seeds CORPUS_DIR DICT_DIR");
        std::process::exit(2);
    };
    let (corpus, dict) = (Path::new(corpus), Path::new(dict));
    let binary = corpus.join("snapshot_binary");
    let json = corpus.join("snapshot_json");
    for dir in [&binary, &json, &dict.to_path_buf()] {
        std::fs::create_dir_all(dir).expect("create a seed directory");
    }
    let mut words = BTreeSet::new();
    for (name, mut pool) in pools() {
        for with_leases in [true, false] {
            let suffix = if with_leases { "" } else { "_no_leases" };
            let bytes = pool.snapshot(NOW, with_leases);
            // Mode 0: the snapshot as it is; odd modes: its body, framed by
            // the target (bit 1: the leases flag).
            let mut raw = vec![0u8];
            raw.extend_from_slice(&bytes);
            std::fs::write(binary.join(format!("{name}{suffix}")), raw).expect("write a seed");
            let mut body = vec![if with_leases { 3u8 } else { 1 }];
            body.extend_from_slice(&bytes[20..]);
            std::fs::write(binary.join(format!("{name}{suffix}_body")), body).expect("write a seed");
            let text = pool.snapshot_json(NOW, with_leases);
            keys(&serde_json::from_str(&text).expect("a JSON snapshot parses"), &mut words);
            std::fs::write(json.join(format!("{name}{suffix}.json")), text).expect("write a seed");
        }
    }
    let lines: String = words.iter().map(|w| format!("{:?}\n", format!("\"{w}\""))).collect();
    std::fs::write(dict.join("snapshot_json.dict"), lines).expect("write the dictionary");
}
