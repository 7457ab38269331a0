//! What the tests of `trellis up`'s pods share: the process kubelet's
//! shims killed whatever happens, kubectl get/apply as JSON, and the
//! etcd processes the etcd-druid tests stop and resume.

use std::path::Path;

use serde_json::Value;

use super::{kubectl, stdout};

/// Kills every shim of a data dir when dropped, whatever happened.
pub struct Shims<'a>(pub &'a Path);

impl Drop for Shims<'_> {
    fn drop(&mut self) {
        kubelet::runtime::kill_all(self.0);
    }
}

/// `kubectl get ARGS -o json`, `Null` when it fails (e.g. not found).
pub fn get(kc: &Path, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let out = kubectl(kc, &all);
    serde_json::from_str(&stdout(&out)).unwrap_or(Value::Null)
}

/// Writes `yaml` to `dir/file` and applies it; panics with kubectl's error.
pub fn apply(kc: &Path, dir: &Path, file: &str, yaml: &str) {
    let path = dir.join(file);
    std::fs::write(&path, yaml).unwrap();
    let out = kubectl(kc, &["apply", "-f", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "kubectl apply {file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether the tools of the etcd tests are here: kubectl, Debian's etcd
/// (installed when missing) and etcdctl; says SKIPPED and why when not.
pub fn etcd_tools() -> bool {
    if !super::have("kubectl") {
        eprintln!("SKIPPED: kubectl is not installed");
        return false;
    }
    if let Err(e) = etcdv3::testing::etcd_binary() {
        eprintln!("SKIPPED: etcd cannot be installed: {e}");
        return false;
    }
    if !super::have("etcdctl") {
        eprintln!("SKIPPED: etcdctl (Debian's etcd-client) is not installed");
        return false;
    }
    true
}

/// Whether a process's command line starts like the wrapper's etcd.
fn is_etcd(cmdline: &[u8]) -> bool {
    String::from_utf8_lossy(cmdline).starts_with("etcd\0--config-file=")
}

/// The etcd processes the etcd-wrapper started (its config file is in the
/// pod's /tmp).
pub fn etcd_processes() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| is_etcd(&std::fs::read(e.path().join("cmdline")).unwrap_or_default()))
        .count()
}

/// The etcd process of pod `pod` (the kubelet sets its HOSTNAME).
pub fn etcd_process_of(pod: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        if !is_etcd(&std::fs::read(e.path().join("cmdline")).ok()?) {
            return None;
        }
        let env = std::fs::read(e.path().join("environ")).ok()?;
        let want = format!("HOSTNAME={pod}");
        env.split(|b| *b == 0)
            .any(|v| v == want.as_bytes())
            .then_some(pid)
    })
}

/// Sends `sig` (e.g. `-STOP`) to `pid` with kill(1).
pub fn signal(sig: &str, pid: i32) -> bool {
    std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// Continues a stopped process when dropped, whatever happened.
pub struct Resume(pub i32);

impl Drop for Resume {
    fn drop(&mut self) {
        signal("-CONT", self.0);
    }
}
