//! The few Shoot facts the worker actuator needs, read out of the raw Shoot
//! embedded in the [`Cluster`] resource. Reading is lenient: a missing or
//! mistyped field reads as absent, because the Cluster is gardenlet's copy of
//! an object the Gardener API server already validated.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use crate::types::Cluster;

/// When a credentials rotation was last started, globally and for pools
/// whose rollout is still pending (`pendingWorkersRollouts`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RotationTimes {
    /// `lastInitiationTime` of the rotation.
    pub last_initiation_time: Option<Time>,
    /// Pool name to the initiation time of its pending rollout.
    pub pending_workers_rollouts: BTreeMap<String, Time>,
}

impl RotationTimes {
    /// The initiation time that applies to `pool`: its pending rollout's if
    /// it has one, else the rotation's.
    pub fn for_pool(&self, pool: &str) -> Option<&Time> {
        self.pending_workers_rollouts
            .get(pool)
            .or(self.last_initiation_time.as_ref())
    }

    fn from_value(v: Option<&Value>) -> RotationTimes {
        let Some(v) = v else {
            return RotationTimes::default();
        };
        let time = |v: Option<&Value>| v.and_then(|t| serde_json::from_value(t.clone()).ok());
        RotationTimes {
            last_initiation_time: time(v.get("lastInitiationTime")),
            pending_workers_rollouts: v
                .get("pendingWorkersRollouts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| {
                    Some((
                        r.get("name")?.as_str()?.to_string(),
                        time(r.get("lastInitiationTime"))?,
                    ))
                })
                .collect(),
        }
    }
}

/// What the actuator reads from the Shoot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShootFacts {
    /// `status.technicalID`, the prefix of machine deployment names.
    pub technical_id: Option<String>,
    /// Control-plane Kubernetes version, used for pools that name none.
    pub kubernetes_version: Option<String>,
    /// `spec.hibernation.enabled`.
    pub hibernated: bool,
    /// `spec.systemComponents.nodeLocalDNS.enabled`.
    pub node_local_dns: bool,
    /// Certificate-authority rotation.
    pub ca_rotation: RotationTimes,
    /// Service-account-key rotation.
    pub service_account_key_rotation: RotationTimes,
    /// CRI name per Shoot pool (`spec.provider.workers[].cri.name`).
    pub cri_by_pool: BTreeMap<String, String>,
}

impl ShootFacts {
    /// Reads the facts from a Cluster's embedded Shoot.
    pub fn from_cluster(cluster: &Cluster) -> ShootFacts {
        ShootFacts::from_shoot(&cluster.spec.shoot)
    }

    /// Reads the facts from a Shoot object as JSON.
    pub fn from_shoot(shoot: &Value) -> ShootFacts {
        let at = |path: &str| shoot.pointer(path);
        let string = |path: &str| at(path).and_then(Value::as_str).map(str::to_string);
        let flag = |path: &str| at(path).and_then(Value::as_bool).unwrap_or(false);
        ShootFacts {
            technical_id: string("/status/technicalID"),
            kubernetes_version: string("/spec/kubernetes/version"),
            hibernated: flag("/spec/hibernation/enabled"),
            node_local_dns: flag("/spec/systemComponents/nodeLocalDNS/enabled"),
            ca_rotation: RotationTimes::from_value(at(
                "/status/credentials/rotation/certificateAuthorities",
            )),
            service_account_key_rotation: RotationTimes::from_value(at(
                "/status/credentials/rotation/serviceAccountKey",
            )),
            cri_by_pool: at("/spec/provider/workers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|w| {
                    Some((
                        w.get("name")?.as_str()?.to_string(),
                        w.pointer("/cri/name")?.as_str()?.to_string(),
                    ))
                })
                .collect(),
        }
    }
}
