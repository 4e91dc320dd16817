//! Partitioned mode on PostgreSQL: three `repute serve` processes, each
//! tenant split into three partitions by context, each partition owned by
//! the process that first got a request for it. Needs the database of
//! `scripts/services.sh`.

use std::time::{Duration, Instant};

use repute_host::{lease_partition, partition_of};
use serde_json::{json, Value};

use super::{call, pg_url, tempdir, unique, Reply, Server};

const PARTITIONS: u32 = 3;

/// A context of each partition, in partition order.
fn contexts() -> Vec<String> {
    (0..PARTITIONS)
        .map(|p| (0..).map(|i| format!("site-{i}.example")).find(|c| partition_of(c, PARTITIONS) == p).unwrap())
        .collect()
}

/// Three processes of one mode on the test database, with an owner TTL of 2 s.
fn servers(mode: &str, name: &str) -> Vec<Server> {
    servers_with_ttl(mode, name, "2")
}

fn servers_with_ttl(mode: &str, name: &str, owner_ttl: &str) -> Vec<Server> {
    let pg = pg_url();
    let mut args = vec!["--no-auth", "--store", &pg, "--mode", mode, "--owner-ttl", owner_ttl, "--sync-every", "0.05"];
    let count = PARTITIONS.to_string();
    if mode == "partitioned" {
        args.extend(["--partitions", &count]);
    }
    let dir = tempdir(name);
    (0..3).map(|_| Server::start(&args, &dir)).collect()
}

/// The entries of other processes this one folded, from its metrics page.
fn folded(s: &Server) -> u64 {
    let page = call("GET", &s.url("/metrics"), &[], None).body;
    page.lines()
        .filter_map(|l| l.strip_prefix("repute_log_entries_folded_total"))
        .map(|rest| rest.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn acquire(s: &Server, t: &[(&str, &str)], context: &str) -> Reply {
    call("POST", &s.url("/v1/leases"), t, Some(json!({"context": context})))
}

/// Registers `n` proxies at `home`, then sends each process `i` a first
/// request for partition `i`'s context, so that process owns it; the
/// leases of those requests are given back.
fn set_up(s: &[Server], t: &[(&str, &str)], n: usize) {
    for i in 0..n {
        let r = call("POST", &s[0].url("/v1/resources"), t, Some(json!({"kind": "proxy", "value": format!("r{i}")})));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    for (server, context) in s.iter().zip(contexts()) {
        let lease = acquire(server, t, &context);
        assert_eq!(lease.status, 201, "{}", lease.body);
        let id = lease.json()["id"].as_u64().unwrap();
        let token = lease.json()["token"].as_u64().unwrap();
        let r = call("DELETE", &server.url(&format!("/v1/leases/{id}?token={token}")), t, None);
        assert_eq!(r.status, 204, "{}", r.body);
    }
}

/// Each context reaches the process that owns its partition, others answer
/// 421 naming it (leases by the partition their id names), and permits stay
/// exact across partitions: however the owners race for six proxies, none
/// is leased twice.
#[test]
fn partitioned_mode_sends_each_context_to_its_owner_and_keeps_permits_exact() {
    let s = servers("partitioned", "partitioned-routing");
    let tenant = unique("part");
    let t = [("Repute-Tenant", tenant.as_str())];
    let ctx = contexts();
    set_up(&s, &t, 6);

    let p = acquire(&s[0], &t, &ctx[1]).problem(421, "not_owner");
    assert_eq!(p["owner"], s[1].base);
    let p = acquire(&s[2], &t, &ctx[0]).problem(421, "not_owner");
    assert_eq!(p["owner"], s[0].base);
    let p = call("GET", &s[1].url("/v1/resources"), &t, None).problem(421, "not_owner");
    assert_eq!(p["owner"], s[0].base, "a request about no context goes to partition 0");
    // A listing about a context is read from the partition that holds it,
    // which folded the same registrations and groups as partition 0.
    let at = |server: &Server, path: &str, context: &str| {
        call("GET", &server.url(&format!("{path}?context={context}")), &t, None)
    };
    for path in ["/v1/resources", "/v1/groups"] {
        let p = at(&s[0], path, &ctx[2]).problem(421, "not_owner");
        assert_eq!(p["owner"], s[2].base, "{path} about a context goes to its partition");
        let (here, home) = (at(&s[2], path, &ctx[2]), call("GET", &s[0].url(path), &t, None));
        assert_eq!((here.status, here.json()), (200, home.json()), "{path}: partition 2 folded what partition 0 did");
    }
    at(&s[0], "/v1/groups", "*").problem(400, "invalid_input");

    // Every owner acquires in turn until each has been refused: a
    // partition knows nothing of the others' leases but what the database
    // refuses it, and no proxy is ever leased twice.
    let mut held: Vec<(usize, Value)> = Vec::new();
    let mut refused = [false; 3];
    for owner in (0..3).cycle().take(30) {
        let r = acquire(&s[owner], &t, &ctx[owner]);
        if r.status == 409 {
            let p = r.problem(409, "no_resource_available");
            assert!(p["reasons"]["leased"].as_u64().unwrap() > 0, "{p}");
            refused[owner] = true;
            continue;
        }
        assert_eq!(r.status, 201, "{}", r.body);
        let lease = r.json();
        let id = lease["id"].as_u64().unwrap();
        assert_eq!(lease_partition(id, PARTITIONS), owner as u32, "lease {id} names its partition");
        held.push((owner, lease));
    }
    assert_eq!(refused, [true; 3]);
    let mut values: Vec<_> = held.iter().map(|(_, l)| l["value"].as_str().unwrap().to_owned()).collect();
    values.sort();
    values.dedup();
    assert_eq!(values.len(), held.len(), "no proxy leased twice across partitions: {held:?}");
    assert!((3..=6).contains(&held.len()), "{held:?}");

    let (owner, lease) = held.iter().find(|(owner, _)| *owner != 0).unwrap();
    let path = format!("/v1/leases/{}?token={}", lease["id"], lease["token"]);
    let p = call("DELETE", &s[0].url(&path), &t, None).problem(421, "not_owner");
    assert_eq!(p["owner"], s[*owner].base, "a lease is released at the partition that granted it");
    for (owner, lease) in &held {
        let path = format!("/v1/leases/{}?token={}", lease["id"], lease["token"]);
        assert_eq!(call("DELETE", &s[*owner].url(&path), &t, None).status, 204);
    }

    let r = call("GET", &s[0].url("/v1/snapshot"), &t, None);
    r.problem(409, "partitioned");
    let map = call("GET", &s[2].url("/v1/partitions"), &t, None);
    assert_eq!(map.status, 200, "{}", map.body);
    assert_eq!(map.json(), json!({"count": 3, "owners": [s[0].base, s[1].base, s[2].base]}));
}

/// A partition moves to another process when its owner hands it over: the
/// owner saves its checkpoint and gives it up, sends its requests to the
/// named process, which claims it on the first one, with what the old
/// owner acknowledged. Handing off what a process does not own, or to no
/// URL, is refused naming the owner or the field.
#[test]
fn a_partition_is_handed_to_another_process_with_what_it_acknowledged() {
    // The old owner sends the partition's requests on for one owner TTL:
    // long enough here that a slow machine still sees it do so.
    let s = servers_with_ttl("partitioned", "partitioned-handoff", "30");
    let tenant = unique("handoff");
    let t = [("Repute-Tenant", tenant.as_str())];
    let ctx = contexts();
    set_up(&s, &t, 2);
    let body = json!({"context": ctx[1], "duration_ms": 600_000.0});
    let r = call("PUT", &s[1].url("/v1/resources/proxy/r0/block"), &t, Some(body));
    assert_eq!(r.status, 204, "{}", r.body);

    let handoff = |from: &Server, index: u32, to: &str| {
        call("POST", &from.url(&format!("/v1/partitions/{index}/handoff")), &t, Some(json!({"to": to})))
    };
    let p = handoff(&s[0], 1, &s[2].base).problem(421, "not_owner");
    assert_eq!(p["owner"], s[1].base);
    let p = handoff(&s[1], 1, "ftp://elsewhere").problem(400, "invalid_input");
    assert_eq!(p["field"], "to");
    let p = handoff(&s[1], 3, &s[2].base).problem(400, "invalid_input");
    assert_eq!(p["field"], "index");

    let r = handoff(&s[1], 1, &s[2].base);
    assert_eq!(r.status, 204, "{}", r.body);
    let p = acquire(&s[1], &t, &ctx[1]).problem(421, "not_owner");
    assert_eq!(p["owner"], s[2].base, "the old owner sends the partition's requests to the new one");
    let lease = acquire(&s[2], &t, &ctx[1]);
    assert_eq!(lease.status, 201, "{}", lease.body);
    assert_eq!(lease.json()["value"], "r1", "the block made at the old owner holds at the new one");
    let map = call("GET", &s[0].url("/v1/partitions"), &t, None).json();
    assert_eq!(map["owners"], json!([s[0].base, s[2].base, s[2].base]));
    let path = format!("/v1/resources/proxy/r0/cells?context={}", ctx[1]);
    let p = call("GET", &s[0].url(&path), &t, None).problem(421, "not_owner");
    assert_eq!(p["owner"], s[2].base, "a context's cells are read where the context lives");
    let cells = call("GET", &s[2].url(&path), &t, None).json();
    let contexts: Vec<&Value> = cells.as_array().unwrap().iter().map(|c| &c["context"]).collect();
    assert_eq!(contexts, [&Value::Null, &json!(ctx[1])], "the global cell and that context's: {cells}");

    let dir = tempdir("not-partitioned");
    let single = Server::start(&["--no-auth", "--store", "memory"], &dir);
    call("GET", &single.url("/v1/partitions"), &t, None).problem(404, "not_found");
}

/// The fold work: the same reports, a hundred per context, made at three
/// processes of shared mode and at the three owners of partitioned mode.
/// In shared mode each process folds the two hundred the others made; in
/// partitioned mode a partition's reports are made and folded by its owner
/// alone, so no process folds more than a third of what shared mode does.
#[test]
fn a_partition_folds_only_its_own_part_of_the_log() {
    let reports = |s: &[Server], t: &[(&str, &str)]| {
        for (i, context) in contexts().iter().enumerate() {
            for n in 0..100 {
                let body =
                    json!({"kind": "proxy", "value": format!("r{}", n % 4), "context": context, "outcome": "success"});
                let r = call("POST", &s[i].url("/v1/outcomes"), t, Some(body));
                assert_eq!(r.status, 204, "{}", r.body);
            }
        }
    };
    let mut work = Vec::new();
    for mode in ["shared", "partitioned"] {
        let s = servers(mode, &format!("fold-{mode}"));
        let tenant = unique(mode);
        let t = [("Repute-Tenant", tenant.as_str())];
        set_up(&s, &t, 4);
        let before: Vec<u64> = s.iter().map(folded).collect();
        reports(&s, &t);
        // Every process syncs every 50 ms: wait until the counts settle.
        let mut after: Vec<u64> = s.iter().map(folded).collect();
        let start = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now: Vec<u64> = s.iter().map(folded).collect();
            if now == after || start.elapsed() > Duration::from_secs(10) {
                break;
            }
            after = now;
        }
        work.push(after.iter().zip(&before).map(|(a, b)| a - b).collect::<Vec<u64>>());
    }
    eprintln!("entries folded per process for 300 reports: shared {:?}, partitioned {:?}", work[0], work[1]);
    assert_eq!(work[0], vec![200, 200, 200], "in shared mode every process folds the others' reports");
    assert!(work[1].iter().all(|&w| w * u64::from(PARTITIONS) <= 200), "{:?}", work[1]);
}

/// When a partition's owner dies, another process takes the partition
/// over once the owner lease ends, with what the dead owner acknowledged:
/// blocks it logged in its context still hold at the new owner.
#[test]
fn a_dead_owners_partition_is_taken_over_with_what_it_acknowledged() {
    let mut s = servers("partitioned", "partitioned-failover");
    let tenant = unique("failover");
    let t = [("Repute-Tenant", tenant.as_str())];
    let ctx = contexts();
    set_up(&s, &t, 3);
    for r in ["r0", "r1"] {
        let body = json!({"context": ctx[1], "duration_ms": 600_000.0, "reason": "banned here"});
        let r = call("PUT", &s[1].url(&format!("/v1/resources/proxy/{r}/block")), &t, Some(body));
        assert_eq!(r.status, 204, "{}", r.body);
    }

    drop(s.remove(1));
    let killed = Instant::now();
    let lease = loop {
        let r = acquire(&s[0], &t, &ctx[1]);
        if r.status != 421 {
            break r;
        }
        assert!(killed.elapsed() < Duration::from_secs(15), "never taken over: {}", r.body);
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("partition taken over {:?} after its owner died (owner TTL 2 s)", killed.elapsed());
    assert_eq!(lease.status, 201, "{}", lease.body);
    assert_eq!(lease.json()["value"], "r2", "the blocks in the context held across the takeover");
    assert_eq!(lease_partition(lease.json()["id"].as_u64().unwrap(), PARTITIONS), 1);
    let p = acquire(&s[1], &t, &ctx[1]).problem(421, "not_owner");
    assert_eq!(p["owner"], s[0].base);
}

/// Changing the number of partitions: the processes stop, and start again
/// with another count. The new partitions are new names, with no owner
/// and no checkpoint of the old ones; each rebuilds from the tenant's log
/// (which partitioned mode never prunes), so what the old layout
/// acknowledged holds, and the lease authority, shared by both layouts,
/// grants no permit the old layout still holds.
#[test]
fn a_new_count_of_partitions_keeps_what_the_old_one_acknowledged_and_held() {
    let pg = pg_url();
    let dir = tempdir("partitions-count");
    let args = |count: &'static str| {
        vec!["--no-auth", "--store", pg.as_str(), "--mode", "partitioned", "--partitions", count, "--owner-ttl", "2"]
    };
    let tenant = unique("recount");
    let t = [("Repute-Tenant", tenant.as_str())];
    let ctx = "shop.example";
    let three: Vec<Server> = (0..3).map(|_| Server::start(&args("3"), &dir)).collect();
    for r in ["r0", "r1", "r2"] {
        let r = call("POST", &three[0].url("/v1/resources"), &t, Some(json!({"kind": "proxy", "value": r})));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let owner = &three[partition_of(ctx, 3) as usize];
    for r in ["r0", "r1"] {
        let body = json!({"context": ctx, "duration_ms": 600_000.0});
        let r = call("PUT", &owner.url(&format!("/v1/resources/proxy/{r}/block")), &t, Some(body));
        assert_eq!(r.status, 204, "{}", r.body);
    }
    let held = acquire(owner, &t, ctx);
    assert_eq!(held.status, 201, "{}", held.body);
    assert_eq!(held.json()["value"], "r2");
    for s in three {
        assert!(s.terminate().success());
    }

    let two: Vec<Server> = (0..2).map(|_| Server::start(&args("2"), &dir)).collect();
    let owner = &two[partition_of(ctx, 2) as usize];
    let p = acquire(owner, &t, ctx).problem(409, "no_resource_available");
    assert_eq!(p["reasons"]["blocked"], 2, "the blocks of the old layout hold: {p}");
    assert_eq!(p["reasons"]["leased"], 1, "the permit the old layout granted is not granted again: {p}");
    let other = (0..).map(|i| format!("other-{i}")).find(|c| partition_of(c, 2) == partition_of(ctx, 2)).unwrap();
    let r = acquire(owner, &t, &other);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_ne!(r.json()["value"], "r2", "{}", r.body);
}
