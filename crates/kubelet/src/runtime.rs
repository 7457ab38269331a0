//! The thin executor over the state directory and the shims: start an
//! attempt, read what every attempt is doing, signal one, wait for one to
//! end, and clean up. Everything it knows survives a trellis crash,
//! because it is all on disk ([`crate::state`]).
//!
//! It only ever signals a shim whose attempt lock is held and whose pid
//! still has the start time recorded in `shim.json`: processes that are
//! not provably ours are never touched.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backoff::Backoff;
use crate::state::{self, Exited, LaunchSpec, Layout, ProcessId, Started};
use crate::view::{Attempt, AttemptState, ContainerRuntime, Exit};

/// Attempts kept per container: the current one and the one before it
/// (`kubectl logs --previous`).
const KEPT_ATTEMPTS: usize = 2;

/// The process runtime of one data dir.
#[derive(Clone, Debug)]
pub struct Runtime {
    pub layout: Layout,
    /// The shim command: a program and its leading arguments, to which
    /// `run DIR` is appended.
    shim: Vec<OsString>,
}

/// How hard to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM to the container's process.
    Term,
    /// SIGKILL to the container's whole pid namespace.
    Kill,
}

/// A live attempt found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Live {
    pub pod_uid: String,
    pub container: String,
    pub index: u32,
    pub shim: Option<ProcessId>,
}

impl Runtime {
    pub fn new(data_dir: &Path, shim: Vec<OsString>) -> Runtime {
        Runtime {
            layout: Layout::new(data_dir),
            shim,
        }
    }

    /// Starts attempt `index` of a container. The lock is taken before
    /// anything is written and passed to the shim, so the attempt counts
    /// as alive from its first file on.
    pub fn start(
        &self,
        uid: &str,
        name: &str,
        index: u32,
        spec: &LaunchSpec,
    ) -> std::io::Result<ProcessId> {
        let dir = self.layout.attempt(uid, name, index);
        std::fs::create_dir_all(&dir)?;
        let lock = state::take_lock(&dir.join(state::LOCK))?;
        state::write_json(&dir, state::SPEC, spec)?;
        let (program, args) = self
            .shim
            .split_first()
            .ok_or_else(|| std::io::Error::other("no shim command configured"))?;
        let mut cmd = std::process::Command::new(program);
        cmd.args(args)
            .arg("run")
            .arg(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("shim.log"))?);
        let lock_fd = lock.as_raw_fd();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Its own session: a Ctrl-C or a kill of trellis's process
                // group does not reach it.
                libc::setsid();
                // dup2 onto itself would keep close-on-exec set.
                let handed = if lock_fd == crate::shim::LOCK_FD {
                    libc::fcntl(lock_fd, libc::F_SETFD, 0)
                } else {
                    libc::dup2(lock_fd, crate::shim::LOCK_FD)
                };
                if handed < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let pid = child.id() as i32;
        // The shim runs on its own; a thread reaps it so it leaves no
        // zombie behind while trellis runs.
        std::thread::spawn(move || {
            let mut child = child;
            let _ = child.wait();
        });
        drop(lock);
        ProcessId::of(pid).ok_or_else(|| std::io::Error::other("the shim exited at once"))
    }

    /// What one attempt is doing.
    pub fn attempt(&self, uid: &str, name: &str, index: u32) -> Attempt {
        let dir = self.layout.attempt(uid, name, index);
        let spec_hash =
            state::read_json::<LaunchSpec>(&dir, state::SPEC).map_or(0, |s| s.spec_hash);
        let started: Option<Started> = state::read_json(&dir, state::STARTED);
        let state = if let Some(e) = state::read_json::<Exited>(&dir, state::EXIT) {
            AttemptState::Exited(Exit {
                exit_code: e.exit_code,
                signal: e.signal,
                reason: e.reason,
                message: e.message,
                started_ms: e.started_ms,
                finished_ms: e.finished_ms,
            })
        } else if state::lock_held(&dir.join(state::LOCK)) {
            match started {
                Some(s) => AttemptState::Running {
                    started_ms: s.started_ms,
                },
                None => AttemptState::Starting,
            }
        } else {
            // The shim is gone without a record (killed with SIGKILL): its
            // init died with it, and so did the container.
            let finished_ms = std::fs::metadata(dir.join(state::LOG))
                .or_else(|_| std::fs::metadata(&dir))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or_else(state::now_ms, |d| d.as_millis() as u64);
            AttemptState::Exited(Exit {
                exit_code: 137,
                signal: None,
                reason: "ContainerStatusUnknown".into(),
                message: Some("The container's supervisor ended without recording an exit".into()),
                started_ms: started.map(|s| s.started_ms),
                finished_ms,
            })
        };
        Attempt {
            index,
            state,
            spec_hash,
        }
    }

    /// A container's current and previous attempts and its back-off.
    pub fn container(&self, uid: &str, name: &str) -> ContainerRuntime {
        let dir = self.layout.container(uid, name);
        let indices = state::attempts(&dir);
        let mut last = indices.iter().rev();
        let current = last.next().map(|i| self.attempt(uid, name, *i));
        let previous = last.next().map(|i| self.attempt(uid, name, *i));
        ContainerRuntime {
            current,
            previous,
            backoff: state::read_json(&dir, state::BACKOFF).unwrap_or_default(),
        }
    }

    pub fn save_backoff(&self, uid: &str, name: &str, b: &Backoff) -> std::io::Result<()> {
        let dir = self.layout.container(uid, name);
        std::fs::create_dir_all(&dir)?;
        state::write_json(&dir, state::BACKOFF, b)
    }

    /// The shim of an attempt, if it provably still runs.
    pub fn shim_of(&self, uid: &str, name: &str, index: u32) -> Option<ProcessId> {
        let dir = self.layout.attempt(uid, name, index);
        if !state::lock_held(&dir.join(state::LOCK)) {
            return None;
        }
        let id: ProcessId = state::read_json(&dir, state::SHIM)?;
        id.alive().then_some(id)
    }

    /// The container's init (for exec), if the attempt runs.
    pub fn init_of(&self, uid: &str, name: &str, index: u32) -> Option<ProcessId> {
        let dir = self.layout.attempt(uid, name, index);
        if !state::lock_held(&dir.join(state::LOCK)) || dir.join(state::EXIT).exists() {
            return None;
        }
        let s: Started = state::read_json(&dir, state::STARTED)?;
        s.init.alive().then_some(s.init)
    }

    /// Asks an attempt to stop; false if it does not run (any more).
    pub fn stop(&self, uid: &str, name: &str, index: u32, how: Stop) -> bool {
        let Some(shim) = self.shim_of(uid, name, index) else {
            return false;
        };
        let sig = match how {
            Stop::Term => libc::SIGTERM,
            Stop::Kill => libc::SIGUSR1,
        };
        // SAFETY: signalling a process proven ours just above.
        unsafe { libc::kill(shim.pid, sig) == 0 }
    }

    /// The last resort for a shim that does not react: SIGKILL (its init
    /// and the container die with it).
    pub fn kill_shim(&self, uid: &str, name: &str, index: u32) -> bool {
        let Some(shim) = self.shim_of(uid, name, index) else {
            return false;
        };
        // SAFETY: as in `stop`.
        unsafe { libc::kill(shim.pid, libc::SIGKILL) == 0 }
    }

    /// Every attempt on disk whose lock is held.
    pub fn live(&self) -> Vec<Live> {
        let mut out = Vec::new();
        for uid in state::subdirs(&self.layout.pods()) {
            let containers = self.layout.pod(&uid).join("containers");
            for name in state::subdirs(&containers) {
                for index in state::attempts(&containers.join(&name)) {
                    let dir = self.layout.attempt(&uid, &name, index);
                    if state::lock_held(&dir.join(state::LOCK)) {
                        out.push(Live {
                            pod_uid: uid.clone(),
                            container: name.clone(),
                            index,
                            shim: self.shim_of(&uid, &name, index),
                        });
                    }
                }
            }
        }
        out
    }

    /// Removes attempts older than the ones kept, if they do not run.
    pub fn prune(&self, uid: &str, name: &str) {
        let dir = self.layout.container(uid, name);
        let indices = state::attempts(&dir);
        let old = indices.len().saturating_sub(KEPT_ATTEMPTS);
        for i in &indices[..old] {
            let a = self.layout.attempt(uid, name, *i);
            if !state::lock_held(&a.join(state::LOCK)) {
                let _ = std::fs::remove_dir_all(a);
            }
        }
    }

    /// Removes a pod's directory once nothing of it runs; false if
    /// something still does.
    pub fn remove_pod(&self, uid: &str) -> bool {
        if self.live().iter().any(|l| l.pod_uid == uid) {
            return false;
        }
        let _ = std::fs::remove_dir_all(self.layout.pod(uid));
        true
    }

    /// The pod directories on disk.
    pub fn pod_uids(&self) -> Vec<String> {
        state::subdirs(&self.layout.pods())
    }

    /// The log of an attempt.
    pub fn log_path(&self, uid: &str, name: &str, index: u32) -> PathBuf {
        self.layout.attempt(uid, name, index).join(state::LOG)
    }
}

/// Resolves when process `id` has exited (or was never ours), without
/// being its parent: a pidfd becomes readable when the process ends.
pub async fn exited(id: ProcessId) {
    // SAFETY: pidfd_open returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, id.pid, 0) };
    if fd < 0 {
        return;
    }
    // SAFETY: the descriptor was just returned to us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // The pid may have been recycled between reading the record and
    // opening the pidfd: check the identity now that the pidfd pins it.
    if !id.alive() {
        return;
    }
    // SAFETY: the OwnedFd is moved in and stays open as long as the AsyncFd.
    let registered = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    };
    match registered {
        Ok(afd) => {
            let _ = afd.readable().await;
        }
        Err(_) => {
            while id.alive() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// SIGKILL to every live shim of a data dir: for tests' cleanup and for
/// `trellis` tooling. Only shims proven ours (lock held, start time
/// matching) are signalled.
pub fn kill_all(data_dir: &Path) -> usize {
    let rt = Runtime::new(data_dir, Vec::new());
    let mut n = 0;
    for l in rt.live() {
        if rt.kill_shim(&l.pod_uid, &l.container, l.index) {
            n += 1;
        }
    }
    // Wait briefly until their locks are free, so the caller may delete
    // the directory.
    for _ in 0..100 {
        if rt.live().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    n
}
