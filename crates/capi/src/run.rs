//! Wiring: the caches, the dynamic watches of provider kinds, who triggers
//! whom, and the five core controllers, run until shutdown.
//!
//! | a change of | triggers |
//! |---|---|
//! | Cluster | itself, its MachineHealthChecks, MachineDeployments and MachineSets |
//! | Machine | itself, its MachineSet, its Cluster's health checks, its Cluster while that is deleting |
//! | MachineSet | itself, its MachineDeployment |
//! | MachineDeployment | itself |
//! | MachineHealthCheck | itself, the Machines it targets (they mirror its verdicts) |
//! | Node (workload cluster) | its Machine, that Machine's MachineSet and health checks |
//! | provider object | the Machine or Cluster that owns it |

use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::runtime::{Controller, controller, watcher};

use crate::controllers::dynamic::Dynamic;
use crate::controllers::informer::{Sink, Triggers, informer, owner_sink};
use crate::controllers::{self, Caches, Config, Context};
use crate::meta::controller_of;
use crate::types::labels;
use crate::types::{Cluster, Machine, MachineDeployment, MachineHealthCheck, MachineSet};

/// The reporting controller of events.
pub const REPORTER: &str = "capi-controller-manager";

/// A sink that triggers the health checks of an object's Cluster.
fn checks_of_cluster<K: kube::Resource + 'static>(
    checks: Store<MachineHealthCheck>,
    triggers: Triggers<MachineHealthCheck>,
    cluster_of: fn(&K) -> Option<String>,
) -> Sink<K> {
    Box::new(move |o: &K| {
        let ns = o.meta().namespace.clone().unwrap_or_default();
        let Some(cluster) = cluster_of(o) else {
            return;
        };
        for c in checks.state_filter(|c| {
            c.metadata.namespace.as_deref() == Some(ns.as_str()) && c.spec.cluster_name == cluster
        }) {
            triggers.trigger_self(c.as_ref());
        }
    })
}

/// Runs the Cluster, Machine, MachineSet, MachineDeployment and
/// MachineHealthCheck controllers against the management cluster
/// (`client`), with Nodes and Pods in the workload cluster `target`
/// (`None`: no node step, Machines stop at `Provisioned`), until
/// `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    target: Option<kube::Client>,
    config: Config,
    shutdown: Shared<BoxFuture<'static, ()>>,
) -> Result<(), controllers::Error> {
    let (cluster_t, cluster_rx) = Triggers::<Cluster>::new();
    let (machine_t, machine_rx) = Triggers::<Machine>::new();
    let (set_t, set_rx) = Triggers::<MachineSet>::new();
    let (md_t, md_rx) = Triggers::<MachineDeployment>::new();
    let (check_t, check_rx) = Triggers::<MachineHealthCheck>::new();

    // Stores some sinks need before their informers exist.
    let sets_late: Arc<OnceLock<Store<MachineSet>>> = Arc::default();
    let mds_late: Arc<OnceLock<Store<MachineDeployment>>> = Arc::default();

    let checks = {
        let machines = machine_t.clone();
        let targets: Sink<MachineHealthCheck> = Box::new(move |c: &MachineHealthCheck| {
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            for t in c.status.iter().flat_map(|s| s.targets.iter()) {
                machines.trigger(&ns, t);
            }
        });
        informer(
            Api::<MachineHealthCheck>::all(client.clone()),
            (),
            vec![check_t.self_sink(), targets],
            shutdown.clone(),
        )
        .await?
    };
    let clusters = {
        let (sl, dl) = (sets_late.clone(), mds_late.clone());
        let (st, dt) = (set_t.clone(), md_t.clone());
        let children: Sink<Cluster> = Box::new(move |c: &Cluster| {
            let (ns, name) = (c.namespace().to_string(), c.name().to_string());
            if let Some(sets) = sl.get() {
                for s in sets.state_filter(|s| {
                    s.metadata.namespace.as_deref() == Some(&ns) && s.spec.cluster_name == name
                }) {
                    st.trigger_self(s.as_ref());
                }
            }
            if let Some(mds) = dl.get() {
                for d in mds.state_filter(|d| {
                    d.metadata.namespace.as_deref() == Some(&ns) && d.spec.cluster_name == name
                }) {
                    dt.trigger_self(d.as_ref());
                }
            }
        });
        informer(
            Api::<Cluster>::all(client.clone()),
            (),
            vec![
                cluster_t.self_sink(),
                checks_of_cluster(checks.clone(), check_t.clone(), |c: &Cluster| {
                    Some(c.name().to_string())
                }),
                children,
            ],
            shutdown.clone(),
        )
        .await?
    };
    let deployments = informer(
        Api::<MachineDeployment>::all(client.clone()),
        (),
        vec![md_t.self_sink()],
        shutdown.clone(),
    )
    .await?;
    let _ = mds_late.set(deployments.clone());
    let sets = informer(
        Api::<MachineSet>::all(client.clone()),
        (),
        vec![set_t.self_sink(), owner_sink(&md_t, "MachineDeployment")],
        shutdown.clone(),
    )
    .await?;
    let _ = sets_late.set(sets.clone());
    let machines = {
        let (clusters, ct) = (clusters.clone(), cluster_t.clone());
        let deleting_cluster: Sink<Machine> = Box::new(move |m: &Machine| {
            let ns = m.namespace();
            if clusters
                .find(|c| c.namespace() == ns && c.name() == m.spec.cluster_name)
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
            {
                ct.trigger(ns, &m.spec.cluster_name);
            }
        });
        informer(
            Api::<Machine>::all(client.clone()),
            (),
            vec![
                machine_t.self_sink(),
                owner_sink(&set_t, "MachineSet"),
                checks_of_cluster(checks.clone(), check_t.clone(), |m: &Machine| {
                    Some(m.spec.cluster_name.clone())
                }),
                deleting_cluster,
            ],
            shutdown.clone(),
        )
        .await?
    };
    // A deleting Cluster hears of its deployments' and sets' progress
    // through their Machines, which are the last to go.

    let nodes = match &target {
        Some(target) => {
            let machines = machines.clone();
            let (mt, st, ct) = (machine_t.clone(), set_t.clone(), check_t.clone());
            let checks = checks.clone();
            let to_machine: Sink<Node> = Box::new(move |n: &Node| {
                let owner = node_machine(&machines, n);
                let Some(m) = owner else {
                    return;
                };
                mt.trigger_self(m.as_ref());
                if let Some(o) = controller_of(&m.metadata).filter(|o| o.kind == "MachineSet") {
                    st.trigger(m.namespace(), &o.name);
                }
                for c in checks.state_filter(|c| {
                    c.metadata.namespace.as_deref() == m.metadata.namespace.as_deref()
                        && c.spec.cluster_name == m.spec.cluster_name
                }) {
                    ct.trigger_self(c.as_ref());
                }
            });
            Some(
                informer(
                    Api::<Node>::all(target.clone()),
                    (),
                    vec![to_machine],
                    shutdown.clone(),
                )
                .await?,
            )
        }
        None => None,
    };

    let dynamic = Dynamic::new(
        client.clone(),
        vec![
            owner_sink(&machine_t, "Machine"),
            owner_sink(&cluster_t, "Cluster"),
        ],
        shutdown.clone(),
    );
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: REPORTER.into(),
            instance: None,
        },
    );
    let workers = controller::Config::default().concurrency(config.concurrency);
    let ctx = Arc::new(Context::new(
        client,
        target,
        dynamic,
        Caches {
            clusters: clusters.clone(),
            machines: machines.clone(),
            sets: sets.clone(),
            deployments: deployments.clone(),
            checks: checks.clone(),
            nodes,
        },
        machine_t,
        set_t,
        recorder,
        config,
    ));

    macro_rules! run_controller {
        ($store:expr, $rx:expr, $module:ident) => {
            Controller::for_stream(
                futures::stream::pending::<Result<_, watcher::Error>>(),
                $store,
            )
            .reconcile_on($rx)
            .with_config(workers.clone())
            .graceful_shutdown_on(shutdown.clone())
            .run(
                controllers::$module::reconcile,
                controllers::$module::error_policy,
                ctx.clone(),
            )
            .for_each(|_| futures::future::ready(()))
        };
    }
    futures::join!(
        run_controller!(clusters, cluster_rx, cluster),
        run_controller!(machines, machine_rx, machine),
        run_controller!(sets, set_rx, machineset),
        run_controller!(deployments, md_rx, machinedeployment),
        run_controller!(checks, check_rx, machinehealthcheck),
    );
    Ok(())
}

/// The Machine of a Node: by the annotations the Machine controller writes,
/// else by providerID.
fn node_machine(machines: &Store<Machine>, n: &Node) -> Option<Arc<Machine>> {
    let ann = |k| crate::meta::annotation(&n.metadata, k);
    if let (Some(ns), Some(name)) = (
        ann(labels::NODE_CLUSTER_NAMESPACE),
        ann(labels::NODE_MACHINE),
    ) {
        return machines.get(&kube::runtime::reflector::ObjectRef::new(name).within(ns));
    }
    let pid = n.spec.as_ref()?.provider_id.as_deref()?;
    machines.find(|m| m.spec.provider_id.as_deref() == Some(pid))
}
