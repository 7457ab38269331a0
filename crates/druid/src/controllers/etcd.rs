//! The etcd controller (spec §3): the event filter of [`gate`], then per
//! pass the deletion flow, or the spec flow (when the gates allow it) and
//! always the status flow, written once at the end. Owned StatefulSets
//! and Leases wake it too, so members and conditions follow the leases
//! backup-restore renews.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};

use super::{Context, Error};
use crate::components::{self, Names, TLS_ENABLED_ANNOTATION, default_labels};
use crate::condition::{self, BackupFacts, Facts};
use crate::gate::{self, FlowOutcome, SpecPass};
use crate::member::{self, LeaseFacts};
use crate::status::{self, StsView};
use crate::sync::{self, DeletionStep, Ref, StsObserved, StsStep};
use crate::types::Etcd;

/// Runs the etcd controller until `shutdown`.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<Etcd> = ctx.watch_api();
    let (reader, writer) = reflector::store::<Etcd>();
    let auto = ctx.opts.auto_reconcile;
    let mut seen: HashMap<(Option<String>, String), Etcd> = HashMap::new();
    let filtered = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .filter_map(move |event| {
            let out = match event {
                Ok(watcher::Event::Apply(e) | watcher::Event::InitApply(e)) => {
                    let key = (e.namespace(), e.name_any());
                    let passes = gate::event_passes(seen.get(&key), &e, auto);
                    seen.insert(key, e.clone());
                    passes.then_some(Ok(e))
                }
                Ok(watcher::Event::Delete(e)) => {
                    seen.remove(&(e.namespace(), e.name_any()));
                    None
                }
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            };
            futures::future::ready(out)
        });
    Controller::for_stream(filtered, reader)
        .owns(ctx.watch_api::<StatefulSet>(), watcher::Config::default())
        .owns(ctx.watch_api::<Lease>(), watcher::Config::default())
        .with_config(
            kube::runtime::controller::Config::default().concurrency(ctx.opts.etcd_workers.max(1)),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

pub fn error_policy(etcd: Arc<Etcd>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(etcd = %etcd.name_any(), error = %err, "etcd reconcile failed");
    Action::requeue(super::ERROR_REQUEUE)
}

/// One pass over an Etcd.
pub async fn reconcile(etcd: Arc<Etcd>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = etcd.namespace().unwrap_or_default();
    let name = etcd.name_any();
    let api: Api<Etcd> = Api::namespaced(ctx.client.clone(), &ns);
    if etcd.metadata.deletion_timestamp.is_some() {
        return deletion_flow(&etcd, &api, &ctx).await;
    }
    let run_id = uuid::Uuid::new_v4().to_string();
    let outcome = match gate::spec_pass(&etcd, ctx.opts.auto_reconcile) {
        SpecPass::Reconcile => Some(spec_flow(&etcd, &api, &ctx, &run_id).await),
        SpecPass::Suspended => {
            let event = Event {
                type_: EventType::Warning,
                reason: "SpecReconciliationSkipped".into(),
                note: Some(format!(
                    "spec reconciliation of {name} is skipped: annotation {} is set",
                    components::SUSPEND_ANNOTATION
                )),
                action: "Reconcile".into(),
                secondary: None,
            };
            // An event is a courtesy: failing to record one changes nothing.
            if let Err(e) = ctx.recorder.publish(&event, &etcd.object_ref(&())).await {
                tracing::debug!(etcd = %name, error = %e, "recording an event failed");
            }
            None
        }
        SpecPass::Skip => None,
    };
    // With runtime creation disabled there is nothing to observe.
    let observed = if sync::runtime_disabled(&etcd) {
        None
    } else {
        Some(observe(&etcd, &ctx).await?)
    };
    let now = Timestamp::now();
    let generation = etcd.metadata.generation.unwrap_or(0);
    let thresholds = ctx.opts.member_thresholds;
    super::update_etcd_status(&api, &name, |fresh| {
        let previous = fresh.status.clone().unwrap_or_default();
        let mut s = match &observed {
            Some(o) => {
                let v = verdicts_for(fresh, o, thresholds, now);
                status::status_flow(fresh, &previous, &v, now)
            }
            None => previous,
        };
        if let Some(outcome) = &outcome {
            status::record_outcome(&mut s, outcome, generation, &run_id, now);
        }
        s
    })
    .await?;
    if outcome == Some(FlowOutcome::Succeeded) {
        super::remove_annotations(&api, &name, &gate::annotations_to_drop(&etcd)).await?;
    }
    let requeue = match &outcome {
        Some(o) => gate::outcome_state(o).1.min(ctx.opts.status_sync_period),
        None => ctx.opts.status_sync_period,
    };
    Ok(Action::requeue(requeue))
}

/// The spec flow in upstream's order; stops at the first failure.
async fn spec_flow(etcd: &Etcd, api: &Api<Etcd>, ctx: &Context, run_id: &str) -> FlowOutcome {
    let now = Timestamp::now();
    let name = etcd.name_any();
    let recorded = super::update_etcd_status(api, &name, |fresh| {
        let mut s = fresh.status.clone().unwrap_or_default();
        let processing = s
            .last_operation
            .as_ref()
            .is_some_and(|o| o.type_ == "Reconcile" && o.state == "Processing");
        if !processing {
            s.last_operation = Some(status::operation(
                "Reconcile",
                "Processing",
                "Reconciliation of the spec is in progress",
                run_id,
                now,
            ));
        }
        s
    })
    .await;
    if let Err(e) = recorded {
        return failed("ERR_RECORD_OPERATION", e);
    }
    if let Err(e) = super::set_finalizer(api, etcd, true).await {
        return failed("ERR_ADD_FINALIZER", e);
    }
    match sync_components(etcd, ctx).await {
        Ok(outcome) => outcome,
        Err((code, e)) => failed(code, e),
    }
}

fn failed(code: &str, e: Error) -> FlowOutcome {
    FlowOutcome::Failed {
        code: code.to_string(),
        description: e.to_string(),
    }
}

/// How long the pre-sync full snapshot may take.
const PRE_SYNC_SNAPSHOT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

async fn sync_components(etcd: &Etcd, ctx: &Context) -> Result<FlowOutcome, (&'static str, Error)> {
    let n = Names::of(etcd);
    let client = &ctx.client;
    let read = |what: &str, source| {
        (
            "ERR_SYNC_STATEFULSET",
            Error::ReadFailed {
                what: what.to_string(),
                source,
            },
        )
    };
    let sts_api: Api<StatefulSet> = Api::namespaced(client.clone(), &n.namespace);
    let sts = sts_api
        .get_opt(&n.name)
        .await
        .map_err(|e| read("statefulset", e))?;
    let want_selector = default_labels(&n.name);
    let pods_exist = if sts.is_none() {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &n.namespace);
        !pods
            .list(&ListParams::default().labels(&selector_string(&want_selector)))
            .await
            .map_err(|e| read("pods", e))?
            .items
            .is_empty()
    } else {
        false
    };
    let observed = StsObserved {
        exists: sts.is_some(),
        selector_matches: sts.as_ref().is_some_and(|s| {
            s.spec
                .as_ref()
                .and_then(|s| s.selector.match_labels.as_ref())
                == Some(&want_selector)
        }),
        reconciled_before: etcd
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .is_some(),
        pods_exist,
        members_in_status: etcd.status.as_ref().map_or(0, |s| s.members.len() as i32),
        replicas: sts
            .as_ref()
            .and_then(|s| s.spec.as_ref())
            .and_then(|s| s.replicas)
            .unwrap_or(0),
        ready: sts
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0),
        tls_volumes: sts
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
            .map(|v| crate::tls::tls_volume_names(&v))
            .unwrap_or_default(),
        lease_peer_tls: if sts.is_some() {
            member_lease_tls(client, etcd)
                .await
                .map_err(|e| read("member leases", e))?
        } else {
            Vec::new()
        },
    };
    let (replicas, requeue) = match sync::sts_step(etcd, &observed) {
        StsStep::OrphanDelete => {
            super::delete(
                client,
                &n.namespace,
                "StatefulSet",
                &n.name,
                &DeleteParams::orphan(),
            )
            .await
            .map_err(|e| ("ERR_SYNC_STATEFULSET", e))?;
            return Ok(FlowOutcome::Requeue(
                "StatefulSet selector differs: deleted, leaving its pods, to be recreated".into(),
            ));
        }
        StsStep::Apply { replicas, requeue } => (replicas, requeue),
        StsStep::Wait(why) => return Ok(FlowOutcome::Requeue(why)),
    };
    let (sts_replicas, sts_ready) = sts.as_ref().map_or((0, 0), |s| {
        (
            s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0),
            s.status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0),
        )
    });
    if sync::pre_sync_snapshot(etcd, sts_replicas, sts_ready) {
        let url = crate::components::full_snapshot_url(etcd, &ctx.opts.settings);
        ctx.opts
            .snapshot_trigger
            .trigger(url, PRE_SYNC_SNAPSHOT_TIMEOUT)
            .await
            .map_err(|e| ("ERR_PRE_SYNC_SNAPSHOT", Error::PreSyncSnapshotFailed(e)))?;
        tracing::info!(etcd = %format!("{}/{}", n.namespace, n.name), "took the pre-sync full snapshot before scaling to 0");
    }
    for obj in sync::components_to_apply(etcd, replicas, &ctx.opts.settings) {
        let component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let obj = if obj["kind"] == "Lease" {
            // Leases are backup-restore's to renew: druid owns only their
            // metadata, so an apply never touches holder or renew time.
            serde_json::json!({
                "apiVersion": obj["apiVersion"],
                "kind": "Lease",
                "metadata": obj["metadata"],
            })
        } else {
            obj
        };
        super::apply(client, &n.namespace, &obj)
            .await
            .map_err(|e| (sync::error_code(&component), e))?;
    }
    let member_leases = if sync::runtime_disabled(etcd) {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &n.namespace);
        let mut sel = default_labels(&n.name);
        sel.insert(
            "app.kubernetes.io/component".into(),
            "etcd-member-lease".into(),
        );
        leases
            .list(&ListParams::default().labels(&selector_string(&sel)))
            .await
            .map_err(|e| {
                (
                    "ERR_SYNC_MEMBER_LEASE",
                    Error::ReadFailed {
                        what: "member leases".into(),
                        source: e,
                    },
                )
            })?
            .items
            .iter()
            .map(|l| l.name_any())
            .collect()
    } else {
        Vec::new()
    };
    for r in sync::components_to_remove(etcd, &member_leases) {
        super::delete(
            client,
            &n.namespace,
            r.kind,
            &r.name,
            &DeleteParams::default(),
        )
        .await
        .map_err(|e| ("ERR_CLEANUP", e))?;
    }
    if requeue {
        return Ok(FlowOutcome::Requeue(format!(
            "StatefulSet recreated with {replicas} replicas, the members' count"
        )));
    }
    Ok(FlowOutcome::Succeeded)
}

/// Each member lease's `tls-enabled` annotation, by ordinal.
async fn member_lease_tls(
    client: &kube::Client,
    etcd: &Etcd,
) -> Result<Vec<Option<bool>>, kube::Error> {
    let n = Names::of(etcd);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &n.namespace);
    let mut sel = default_labels(&n.name);
    sel.insert(
        "app.kubernetes.io/component".into(),
        "etcd-member-lease".into(),
    );
    // One list, not a read per member.
    let by_name: std::collections::BTreeMap<String, Option<bool>> = leases
        .list(&ListParams::default().labels(&selector_string(&sel)))
        .await?
        .items
        .into_iter()
        .map(|l| {
            let tls = l
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(TLS_ENABLED_ANNOTATION))
                .map(|v| v == "true");
            (l.name_any(), tls)
        })
        .collect();
    Ok((0..etcd.spec.replicas.max(0))
        .map(|i| by_name.get(&format!("{}-{i}", n.name)).copied().flatten())
        .collect())
}

fn selector_string(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What the status flow reads: the StatefulSet, the Etcd's leases and
/// pods, and Warning events of its claims.
pub struct Observed {
    sts: Option<StsView>,
    leases: Vec<Lease>,
    ready_pods: Vec<String>,
    volume_warnings: Vec<String>,
}

async fn observe(etcd: &Etcd, ctx: &Context) -> Result<Observed, Error> {
    let n = Names::of(etcd);
    let client = &ctx.client;
    let read = |what: &str| {
        let what = what.to_string();
        move |source| Error::ReadFailed { what, source }
    };
    let selector = selector_string(&default_labels(&n.name));
    let sts = Api::<StatefulSet>::namespaced(client.clone(), &n.namespace)
        .get_opt(&n.name)
        .await
        .map_err(read("statefulset"))?;
    let leases = Api::<Lease>::namespaced(client.clone(), &n.namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(read("leases"))?
        .items;
    let ready_pods = Api::<Pod>::namespaced(client.clone(), &n.namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(read("pods"))?
        .items
        .into_iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "ContainersReady" && c.status == "True")
                })
        })
        .map(|p| p.name_any())
        .collect();
    let claim_prefix = format!("{}-{}-", components::volume_claim_template(etcd), n.name);
    let volume_warnings = if sts.is_some() {
        Api::<CoreEvent>::namespaced(client.clone(), &n.namespace)
            .list(&ListParams::default())
            .await
            .map_err(read("events"))?
            .items
            .into_iter()
            .filter(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.involved_object.kind.as_deref() == Some("PersistentVolumeClaim")
                    && e.involved_object
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with(&claim_prefix))
            })
            .map(|e| {
                format!(
                    "{}: {}",
                    e.involved_object.name.unwrap_or_default(),
                    e.message.unwrap_or_default()
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Observed {
        sts: sts.as_ref().map(StsView::of),
        leases,
        ready_pods,
        volume_warnings,
    })
}

fn lease_facts(lease: &Lease) -> LeaseFacts {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseFacts {
        name: lease.name_any(),
        holder_identity: spec.holder_identity,
        renew_time: spec.renew_time.map(|t| t.0),
    }
}

fn std_to_signed(d: std::time::Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// Members and every condition's verdict from what was observed.
fn verdicts_for(
    etcd: &Etcd,
    o: &Observed,
    thresholds: member::Thresholds,
    now: Timestamp,
) -> status::Observed {
    let n = Names::of(etcd);
    let expected: Vec<String> = (0..etcd.spec.replicas.max(0))
        .map(|i| n.member_lease(i))
        .collect();
    let member_leases: Vec<&Lease> = expected
        .iter()
        .filter_map(|name| o.leases.iter().find(|l| &l.name_any() == name))
        .collect();
    let facts: Vec<LeaseFacts> = member_leases.iter().map(|l| lease_facts(l)).collect();
    let previous = etcd.status.clone().unwrap_or_default();
    let members = member::member_statuses(
        &facts,
        |pod| o.ready_pods.iter().any(|p| p == pod),
        &previous.members,
        thresholds,
        now,
    );
    let cluster_ids = member::cluster_ids(&facts, &members);
    let backup = etcd.spec.backup.store.as_ref().map(|_| {
        let find = |name: String| o.leases.iter().find(|l| l.name_any() == name);
        let full = find(n.full_snapshot_lease());
        let delta = find(n.delta_snapshot_lease());
        let renewed = |l: Option<&Lease>| {
            l.and_then(|l| l.spec.as_ref())
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0)
        };
        let b = &etcd.spec.backup;
        BackupFacts {
            lease_error: false,
            delta_renewed: renewed(delta),
            full_renewed: renewed(full),
            full_created: full.and_then(|l| l.metadata.creation_timestamp.as_ref().map(|t| t.0)),
            delta_period: std_to_signed(
                b.delta_snapshot_period
                    .as_deref()
                    .and_then(crate::duration::parse)
                    .unwrap_or(std::time::Duration::from_secs(20)),
            ),
            full_interval: std_to_signed(components::full_snapshot_interval(
                b.full_snapshot_schedule.as_deref(),
            )),
        }
    });
    let tls: Vec<Option<&String>> = member_leases
        .iter()
        .map(|l| {
            l.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(TLS_ENABLED_ANNOTATION))
        })
        .collect();
    let peer_tls_enabled = if tls.iter().all(Option::is_none) {
        None
    } else {
        Some(tls.iter().all(|t| t.is_some_and(|v| v == "true")))
    };
    let f = Facts {
        spec_replicas: etcd.spec.replicas,
        members: &members,
        sts: o.sts.as_ref().map(StsView::condition_facts),
        backup,
        volume_warnings: o.sts.as_ref().map(|_| o.volume_warnings.clone()),
        cluster_ids,
    };
    let verdicts = condition::checks(&f, &previous.conditions, now);
    status::Observed {
        sts: o.sts.clone(),
        members,
        verdicts,
        peer_tls_enabled,
    }
}

/// Deletion: record it, delete every component, wait until none remains,
/// then let the Etcd go.
async fn deletion_flow(etcd: &Etcd, api: &Api<Etcd>, ctx: &Context) -> Result<Action, Error> {
    if !super::has_finalizer(etcd) {
        return Ok(Action::await_change());
    }
    let n = Names::of(etcd);
    let now = Timestamp::now();
    super::update_etcd_status(api, &n.name, |fresh| {
        let mut s = fresh.status.clone().unwrap_or_default();
        let deleting = s
            .last_operation
            .as_ref()
            .is_some_and(|o| o.type_ == "Delete" && o.state == "Processing");
        if !deleting {
            s.last_operation = Some(status::operation(
                "Delete",
                "Processing",
                "Deletion of the etcd cluster is in progress",
                "",
                now,
            ));
        }
        s
    })
    .await?;
    let selector = selector_string(&default_labels(&n.name));
    let mut remaining = Vec::new();
    for kind in sync::COMPONENT_KINDS {
        let list = super::dynamic(&ctx.client, &n.namespace, kind)
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| Error::ReadFailed {
                what: format!("{kind} components"),
                source,
            })?;
        remaining.extend(list.items.into_iter().map(|o| {
            (
                Ref {
                    kind,
                    name: o.name_any(),
                },
                o.metadata.deletion_timestamp.is_some(),
            )
        }));
    }
    let going: Vec<Ref> = remaining
        .iter()
        .filter(|(_, deleting)| *deleting)
        .map(|(r, _)| r.clone())
        .collect();
    match sync::deletion_step(remaining.into_iter().map(|(r, _)| r).collect()) {
        DeletionStep::Delete(refs) => {
            for r in refs.iter().filter(|r| !going.contains(r)) {
                super::delete(
                    &ctx.client,
                    &n.namespace,
                    r.kind,
                    &r.name,
                    &DeleteParams::background(),
                )
                .await?;
            }
            Ok(Action::requeue(gate::DELETION_REQUEUE))
        }
        DeletionStep::RemoveFinalizer => {
            super::set_finalizer(api, etcd, false).await?;
            Ok(Action::await_change())
        }
    }
}
