//! The pod decisions of a simulated kubelet, as pure functions of the pod,
//! its node and the clock: what status a pod bound to the node should show,
//! whether it must be written, when a deleted pod is finished, and how its
//! persistent volumes show up in the node's status.
//!
//! The simulator runs no containers. A pod becomes `Running` with every
//! container started and ready as soon as its node is up and its volumes are
//! attached; the [`crate::faults`] annotations make it crash-loop or report
//! restarts.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PersistentVolumeSpec, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::faults::PodFaults;

/// Where a pod runs, as far as its decisions need.
#[derive(Clone, Copy, Debug)]
pub struct PodHost<'a> {
    /// The node is registered and booted and its kubelet runs: only then is
    /// anything done for its pods.
    pub running: bool,
    /// The node's `InternalIP`.
    pub host_ip: &'a str,
}

/// What to do for one pod now.
#[derive(Clone, Debug, PartialEq)]
pub enum PodPlan {
    /// The pod's status is as it should be.
    Nothing,
    /// Write this status.
    Post(Box<PodStatus>),
    /// The pod is being deleted: finish it (delete with grace period 0),
    /// as the kubelet does once its containers have stopped.
    Finalize,
}

/// Names of the PersistentVolumeClaims a pod mounts.
pub fn pvc_claims(pod: &Pod) -> Vec<String> {
    let claims: BTreeSet<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect();
    claims.into_iter().collect()
}

/// The name under which a persistent volume appears in
/// `node.status.volumesAttached` and `volumesInUse`.
///
/// CSI volumes use the kubelet's form `kubernetes.io/csi/<driver>^<handle>`;
/// host paths `kubernetes.io/host-path/<path>`. Both contain the volume ID
/// the local provider's `GetVolumeIDs` reports, which is what drain looks
/// for while it waits for a volume to detach. Any other source falls back
/// to `kubernetes.io/pv/<pv name>`.
pub fn attached_volume_name(pv_name: &str, spec: Option<&PersistentVolumeSpec>) -> String {
    if let Some(csi) = spec.and_then(|s| s.csi.as_ref()) {
        return format!("kubernetes.io/csi/{}^{}", csi.driver, csi.volume_handle);
    }
    if let Some(hp) = spec.and_then(|s| s.host_path.as_ref()) {
        return format!("kubernetes.io/host-path/{}", hp.path);
    }
    format!("kubernetes.io/pv/{pv_name}")
}

/// 64-bit FNV-1a: a stable hash for made-up addresses and IDs (the standard
/// library's hasher is randomly seeded per process).
pub(crate) fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A pod IP derived from the pod's UID, in 10.64.0.0/10, so that the same
/// pod always gets the same address without any allocation state.
pub fn pod_ip(uid: &str) -> String {
    let h = fnv(uid);
    format!(
        "10.{}.{}.{}",
        64 + (h % 64),
        (h >> 8) & 0xff,
        1 + ((h >> 16) % 254)
    )
}

/// The comparable part of a container status: everything but timestamps
/// and IDs.
#[derive(Debug, PartialEq)]
struct ContainerSig {
    name: String,
    state: &'static str,
    reason: Option<String>,
    ready: bool,
    started: Option<bool>,
    restarts: i32,
}

/// The comparable part of a pod status.
#[derive(Debug, PartialEq)]
struct StatusSig {
    phase: Option<String>,
    pod_ip: Option<String>,
    host_ip: Option<String>,
    conditions: BTreeSet<(String, String)>,
    containers: Vec<ContainerSig>,
    init_containers: Vec<ContainerSig>,
}

fn state_sig(s: Option<&ContainerState>) -> (&'static str, Option<String>) {
    match s {
        Some(ContainerState {
            running: Some(_), ..
        }) => ("running", None),
        Some(ContainerState {
            terminated: Some(t),
            ..
        }) => ("terminated", t.reason.clone()),
        Some(ContainerState {
            waiting: Some(w), ..
        }) => ("waiting", w.reason.clone()),
        _ => ("none", None),
    }
}

fn container_sigs(list: Option<&Vec<ContainerStatus>>) -> Vec<ContainerSig> {
    list.into_iter()
        .flatten()
        .map(|c| {
            let (state, reason) = state_sig(c.state.as_ref());
            ContainerSig {
                name: c.name.clone(),
                state,
                reason,
                ready: c.ready,
                started: c.started,
                restarts: c.restart_count,
            }
        })
        .collect()
}

fn signature(s: Option<&PodStatus>) -> StatusSig {
    let Some(s) = s else {
        return StatusSig {
            phase: None,
            pod_ip: None,
            host_ip: None,
            conditions: BTreeSet::new(),
            containers: Vec::new(),
            init_containers: Vec::new(),
        };
    };
    StatusSig {
        phase: s.phase.clone(),
        pod_ip: s.pod_ip.clone(),
        host_ip: s.host_ip.clone(),
        conditions: s
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect(),
        containers: container_sigs(s.container_statuses.as_ref()),
        init_containers: container_sigs(s.init_container_statuses.as_ref()),
    }
}

/// How the pod's main containers are doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Health {
    /// Waiting for volumes: `ContainerCreating`.
    Creating,
    /// Running and ready.
    Running,
    /// Crash-looping (restart policy allows restarts).
    CrashLooping,
    /// Crashed for good (`restartPolicy: Never`).
    Failed,
}

/// The status a pod on `host` should show now. Timestamps and restart
/// counts carry over from the pod's current status where the state did not
/// change, so that computing it twice gives the same answer.
pub fn desired_pod_status(
    pod: &Pod,
    host: &PodHost<'_>,
    volumes_ready: bool,
    now: Timestamp,
) -> PodStatus {
    let faults = PodFaults::from_annotations(pod.metadata.annotations.as_ref());
    let spec = pod.spec.clone().unwrap_or_default();
    let current = pod.status.as_ref();
    let never_restart = spec.restart_policy.as_deref() == Some("Never");
    let health = match (volumes_ready, faults.crash, never_restart) {
        (false, _, _) => Health::Creating,
        (true, false, _) => Health::Running,
        (true, true, false) => Health::CrashLooping,
        (true, true, true) => Health::Failed,
    };
    let now_t = Time(now);
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();

    let current_container = |name: &str| {
        current
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|l| l.iter().find(|c| c.name == name))
    };
    let containers: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| {
            let cur = current_container(&c.name);
            let cur_restarts = cur.map_or(0, |s| s.restart_count);
            let cur_state = state_sig(cur.and_then(|s| s.state.as_ref()));
            let cur_started_at = cur
                .and_then(|s| s.state.as_ref())
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.clone());
            let crashed_state = || ContainerStateTerminated {
                exit_code: 1,
                reason: Some("Error".to_string()),
                started_at: Some(now_t.clone()),
                finished_at: Some(now_t.clone()),
                ..ContainerStateTerminated::default()
            };
            // A crash counts as one restart when it starts; while it goes on
            // the count stays, so the decision is stable between ticks.
            let already = |state: (&str, Option<String>), reason: &str| {
                state.0 != "none" && state.1.as_deref() == Some(reason)
            };
            let (state, last_state, ready, restarts) = match health {
                Health::Creating => (
                    ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some("ContainerCreating".to_string()),
                            message: None,
                        }),
                        ..ContainerState::default()
                    },
                    None,
                    false,
                    cur_restarts,
                ),
                Health::Running => (
                    ContainerState {
                        running: Some(ContainerStateRunning {
                            started_at: Some(cur_started_at.unwrap_or_else(|| now_t.clone())),
                        }),
                        ..ContainerState::default()
                    },
                    cur.and_then(|s| s.last_state.clone()),
                    true,
                    cur_restarts,
                ),
                Health::CrashLooping => {
                    let crashing = already(cur_state, "CrashLoopBackOff");
                    (
                        ContainerState {
                            waiting: Some(ContainerStateWaiting {
                                reason: Some("CrashLoopBackOff".to_string()),
                                message: Some(format!(
                                    "back-off 10s restarting failed container={} pod={pod_name}",
                                    c.name
                                )),
                            }),
                            ..ContainerState::default()
                        },
                        if crashing {
                            cur.and_then(|s| s.last_state.clone())
                        } else {
                            Some(ContainerState {
                                terminated: Some(crashed_state()),
                                ..ContainerState::default()
                            })
                        },
                        false,
                        if crashing {
                            cur_restarts
                        } else {
                            cur_restarts + 1
                        },
                    )
                }
                Health::Failed => (
                    if already(cur_state, "Error") {
                        cur.and_then(|s| s.state.clone()).unwrap_or_default()
                    } else {
                        ContainerState {
                            terminated: Some(crashed_state()),
                            ..ContainerState::default()
                        }
                    },
                    None,
                    false,
                    cur_restarts,
                ),
            };
            ContainerStatus {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                image_id: format!("sim://{}", c.image.as_deref().unwrap_or_default()),
                container_id: (health != Health::Creating).then(|| {
                    format!(
                        "sim://{:016x}",
                        crate::pods::fnv(&format!("{uid}/{}", c.name))
                    )
                }),
                ready,
                started: Some(health == Health::Running),
                restart_count: restarts.max(faults.restarts),
                state: Some(state),
                last_state,
                ..ContainerStatus::default()
            }
        })
        .collect();

    let init_containers: Option<Vec<ContainerStatus>> = spec.init_containers.as_ref().map(|l| {
        l.iter()
            .map(|c| ContainerStatus {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                image_id: format!("sim://{}", c.image.as_deref().unwrap_or_default()),
                ready: health != Health::Creating,
                started: Some(false),
                state: Some(if health == Health::Creating {
                    ContainerState {
                        waiting: Some(ContainerStateWaiting {
                            reason: Some("PodInitializing".to_string()),
                            message: None,
                        }),
                        ..ContainerState::default()
                    }
                } else {
                    ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: 0,
                            reason: Some("Completed".to_string()),
                            ..ContainerStateTerminated::default()
                        }),
                        ..ContainerState::default()
                    }
                }),
                ..ContainerStatus::default()
            })
            .collect()
    });

    let all_ready = health == Health::Running;
    let started = health != Health::Creating;
    let cond = |type_: &str, ok: bool| {
        let status = if ok { "True" } else { "False" };
        let last_transition = current
            .and_then(|s| s.conditions.as_ref())
            .and_then(|l| l.iter().find(|c| c.type_ == type_))
            .filter(|c| c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| now_t.clone());
        PodCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            last_transition_time: Some(last_transition),
            reason: (!ok && matches!(type_, "Ready" | "ContainersReady"))
                .then(|| "ContainersNotReady".to_string()),
            ..PodCondition::default()
        }
    };
    let conditions = vec![
        cond("PodReadyToStartContainers", started),
        cond("Initialized", started),
        cond("Ready", all_ready),
        cond("ContainersReady", all_ready),
        cond("PodScheduled", true),
    ];

    let pod_ip = started.then(|| {
        if spec.host_network == Some(true) {
            host.host_ip.to_string()
        } else {
            pod_ip(uid)
        }
    });
    PodStatus {
        phase: Some(
            match health {
                Health::Creating => "Pending",
                Health::Running | Health::CrashLooping => "Running",
                Health::Failed => "Failed",
            }
            .to_string(),
        ),
        conditions: Some(conditions),
        host_ip: (!host.host_ip.is_empty()).then(|| host.host_ip.to_string()),
        host_ips: (!host.host_ip.is_empty()).then(|| {
            vec![HostIP {
                ip: host.host_ip.to_string(),
            }]
        }),
        pod_ips: pod_ip.clone().map(|ip| vec![PodIP { ip }]),
        pod_ip,
        start_time: Some(
            current
                .and_then(|s| s.start_time.clone())
                .unwrap_or_else(|| now_t.clone()),
        ),
        container_statuses: Some(containers),
        init_container_statuses: init_containers,
        ..PodStatus::default()
    }
}

/// What to do for a pod bound to a simulated node now.
///
/// Nothing happens on a node that is not up (booting, kubelet stopped, VM
/// gone): there is no kubelet to do it. A pod with a `deletionTimestamp` is
/// finished; a pod that has terminated is left alone; otherwise the status
/// is written when its comparable part differs from [`desired_pod_status`].
pub fn plan_pod(pod: &Pod, host: &PodHost<'_>, volumes_ready: bool, now: Timestamp) -> PodPlan {
    if !host.running {
        return PodPlan::Nothing;
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return PodPlan::Finalize;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return PodPlan::Nothing;
    }
    let desired = desired_pod_status(pod, host, volumes_ready, now);
    if signature(Some(&desired)) == signature(pod.status.as_ref()) {
        PodPlan::Nothing
    } else {
        PodPlan::Post(Box::new(desired))
    }
}

#[cfg(test)]
mod tests;
