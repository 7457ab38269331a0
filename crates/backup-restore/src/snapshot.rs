//! Snapshot objects and their names, as etcd-backup-restore writes them
//! (`br:pkg/snapstore/types.go`): `Full-<start>-<last>-<unix>` for a whole
//! database, `Incr-<start>-<last>-<unix>` for the events between two
//! revisions (a "delta"), each revision padded to eight digits, then the
//! compression suffix (`.gz`, `.zlib`, `.Z`) and `.final` for the last full
//! snapshot before a member stopped. Keeping upstream's names means a store
//! written by trellis can be read by upstream's tools and the other way
//! round.

use std::cmp::Ordering;

/// A full snapshot (the database) or a delta (events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Full,
    Delta,
}

impl Kind {
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Full => "Full",
            Kind::Delta => "Incr",
        }
    }
}

/// How a snapshot's bytes are compressed (br's `--compression-policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zlib,
    /// Named for completeness: upstream's `lzw` policy. trellis reads and
    /// writes only gzip and zlib, and says so when it meets one.
    Lzw,
}

impl Compression {
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Zlib => ".zlib",
            Compression::Lzw => ".Z",
        }
    }

    /// The policy named by `--compression-policy`.
    pub fn from_policy(policy: &str) -> Option<Compression> {
        match policy {
            "gzip" => Some(Compression::Gzip),
            "zlib" => Some(Compression::Zlib),
            "lzw" => Some(Compression::Lzw),
            _ => None,
        }
    }
}

const FINAL_SUFFIX: &str = ".final";

/// One snapshot object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Snapshot {
    pub kind: Kind,
    pub start_revision: i64,
    pub last_revision: i64,
    /// Seconds since the Unix epoch.
    pub created: i64,
    pub compression: Compression,
    /// The full snapshot a member took as it stopped (hibernation).
    pub is_final: bool,
}

impl Snapshot {
    pub fn full(last_revision: i64, created: i64, compression: Compression) -> Snapshot {
        Snapshot {
            kind: Kind::Full,
            start_revision: 0,
            last_revision,
            created,
            compression,
            is_final: false,
        }
    }

    pub fn delta(start: i64, last: i64, created: i64, compression: Compression) -> Snapshot {
        Snapshot {
            kind: Kind::Delta,
            start_revision: start,
            last_revision: last,
            created,
            compression,
            is_final: false,
        }
    }

    /// The object name.
    pub fn name(&self) -> String {
        format!(
            "{}-{:08}-{:08}-{}{}{}",
            self.kind.prefix(),
            self.start_revision,
            self.last_revision,
            self.created,
            self.compression.suffix(),
            if self.is_final { FINAL_SUFFIX } else { "" }
        )
    }

    /// The snapshot an object name stands for; `None` for any other name
    /// (a store may hold files of other tools, which are left alone).
    pub fn parse(name: &str) -> Option<Snapshot> {
        let (rest, is_final) = match name.strip_suffix(FINAL_SUFFIX) {
            Some(r) => (r, true),
            None => (name, false),
        };
        let (rest, compression) = [Compression::Gzip, Compression::Zlib, Compression::Lzw]
            .into_iter()
            .find_map(|c| rest.strip_suffix(c.suffix()).map(|r| (r, c)))
            .unwrap_or((rest, Compression::None));
        let mut parts = rest.split('-');
        let kind = match parts.next()? {
            "Full" => Kind::Full,
            "Incr" => Kind::Delta,
            _ => return None,
        };
        let number = |s: Option<&str>| -> Option<i64> {
            let s = s?;
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        let start_revision = number(parts.next())?;
        let last_revision = number(parts.next())?;
        let created = number(parts.next())?;
        if parts.next().is_some() || last_revision < start_revision {
            return None;
        }
        Some(Snapshot {
            kind,
            start_revision,
            last_revision,
            created,
            compression,
            is_final,
        })
    }
}

/// The order snapshots are taken in: by creation time, then revisions
/// (a full before the deltas that follow it within the same second).
pub fn chronological(a: &Snapshot, b: &Snapshot) -> Ordering {
    a.created
        .cmp(&b.created)
        .then(a.last_revision.cmp(&b.last_revision))
        .then(a.kind.cmp(&b.kind))
        .then(a.start_revision.cmp(&b.start_revision))
}

// Sets of snapshots (garbage collection) order them chronologically; the
// name breaks ties, so the order agrees with equality.
impl PartialOrd for Snapshot {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Snapshot {
    fn cmp(&self, other: &Self) -> Ordering {
        chronological(self, other).then_with(|| self.name().cmp(&other.name()))
    }
}

/// The newest full snapshot and the deltas after it, in order: what a
/// restore replays (`GetLatestFullSnapshotAndDeltaSnapList`). Without a
/// full snapshot every delta counts, replayed onto an empty member.
pub fn latest_set(snaps: &[Snapshot]) -> (Option<Snapshot>, Vec<Snapshot>) {
    let mut sorted = snaps.to_vec();
    sorted.sort_by(chronological);
    let full_at = sorted.iter().rposition(|s| s.kind == Kind::Full);
    let full = full_at.map(|i| sorted[i].clone());
    let floor = full.as_ref().map_or(0, |f| f.last_revision);
    let deltas = sorted[full_at.map_or(0, |i| i + 1)..]
        .iter()
        .filter(|s| s.kind == Kind::Delta && s.last_revision > floor)
        .cloned()
        .collect();
    (full, deltas)
}

/// The revision the store's backups reach: the last revision of the
/// newest set's last object (0 for an empty store).
pub fn latest_revision(snaps: &[Snapshot]) -> i64 {
    let (full, deltas) = latest_set(snaps);
    deltas
        .last()
        .map(|d| d.last_revision)
        .or(full.map(|f| f.last_revision))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_upstreams_format() {
        let cases = [
            (
                Snapshot::full(5, 1_700_000_000, Compression::None),
                "Full-00000000-00000005-1700000000",
            ),
            (
                Snapshot::delta(6, 123_456_789, 1_700_000_020, Compression::Gzip),
                "Incr-00000006-123456789-1700000020.gz",
            ),
            (
                Snapshot {
                    is_final: true,
                    ..Snapshot::full(9, 1, Compression::Zlib)
                },
                "Full-00000000-00000009-1.zlib.final",
            ),
        ];
        for (snap, name) in cases {
            assert_eq!(snap.name(), name);
            assert_eq!(Snapshot::parse(name), Some(snap), "{name}");
        }
    }

    #[test]
    fn other_names_are_not_snapshots() {
        for name in [
            "",
            "Full",
            "Full-1-2",
            "Full-00000000-00000005-x",
            "Diff-00000000-00000005-1",
            "Full-00000009-00000005-1",
            "Full-00000000-00000005-1-2",
            "Full-00000000-00000005-1.tmp",
            "Full--00000005-1",
            "Full-+1-00000005-1",
        ] {
            assert_eq!(Snapshot::parse(name), None, "{name:?}");
        }
    }

    #[test]
    fn the_latest_set_is_the_newest_full_and_the_deltas_after_it() {
        let f1 = Snapshot::full(10, 100, Compression::None);
        let d1 = Snapshot::delta(11, 20, 110, Compression::None);
        let f2 = Snapshot::full(20, 120, Compression::None);
        let d2 = Snapshot::delta(21, 30, 130, Compression::None);
        let d3 = Snapshot::delta(31, 35, 140, Compression::None);
        let all = vec![d3.clone(), f1, d1, d2.clone(), f2.clone()];
        assert_eq!(latest_set(&all), (Some(f2), vec![d2, d3]));
        assert_eq!(latest_revision(&all), 35);
        // Deltas alone are replayed onto an empty member.
        let d = Snapshot::delta(1, 4, 5, Compression::None);
        assert_eq!(latest_set(std::slice::from_ref(&d)), (None, vec![d]));
        assert_eq!(latest_revision(&[]), 0);
    }
}
