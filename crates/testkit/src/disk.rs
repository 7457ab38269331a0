//! A really full disk: a small tmpfs, for tests of what happens when writes
//! fail for want of space.

use std::path::Path;
use std::process::Command;

/// A mounted tmpfs, unmounted on drop.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`2m`, `48m`) on a fresh directory. Mounting
    /// needs root or CAP_SYS_ADMIN (we have both here and in CI); where it is
    /// not permitted this says why on stderr and returns `None`, and the
    /// test skips.
    pub fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount: {e}");
                None
            }
        }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Still busy (a thread of a dropped store or server finishing):
            // detach it.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}
