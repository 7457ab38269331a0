//! What the runtime knows of a pod's containers, as the planner sees it:
//! each container's current and previous attempt (an attempt is one run of
//! the container's process; its index is the restart count it started
//! with), the back-off record, and the probe results of the current
//! attempt. Built by the executor from the state directory; plain data.

use std::collections::BTreeMap;

use crate::backoff::Backoff;

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    pub exit_code: i32,
    /// The signal that ended the process, if one did.
    pub signal: Option<i32>,
    /// `Completed`, `Error`, `StartError`, `OOMKilled` or `Unknown`.
    pub reason: String,
    pub message: Option<String>,
    /// When the process started; `None` if it never did.
    pub started_ms: Option<u64>,
    pub finished_ms: u64,
}

/// The state of one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptState {
    /// The supervisor runs, the process has not started yet.
    Starting,
    Running {
        started_ms: u64,
    },
    Exited(Exit),
}

/// One run of a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub index: u32,
    pub state: AttemptState,
    /// The hash of the container definition it was started from.
    pub spec_hash: u64,
}

impl Attempt {
    pub fn alive(&self) -> bool {
        !matches!(self.state, AttemptState::Exited(_))
    }
}

/// A container's attempts and back-off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerRuntime {
    pub current: Option<Attempt>,
    pub previous: Option<Attempt>,
    pub backoff: Backoff,
}

/// The probe results of a container's current attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeView {
    /// The readiness probe succeeded last (or there is none).
    pub ready: bool,
    /// The startup probe succeeded (or there is none).
    pub started: bool,
    /// The liveness (or startup) probe failed its threshold.
    pub failed: bool,
}

/// Why a container cannot start: a waiting reason and message, as kube
/// shows them (`ErrImagePull`, `CreateContainerConfigError`,
/// `ContainerCreating`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub reason: String,
    pub message: String,
}

/// Everything the planner reads about one pod besides the Pod itself.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub containers: BTreeMap<String, ContainerRuntime>,
    pub probes: BTreeMap<String, ProbeView>,
    pub blocked: BTreeMap<String, Blocked>,
    /// The hash of each container's current definition.
    pub spec_hashes: BTreeMap<String, u64>,
    /// The pod IP, once its sandbox (IP, directories, volumes) is made.
    pub pod_ip: Option<String>,
    pub host_ip: String,
    /// The pod disappeared from the API (force-deleted): stop it.
    pub gone: bool,
}
