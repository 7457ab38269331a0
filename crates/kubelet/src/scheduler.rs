//! The scheduler step: every unbound pod that fits this node
//! ([`crate::schedule::fits`]) is bound to it through the pods/binding
//! subresource, with kube-scheduler's `Scheduled` and `FailedScheduling`
//! events. Pods bound to other nodes (the simulated workers) are never
//! seen here: the watch asks only for pods without a node.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tracing::{debug, warn};

use crate::kubelet::{Shared, bind, node, scheduled_event};
use crate::schedule::{Misfit, fits};

pub(crate) async fn run(shared: Arc<Shared>) {
    let api: Api<Pod> = Api::all(shared.client.clone());
    let cfg = watcher::Config::default().fields("spec.nodeName=");
    let mut events = watcher::watcher(api, cfg).default_backoff().boxed();
    // Pods told once why they do not fit (until they change).
    let mut told: HashSet<(String, String)> = HashSet::new();
    while let Some(ev) = events.next().await {
        let pod = match ev {
            Ok(Event::Apply(p) | Event::InitApply(p)) => p,
            Ok(_) => continue,
            Err(e) => {
                debug!(error = %e, "unscheduled pod watch");
                continue;
            }
        };
        let Some(n) = node(&shared).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let key = (
            pod.metadata.uid.clone().unwrap_or_default(),
            pod.metadata.resource_version.clone().unwrap_or_default(),
        );
        match fits(&pod, &n) {
            Ok(()) => match bind(&shared, &pod).await {
                Ok(()) => scheduled_event(&shared, &pod, Ok(())).await,
                Err(e) => warn!(error = %e, "binding"),
            },
            Err(Misfit::NotOurs) => {}
            Err(why) => {
                if told.insert(key) {
                    scheduled_event(&shared, &pod, Err(why.to_string())).await;
                }
            }
        }
    }
}
