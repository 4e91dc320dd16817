//! `repute key`: API keys for `serve`.

use std::path::PathBuf;

use crate::serve::auth;

/// `repute key new`: makes an API key bound to one tenant.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Creates a key for a tenant, appends its hash to the key file and prints the key (shown once).
    New {
        /// The tenant the key may act on.
        #[arg(long, default_value = "default")]
        tenant: String,
        /// Key file the server reads.
        #[arg(long, env = "REPUTE_KEYS", default_value = "repute.keys")]
        keys: PathBuf,
    },
}

pub fn main(args: &Args) -> Result<(), String> {
    match &args.command {
        Command::New { tenant, keys } => {
            println!("{}", auth::new_key(tenant, keys)?);
            Ok(())
        }
    }
}
