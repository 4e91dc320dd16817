//! Checkpoints saved the way the Java library saves them: the whole pool,
//! replacing whatever was stored, with no condition. Two instances that do
//! this silently overwrite each other; the naive tests show it.

use postgres::Client;

/// A table of whole-pool snapshots, one row per pool.
pub struct NaiveCheckpoints {
    table: String,
}

impl NaiveCheckpoints {
    pub fn create(pg: &mut Client, table: &str) -> NaiveCheckpoints {
        pg.batch_execute(&format!(
            "DROP TABLE IF EXISTS {table};
             CREATE TABLE {table} (pool text PRIMARY KEY, snapshot text NOT NULL)"
        ))
        .unwrap_or_else(|e| panic!("create {table}: {e}"));
        NaiveCheckpoints { table: table.to_owned() }
    }

    /// DELETE then INSERT: last writer wins, whatever it had not seen.
    pub fn save(&self, pg: &mut Client, pool: &str, snapshot: &str) {
        let mut tx = pg.transaction().expect("a transaction starts");
        tx.execute(&format!("DELETE FROM {} WHERE pool = $1", self.table), &[&pool]).expect("delete");
        tx.execute(&format!("INSERT INTO {} (pool, snapshot) VALUES ($1, $2)", self.table), &[&pool, &snapshot])
            .expect("insert");
        tx.commit().expect("commit");
    }

    pub fn load(&self, pg: &mut Client, pool: &str) -> String {
        pg.query_one(&format!("SELECT snapshot FROM {} WHERE pool = $1", self.table), &[&pool])
            .expect("a saved snapshot")
            .get(0)
    }
}
