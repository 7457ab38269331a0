//! Fault injection through the API: the annotation keys the simulator reads
//! from Nodes and Pods, and their parsed form.
//!
//! Faults are ordinary annotations so that a test, a script or a person with
//! `kubectl annotate` can break a simulated machine the same way, on the
//! embedded API server or on a real cluster, with no side channel.
//!
//! On a **Node** (the simulator reads them from its node watch):
//!
//! | key | value | effect |
//! |---|---|---|
//! | [`KUBELET`] | `stopped` | the kubelet stops: no lease renewals, no status posts, pods frozen; after the grace period the simulator, standing in for the node-lifecycle controller, sets `Ready` and the pressure conditions to `Unknown` (reason `NodeStatusUnknown`). Removing the annotation restarts the kubelet. |
//! | [`READY`] | `false` | `Ready=False` (reason `KubeletNotReady`), lease still renewed |
//! | [`CONDITIONS`] | `DiskPressure,KernelDeadlock,...` | those condition types `True`; types other than the kubelet's own stay reported `False` once the fault is cleared, as node-problem-detector does |
//! | [`VANISH`] | `true` | the VM vanishes: the kubelet stops for good and the simulator tells its subscribers ([`crate::NodeSimulator::subscribe_vanished`]) so a provider can drop the VM record |
//!
//! A slow boot is not an annotation (the Node does not exist yet while the
//! VM boots): it is [`crate::NodeSpec::boot_delay`].
//!
//! On a **Pod** bound to a simulated node:
//!
//! | key | value | effect |
//! |---|---|---|
//! | [`CRASH`] | `true` | every container crash-loops: `Waiting` with reason `CrashLoopBackOff`, last state `Terminated` (exit code 1), restart count +1, pod not ready; with `restartPolicy: Never` the pod fails instead |
//! | [`RESTARTS`] | a number | every container reports at least that many restarts |

use std::collections::{BTreeMap, BTreeSet};

/// Node annotation: `stopped` stops the kubelet.
pub const KUBELET: &str = "nodesim.trellis.dev/kubelet";
/// The value of [`KUBELET`] that stops the kubelet.
pub const KUBELET_STOPPED: &str = "stopped";
/// Node annotation: `false` makes the node report `Ready=False`.
pub const READY: &str = "nodesim.trellis.dev/ready";
/// Node annotation: comma-separated condition types to report `True`.
pub const CONDITIONS: &str = "nodesim.trellis.dev/conditions";
/// Node annotation: `true` makes the VM vanish.
pub const VANISH: &str = "nodesim.trellis.dev/vanish";
/// Pod annotation: `true` makes the pod's containers crash-loop.
pub const CRASH: &str = "nodesim.trellis.dev/crash";
/// Pod annotation: the restart count every container reports at least.
pub const RESTARTS: &str = "nodesim.trellis.dev/restarts";

/// The faults set on one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFaults {
    /// [`KUBELET`] is `stopped`.
    pub kubelet_stopped: bool,
    /// [`READY`] is `false`.
    pub not_ready: bool,
    /// Condition types from [`CONDITIONS`] to report `True`. `Ready` is
    /// never among them: readiness has its own key, so that one annotation
    /// cannot make a node both ready and not ready.
    pub conditions: BTreeSet<String>,
    /// [`VANISH`] is `true`.
    pub vanish: bool,
}

impl NodeFaults {
    /// Reads the faults from a node's annotations. Unknown values count as
    /// "no fault", so a typo never breaks a node by accident.
    pub fn from_annotations(annotations: Option<&BTreeMap<String, String>>) -> NodeFaults {
        let Some(a) = annotations else {
            return NodeFaults::default();
        };
        let get = |k: &str| a.get(k).map(|v| v.trim());
        NodeFaults {
            kubelet_stopped: get(KUBELET).is_some_and(|v| v.eq_ignore_ascii_case(KUBELET_STOPPED)),
            not_ready: get(READY).is_some_and(|v| v.eq_ignore_ascii_case("false")),
            conditions: get(CONDITIONS)
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty() && *t != "Ready")
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            vanish: get(VANISH).is_some_and(|v| v.eq_ignore_ascii_case("true")),
        }
    }
}

/// The faults set on one pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFaults {
    /// [`CRASH`] is `true`.
    pub crash: bool,
    /// [`RESTARTS`], or 0 when absent or not a non-negative number.
    pub restarts: i32,
}

impl PodFaults {
    /// Reads the faults from a pod's annotations.
    pub fn from_annotations(annotations: Option<&BTreeMap<String, String>>) -> PodFaults {
        let Some(a) = annotations else {
            return PodFaults::default();
        };
        PodFaults {
            crash: a
                .get(CRASH)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            restarts: a
                .get(RESTARTS)
                .and_then(|v| v.trim().parse::<i32>().ok())
                .filter(|n| *n >= 0)
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn node_faults_from_annotations() {
        let cases: &[(&[(&str, &str)], NodeFaults)] = &[
            (&[], NodeFaults::default()),
            (
                &[(KUBELET, "stopped")],
                NodeFaults {
                    kubelet_stopped: true,
                    ..NodeFaults::default()
                },
            ),
            (&[(KUBELET, "running")], NodeFaults::default()),
            (
                &[(READY, "False")],
                NodeFaults {
                    not_ready: true,
                    ..NodeFaults::default()
                },
            ),
            (&[(READY, "true")], NodeFaults::default()),
            (
                &[(CONDITIONS, " DiskPressure, KernelDeadlock,,Ready ")],
                NodeFaults {
                    conditions: ["DiskPressure", "KernelDeadlock"].map(String::from).into(),
                    ..NodeFaults::default()
                },
            ),
            (
                &[(VANISH, "true"), ("other", "x")],
                NodeFaults {
                    vanish: true,
                    ..NodeFaults::default()
                },
            ),
        ];
        for (pairs, want) in cases {
            assert_eq!(
                &NodeFaults::from_annotations(Some(&ann(pairs))),
                want,
                "{pairs:?}"
            );
        }
        assert_eq!(NodeFaults::from_annotations(None), NodeFaults::default());
    }

    #[test]
    fn pod_faults_from_annotations() {
        let cases: &[(&[(&str, &str)], PodFaults)] = &[
            (&[], PodFaults::default()),
            (
                &[(CRASH, "true"), (RESTARTS, "3")],
                PodFaults {
                    crash: true,
                    restarts: 3,
                },
            ),
            (&[(CRASH, "no"), (RESTARTS, "-1")], PodFaults::default()),
            (&[(RESTARTS, "many")], PodFaults::default()),
        ];
        for (pairs, want) in cases {
            assert_eq!(
                &PodFaults::from_annotations(Some(&ann(pairs))),
                want,
                "{pairs:?}"
            );
        }
    }
}
