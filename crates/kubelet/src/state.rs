//! The runtime's state directory and the records in it, shared by the
//! shim that writes them and the kubelet that reads them.
//!
//! ```text
//! DATA_DIR/kubelet/
//!   pods/<pod uid>/
//!     pod.json                      namespace, name, uid, pod IP
//!     hosts                         the pod's /etc/hosts
//!     volumes/<kind>/<name>/        emptyDir, configMap, secret, downwardAPI
//!     containers/<name>/
//!       backoff.json                the crash-loop back-off
//!       <attempt>/                  one run of the container (0, 1, …)
//!         spec.json                 what to run (the kubelet writes it)
//!         lock                      held by the shim for as long as it lives
//!         shim.json                 the shim's pid and start time
//!         started.json              when the process started, its init's pid
//!         exit.json                 how it ended
//!         container.log             stdout and stderr, CRI format
//!         rootfs/                   mount point of the container's root
//!   volumes/pvc/<claim uid>/        PersistentVolumeClaims (outlive pods)
//! ```
//!
//! Whether an attempt still runs is decided by its lock, never by a pid
//! alone: the kubelet takes the lock before it writes `spec.json` and hands
//! it to the shim it spawns, so from the first byte on disk until the shim
//! (and the container's init, which inherits it) has exited, the lock is
//! held. A pid is signalled only when the lock is held and the pid's start
//! time in `/proc` matches the record: a recycled pid is never ours.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, de::DeserializeOwned};

pub const SPEC: &str = "spec.json";
pub const LOCK: &str = "lock";
pub const SHIM: &str = "shim.json";
pub const STARTED: &str = "started.json";
pub const EXIT: &str = "exit.json";
pub const LOG: &str = "container.log";
pub const ROOTFS: &str = "rootfs";
pub const BACKOFF: &str = "backoff.json";
pub const POD: &str = "pod.json";

/// A process we started, identified beyond its pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat`: clock ticks after boot.
    pub start_time: u64,
}

impl ProcessId {
    /// This process.
    pub fn current() -> Option<ProcessId> {
        let pid = std::process::id() as i32;
        Some(ProcessId {
            pid,
            start_time: start_time(pid)?,
        })
    }

    /// `pid`, if it runs.
    pub fn of(pid: i32) -> Option<ProcessId> {
        Some(ProcessId {
            pid,
            start_time: start_time(pid)?,
        })
    }

    /// Whether this exact process still exists.
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start_time)
    }
}

/// The start time of `pid` from `/proc/<pid>/stat`.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Field 22 of a `stat` line; the command (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the command: state is field 3, so start time is the 20th here.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// When the container process started, and its init (pid 1 of the
/// container's namespaces, as the host sees it: `kubectl exec` and exec
/// probes join its namespaces).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Started {
    pub started_ms: u64,
    pub init: ProcessId,
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exited {
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub reason: String,
    pub message: Option<String>,
    pub started_ms: Option<u64>,
    pub finished_ms: u64,
}

/// A pod's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub ip: String,
}

/// A bind mount of the container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// On the host (under the data dir, or a hostPath).
    pub source: PathBuf,
    /// Inside the container.
    pub target: String,
    pub read_only: bool,
}

/// What the shim runs: written by the kubelet as `spec.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    pub hostname: String,
    pub mounts: Vec<Mount>,
    /// Host paths hidden inside the container (the data dir: other pods'
    /// volumes and the cluster's keys are not a pod's business).
    pub mask: Vec<PathBuf>,
    /// The hash of the container definition this was made from.
    pub spec_hash: u64,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Writes `value` as JSON to `dir/name` atomically (temporary file, then
/// rename), so a reader never sees half a record.
pub fn write_json<T: Serialize>(dir: &Path, name: &str, value: &T) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(&serde_json::to_vec(value).map_err(std::io::Error::other)?)?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name))
}

/// Reads `dir/name`; `None` if it is missing or unreadable.
pub fn read_json<T: DeserializeOwned>(dir: &Path, name: &str) -> Option<T> {
    let bytes = std::fs::read(dir.join(name)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether somebody holds the lock file at `path`.
pub fn lock_held(path: &Path) -> bool {
    let Ok(f) = File::open(path) else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; no memory is involved.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    // Taken at once means free; our shared lock goes with `f`.
    r != 0
}

/// Creates and locks `path`; the lock lasts while the returned file (or a
/// copy of its descriptor in a child) is open.
pub fn take_lock(path: &Path) -> std::io::Result<File> {
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    // SAFETY: as above.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(f)
}

/// The directories of one data dir.
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn new(data_dir: &Path) -> Layout {
        Layout {
            root: data_dir.join("kubelet"),
        }
    }

    pub fn pods(&self) -> PathBuf {
        self.root.join("pods")
    }

    pub fn pod(&self, uid: &str) -> PathBuf {
        self.pods().join(uid)
    }

    pub fn container(&self, uid: &str, name: &str) -> PathBuf {
        self.pod(uid).join("containers").join(name)
    }

    pub fn attempt(&self, uid: &str, name: &str, index: u32) -> PathBuf {
        self.container(uid, name).join(index.to_string())
    }

    pub fn pod_volume(&self, uid: &str, kind: &str, name: &str) -> PathBuf {
        self.pod(uid).join("volumes").join(kind).join(name)
    }

    pub fn claims(&self) -> PathBuf {
        self.root.join("volumes").join("pvc")
    }

    pub fn claim(&self, claim_uid: &str) -> PathBuf {
        self.claims().join(claim_uid)
    }

    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }
}

/// The attempt indices of a container directory, ascending.
pub fn attempts(container_dir: &Path) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(container_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// Names of the subdirectories of `dir`.
pub fn subdirs(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_survives_odd_command_names() {
        let stat =
            "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(stat), Some(987654));
        assert_eq!(parse_start_time("garbage"), None);
        assert_eq!(parse_start_time("1 (x) S 1"), None);
        let me = ProcessId::current().unwrap();
        assert!(me.alive());
        let other = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!other.alive(), "same pid, other start time: not ours");
    }

    #[test]
    fn locks_tell_whether_an_attempt_lives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK);
        assert!(!lock_held(&path), "no file, no holder");
        let held = take_lock(&path).unwrap();
        assert!(lock_held(&path));
        assert!(take_lock(&path).is_err(), "exclusive");
        drop(held);
        assert!(!lock_held(&path));
        write_json(
            dir.path(),
            "x.json",
            &PodRecord {
                namespace: "n".into(),
                name: "p".into(),
                uid: "u".into(),
                ip: "127.1.0.1".into(),
            },
        )
        .unwrap();
        let back: PodRecord = read_json(dir.path(), "x.json").unwrap();
        assert_eq!(back.ip, "127.1.0.1");
        assert!(read_json::<PodRecord>(dir.path(), "missing.json").is_none());
    }
}
