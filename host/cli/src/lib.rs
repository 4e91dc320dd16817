//! The `repute` command line as a library, so integration tests drive the same
//! code the binary runs. One module per subcommand.

pub mod bench;
pub mod key;
pub mod serve;
pub mod simulate;
pub mod snapshot;
