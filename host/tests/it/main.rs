//! The host's integration tests, one binary: each module is one concern of
//! the host, driven through its public API. The networked ones need their
//! server (`scripts/services.sh`): `postgres`, `redis` and `etcd` (the last
//! only with the `etcd` feature); `shared_store` is what every shared store
//! must show, run by `postgres` and `redis`; `usage_limits` what every
//! lease authority must show of usage limits, run against every store.

mod boundary;
mod differential;
#[cfg(feature = "etcd")]
mod etcd;
mod poolset;
mod postgres;
mod prober;
mod redis;
mod report_and_release;
mod resource_keys;
mod restore;
mod secrets;
mod selection;
mod shared_store;
mod sqlite_restart;
mod trap;
mod usage_limits;
