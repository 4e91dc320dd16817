//! The user's own store, guarded by fencing tokens: the other half of a
//! fenced lease. repute decides who holds a resource permit; this table makes
//! sure that a holder who lost its lease without knowing it (a pause, a slow
//! network) cannot overwrite what a later holder wrote.
//!
//! The whole guard is one statement: the write lands only if no higher token
//! for that (resource, permit) has been seen, and the row remembers the
//! highest token so far. Equal tokens pass, so one holder can write many times.

use std::time::Duration;

use postgres::{Client, Config, NoTls, Statement};

/// Creates (or empties) the downstream table.
pub fn create_table(url: &str, table: &str) {
    let mut client = postgres::Client::connect(url, NoTls).unwrap_or_else(|e| panic!("{url}: {e}"));
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table};
             CREATE TABLE {table} (
                 resource text NOT NULL,
                 permit integer NOT NULL,
                 token bigint NOT NULL,
                 value text NOT NULL,
                 PRIMARY KEY (resource, permit)
             )"
        ))
        .unwrap_or_else(|e| panic!("create {table}: {e}"));
}

/// A connection to the downstream table, reopened after PostgreSQL drops it.
pub struct Downstream {
    config: Config,
    table: String,
    /// The connection and the write statement prepared on it.
    conn: Option<(Client, Statement)>,
}

/// Whether a fenced write landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fenced {
    Written,
    /// A higher token was already seen: the writer's lease is stale.
    Refused,
}

impl Downstream {
    /// Connects lazily: a worker may start while PostgreSQL is restarting.
    pub fn open(url: &str, table: &str) -> Downstream {
        let mut config: Config = url.parse().unwrap_or_else(|e| panic!("{url}: {e}"));
        config.connect_timeout(Duration::from_secs(1));
        // Fencing needs ordering, not durability (PostgreSQL is only ever
        // stopped cleanly here); without this the workers would wait on the
        // downstream's fsyncs rather than on repute.
        config.options("-c synchronous_commit=off");
        Downstream { config, table: table.to_owned(), conn: None }
    }

    /// Writes `value` for the holder of `token` on (resource, permit), unless
    /// a higher token was seen. An error means the database was unreachable;
    /// the next call reconnects.
    pub fn write(&mut self, resource: &str, permit: u32, token: u64, value: &str) -> Result<Fenced, postgres::Error> {
        let token = i64::try_from(token).expect("tokens fit bigint");
        let permit = i32::try_from(permit).expect("permits fit integer");
        let result = self
            .connection()
            .and_then(|(client, write)| client.query_opt(write, &[&resource, &permit, &token, &value]));
        match result {
            Ok(Some(_)) => Ok(Fenced::Written),
            Ok(None) => Ok(Fenced::Refused),
            Err(e) => {
                self.conn = None;
                Err(e)
            }
        }
    }

    fn connection(&mut self) -> Result<(&mut Client, &Statement), postgres::Error> {
        if self.conn.as_ref().is_none_or(|(c, _)| c.is_closed()) {
            let mut client = self.config.connect(NoTls)?;
            let write = client.prepare(&format!(
                "INSERT INTO {t} AS f (resource, permit, token, value) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (resource, permit) DO UPDATE SET token = EXCLUDED.token, value = EXCLUDED.value
                 WHERE f.token <= EXCLUDED.token
                 RETURNING f.token",
                t = self.table
            ))?;
            self.conn = Some((client, write));
        }
        let (client, write) = self.conn.as_mut().expect("just connected");
        Ok((client, write))
    }
}
