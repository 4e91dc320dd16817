//! The `repute simulate` binary as a user meets it: help, flag errors, output formats, the plot.

use std::path::PathBuf;
use std::process::{Command, Output};

fn repute(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_repute")).args(args).output().expect("the repute binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 output")
}

#[test]
fn help_is_there_for_the_binary_and_the_subcommand() {
    let top = repute(&["--help"]);
    assert!(top.status.success());
    assert!(stdout(&top).contains("simulate"));
    let sub = repute(&["simulate", "--help"]);
    assert!(sub.status.success());
    for flag in ["--scenario", "--requests", "--seed", "--prober", "--format", "--plot"] {
        assert!(stdout(&sub).contains(flag), "simulate --help lacks {flag}");
    }
}

#[test]
fn bad_flags_are_one_clear_error_and_exit_code_two() {
    for args in [
        &["simulate", "--scenario", "nope"][..],
        &["simulate", "--requests", "0"],
        &["simulate", "--seed", "x"],
        &["simulate", "--prober", "sometimes"],
    ] {
        let o = repute(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).starts_with("error:"), "{args:?}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn json_output_is_identical_for_the_same_seed_and_lists_every_contender() {
    let args = ["simulate", "--scenario", "drift", "--requests", "500", "--seed", "3", "--format", "json"];
    let (a, b) = (repute(&args), repute(&args));
    assert!(a.status.success());
    assert_eq!(stdout(&a), stdout(&b));
    let v: serde_json::Value = serde_json::from_str(&stdout(&a)).expect("valid JSON");
    let names = |i: usize| -> Vec<String> {
        v[i]["strategies"].as_array().unwrap().iter().map(|s| s["strategy"].as_str().unwrap().to_string()).collect()
    };
    let proxies = [
        "oracle",
        "thompson",
        "thompson-classic-recovery",
        "classic",
        "crawlee-sessions",
        "litellm-cooldown",
        "envoy-ejection",
        "round-robin",
        "random",
    ];
    assert_eq!(names(0), proxies);
    let variants: Vec<_> =
        v.as_array().unwrap().iter().map(|r| (r["scenario"].as_str(), r["prober"].as_bool())).collect();
    assert_eq!(variants, [(Some("drift"), Some(true)), (Some("drift"), Some(false))]);
    assert_eq!((v[0]["requests"].as_u64(), v[0]["seed"].as_u64()), (Some(500), Some(3)));
    let keys =
        repute(&["simulate", "--scenario", "api-keys", "--prober", "without", "--requests", "300", "--format", "json"]);
    let k: serde_json::Value = serde_json::from_str(&stdout(&keys)).expect("valid JSON");
    assert_eq!(k.as_array().unwrap().len(), 1);
    let key_names: Vec<&str> =
        k[0]["strategies"].as_array().unwrap().iter().map(|s| s["strategy"].as_str().unwrap()).collect();
    assert_eq!(key_names[8], "round-robin-retry-after");
    assert!(k[0]["strategies"][1]["rate_limited"].is_u64());
}

#[test]
fn the_table_marks_the_default_and_the_plot_is_an_svg() {
    let plot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("simulate-test.svg");
    let _ = std::fs::remove_file(&plot);
    let o = repute(&["simulate", "--requests", "300", "--plot", plot.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = stdout(&o);
    assert_eq!(table.matches("scenario ").count(), 14);
    assert_eq!(table.matches(" (no prober): ").count(), 7);
    assert_eq!(table.matches("thompson (default)").count(), 14);
    assert!(table.contains("scenario api-keys: 300 requests over"));
    assert!(table.contains("20 keys, 4 models"));
    let svg = std::fs::read_to_string(&plot).expect("plot written");
    assert!(svg.starts_with("<svg"));
    let names = ["steady", "drift", "context", "bursts", "api-keys", "limits", "projects", "crawlee-sessions"];
    for name in names.into_iter().chain(["litellm-cooldown"]) {
        assert!(svg.contains(name), "plot lacks {name}");
    }
}

#[test]
fn an_unwritable_plot_path_is_an_error_not_a_panic() {
    let o = repute(&["simulate", "--requests", "50", "--scenario", "steady", "--plot", "/nonexistent-dir/x.svg"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: cannot write plot"), "{err}");
    assert!(!err.contains("panicked"));
}
