//! The phase of a Machine and of a Cluster, each a pure function of fields
//! (seed 004: "the value should not be interpreted by any software
//! components ... controllers should always look at the actual state of
//! the Machine's fields"). Nothing in trellis reads a phase back to decide
//! anything; the controllers write it for people.
//!
//! The Machine phase follows the seed's state table, mapped onto upstream's
//! fields (upstream moved `spec.bootstrap.data` into the Secret named by
//! `spec.bootstrap.dataSecretName`):
//!
//! | phase | when (later rows win) |
//! |---|---|
//! | `Pending` | always the start: no bootstrap data yet (`dataSecretName` unset) |
//! | `Provisioning` | bootstrap data present (`status.bootstrapReady`) |
//! | `Provisioned` | infrastructure ready and `spec.providerID` copied from it |
//! | `Running` | `status.nodeRef` set, which the controller does once a Node with the providerID is Ready |
//! | `Failed` | `failureReason` or `failureMessage` set |
//! | `Deleting` | `deletionTimestamp` set |
//! | `Deleted` | deleting, and the infrastructure and bootstrap objects are gone |
//!
//! Where upstream (v1.10) differs from the seed, trellis follows the seed,
//! which the issue asks for: `Running` needs the Node to have been Ready
//! (upstream sets `nodeRef` as soon as the Node exists), `Provisioned`
//! needs the infrastructure ready as well as a providerID, a Machine whose
//! data Secret is given directly (no `configRef`, the seed's `data: ""`)
//! skips the bootstrap step and shows `Provisioning` (upstream never sets
//! `bootstrapReady` for it), and `Deleted` is written right before the
//! finalizer goes (upstream never writes it). Phases are CamelCase, as
//! upstream writes them.

use crate::types::{Cluster, Machine};

/// A Machine's phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MachinePhase {
    Pending,
    Provisioning,
    Provisioned,
    Running,
    Deleting,
    Deleted,
    Failed,
    Unknown,
}

impl MachinePhase {
    pub const ALL: [MachinePhase; 8] = [
        MachinePhase::Pending,
        MachinePhase::Provisioning,
        MachinePhase::Provisioned,
        MachinePhase::Running,
        MachinePhase::Deleting,
        MachinePhase::Deleted,
        MachinePhase::Failed,
        MachinePhase::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MachinePhase::Pending => "Pending",
            MachinePhase::Provisioning => "Provisioning",
            MachinePhase::Provisioned => "Provisioned",
            MachinePhase::Running => "Running",
            MachinePhase::Deleting => "Deleting",
            MachinePhase::Deleted => "Deleted",
            MachinePhase::Failed => "Failed",
            MachinePhase::Unknown => "Unknown",
        }
    }

    /// Parses a written phase; anything else is `Unknown`.
    pub fn parse(s: &str) -> MachinePhase {
        MachinePhase::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .unwrap_or(MachinePhase::Unknown)
    }
}

impl std::fmt::Display for MachinePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fields the Machine phase is derived from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseFacts {
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The infrastructure object (and the bootstrap config, if referenced)
    /// no longer exist.
    pub dependents_deleted: bool,
    /// `status.failureReason` or `status.failureMessage` is set.
    pub failed: bool,
    /// `status.bootstrapReady`: the bootstrap data Secret is known.
    pub bootstrap_ready: bool,
    /// `status.infrastructureReady`.
    pub infrastructure_ready: bool,
    /// `spec.providerID` is set.
    pub provider_id: bool,
    /// `status.nodeRef` is set.
    pub node_ref: bool,
}

impl PhaseFacts {
    /// The facts of a Machine as written; `dependents_deleted` comes from
    /// what the controller observed about the referenced objects.
    pub fn of(m: &Machine, dependents_deleted: bool) -> PhaseFacts {
        let s = m.status.clone().unwrap_or_default();
        PhaseFacts {
            deleting: m.metadata.deletion_timestamp.is_some(),
            dependents_deleted,
            failed: s.failure_reason.as_deref().is_some_and(|r| !r.is_empty())
                || s.failure_message.as_deref().is_some_and(|r| !r.is_empty()),
            bootstrap_ready: s.bootstrap_ready,
            infrastructure_ready: s.infrastructure_ready,
            provider_id: m.spec.provider_id.as_deref().is_some_and(|p| !p.is_empty()),
            node_ref: s.node_ref.is_some(),
        }
    }
}

/// The Machine's phase: the seed's table, later rows winning.
pub fn machine_phase(f: &PhaseFacts) -> MachinePhase {
    let mut phase = MachinePhase::Pending;
    if f.bootstrap_ready {
        phase = MachinePhase::Provisioning;
    }
    if f.infrastructure_ready && f.provider_id {
        phase = MachinePhase::Provisioned;
    }
    if f.node_ref && f.infrastructure_ready {
        phase = MachinePhase::Running;
    }
    if f.failed {
        phase = MachinePhase::Failed;
    }
    if f.deleting {
        phase = MachinePhase::Deleting;
        if f.dependents_deleted {
            phase = MachinePhase::Deleted;
        }
    }
    phase
}

/// A Cluster's phase (`cluster_controller_phases.go`), later rows winning:
/// `Pending`; `Provisioning` once it references infrastructure or a
/// control plane; `Provisioned` once the infrastructure is ready and the
/// endpoint known; `Failed`; `Deleting`.
pub fn cluster_phase(c: &Cluster) -> &'static str {
    let s = c.status.clone().unwrap_or_default();
    let mut phase = "Pending";
    if c.spec.infrastructure_ref.is_some() || c.spec.control_plane_ref.is_some() {
        phase = "Provisioning";
    }
    if s.infrastructure_ready && c.spec.control_plane_endpoint.is_valid() {
        phase = "Provisioned";
    }
    if s.failure_reason.is_some() || s.failure_message.is_some() {
        phase = "Failed";
    }
    if c.metadata.deletion_timestamp.is_some() {
        phase = "Deleting";
    }
    phase
}

#[cfg(test)]
mod tests {
    use super::*;
    use MachinePhase::*;

    /// Every row of seed 004's state table, and the transitions between
    /// them, as facts → phase.
    #[test]
    fn seed_state_table() {
        let none = PhaseFacts::default();
        let bootstrapped = PhaseFacts {
            bootstrap_ready: true,
            ..none
        };
        let provisioned = PhaseFacts {
            infrastructure_ready: true,
            provider_id: true,
            ..bootstrapped
        };
        let running = PhaseFacts {
            node_ref: true,
            ..provisioned
        };
        let rows: Vec<(&str, PhaseFacts, MachinePhase)> = vec![
            ("a new Machine (phase \"\") is Pending", none, Pending),
            (
                "no bootstrap data (config not ready, dataSecretName nil): stays Pending",
                none,
                Pending,
            ),
            (
                "bootstrap data present (config ready and copied, or given directly): Provisioning",
                bootstrapped,
                Provisioning,
            ),
            (
                "infrastructure ready without a providerID: not yet Provisioned",
                PhaseFacts {
                    infrastructure_ready: true,
                    ..bootstrapped
                },
                Provisioning,
            ),
            (
                "infrastructure ready and providerID synced: Provisioned",
                provisioned,
                Provisioned,
            ),
            (
                "a providerID while the infrastructure is not ready: still Provisioning",
                PhaseFacts {
                    provider_id: true,
                    ..bootstrapped
                },
                Provisioning,
            ),
            ("nodeRef set (Node Ready): Running", running, Running),
            (
                "a nodeRef without ready infrastructure is not Running",
                PhaseFacts {
                    infrastructure_ready: false,
                    ..running
                },
                Provisioning,
            ),
            (
                "failureReason/Message from Pending: Failed",
                PhaseFacts {
                    failed: true,
                    ..none
                },
                Failed,
            ),
            (
                "failureReason/Message from Running: Failed",
                PhaseFacts {
                    failed: true,
                    ..running
                },
                Failed,
            ),
            (
                "deletionTimestamp set: Deleting",
                PhaseFacts {
                    deleting: true,
                    ..running
                },
                Deleting,
            ),
            (
                "deleting wins over failed",
                PhaseFacts {
                    deleting: true,
                    failed: true,
                    ..running
                },
                Deleting,
            ),
            (
                "deleting a Pending Machine: Deleting",
                PhaseFacts {
                    deleting: true,
                    ..none
                },
                Deleting,
            ),
            (
                "deleting and the infrastructure and bootstrap objects gone: Deleted",
                PhaseFacts {
                    deleting: true,
                    dependents_deleted: true,
                    ..running
                },
                Deleted,
            ),
            (
                "dependents gone without a deletion (deleted out of band) is no Deleted",
                PhaseFacts {
                    dependents_deleted: true,
                    ..running
                },
                Running,
            ),
        ];
        for (why, facts, want) in rows {
            assert_eq!(machine_phase(&facts), want, "{why}");
        }
    }

    #[test]
    fn phases_parse_and_print() {
        for p in MachinePhase::ALL {
            assert_eq!(MachinePhase::parse(p.as_str()), p);
        }
        assert_eq!(MachinePhase::parse("pending"), Unknown);
    }

    #[test]
    fn facts_come_from_the_fields() {
        let mut m = Machine::new("m", Default::default());
        assert_eq!(PhaseFacts::of(&m, false), PhaseFacts::default());
        m.spec.provider_id = Some(String::new());
        m.status = Some(crate::types::MachineStatus {
            failure_message: Some("boom".into()),
            node_ref: Some(Default::default()),
            ..Default::default()
        });
        let f = PhaseFacts::of(&m, true);
        assert!(!f.provider_id && f.failed && f.node_ref && f.dependents_deleted);
    }

    #[test]
    fn cluster_phases() {
        let mut c = Cluster::new("c", Default::default());
        assert_eq!(cluster_phase(&c), "Pending");
        c.spec.infrastructure_ref = Some(Default::default());
        assert_eq!(cluster_phase(&c), "Provisioning");
        c.status = Some(crate::types::ClusterStatus {
            infrastructure_ready: true,
            ..Default::default()
        });
        assert_eq!(cluster_phase(&c), "Provisioning", "no endpoint yet");
        c.spec.control_plane_endpoint = crate::types::ApiEndpoint {
            host: "127.0.0.1".into(),
            port: 6443,
        };
        assert_eq!(cluster_phase(&c), "Provisioned");
        c.metadata.deletion_timestamp = Some(mcm::time::to_time(chrono::Utc::now()));
        assert_eq!(cluster_phase(&c), "Deleting");
    }
}
