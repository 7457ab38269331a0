//! The Cluster controller's decisions (`cluster_controller{,_phases}.go`):
//! the infrastructure cluster's readiness, endpoint and failure domains
//! copied in, the phase, and the deletion order (MachineDeployments,
//! MachineSets and Machines first, then the infrastructure cluster, then
//! the finalizer).
//!
//! trellis runs no control-plane provider: a Cluster without a
//! `controlPlaneRef` has its control plane provided from outside (the
//! workload API server the controllers were given), so
//! `ControlPlaneInitialized` and `controlPlaneReady` follow the
//! infrastructure's readiness. A Cluster with a `controlPlaneRef` waits,
//! and says that no control-plane provider is installed.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::conditions::{self as cond, severity};
use crate::contract;
use crate::machine::Lookup;
use crate::meta::{self, label};
use crate::types::labels::{self, conditions as ct, reasons};
use crate::types::{Cluster, ClusterStatus};

/// The Cluster's objects that deletion must remove first.
#[derive(Clone, Debug, Default)]
pub struct Descendants {
    /// MachineDeployments of the cluster (name, deleting).
    pub deployments: Vec<(String, bool)>,
    /// MachineSets not controlled by a MachineDeployment.
    pub sets: Vec<(String, bool)>,
    /// Machines not controlled by a MachineSet.
    pub machines: Vec<(String, bool)>,
    /// Everything of the cluster still there (any owner).
    pub remaining: usize,
}

/// Everything one reconcile of a Cluster observed.
pub struct ClusterScope<'a> {
    pub cluster: &'a Cluster,
    pub infra: Lookup<'a>,
    pub descendants: Descendants,
    pub now: DateTime<Utc>,
}

/// What to do.
#[derive(Clone, Debug, Default)]
pub struct ClusterPlan {
    pub add_finalizer: bool,
    /// Merge patch of the Cluster (control-plane endpoint).
    pub cluster_patch: Option<Value>,
    /// Merge patch of the infrastructure cluster (owner, label).
    pub infra_patch: Option<Value>,
    pub delete_deployments: Vec<String>,
    pub delete_sets: Vec<String>,
    pub delete_machines: Vec<String>,
    pub delete_infra: bool,
    pub status: ClusterStatus,
    pub remove_finalizer: bool,
    pub requeue: Option<Duration>,
    pub errors: Vec<String>,
}

/// How often a deleting Cluster looks again while its objects go.
pub const DELETION_POLL: Duration = Duration::from_secs(2);

/// Decides one reconcile of a Cluster.
pub fn plan(s: &ClusterScope<'_>) -> ClusterPlan {
    let c = s.cluster;
    let now = s.now;
    let mut p = ClusterPlan {
        status: c.status.clone().unwrap_or_default(),
        ..ClusterPlan::default()
    };
    let deleting = c.metadata.deletion_timestamp.is_some();
    let has_finalizer = c
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == labels::CLUSTER_FINALIZER);
    if !deleting && !has_finalizer {
        p.add_finalizer = true;
        return p;
    }
    if c.spec.paused {
        cond::set(&mut p.status.conditions, cond::true_(ct::PAUSED), now);
        return p;
    }
    cond::delete(&mut p.status.conditions, ct::PAUSED);

    // Infrastructure.
    match (&c.spec.infrastructure_ref, &s.infra) {
        (None, _) => {
            p.status.infrastructure_ready = true;
            cond::set(
                &mut p.status.conditions,
                cond::true_(ct::INFRASTRUCTURE_READY),
                now,
            );
        }
        (Some(r), Lookup::Invalid(why)) => {
            cond::set(
                &mut p.status.conditions,
                cond::false_(
                    ct::INFRASTRUCTURE_READY,
                    reasons::INVALID_REFERENCE,
                    severity::ERROR,
                    format!(
                        "spec.infrastructureRef: {} cannot be read: {why}",
                        contract::group_kind_string(r)
                    ),
                ),
                now,
            );
            p.requeue = Some(crate::machine::MISSING_REFERENCE_RETRY);
        }
        (Some(r), Lookup::NotFound | Lookup::None) => {
            if !deleting {
                cond::set(
                    &mut p.status.conditions,
                    cond::false_(
                        ct::INFRASTRUCTURE_READY,
                        reasons::REFERENCE_NOT_FOUND,
                        severity::WARNING,
                        format!(
                            "spec.infrastructureRef: {} {:?} does not exist",
                            contract::group_kind_string(r),
                            r.name.as_deref().unwrap_or_default()
                        ),
                    ),
                    now,
                );
                p.requeue = Some(crate::machine::MISSING_REFERENCE_RETRY);
            }
        }
        (Some(r), Lookup::Found(obj)) => {
            let owner = meta::owner_ref(
                crate::API_VERSION,
                "Cluster",
                c.name(),
                c.metadata.uid.as_deref().unwrap_or_default(),
                true,
            );
            let refs = meta::with_controller(&obj.metadata, owner, &[]);
            let mut patch = json!({});
            if obj.metadata.owner_references.as_deref().unwrap_or(&[]) != refs.as_slice() {
                patch["metadata"]["ownerReferences"] = json!(refs);
            }
            if label(&obj.metadata, labels::CLUSTER_NAME) != Some(c.name()) {
                patch["metadata"]["labels"] = json!({labels::CLUSTER_NAME: c.name()});
            }
            if patch.as_object().is_some_and(|o| !o.is_empty()) {
                p.infra_patch = Some(patch);
            }
            let (reason, message) = contract::failure(obj);
            if reason.is_some() {
                p.status.failure_reason = reason;
            }
            if let Some(m) = message {
                p.status.failure_message = Some(format!(
                    "Failure detected from referenced resource {} with name {:?}: {m}",
                    contract::group_kind_string(r),
                    r.name.as_deref().unwrap_or_default()
                ));
            }
            let fallback = cond::false_(
                ct::INFRASTRUCTURE_READY,
                reasons::WAITING_FOR_INFRASTRUCTURE,
                severity::INFO,
                format!("Waiting for {} to be ready", contract::group_kind_string(r)),
            );
            cond::set(
                &mut p.status.conditions,
                cond::mirror(
                    &contract::conditions(obj),
                    ct::INFRASTRUCTURE_READY,
                    fallback,
                ),
                now,
            );
            if contract::ready(obj) {
                p.status.infrastructure_ready = true;
                cond::set(
                    &mut p.status.conditions,
                    cond::true_(ct::INFRASTRUCTURE_READY),
                    now,
                );
                if !c.spec.control_plane_endpoint.is_valid()
                    && let Some(ep) = contract::control_plane_endpoint(obj)
                {
                    p.cluster_patch = Some(json!({"spec": {"controlPlaneEndpoint": ep}}));
                }
                let domains = contract::failure_domains(obj);
                if !domains.is_empty() {
                    p.status.failure_domains = domains;
                }
            }
        }
    }

    // The control plane: provided from outside unless a provider is named.
    if c.spec.control_plane_ref.is_none() {
        let ready = p.status.infrastructure_ready;
        p.status.control_plane_ready = ready;
        let c_ = if ready {
            cond::true_(ct::CONTROL_PLANE_INITIALIZED)
        } else {
            cond::false_(
                ct::CONTROL_PLANE_INITIALIZED,
                reasons::WAITING_FOR_INFRASTRUCTURE,
                severity::INFO,
                "Waiting for the infrastructure",
            )
        };
        cond::set(&mut p.status.conditions, c_.clone(), now);
        let ready_c = crate::types::Condition {
            type_: ct::CONTROL_PLANE_READY.into(),
            ..c_
        };
        cond::set(&mut p.status.conditions, ready_c, now);
    } else {
        let msg = "trellis runs no control-plane provider for spec.controlPlaneRef";
        for t in [ct::CONTROL_PLANE_INITIALIZED, ct::CONTROL_PLANE_READY] {
            cond::set(
                &mut p.status.conditions,
                cond::false_(t, reasons::WAITING_FOR_CONTROL_PLANE, severity::INFO, msg),
                now,
            );
        }
    }

    if deleting {
        let d = &s.descendants;
        let live = |v: &[(String, bool)]| {
            v.iter()
                .filter(|(_, deleting)| !deleting)
                .map(|(n, _)| n.clone())
                .collect()
        };
        p.delete_deployments = live(&d.deployments);
        p.delete_sets = live(&d.sets);
        p.delete_machines = live(&d.machines);
        if d.remaining > 0 {
            p.requeue = Some(DELETION_POLL);
        } else if let Lookup::Found(obj) = &s.infra {
            p.delete_infra = !contract::deleting(obj);
            p.requeue = Some(DELETION_POLL);
        } else {
            p.remove_finalizer = true;
        }
    }

    let mut written = c.clone();
    if let Some(ep) = p
        .cluster_patch
        .as_ref()
        .and_then(|v| v.pointer("/spec/controlPlaneEndpoint"))
    {
        written.spec.control_plane_endpoint =
            serde_json::from_value(ep.clone()).unwrap_or_default();
    }
    written.status = Some(p.status.clone());
    p.status.phase = Some(crate::phase::cluster_phase(&written).to_string());
    let summary = cond::summary(
        &p.status.conditions,
        &[ct::INFRASTRUCTURE_READY, ct::CONTROL_PLANE_READY],
    );
    cond::set(&mut p.status.conditions, summary, now);
    if p.errors.is_empty() {
        p.status.observed_generation = c.metadata.generation;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{at, cluster, deleting, provider_object, reference};

    fn with_infra() -> Cluster {
        let mut c = cluster();
        c.metadata.finalizers = Some(vec![labels::CLUSTER_FINALIZER.into()]);
        c.spec.infrastructure_ref =
            Some(reference(crate::testing::INFRA_API, "LocalCluster", "c1"));
        c
    }

    fn local_cluster(ready: bool) -> kube::api::DynamicObject {
        provider_object(
            crate::testing::INFRA_API,
            "LocalCluster",
            "c1",
            json!({
                "spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}},
                "status": {"ready": ready, "failureDomains": {"zone-a": {"controlPlane": true}}},
            }),
        )
    }

    fn run(c: &Cluster, infra: Lookup<'_>, d: Descendants) -> ClusterPlan {
        plan(&ClusterScope {
            cluster: c,
            infra,
            descendants: d,
            now: at(0),
        })
    }

    #[test]
    fn provisioning_to_provisioned() {
        let c = with_infra();
        let lc = local_cluster(false);
        let p = run(&c, Lookup::Found(&lc), Descendants::default());
        assert_eq!(p.status.phase.as_deref(), Some("Provisioning"));
        assert_eq!(
            p.infra_patch.as_ref().unwrap()["metadata"]["ownerReferences"][0]["kind"],
            "Cluster"
        );
        assert!(!p.status.infrastructure_ready);
        let lc = local_cluster(true);
        let p = run(&c, Lookup::Found(&lc), Descendants::default());
        assert_eq!(p.status.phase.as_deref(), Some("Provisioned"));
        assert_eq!(
            p.cluster_patch.unwrap()["spec"]["controlPlaneEndpoint"]["port"],
            6443
        );
        assert!(p.status.failure_domains["zone-a"].control_plane);
        assert!(cond::is_true(
            &p.status.conditions,
            ct::CONTROL_PLANE_INITIALIZED
        ));
        assert!(cond::is_true(&p.status.conditions, ct::READY));
    }

    #[test]
    fn an_unknown_infrastructure_kind_is_a_condition() {
        let c = with_infra();
        let p = run(
            &c,
            Lookup::Invalid("no API serves kind LocalCluster".into()),
            Descendants::default(),
        );
        let ready = cond::get(&p.status.conditions, ct::INFRASTRUCTURE_READY).unwrap();
        assert_eq!(ready.reason, "InvalidReference");
        assert_eq!(p.status.phase.as_deref(), Some("Provisioning"));
    }

    #[test]
    fn deletion_goes_top_down() {
        let c = deleting(with_infra(), at(0));
        let lc = local_cluster(true);
        let d = Descendants {
            deployments: vec![("md".into(), false)],
            sets: vec![("standalone-ms".into(), true)],
            machines: vec![("m".into(), false)],
            remaining: 5,
        };
        let p = run(&c, Lookup::Found(&lc), d);
        assert_eq!(p.delete_deployments, ["md"]);
        assert!(p.delete_sets.is_empty(), "already deleting");
        assert_eq!(p.delete_machines, ["m"]);
        assert!(!p.delete_infra && !p.remove_finalizer);
        assert_eq!(p.status.phase.as_deref(), Some("Deleting"));
        let p = run(&c, Lookup::Found(&lc), Descendants::default());
        assert!(p.delete_infra && !p.remove_finalizer);
        let p = run(&c, Lookup::NotFound, Descendants::default());
        assert!(p.remove_finalizer);
    }

    #[test]
    fn a_cluster_without_infrastructure_is_ready_at_once() {
        let mut c = cluster();
        c.metadata.finalizers = Some(vec![labels::CLUSTER_FINALIZER.into()]);
        let p = run(&c, Lookup::None, Descendants::default());
        assert!(p.status.infrastructure_ready);
        assert_eq!(p.status.phase.as_deref(), Some("Pending"));
        let mut fresh = cluster();
        fresh.metadata.finalizers = None;
        assert!(run(&fresh, Lookup::None, Descendants::default()).add_finalizer);
    }
}
