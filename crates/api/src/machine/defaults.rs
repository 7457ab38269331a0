//! Defaulting, applied by the API server before validation.
//!
//! Upstream MCM registers no defaulting functions: an object without a
//! strategy simply fails its controller-side validation and is skipped. The
//! API reference nonetheless documents defaults for the strategy, and applying
//! them at admission turns a silently ignored object into a working one. Only
//! those documented defaults are applied; everything upstream treats as
//! "absent means unlimited" (`revisionHistoryLimit`, `progressDeadlineSeconds`)
//! stays absent, and `replicas`/`minReadySeconds` are already 0 when absent.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::machine_deployment::{
    MachineDeployment, MachineDeploymentStrategyType, RollingUpdateMachineDeployment,
};

/// `maxSurge` when a rolling update leaves it out: one machine, as documented
/// in the API reference.
pub const DEFAULT_MAX_SURGE: i32 = 1;

/// `maxUnavailable` when a rolling update leaves it out: one machine, as
/// documented in the API reference.
pub const DEFAULT_MAX_UNAVAILABLE: i32 = 1;

/// Fills in the documented defaults of a machine deployment:
/// `spec.strategy.type` becomes `RollingUpdate`, and a rolling update gets
/// `maxSurge: 1` and `maxUnavailable: 1` where they are missing. In-place
/// updates get nothing: upstream documents no defaults for them.
pub fn default_machine_deployment(md: &mut MachineDeployment) {
    let strategy = &mut md.spec.strategy;
    let kind = *strategy
        .type_
        .get_or_insert(MachineDeploymentStrategyType::RollingUpdate);
    if kind == MachineDeploymentStrategyType::RollingUpdate {
        let rolling = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateMachineDeployment::default);
        rolling
            .max_surge
            .get_or_insert(IntOrString::Int(DEFAULT_MAX_SURGE));
        rolling
            .max_unavailable
            .get_or_insert(IntOrString::Int(DEFAULT_MAX_UNAVAILABLE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::machine_deployment::{
        InPlaceUpdateMachineDeployment, MachineDeploymentStrategy,
    };

    fn strategy_after_defaulting(strategy: MachineDeploymentStrategy) -> MachineDeploymentStrategy {
        let mut md = MachineDeployment::default();
        md.spec.strategy = strategy;
        default_machine_deployment(&mut md);
        md.spec.strategy
    }

    fn rolling(
        surge: Option<IntOrString>,
        unavailable: Option<IntOrString>,
    ) -> MachineDeploymentStrategy {
        MachineDeploymentStrategy {
            type_: Some(MachineDeploymentStrategyType::RollingUpdate),
            rolling_update: Some(RollingUpdateMachineDeployment {
                max_surge: surge,
                max_unavailable: unavailable,
            }),
            in_place_update: None,
        }
    }

    #[test]
    fn strategy_defaults() {
        let pct = |s: &str| IntOrString::String(s.to_string());
        let cases: Vec<(&str, MachineDeploymentStrategy, MachineDeploymentStrategy)> = vec![
            (
                "empty strategy becomes a 1/1 rolling update",
                MachineDeploymentStrategy::default(),
                rolling(Some(IntOrString::Int(1)), Some(IntOrString::Int(1))),
            ),
            (
                "missing rollingUpdate block is filled",
                MachineDeploymentStrategy {
                    type_: Some(MachineDeploymentStrategyType::RollingUpdate),
                    ..Default::default()
                },
                rolling(Some(IntOrString::Int(1)), Some(IntOrString::Int(1))),
            ),
            (
                "explicit values are kept, including zero",
                rolling(Some(pct("25%")), Some(IntOrString::Int(0))),
                rolling(Some(pct("25%")), Some(IntOrString::Int(0))),
            ),
            (
                "only the missing bound is filled",
                rolling(None, Some(pct("10%"))),
                rolling(Some(IntOrString::Int(1)), Some(pct("10%"))),
            ),
            (
                "recreate gets no rolling parameters",
                MachineDeploymentStrategy {
                    type_: Some(MachineDeploymentStrategyType::Recreate),
                    ..Default::default()
                },
                MachineDeploymentStrategy {
                    type_: Some(MachineDeploymentStrategyType::Recreate),
                    ..Default::default()
                },
            ),
            (
                "in-place update is left alone",
                MachineDeploymentStrategy {
                    type_: Some(MachineDeploymentStrategyType::InPlaceUpdate),
                    in_place_update: Some(InPlaceUpdateMachineDeployment::default()),
                    ..Default::default()
                },
                MachineDeploymentStrategy {
                    type_: Some(MachineDeploymentStrategyType::InPlaceUpdate),
                    in_place_update: Some(InPlaceUpdateMachineDeployment::default()),
                    ..Default::default()
                },
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(strategy_after_defaulting(input), want, "{name}");
        }
    }

    #[test]
    fn leaves_unbounded_fields_absent() {
        let mut md = MachineDeployment::default();
        default_machine_deployment(&mut md);
        assert_eq!(md.spec.revision_history_limit, None);
        assert_eq!(md.spec.progress_deadline_seconds, None);
        assert_eq!(md.spec.replicas, 0);
        assert_eq!(md.spec.min_ready_seconds, 0);
        // Defaulting twice changes nothing.
        let once = md.clone();
        default_machine_deployment(&mut md);
        assert_eq!(md, once);
    }
}
