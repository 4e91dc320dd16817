//! `repute bench` and `repute snapshot`, run as the binary.

use std::process::Command;

use repute_core::{Context, FailureKind, Outcome, Policy, Pool, ResourceId};

use crate::tempdir;

fn repute(args: &[&str], dir: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_repute")).args(args).current_dir(dir).output().unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn snapshot_tools_convert_both_ways_and_refuse_garbage() {
    let dir = tempdir("snap");
    let mut pool = Pool::new(Policy::default(), 3).unwrap();
    for v in ["a", "b", "c"] {
        pool.register(ResourceId::new("proxy", v).unwrap(), 1, 0).unwrap();
    }
    let site = Context::new("example.com").unwrap();
    pool.report(&ResourceId::new("proxy", "a").unwrap(), &site, Outcome::failure(FailureKind::Slow, 9.0).unwrap(), 0)
        .unwrap();
    pool.acquire(&site, 0).unwrap();
    let bin = pool.snapshot(0, true);
    std::fs::write(dir.join("pool.snap"), &bin).unwrap();

    let (ok, out, _) = repute(&["snapshot", "inspect", "pool.snap", "--summary"], &dir);
    assert!(ok);
    assert_eq!(out.trim(), "format 5 · strategy thompson · 3 resources · 1 cells · 1 leases · 0 retired fence sets");
    let (ok, _, err) = repute(&["snapshot", "export", "pool.snap", "pool.json"], &dir);
    assert!(ok, "{err}");
    let (ok, _, err) = repute(&["snapshot", "import", "pool.json", "back.snap"], &dir);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(dir.join("back.snap")).unwrap(), bin, "binary → JSON → binary is identical");

    std::fs::write(dir.join("junk.snap"), b"not a snapshot at all").unwrap();
    let (ok, _, err) = repute(&["snapshot", "inspect", "junk.snap"], &dir);
    assert!(!ok);
    assert_eq!(err.trim(), "error: junk.snap: snapshot refused: not a repute snapshot");
}

#[test]
fn bench_runs_a_counted_load_embedded() {
    let dir = tempdir("bench");
    let (ok, out, err) = repute(&["bench", "--threads", "2", "--count", "2000", "--resources", "50", "--report"], &dir);
    assert!(ok, "{err}");
    assert!(out.starts_with("2000 pairs in "), "{out}");
    assert!(out.contains("errors 0"), "{out}");
    assert!(out.contains("latency per pair: p50 "), "{out}");
}
