//! Shared mode on PostgreSQL: every process serves the tenant and folds
//! what the others log. Needs the database of `scripts/services.sh`.

use std::time::Duration;

use serde_json::json;

use super::{call, pg_url, tempdir, unique, Server};

/// Each process checkpoints the tenant; the store keeps the checkpoint
/// furthest along the log and refuses one behind it. A process behind
/// another's checkpoint says so at debug level, and logs no error.
#[test]
fn a_checkpoint_behind_another_process_is_no_error() {
    let pg = pg_url();
    // Checkpoints every 0.2 s; no sync in the test's time, so the second
    // process stays where it opened while the first logs on.
    let args = ["--no-auth", "--store", &pg, "--mode", "shared", "--checkpoint-every", "0.2", "--sync-every", "60"];
    let dir = tempdir("shared-checkpoints");
    let first = Server::start(&args, &dir);
    let (second, log) = Server::start_logged(&args, &dir, "debug");
    let tenant = unique("shared");
    let t = [("Repute-Tenant", tenant.as_str())];
    let r = call("POST", &first.url("/v1/resources"), &t, Some(json!({"kind": "proxy", "value": "a"})));
    assert_eq!(r.status, 204, "{}", r.body);
    let r = call("GET", &second.url("/v1/resources"), &t, None);
    assert_eq!((r.status, r.json().as_array().map(Vec::len)), (200, Some(1)), "{}", r.body);
    for _ in 0..20 {
        let body = json!({"kind": "proxy", "value": "a", "context": "x.com", "outcome": "success"});
        let r = call("POST", &first.url("/v1/outcomes"), &t, Some(body));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    std::thread::sleep(Duration::from_millis(1200));
    assert!(second.terminate().success());
    let lines: Vec<String> = log.iter().collect();
    let about = |what: &str| lines.iter().filter(|l| l.contains(what) && l.contains(&tenant)).count();
    assert!(about("checkpoint not saved") >= 1, "the second process was behind: {lines:#?}");
    assert_eq!(about("checkpoint failed"), 0, "{lines:#?}");
    assert!(lines.iter().all(|l| !l.contains("ERROR")), "{lines:#?}");
}
