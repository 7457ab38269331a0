//! Data-directory validation (`br:pkg/initializer/validator`): before etcd
//! starts, the sidecar checks that the volume belongs to this namespace
//! (the `safe_guard` file next to the data directory), that the data
//! directory has etcd's layout (`member/snap`, `member/wal` with WAL files)
//! and that the bbolt database's meta pages are intact. The facts are
//! gathered by [`observe`]; [`check`] decides purely.

use std::path::{Path, PathBuf};

/// Name of the guard file next to the data directory.
pub const SAFE_GUARD: &str = "safe_guard";

/// bbolt's magic number, in each of the two meta pages at the start of
/// the database file.
const BOLT_MAGIC: u32 = 0xED0C_DAED;

/// What the database file looks like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbFile {
    Missing,
    Unreadable(String),
    /// Neither meta page carries bbolt's magic number.
    NotBolt,
    Intact,
}

/// What is on the volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirFacts {
    /// The guard file's content, if it exists.
    pub safe_guard: Option<String>,
    pub exists: bool,
    pub has_snap_dir: bool,
    pub has_wal_files: bool,
    pub db: DbFile,
}

/// The verdict on a data directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirStatus {
    Valid,
    /// No data directory: a new member, or its data is gone.
    NotExist,
    /// The volume was written by another namespace's member: refuse to
    /// touch it (upstream's `WrongVolumeMounted`).
    WrongVolumeMounted(String),
    Corrupt(String),
    /// The database is behind the backups (a single member with a store).
    Inconsistent {
        db_revision: i64,
        store_revision: i64,
    },
}

impl DirStatus {
    pub fn is_valid(&self) -> bool {
        *self == DirStatus::Valid
    }
}

/// The verdict on `facts` for a member of `namespace`.
pub fn check(facts: &DirFacts, namespace: &str) -> DirStatus {
    if let Some(guard) = &facts.safe_guard {
        let guard = guard.trim();
        if guard != namespace {
            return DirStatus::WrongVolumeMounted(format!(
                "the volume belongs to namespace {guard:?}, not {namespace:?}"
            ));
        }
    }
    if !facts.exists {
        return DirStatus::NotExist;
    }
    if !facts.has_snap_dir {
        return DirStatus::Corrupt("member/snap is missing".into());
    }
    if !facts.has_wal_files {
        return DirStatus::Corrupt("member/wal has no WAL files".into());
    }
    match &facts.db {
        DbFile::Intact => DirStatus::Valid,
        DbFile::Missing => DirStatus::Corrupt("member/snap/db is missing".into()),
        DbFile::Unreadable(e) => DirStatus::Corrupt(format!("member/snap/db: {e}")),
        DbFile::NotBolt => DirStatus::Corrupt("member/snap/db is not a bbolt database".into()),
    }
}

/// A single member with backups must not be behind them: its database's
/// revision below the store's means the volume is older than the backups.
pub fn check_revision(status: DirStatus, db_revision: i64, store_revision: i64) -> DirStatus {
    if status.is_valid() && db_revision < store_revision {
        DirStatus::Inconsistent {
            db_revision,
            store_revision,
        }
    } else {
        status
    }
}

/// The guard file of a data directory.
pub fn safe_guard_path(data_dir: &Path) -> PathBuf {
    data_dir.parent().unwrap_or(Path::new("/")).join(SAFE_GUARD)
}

fn bolt_meta_ok(bytes: &[u8], page_size: usize) -> bool {
    // A page header is 16 bytes (id, flags, count, overflow); the meta's
    // magic follows.
    let at = |off: usize| {
        bytes
            .get(off + 16..off + 20)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    at(0) == Some(BOLT_MAGIC) || at(page_size) == Some(BOLT_MAGIC)
}

fn db_file(path: &Path) -> DbFile {
    use std::io::Read;
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return DbFile::Missing,
        Err(e) => return DbFile::Unreadable(e.to_string()),
    };
    let mut head = vec![0u8; 2 * 65_536];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return DbFile::Unreadable(e.to_string()),
        }
    }
    head.truncate(n);
    // The second meta page is one page in; bbolt's page size is the OS
    // page size (4 KiB here), but check the sizes etcd may have used.
    if [4096, 8192, 16_384, 65_536]
        .iter()
        .any(|p| bolt_meta_ok(&head, *p))
    {
        DbFile::Intact
    } else {
        DbFile::NotBolt
    }
}

/// Gathers the facts about `data_dir` (I/O only, no verdict).
pub fn observe(data_dir: &Path) -> DirFacts {
    let wal = data_dir.join("member/wal");
    let has_wal_files = std::fs::read_dir(&wal)
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".wal"))
        })
        .unwrap_or(false);
    DirFacts {
        safe_guard: std::fs::read_to_string(safe_guard_path(data_dir)).ok(),
        exists: data_dir.is_dir(),
        has_snap_dir: data_dir.join("member/snap").is_dir(),
        has_wal_files,
        db: db_file(&data_dir.join("member/snap/db")),
    }
}

/// Writes the guard file (once a member is initialized on the volume).
pub fn write_safe_guard(data_dir: &Path, namespace: &str) -> std::io::Result<()> {
    let path = safe_guard_path(data_dir);
    if std::fs::read_to_string(&path).is_ok_and(|g| g.trim() == namespace) {
        return Ok(());
    }
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    std::fs::write(&path, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> DirFacts {
        DirFacts {
            safe_guard: Some("ns".into()),
            exists: true,
            has_snap_dir: true,
            has_wal_files: true,
            db: DbFile::Intact,
        }
    }

    #[test]
    fn scenario_21_a_guard_of_another_namespace_refuses_the_volume() {
        let facts = DirFacts {
            safe_guard: Some("other\n".into()),
            ..valid()
        };
        assert!(matches!(
            check(&facts, "ns"),
            DirStatus::WrongVolumeMounted(m) if m.contains("\"other\"")
        ));
        // Even a missing data directory is not touched on a foreign volume.
        let facts = DirFacts {
            exists: false,
            ..facts
        };
        assert!(matches!(
            check(&facts, "ns"),
            DirStatus::WrongVolumeMounted(_)
        ));
    }

    #[test]
    fn verdicts() {
        assert_eq!(check(&valid(), "ns"), DirStatus::Valid);
        let no_guard = DirFacts {
            safe_guard: None,
            ..valid()
        };
        assert_eq!(check(&no_guard, "ns"), DirStatus::Valid);
        let missing = DirFacts {
            exists: false,
            has_snap_dir: false,
            has_wal_files: false,
            db: DbFile::Missing,
            ..valid()
        };
        assert_eq!(check(&missing, "ns"), DirStatus::NotExist);
        for facts in [
            DirFacts {
                has_snap_dir: false,
                ..valid()
            },
            DirFacts {
                has_wal_files: false,
                ..valid()
            },
            DirFacts {
                db: DbFile::NotBolt,
                ..valid()
            },
            DirFacts {
                db: DbFile::Missing,
                ..valid()
            },
        ] {
            assert!(
                matches!(check(&facts, "ns"), DirStatus::Corrupt(_)),
                "{facts:?}"
            );
        }
        assert_eq!(
            check_revision(DirStatus::Valid, 5, 9),
            DirStatus::Inconsistent {
                db_revision: 5,
                store_revision: 9
            }
        );
        assert_eq!(check_revision(DirStatus::Valid, 9, 9), DirStatus::Valid);
        assert_eq!(
            check_revision(DirStatus::NotExist, 0, 9),
            DirStatus::NotExist
        );
    }

    #[test]
    fn observe_reads_the_layout_and_the_bolt_magic() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("new.etcd");
        assert!(!observe(&data).exists);
        std::fs::create_dir_all(data.join("member/snap")).unwrap();
        std::fs::create_dir_all(data.join("member/wal")).unwrap();
        std::fs::write(
            data.join("member/wal/0000000000000000-0000000000000000.wal"),
            b"",
        )
        .unwrap();
        let mut db = vec![0u8; 8192];
        db[16..20].copy_from_slice(&BOLT_MAGIC.to_le_bytes());
        std::fs::write(data.join("member/snap/db"), &db).unwrap();
        write_safe_guard(&data, "ns").unwrap();
        let facts = observe(&data);
        assert_eq!(check(&facts, "ns"), DirStatus::Valid);
        std::fs::write(data.join("member/snap/db"), b"garbage").unwrap();
        assert_eq!(observe(&data).db, DbFile::NotBolt);
    }
}
