//! The weeder's decisions (spec §2.2–§2.4): when an EndpointSlice is ready,
//! which slice events start a weeder, and which dependant pods it deletes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::config::WeederConfig;

/// The label naming an EndpointSlice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The waiting reason of a crash-looping container.
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";

/// Whether every endpoint of the slice is ready (a nil `ready` is not). A
/// slice without endpoints is ready: upstream's vacuous truth, kept.
pub fn slice_ready(slice: &EndpointSlice) -> bool {
    slice
        .endpoints
        .iter()
        .all(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
}

/// The configured service a slice belongs to, if any.
pub fn service_of<'a>(slice: &'a EndpointSlice, config: &WeederConfig) -> Option<&'a str> {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(SERVICE_NAME_LABEL))
        .map(String::as_str)
        .filter(|s| config.services_and_dependant_selectors.contains_key(*s))
}

/// A watch event on an EndpointSlice.
#[derive(Clone, Copy, Debug)]
pub enum SliceEvent<'a> {
    Create(&'a EndpointSlice),
    Update {
        old: &'a EndpointSlice,
        new: &'a EndpointSlice,
    },
    Delete(&'a EndpointSlice),
}

/// Whether the event starts (or restarts) a weeder: a configured service's
/// slice that is created ready, or turns from not ready to ready.
pub fn triggers(event: SliceEvent<'_>, config: &WeederConfig) -> bool {
    match event {
        SliceEvent::Create(s) => service_of(s, config).is_some() && slice_ready(s),
        SliceEvent::Update { old, new } => {
            old.metadata.resource_version != new.metadata.resource_version
                && service_of(new, config).is_some()
                && !slice_ready(old)
                && slice_ready(new)
        }
        SliceEvent::Delete(_) => false,
    }
}

/// Whether the weeder deletes the pod: not already deleting, and some
/// (non-init) container waiting in `CrashLoopBackOff`.
pub fn should_delete(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.state
                        .as_ref()
                        .and_then(|s| s.waiting.as_ref())
                        .and_then(|w| w.reason.as_deref())
                        == Some(CRASH_LOOP_BACK_OFF)
                })
            })
}

/// The label selector of the slice watch: only configured services'
/// slices (upstream watches every slice and filters; asking the server to
/// filter is the same decision with less traffic).
pub fn slice_watch_selector(config: &WeederConfig) -> String {
    let names: Vec<&str> = config
        .services_and_dependant_selectors
        .keys()
        .map(String::as_str)
        .collect();
    format!("{SERVICE_NAME_LABEL} in ({})", names.join(","))
}

/// A weeder's key: `<namespace>/<slice>`.
pub fn key(slice: &EndpointSlice) -> String {
    format!(
        "{}/{}",
        slice.metadata.namespace.as_deref().unwrap_or_default(),
        slice.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Labels of a pod, for logging which selector matched.
pub fn labels(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.labels.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus, PodStatus,
    };
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn config() -> WeederConfig {
        WeederConfig::from_yaml(
            "watchDuration: 2m\nservicesAndDependantSelectors:\n  etcd-main-client:\n    podSelectors:\n    - matchLabels: {role: apiserver}\n",
        )
        .unwrap()
    }

    fn slice(service: Option<&str>, rv: &str, ready: &[Option<bool>]) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some("etcd-main-client-abc".into()),
                namespace: Some("shoot--p--a".into()),
                resource_version: Some(rv.into()),
                labels: service
                    .map(|s| BTreeMap::from([(SERVICE_NAME_LABEL.to_string(), s.to_string())])),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            endpoints: ready
                .iter()
                .map(|r| Endpoint {
                    addresses: vec!["127.1.0.1".into()],
                    conditions: Some(EndpointConditions {
                        ready: *r,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ports: None,
        }
    }

    #[test]
    fn slice_readiness() {
        let table: Vec<(&str, Vec<Option<bool>>, bool)> = vec![
            ("all ready", vec![Some(true); 3], true),
            (
                "one not ready",
                vec![Some(true), Some(false), Some(true)],
                false,
            ),
            ("nil ready is not ready", vec![Some(true), None], false),
            ("no endpoints is ready", vec![], true),
        ];
        for (name, ready, want) in table {
            assert_eq!(slice_ready(&slice(Some("x"), "1", &ready)), want, "{name}");
        }
    }

    #[test]
    fn scenarios_21_23_24_which_events_start_a_weeder() {
        let c = config();
        let svc = Some("etcd-main-client");
        let not_ready = slice(svc, "1", &[Some(false); 3]);
        let ready = slice(svc, "2", &[Some(true); 3]);
        let ready_again = slice(svc, "3", &[Some(true); 3]);
        let ready_same_rv = slice(svc, "2", &[Some(true); 3]);
        let other = slice(Some("other"), "2", &[Some(true)]);
        let other_old = slice(Some("other"), "1", &[Some(false)]);
        let unlabelled = slice(None, "2", &[Some(true)]);
        let table: Vec<(&str, SliceEvent<'_>, bool)> = vec![
            (
                "21/24: not ready → ready",
                SliceEvent::Update {
                    old: &not_ready,
                    new: &ready,
                },
                true,
            ),
            (
                "23: ready → ready",
                SliceEvent::Update {
                    old: &ready,
                    new: &ready_again,
                },
                false,
            ),
            (
                "23: ready → not ready",
                SliceEvent::Update {
                    old: &ready,
                    new: &not_ready,
                },
                false,
            ),
            ("23: deleted", SliceEvent::Delete(&ready), false),
            (
                "unchanged resourceVersion",
                SliceEvent::Update {
                    old: &not_ready,
                    new: &ready_same_rv,
                }
                .same_rv(),
                false,
            ),
            ("created ready", SliceEvent::Create(&ready), true),
            ("created not ready", SliceEvent::Create(&not_ready), false),
            (
                "another service",
                SliceEvent::Update {
                    old: &other_old,
                    new: &other,
                },
                false,
            ),
            ("no service label", SliceEvent::Create(&unlabelled), false),
        ];
        for (name, ev, want) in table {
            assert_eq!(triggers(ev, &c), want, "{name}");
        }
    }

    impl<'a> SliceEvent<'a> {
        /// The same update, with the old object's resourceVersion on the
        /// new one (a resync).
        fn same_rv(self) -> SliceEvent<'a> {
            match self {
                SliceEvent::Update { new, .. } => SliceEvent::Update { old: new, new },
                e => e,
            }
        }
    }

    fn pod(waiting: &[Option<&str>], deleting: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("kube-apiserver-1".into()),
                deletion_timestamp: deleting
                    .then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                ..ObjectMeta::default()
            },
            status: Some(PodStatus {
                container_statuses: Some(
                    waiting
                        .iter()
                        .map(|w| ContainerStatus {
                            name: "c".into(),
                            state: Some(match w {
                                Some(reason) => ContainerState {
                                    waiting: Some(ContainerStateWaiting {
                                        reason: Some(reason.to_string()),
                                        message: None,
                                    }),
                                    ..Default::default()
                                },
                                None => ContainerState {
                                    running: Some(ContainerStateRunning::default()),
                                    ..Default::default()
                                },
                            }),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn scenarios_21_and_25_which_pods_are_deleted() {
        let table: Vec<(&str, Pod, bool)> = vec![
            (
                "21: crash-looping",
                pod(&[Some("CrashLoopBackOff")], false),
                true,
            ),
            (
                "21: one of two containers",
                pod(&[None, Some("CrashLoopBackOff")], false),
                true,
            ),
            ("21: running is untouched", pod(&[None], false), false),
            (
                "another waiting reason",
                pod(&[Some("ContainerCreating")], false),
                false,
            ),
            (
                "25: already deleting",
                pod(&[Some("CrashLoopBackOff")], true),
                false,
            ),
            ("no status", Pod::default(), false),
        ];
        for (name, p, want) in table {
            assert_eq!(should_delete(&p), want, "{name}");
        }
    }

    #[test]
    fn the_slice_watch_asks_only_for_configured_services() {
        let c = WeederConfig::from_yaml(crate::config::tests::UPSTREAM_WEEDER_EXAMPLE).unwrap();
        assert_eq!(
            slice_watch_selector(&c),
            "kubernetes.io/service-name in (etcd-main-client,kube-apiserver)"
        );
    }
}
