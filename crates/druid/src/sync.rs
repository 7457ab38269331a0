//! The spec flow's decisions (spec §3 "Spec flow", "STS sync",
//! "Deletion"): which components one pass applies and removes, what the
//! StatefulSet step does, and when a deletion is done. Pure; the etcd
//! controller applies what these return.

use serde_json::Value;

use crate::components::{self, DISABLE_RUNTIME_ANNOTATION, Names, Settings};
use crate::types::Etcd;

/// Runtime component creation is disabled by annotation: only the
/// ConfigMap and a StatefulSet of 0 replicas are kept.
pub fn runtime_disabled(etcd: &Etcd) -> bool {
    etcd.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(DISABLE_RUNTIME_ANNOTATION))
}

/// A component by kind and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ref {
    pub kind: &'static str,
    pub name: String,
}

/// What the StatefulSet step saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StsObserved {
    /// The set exists; `selector_matches`: its selector is druid's.
    pub exists: bool,
    pub selector_matches: bool,
    /// `status.observedGeneration` is set (the spec was applied before).
    pub reconciled_before: bool,
    /// Pods with the Etcd's labels exist.
    pub pods_exist: bool,
    /// `status.members` of the Etcd.
    pub members_in_status: i32,
    /// The set's `spec.replicas` and `status.readyReplicas`.
    pub replicas: i32,
    pub ready: i32,
    /// The set's TLS volumes ([`crate::tls::tls_volume_names`]).
    pub tls_volumes: Vec<String>,
    /// Each member lease's `member.etcd.gardener.cloud/tls-enabled`, by
    /// ordinal (`None`: not said yet, which counts as false).
    pub lease_peer_tls: Vec<Option<bool>>,
}

/// The StatefulSet step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StsStep {
    /// The selector is not druid's and it is immutable: delete the set
    /// leaving its pods (orphan), recreate it on the next pass.
    OrphanDelete,
    /// Apply the set with `replicas`; `requeue`: look again before
    /// declaring success.
    Apply { replicas: i32, requeue: bool },
    /// Leave the set as it is and look again, for this reason.
    Wait(String),
}

pub fn sts_step(etcd: &Etcd, o: &StsObserved) -> StsStep {
    if runtime_disabled(etcd) {
        return StsStep::Apply {
            replicas: 0,
            requeue: false,
        };
    }
    if o.exists && !o.selector_matches {
        return StsStep::OrphanDelete;
    }
    if !o.exists && o.reconciled_before && o.pods_exist {
        // Someone deleted the set under running members: bring it back at
        // the size the members had, not a size they never agreed on.
        return StsStep::Apply {
            replicas: o.members_in_status,
            requeue: true,
        };
    }
    if o.exists && o.replicas > 0 {
        // TLS changes go in steps (spec §3): the mounts first, at the
        // members' current count, then wait until every member says it
        // runs the wanted peer TLS, and only then the new count.
        let mut want: Vec<String> = crate::tls::tls_volumes(etcd)
            .into_iter()
            .map(|(v, _, _)| v.to_string())
            .collect();
        want.sort();
        let peer_wanted = etcd.spec.etcd.peer_url_tls.is_some();
        if o.tls_volumes != want {
            let peer_enabling =
                peer_wanted && !o.tls_volumes.iter().any(|v| v.starts_with("peer-url-"));
            if peer_enabling && o.replicas > 1 && o.ready > 0 && o.ready < o.replicas {
                return StsStep::Wait(format!(
                    "peer TLS is being enabled while {} of {} members are ready: waiting for all",
                    o.ready, o.replicas
                ));
            }
            return StsStep::Apply {
                replicas: o.replicas,
                requeue: true,
            };
        }
        let members = o.replicas.max(0) as usize;
        if o.lease_peer_tls
            .iter()
            .take(members)
            .any(|t| t.unwrap_or(false) != peer_wanted)
        {
            return StsStep::Wait(format!(
                "waiting for every member to report peer TLS {}",
                if peer_wanted { "enabled" } else { "disabled" }
            ));
        }
    }
    StsStep::Apply {
        replicas: etcd.spec.replicas,
        requeue: false,
    }
}

/// Whether scaling to `replicas: 0` (hibernation) first takes the
/// pre-sync full snapshot (spec §6, scenario 11): the Etcd goes to 0, it
/// has a backup store, and its StatefulSet still runs members that are
/// ready (`sts_replicas`, `sts_ready`), so what they hold since the last
/// snapshot is kept. Once the set is at 0 there is nothing left to take.
pub fn pre_sync_snapshot(etcd: &Etcd, sts_replicas: i32, sts_ready: i32) -> bool {
    etcd.spec.replicas == 0
        && etcd.spec.backup.store.is_some()
        && !runtime_disabled(etcd)
        && sts_replicas > 0
        && sts_ready > 0
}

/// The components to apply in upstream's order, the StatefulSet last with
/// `sts_replicas`. With runtime creation disabled only the ConfigMap and
/// the StatefulSet.
pub fn components_to_apply(etcd: &Etcd, sts_replicas: i32, settings: &Settings) -> Vec<Value> {
    if runtime_disabled(etcd) {
        return vec![
            components::config_map(etcd),
            components::statefulset(etcd, sts_replicas, settings),
        ];
    }
    components::all(etcd, sts_replicas, settings)
}

/// Components this pass removes: the snapshot leases without a store, and
/// with runtime creation disabled everything but the ConfigMap and the
/// StatefulSet (member leases included).
pub fn components_to_remove(etcd: &Etcd, existing_member_leases: &[String]) -> Vec<Ref> {
    let n = Names::of(etcd);
    let mut out = Vec::new();
    if runtime_disabled(etcd) {
        out.push(Ref {
            kind: "ServiceAccount",
            name: n.name.clone(),
        });
        out.push(Ref {
            kind: "Role",
            name: n.role(),
        });
        out.push(Ref {
            kind: "RoleBinding",
            name: n.role(),
        });
        for l in existing_member_leases {
            out.push(Ref {
                kind: "Lease",
                name: l.clone(),
            });
        }
        out.push(Ref {
            kind: "PodDisruptionBudget",
            name: n.name.clone(),
        });
        out.push(Ref {
            kind: "Service",
            name: n.client_service(),
        });
        out.push(Ref {
            kind: "Service",
            name: n.peer_service(),
        });
    }
    if runtime_disabled(etcd) || etcd.spec.backup.store.is_none() {
        out.push(Ref {
            kind: "Lease",
            name: n.full_snapshot_lease(),
        });
        out.push(Ref {
            kind: "Lease",
            name: n.delta_snapshot_lease(),
        });
    }
    out
}

/// Whether `existing` already holds everything `desired` says: every
/// field of `desired` present with the same value (objects recursively,
/// lists element by element), fields the server added (defaults, status)
/// ignored. The controller skips applying such a component: an apply that
/// changes nothing is still a write on some servers (a new generation of
/// the StatefulSet), which would wake the controller again.
pub fn contains(existing: &Value, desired: &Value) -> bool {
    match (existing, desired) {
        (Value::Object(e), Value::Object(d)) => d
            .iter()
            .all(|(k, dv)| e.get(k).is_some_and(|ev| contains(ev, dv))),
        (Value::Array(e), Value::Array(d)) => {
            e.len() == d.len() && e.iter().zip(d).all(|(ev, dv)| contains(ev, dv))
        }
        (Value::Number(e), Value::Number(d)) => e.as_f64() == d.as_f64(),
        (e, d) => e == d,
    }
}

/// Upstream's error code of a failed component sync, from the
/// component's `app.kubernetes.io/component` label.
pub fn error_code(component: &str) -> &'static str {
    match component {
        "etcd-service-account" => "ERR_SYNC_SERVICE_ACCOUNT",
        "etcd-druid-role" => "ERR_SYNC_ROLE",
        "druid-role-binding" => "ERR_SYNC_ROLE_BINDING",
        "etcd-member-lease" => "ERR_SYNC_MEMBER_LEASE",
        "etcd-snapshot-lease" => "ERR_SYNC_SNAPSHOT_LEASE",
        "etcd-pdb" => "ERR_SYNC_POD_DISRUPTION_BUDGET",
        "etcd-client-service" => "ERR_SYNC_CLIENT_SERVICE",
        "etcd-peer-service" => "ERR_SYNC_PEER_SERVICE",
        "etcd-config" => "ERR_SYNC_CONFIGMAP",
        "etcd-statefulset" => "ERR_SYNC_STATEFULSET",
        _ => "ERR_SYNC",
    }
}

/// The kinds the deletion flow deletes (every component kind; PVCs are
/// not among them: the data outlives the Etcd).
pub const COMPONENT_KINDS: [&str; 8] = [
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Lease",
    "PodDisruptionBudget",
    "Service",
    "ConfigMap",
    "StatefulSet",
];

/// The deletion flow's verdict from what is left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeletionStep {
    /// Delete these (still present) and look again.
    Delete(Vec<Ref>),
    /// Nothing is left: remove the finalizer.
    RemoveFinalizer,
}

pub fn deletion_step(remaining: Vec<Ref>) -> DeletionStep {
    if remaining.is_empty() {
        DeletionStep::RemoveFinalizer
    } else {
        DeletionStep::Delete(remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{BackupSpec, EtcdSpec, StoreSpec};

    fn etcd(replicas: i32, store: bool, disabled: bool) -> Etcd {
        let mut e = Etcd::new(
            "e",
            EtcdSpec {
                replicas,
                backup: BackupSpec {
                    store: store.then(|| StoreSpec {
                        prefix: "e".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        e.metadata.namespace = Some("ns".into());
        if disabled {
            e.metadata.annotations =
                Some([(DISABLE_RUNTIME_ANNOTATION.to_string(), String::new())].into());
        }
        e
    }

    #[test]
    fn scenario_12_peer_tls_goes_in_steps() {
        let mut tls = etcd(3, true, false);
        tls.spec.etcd.peer_url_tls = Some(crate::types::TlsConfig {
            tls_ca_secret_ref: crate::types::CaSecretRef {
                name: "ca".into(),
                ..Default::default()
            },
            server_tls_secret_ref: crate::types::SecretReference {
                name: "peer".into(),
                ..Default::default()
            },
            client_tls_secret_ref: None,
        });
        let peer_volumes = vec![
            "peer-url-ca-etcd".to_string(),
            "peer-url-etcd-server-tls".to_string(),
        ];
        let running = |ready: i32, volumes: Vec<String>, leases: Vec<Option<bool>>| StsObserved {
            exists: true,
            selector_matches: true,
            reconciled_before: true,
            replicas: 3,
            ready,
            tls_volumes: volumes,
            lease_peer_tls: leases,
            ..StsObserved::default()
        };
        let apply = |replicas, requeue| StsStep::Apply { replicas, requeue };
        // (name, etcd, observed, want: None = Wait)
        let table: Vec<(&str, Etcd, StsObserved, Option<StsStep>)> = vec![
            (
                "enabling with 2 of 3 ready: unsafe, no patch",
                tls.clone(),
                running(2, vec![], vec![None; 3]),
                None,
            ),
            (
                "enabling with all ready: mounts first, at the current count",
                tls.clone(),
                running(3, vec![], vec![None; 3]),
                Some(apply(3, true)),
            ),
            (
                "enabling with none ready: mounts first too",
                tls.clone(),
                running(0, vec![], vec![None; 3]),
                Some(apply(3, true)),
            ),
            (
                "mounted, a member still without peer TLS: wait",
                tls.clone(),
                running(
                    3,
                    peer_volumes.clone(),
                    vec![Some(true), Some(false), Some(true)],
                ),
                None,
            ),
            (
                "mounted, every member with peer TLS: done",
                tls.clone(),
                running(3, peer_volumes.clone(), vec![Some(true); 3]),
                Some(apply(3, false)),
            ),
            (
                "no TLS wanted or mounted, leases silent: done",
                etcd(3, true, false),
                running(3, vec![], vec![None; 3]),
                Some(apply(3, false)),
            ),
            (
                "a scale-out without TLS is not held by new members' leases",
                etcd(5, true, false),
                running(3, vec![], vec![None; 3]),
                Some(apply(5, false)),
            ),
        ];
        for (name, e, o, want) in table {
            let got = sts_step(&e, &o);
            match want {
                Some(w) => assert_eq!(got, w, "{name}"),
                None => assert!(matches!(got, StsStep::Wait(_)), "{name}: {got:?}"),
            }
        }
    }

    #[test]
    fn scenario_11_scaling_to_zero_takes_a_pre_sync_full_snapshot_first() {
        // (name, etcd replicas, store, runtime disabled, sts replicas, ready, want)
        let table = [
            ("hibernating 3 ready members", 0, true, false, 3, 3, true),
            ("hibernating 1 ready member", 0, true, false, 1, 1, true),
            (
                "members not ready: nothing to take",
                0,
                true,
                false,
                3,
                0,
                false,
            ),
            ("already at 0", 0, true, false, 0, 0, false),
            ("no backup store", 0, false, false, 3, 3, false),
            ("runtime disabled", 0, true, true, 3, 3, false),
            ("not hibernating", 3, true, false, 3, 3, false),
        ];
        for (name, replicas, store, disabled, sts, ready, want) in table {
            assert_eq!(
                pre_sync_snapshot(&etcd(replicas, store, disabled), sts, ready),
                want,
                "{name}"
            );
        }
    }

    fn kinds(v: &[Value]) -> Vec<String> {
        v.iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn scenario_01_a_new_etcd_applies_every_component_with_the_spec_replicas() {
        let e = etcd(3, true, false);
        let step = sts_step(&e, &StsObserved::default());
        assert_eq!(
            step,
            StsStep::Apply {
                replicas: 3,
                requeue: false
            }
        );
        assert_eq!(components_to_apply(&e, 3, &Settings::default()).len(), 13);
        assert!(components_to_remove(&e, &[]).is_empty());
    }

    #[test]
    fn scenario_09_without_a_store_the_snapshot_leases_are_removed() {
        let e = etcd(1, false, false);
        let names: Vec<String> = components_to_remove(&e, &[])
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["e-full-snap", "e-delta-snap"]);
    }

    #[test]
    fn a_deleted_statefulset_with_running_members_comes_back_at_their_size() {
        let e = etcd(3, true, false);
        let o = StsObserved {
            reconciled_before: true,
            pods_exist: true,
            members_in_status: 1,
            ..Default::default()
        };
        assert_eq!(
            sts_step(&e, &o),
            StsStep::Apply {
                replicas: 1,
                requeue: true
            }
        );
        let no_pods = StsObserved {
            pods_exist: false,
            ..o
        };
        assert_eq!(
            sts_step(&e, &no_pods),
            StsStep::Apply {
                replicas: 3,
                requeue: false
            }
        );
    }

    #[test]
    fn a_foreign_selector_orphan_deletes_the_statefulset() {
        let e = etcd(3, true, false);
        let o = StsObserved {
            exists: true,
            selector_matches: false,
            ..Default::default()
        };
        assert_eq!(sts_step(&e, &o), StsStep::OrphanDelete);
    }

    #[test]
    fn disabled_runtime_keeps_only_the_config_map_and_an_empty_statefulset() {
        let e = etcd(3, true, true);
        assert_eq!(
            sts_step(&e, &StsObserved::default()),
            StsStep::Apply {
                replicas: 0,
                requeue: false
            }
        );
        assert_eq!(
            kinds(&components_to_apply(&e, 0, &Settings::default())),
            ["ConfigMap", "StatefulSet"]
        );
        let removed = components_to_remove(&e, &["e-0".to_string()]);
        assert!(removed.contains(&Ref {
            kind: "Lease",
            name: "e-0".into()
        }));
        assert!(
            removed
                .iter()
                .all(|r| r.kind != "ConfigMap" && r.kind != "StatefulSet")
        );
    }

    #[test]
    fn a_component_with_server_defaults_still_contains_what_druid_wants() {
        let desired = serde_json::json!({"spec": {"replicas": 3, "ports": [{"port": 2380}]}});
        let existing = serde_json::json!({
            "metadata": {"resourceVersion": "7"},
            "spec": {"replicas": 3, "ports": [{"port": 2380, "protocol": "TCP"}], "x": 1},
        });
        assert!(contains(&existing, &desired));
        let scaled = serde_json::json!({"spec": {"replicas": 1, "ports": [{"port": 2380}]}});
        assert!(!contains(&scaled, &desired));
        let more_ports =
            serde_json::json!({"spec": {"replicas": 3, "ports": [{"port": 2380}, {"port": 1}]}});
        assert!(!contains(&more_ports, &desired));
        assert!(!contains(&serde_json::json!({}), &desired));
    }

    #[test]
    fn every_component_has_its_error_code() {
        let e = etcd(3, true, false);
        let codes: Vec<&str> = components_to_apply(&e, 3, &Settings::default())
            .iter()
            .map(|o| {
                error_code(
                    o["metadata"]["labels"]["app.kubernetes.io/component"]
                        .as_str()
                        .unwrap(),
                )
            })
            .collect();
        assert!(!codes.contains(&"ERR_SYNC"), "{codes:?}");
        assert_eq!(codes.last(), Some(&"ERR_SYNC_STATEFULSET"));
    }

    #[test]
    fn scenario_17_the_finalizer_goes_only_when_nothing_remains() {
        let left = vec![Ref {
            kind: "StatefulSet",
            name: "e".into(),
        }];
        assert_eq!(deletion_step(left.clone()), DeletionStep::Delete(left));
        assert_eq!(deletion_step(Vec::new()), DeletionStep::RemoveFinalizer);
    }
}
