//! etcd-backup-restore (`spec/druid.md` §10): the sidecar that guards an
//! etcd member's data. It validates the data directory before etcd
//! starts and restores it from backups when it is unusable, takes full
//! snapshots (etcd's Maintenance snapshot) on a cron schedule and on
//! demand, delta snapshots from a watch, collects old snapshots, renews
//! the member and snapshot Leases druid reads, and compacts a store for
//! druid's compaction Job.
//!
//! Decisions are pure functions ([`snapshot`] names, [`gc`], [`validate`],
//! [`init`]); the modules that touch etcd, the store or the API are thin.

pub mod compact;
pub mod compress;
pub mod config;
pub mod copy;
pub mod defrag;
pub mod delta;
pub mod gc;
pub mod init;
pub mod join;
pub mod lease;
pub mod restore;
pub mod sidecar;
pub mod snapshot;
pub mod snapshotter;
pub mod snapstore;
pub mod validate;
