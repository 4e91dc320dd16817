//! `repute snapshot`: the binary snapshot format and its JSON view, both ways,
//! without a running pool. Every conversion validates, so a file that
//! converts is one `restore` accepts.

use std::fs;
use std::path::PathBuf;

use repute_core::snapshot::{binary_to_json, json_to_binary};
use serde_json::Value;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Summarises a binary snapshot (format, counts) and prints its JSON view.
    Inspect {
        snapshot: PathBuf,
        /// Print only the summary line.
        #[arg(long)]
        summary: bool,
    },
    /// Writes the JSON view of a binary snapshot.
    Export { snapshot: PathBuf, out: PathBuf },
    /// Writes the binary snapshot of a JSON view (after checking it restores).
    Import { json: PathBuf, out: PathBuf },
}

fn read(path: &PathBuf) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &PathBuf, bytes: &[u8]) -> Result<(), String> {
    fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn to_json(path: &PathBuf) -> Result<String, String> {
    binary_to_json(&read(path)?).map_err(|e| format!("{}: snapshot refused: {e}", path.display()))
}

/// One line a person can read: what the snapshot holds.
pub fn summary(json: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let count = |k: &str| v[k].as_array().map_or(0, Vec::len);
    Ok(format!(
        "format {} · strategy {} · {} resources · {} cells · {} leases · {} retired fence sets",
        v["format"],
        v["policy"]["strategy"].as_str().unwrap_or("?"),
        count("resources"),
        count("cells"),
        count("leases"),
        count("retired_fences"),
    ))
}

pub fn main(args: &Args) -> Result<(), String> {
    match &args.command {
        Command::Inspect { snapshot, summary: only } => {
            let json = to_json(snapshot)?;
            println!("{}", summary(&json)?);
            if !only {
                println!("{json}");
            }
        }
        Command::Export { snapshot, out } => write(out, to_json(snapshot)?.as_bytes())?,
        Command::Import { json, out } => {
            let text = String::from_utf8(read(json)?).map_err(|_| format!("{}: not UTF-8", json.display()))?;
            let bytes = json_to_binary(&text).map_err(|e| format!("{}: snapshot refused: {e}", json.display()))?;
            write(out, &bytes)?;
        }
    }
    Ok(())
}
