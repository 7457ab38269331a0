//! `copy` for druid's EtcdCopyBackupsTask (`br:pkg/snapshot/copier`):
//! optionally wait for a final full snapshot in the source (and copy
//! anyway once the wait times out), choose the sets that are young enough
//! and among the newest `max_backups`, skip what the target already has,
//! and copy the rest without the `.final` suffix, so the target's owner
//! treats the copied snapshots as ordinary ones. [`plan`] decides purely.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::snapshot::{Kind, Snapshot, chronological};
use crate::snapstore::{SnapStore, StoreError};

/// What to copy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Sets whose full snapshot is older than this many days are left out.
    pub max_backup_age_days: Option<i64>,
    /// Only the newest this many sets.
    pub max_backups: Option<usize>,
}

/// The snapshots of `source` to copy into a target holding `target`,
/// oldest first, each named as it will be in the target.
pub fn plan(source: &[Snapshot], target: &[Snapshot], f: &Filter, now: i64) -> Vec<Snapshot> {
    let mut sorted = source.to_vec();
    sorted.sort_by(chronological);
    // Sets: each full with the deltas after it (deltas before any full
    // belong to no set and are not copied).
    let mut sets: Vec<Vec<Snapshot>> = Vec::new();
    for s in sorted {
        match s.kind {
            Kind::Full => sets.push(vec![s]),
            Kind::Delta => {
                if let Some(set) = sets.last_mut() {
                    set.push(s);
                }
            }
        }
    }
    if let Some(days) = f.max_backup_age_days {
        let oldest = now - days * 86_400;
        sets.retain(|set| set[0].created >= oldest);
    }
    if let Some(n) = f.max_backups {
        let skip = sets.len().saturating_sub(n);
        sets.drain(..skip);
    }
    let have: BTreeSet<String> = target.iter().map(Snapshot::name).collect();
    sets.into_iter()
        .flatten()
        .map(|s| Snapshot {
            is_final: false,
            ..s
        })
        .filter(|s| !have.contains(&s.name()))
        .collect()
}

/// Copies per [`plan`] through `temp` (a directory); waits up to
/// `wait_for_final` (`Some(ZERO)` = forever) for a final full snapshot
/// in the source first. Returns how many objects were copied.
pub async fn copy(
    source: &dyn SnapStore,
    target: &dyn SnapStore,
    f: &Filter,
    wait_for_final: Option<Duration>,
    temp: &std::path::Path,
) -> Result<usize, StoreError> {
    if let Some(limit) = wait_for_final {
        let start = std::time::Instant::now();
        loop {
            let snaps = source.list().await?;
            if snaps.iter().any(|s| s.kind == Kind::Full && s.is_final) {
                break;
            }
            if !limit.is_zero() && start.elapsed() >= limit {
                tracing::warn!("no final full snapshot within {limit:?}; copying anyway");
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let todo = plan(
        &source.list().await?,
        &target.list().await?,
        f,
        chrono::Utc::now().timestamp(),
    );
    let _ = tokio::fs::create_dir_all(temp).await;
    let source_all = source.list().await?;
    for s in &todo {
        // The source object keeps its own name (maybe `.final`).
        let original = source_all
            .iter()
            .find(|o| {
                Snapshot {
                    is_final: false,
                    ..(*o).clone()
                } == *s
            })
            .unwrap_or(s);
        let file = temp.join(format!("copy-{}", s.name()));
        source.fetch(original, &file).await?;
        let saved = target.save(s, &file).await;
        let _ = tokio::fs::remove_file(&file).await;
        saved?;
    }
    Ok(todo.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Compression::None as Plain;

    const DAY: i64 = 86_400;

    #[test]
    fn newest_young_sets_are_copied_once_without_final() {
        let now = 100 * DAY;
        let f1 = Snapshot::full(10, now - 10 * DAY, Plain);
        let d1 = Snapshot::delta(11, 20, now - 10 * DAY + 60, Plain);
        let f2 = Snapshot::full(30, now - 2 * DAY, Plain);
        let d2 = Snapshot::delta(31, 40, now - 2 * DAY + 60, Plain);
        let f3 = Snapshot {
            is_final: true,
            ..Snapshot::full(50, now - DAY, Plain)
        };
        let lone = Snapshot::delta(1, 5, now - 20 * DAY, Plain);
        let source = vec![
            d2.clone(),
            f3.clone(),
            lone,
            f1.clone(),
            d1.clone(),
            f2.clone(),
        ];
        let unfinal = Snapshot {
            is_final: false,
            ..f3.clone()
        };
        let names = |v: Vec<Snapshot>| v.iter().map(Snapshot::name).collect::<Vec<_>>();
        // Everything but the lone delta, oldest first, `.final` dropped.
        assert_eq!(
            names(plan(&source, &[], &Filter::default(), now)),
            names(vec![
                f1.clone(),
                d1.clone(),
                f2.clone(),
                d2.clone(),
                unfinal.clone()
            ])
        );
        // Age: the 10-day-old set goes.
        let young = Filter {
            max_backup_age_days: Some(7),
            ..Filter::default()
        };
        assert_eq!(
            names(plan(&source, &[], &young, now)),
            names(vec![f2.clone(), d2.clone(), unfinal.clone()])
        );
        // Count: only the newest set; already in the target: skipped.
        let one = Filter {
            max_backups: Some(1),
            ..Filter::default()
        };
        assert_eq!(
            names(plan(&source, &[], &one, now)),
            names(vec![unfinal.clone()])
        );
        assert!(plan(&source, &[unfinal], &one, now).is_empty());
    }

    #[tokio::test]
    async fn copy_moves_objects_between_local_stores() {
        let dir = tempfile::tempdir().unwrap();
        let src = crate::snapstore::LocalStore::new(dir.path().join("src"));
        let dst = crate::snapstore::LocalStore::new(dir.path().join("dst"));
        let raw = dir.path().join("raw");
        std::fs::write(&raw, b"db bytes").unwrap();
        let f = Snapshot {
            is_final: true,
            ..Snapshot::full(7, 1_700_000_000, Plain)
        };
        src.save(&f, &raw).await.unwrap();
        let n = copy(
            &src,
            &dst,
            &Filter::default(),
            Some(Duration::from_secs(5)),
            &dir.path().join("t"),
        )
        .await
        .unwrap();
        assert_eq!(n, 1);
        let got = dst.list().await.unwrap();
        assert_eq!(got.len(), 1);
        assert!(!got[0].is_final);
        let back = dir.path().join("back");
        dst.fetch(&got[0], &back).await.unwrap();
        assert_eq!(std::fs::read(back).unwrap(), b"db bytes");
        // A second run copies nothing.
        let n = copy(&src, &dst, &Filter::default(), None, &dir.path().join("t"))
            .await
            .unwrap();
        assert_eq!(n, 0);
    }
}
