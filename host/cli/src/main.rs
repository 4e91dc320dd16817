//! `repute`: the command-line face of the pool. Parses flags and dispatches to
//! one module per subcommand; every failure ends as one line on stderr and a
//! non-zero exit code, never a panic.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use repute_cli::{bench, key, serve, simulate, snapshot};

#[derive(Debug, Parser)]
#[command(name = "repute", version, about = "A reputation-aware resource pool with fenced leases")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decision-quality benchmark: every strategy against baselines and an oracle on built-in scenarios.
    Simulate(simulate::Args),
    /// Serve the pool over HTTP/JSON: leases, outcomes, events (SSE), metrics.
    /// Boxed: its many flags make it far larger than the other variants.
    Serve(Box<serve::Args>),
    /// API keys for `serve`.
    Key(key::Args),
    /// Load generator: acquire + release pairs against an embedded pool or a running server.
    Bench(bench::Args),
    /// Snapshot files: inspect, and convert between binary and JSON.
    Snapshot(snapshot::Args),
    /// Print the server's OpenAPI document, as the routes and their types make it
    /// (`repute openapi > host/cli/openapi.json` regenerates the kept copy).
    Openapi,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(args) => simulate::main(&args),
        Command::Serve(args) => serve::main(&args),
        Command::Key(args) => key::main(&args),
        Command::Bench(args) => bench::main(&args),
        Command::Snapshot(args) => snapshot::main(&args),
        Command::Openapi => {
            print!("{}", serve::routes::openapi());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
