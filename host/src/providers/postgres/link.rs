//! The connection every PostgreSQL call runs on: opened again after it
//! broke, with its statements prepared once.

use std::collections::HashMap;

use ::postgres::types::ToSql;
use ::postgres::{Client, Config, NoTls, Row, Statement};

use super::unavailable;
use crate::error::StoreError;

/// One connection, opened again after it broke (server restart, cut
/// network). Calls are bounded by the connection's timeouts, so a dead peer
/// surfaces as an error instead of a hang.
pub(super) struct Link {
    pub(super) config: Config,
    pub(super) client: Option<(Client, Statements)>,
}

/// Statements prepared on the current connection. A statement sent as text
/// costs a second round trip (parse, then execute) on every call; prepared
/// once, each call is one round trip.
type Statements = HashMap<&'static str, Statement>;

/// The current connection as a call sees it.
pub(super) struct Session<'a> {
    pub(super) client: &'a mut Client,
    statements: &'a mut Statements,
}

impl Session<'_> {
    fn prepared(&mut self, sql: &'static str) -> Result<Statement, ::postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }

    pub(super) fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, ::postgres::Error> {
        let statement = self.prepared(sql)?;
        self.client.query(&statement, params)
    }

    pub(super) fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, ::postgres::Error> {
        let statement = self.prepared(sql)?;
        self.client.query_opt(&statement, params)
    }

    pub(super) fn query_one(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, ::postgres::Error> {
        let statement = self.prepared(sql)?;
        self.client.query_one(&statement, params)
    }

    pub(super) fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, ::postgres::Error> {
        let statement = self.prepared(sql)?;
        self.client.execute(&statement, params)
    }
}

impl Link {
    pub(super) fn run<T>(
        &mut self,
        f: impl FnOnce(&mut Session<'_>) -> Result<T, ::postgres::Error>,
    ) -> Result<T, StoreError> {
        if self.client.as_ref().is_none_or(|(c, _)| c.is_closed()) {
            self.client = None;
            self.client = Some((self.config.connect(NoTls).map_err(unavailable)?, Statements::new()));
        }
        let (client, statements) = self.client.as_mut().expect("connected above");
        f(&mut Session { client, statements })
            .inspect_err(|e| {
                // Only a refusal by the server leaves the session usable.
                if e.as_db_error().is_none() {
                    self.client = None;
                }
            })
            .map_err(unavailable)
    }
}

impl Drop for Link {
    /// Closing a connection blocks on its own runtime, which tokio forbids
    /// on a thread that drives async tasks: there, it is closed on a thread
    /// of its own.
    fn drop(&mut self) {
        if let Some((client, _)) = self.client.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::Builder::new().name("repute-pg-close".into()).spawn(move || drop(client));
            }
        }
    }
}
