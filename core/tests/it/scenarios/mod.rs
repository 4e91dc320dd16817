//! Scenario tests: each pins one documented rule with exact values.

mod leases;
mod reputation;
mod snapshots;
