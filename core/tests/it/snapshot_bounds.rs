//! The JSON view's size against the bounds a server derives its body limit
//! from (`repute_core::snapshot::json_bound`, `JSON_PER_FOOTPRINT_BYTE`), on
//! pools as long in JSON as they can be.

use repute_core::snapshot::{json_bound, JSON_PER_FOOTPRINT_BYTE};
use repute_core::{Context, FailureKind, Labels, Outcome, Policy, Pool, Registration, ResourceId, MAX_LABELS};

/// A name of `len` bytes, unique per `i`, made of the character JSON
/// escapes (`"` becomes `\"`), so its JSON is as long as a name's can be.
fn quoted(prefix: &str, i: usize, len: usize) -> String {
    let tag = format!("{prefix}{i}");
    format!("{tag}{}", "\"".repeat(len - tag.len()))
}

#[test]
fn the_json_snapshot_stays_within_its_bounds() {
    for window in [10, 1024] {
        let policy = Policy { window, ..Policy::default() };
        let mut p = Pool::new(policy, 1).unwrap();
        let timeout = Outcome::failure(FailureKind::Timeout, 123456.789).unwrap();
        let (resources, contexts) = (20, 5);
        for i in 0..resources {
            let id = ResourceId::new(quoted("k", i, 256), quoted("v", i, 256)).unwrap();
            // The most labels, the longest names, values JSON escapes.
            let labels = (0..MAX_LABELS).map(|l| (format!("{l:0>64}"), quoted("l", l, 256)));
            let registration = Registration { labels: Labels::new(labels).unwrap(), ..Registration::new(1) };
            p.register_with(id.clone(), registration, 0).unwrap();
            p.block(&id, None, Some(1 << 60), Some(quoted("r", i, 1024)), 0).unwrap();
            for c in 0..contexts {
                let context = Context::new(quoted("c", c, 256)).unwrap();
                for _ in 0..window {
                    p.report(&id, &context, timeout, 0).unwrap();
                }
                p.block(&id, Some(&context), Some(1 << 60), Some(quoted("r", c, 1024)), 0).unwrap();
            }
        }
        let json = p.snapshot_json(0, true).len() as u64;
        let cells = (resources * contexts) as u32;
        assert!(json <= json_bound(resources as u32, cells, window), "window {window}: {json} bytes");
        assert!(json <= JSON_PER_FOOTPRINT_BYTE * p.footprint(), "window {window}: {json} bytes");
    }
    // Leases in the longest contexts, on resources of many permits.
    let mut p = Pool::new(Policy::default(), 1).unwrap();
    for i in 0..10 {
        p.register(ResourceId::new(quoted("k", i, 256), quoted("v", i, 256)).unwrap(), 1024, 0).unwrap();
    }
    for i in 0..10 * 1024 {
        p.acquire(&Context::new(quoted("c", i % 3, 256)).unwrap(), 0).unwrap();
    }
    let json = p.snapshot_json(0, true).len() as u64;
    assert!(json <= JSON_PER_FOOTPRINT_BYTE * p.footprint(), "{json} bytes, footprint {}", p.footprint());
}
