//! Fixtures the machine planners' tests share: a clock and a node with
//! conditions.

use api::Machine;
use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::time::to_time;

pub(crate) fn t(s: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
}

pub(crate) fn created_at(m: Machine, s: i64) -> Machine {
    let mut m = m;
    m.metadata.creation_timestamp = Some(to_time(t(s)));
    m
}

pub(crate) fn node(conds: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("n1".into()),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            conditions: Some(
                conds
                    .iter()
                    .map(|(ty, st)| NodeCondition {
                        type_: ty.to_string(),
                        status: st.to_string(),
                        last_transition_time: Some(to_time(t(0))),
                        ..NodeCondition::default()
                    })
                    .collect(),
            ),
            ..NodeStatus::default()
        }),
    }
}
