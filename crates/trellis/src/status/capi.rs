//! `trellis status` for Cluster API objects, in the shape of `clusterctl
//! describe cluster`: Cluster → its infrastructure → MachineDeployment →
//! MachineSet → Machine → the Machine's bootstrap config, infrastructure
//! and Node, each with its Ready condition (status, severity, reason,
//! since when, message). The bootstrap and infrastructure lines show the
//! Machine's `BootstrapReady` and `InfrastructureReady`, which the Machine
//! controller mirrors from the provider objects, so the tree needs no
//! provider kinds.
//!
//! Rendering is a pure function of a [`CapiSnapshot`] and the time; the
//! listing is [`observe`], which answers `None` where Cluster API is not
//! served.

use std::collections::BTreeMap;
use std::time::Duration;

use capi::types::labels::conditions as ct;
use capi::{Cluster, Condition, Machine, MachineDeployment, MachineSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

use super::paint::{Paint, human_age, truncate};

/// The Cluster API objects of a namespace (or all) and the Nodes' readiness.
#[derive(Clone, Debug, Default)]
pub struct CapiSnapshot {
    pub clusters: Vec<Cluster>,
    pub deployments: Vec<MachineDeployment>,
    pub sets: Vec<MachineSet>,
    pub machines: Vec<Machine>,
    /// Node name → Ready.
    pub nodes: BTreeMap<String, bool>,
}

/// Lists the Cluster API objects; `None` when the API server does not serve
/// Cluster API (no CRD: nothing to show).
pub async fn observe(
    client: &kube::Client,
    namespace: Option<&str>,
) -> anyhow::Result<Option<CapiSnapshot>> {
    fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let lp = ListParams::default();
    let clusters = match api::<Cluster>(client, namespace).list(&lp).await {
        Ok(l) => l.items,
        // Not served, or not ours to see: no Cluster API section.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let (mds, mss, ms) = (
        api::<MachineDeployment>(client, namespace),
        api::<MachineSet>(client, namespace),
        api::<Machine>(client, namespace),
    );
    let (deployments, sets, machines) =
        futures::try_join!(mds.list(&lp), mss.list(&lp), ms.list(&lp))?;
    if clusters.is_empty() && machines.items.is_empty() {
        return Ok(None);
    }
    // Nodes are in the workload cluster, which is this one in trellis; a
    // client that may not list them just shows the Machines' conditions.
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&lp)
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|n| {
                    let ready = n.status.and_then(|s| s.conditions).is_some_and(|cs| {
                        cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                    });
                    (n.metadata.name.unwrap_or_default(), ready)
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Some(CapiSnapshot {
        clusters,
        deployments: deployments.items,
        sets: sets.items,
        machines: machines.items,
        nodes,
    }))
}

/// One row before alignment.
#[derive(Clone, Debug, Default)]
struct Row {
    name: String,
    ready: String,
    severity: String,
    reason: String,
    since: String,
    message: String,
    children: Vec<Row>,
}

fn since(t: Option<&Time>, now: Timestamp) -> String {
    t.map(|Time(t)| {
        let secs = now.as_second().saturating_sub(t.as_second()).max(0);
        human_age(Duration::from_secs(secs as u64))
    })
    .unwrap_or_default()
}

/// A row from a condition (or none: empty cells).
fn row(name: String, c: Option<&Condition>, now: Timestamp, message: String) -> Row {
    let (ready, severity, reason, when, cmsg) = match c {
        Some(c) => (
            c.status.clone(),
            c.severity.clone(),
            c.reason.clone(),
            since(c.last_transition_time.as_ref(), now),
            c.message.clone(),
        ),
        None => Default::default(),
    };
    let message = match (message.is_empty(), cmsg.is_empty()) {
        (false, false) => format!("{message}: {cmsg}"),
        (true, _) => cmsg,
        (false, true) => message,
    };
    Row {
        name,
        ready,
        severity,
        reason,
        since: when,
        message,
        children: Vec::new(),
    }
}

fn find<'a>(conditions: &'a [Condition], t: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == t)
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    capi::meta::controller_of(meta).map(|o| o.uid.as_str())
}

fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn same_ns(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.namespace == b.namespace
}

fn machine_row(m: &Machine, snap: &CapiSnapshot, now: Timestamp) -> Row {
    let st = m.status.clone().unwrap_or_default();
    let phase = if m.metadata.deletion_timestamp.is_some() && st.phase.as_deref() != Some("Deleted")
    {
        "Deleting".to_string()
    } else {
        st.phase.clone().unwrap_or_default()
    };
    let mut r = row(
        format!("Machine/{}", m.name()),
        find(&st.conditions, ct::READY),
        now,
        phase,
    );
    let kind = |r: &k8s_openapi::api::core::v1::ObjectReference| {
        format!(
            "{}/{}",
            r.kind.as_deref().unwrap_or_default(),
            r.name.as_deref().unwrap_or_default()
        )
    };
    let bootstrap_name = match &m.spec.bootstrap.config_ref {
        Some(c) => format!("BootstrapConfig - {}", kind(c)),
        None => format!(
            "BootstrapConfig - Secret/{}",
            m.spec
                .bootstrap
                .data_secret_name
                .as_deref()
                .unwrap_or_default()
        ),
    };
    r.children.push(row(
        bootstrap_name,
        find(&st.conditions, ct::BOOTSTRAP_READY),
        now,
        String::new(),
    ));
    r.children.push(row(
        format!(
            "MachineInfrastructure - {}",
            kind(&m.spec.infrastructure_ref)
        ),
        find(&st.conditions, ct::INFRASTRUCTURE_READY),
        now,
        m.spec.provider_id.clone().unwrap_or_default(),
    ));
    if let Some(node) = st.node_ref.as_ref().and_then(|n| n.name.clone()) {
        let health = find(&st.conditions, ct::NODE_HEALTHY);
        let mut n = row(format!("Node/{node}"), health, now, String::new());
        if let Some(ready) = snap.nodes.get(&node) {
            n.ready = if *ready { "True" } else { "False" }.into();
            if !*ready && n.message.is_empty() {
                n.message = "Node is not Ready".into();
            }
        }
        r.children.push(n);
    }
    r
}

fn set_row(s: &MachineSet, snap: &CapiSnapshot, now: Timestamp) -> Row {
    let st = s.status.clone().unwrap_or_default();
    let desired = s.spec.replicas.unwrap_or(0);
    let mut r = row(
        format!("MachineSet/{}", name(&s.metadata)),
        find(&st.conditions, ct::READY),
        now,
        format!("{}/{desired} ready", st.ready_replicas),
    );
    let uid = s.metadata.uid.as_deref();
    let mut machines: Vec<&Machine> = snap
        .machines
        .iter()
        .filter(|m| {
            same_ns(&m.metadata, &s.metadata) && controller_uid(&m.metadata) == uid && uid.is_some()
        })
        .collect();
    machines.sort_by_key(|m| m.name().to_string());
    r.children = machines
        .into_iter()
        .map(|m| machine_row(m, snap, now))
        .collect();
    r
}

fn deployment_row(d: &MachineDeployment, snap: &CapiSnapshot, now: Timestamp) -> Row {
    let st = d.status.clone().unwrap_or_default();
    let desired = d.spec.replicas.unwrap_or(0);
    let mut r = row(
        format!("MachineDeployment/{}", name(&d.metadata)),
        find(&st.conditions, ct::READY),
        now,
        format!(
            "{} {}/{desired} ready, {} up to date",
            st.phase.as_deref().unwrap_or_default(),
            st.ready_replicas,
            st.updated_replicas
        )
        .trim()
        .to_string(),
    );
    let uid = d.metadata.uid.as_deref();
    let mut sets: Vec<&MachineSet> = snap
        .sets
        .iter()
        .filter(|s| {
            same_ns(&s.metadata, &d.metadata) && controller_uid(&s.metadata) == uid && uid.is_some()
        })
        .collect();
    sets.sort_by_key(|s| {
        (
            s.metadata.creation_timestamp.as_ref().map(|Time(t)| *t),
            name(&s.metadata).to_string(),
        )
    });
    r.children = sets.into_iter().map(|s| set_row(s, snap, now)).collect();
    r
}

fn cluster_row(c: &Cluster, snap: &CapiSnapshot, now: Timestamp) -> Row {
    let st = c.status.clone().unwrap_or_default();
    let mut r = row(
        format!("Cluster/{}", c.name()),
        find(&st.conditions, ct::READY),
        now,
        st.phase.clone().unwrap_or_default(),
    );
    if let Some(infra) = &c.spec.infrastructure_ref {
        r.children.push(row(
            format!(
                "ClusterInfrastructure - {}/{}",
                infra.kind.as_deref().unwrap_or_default(),
                infra.name.as_deref().unwrap_or_default()
            ),
            find(&st.conditions, ct::INFRASTRUCTURE_READY),
            now,
            String::new(),
        ));
    }
    let of_cluster =
        |meta: &ObjectMeta, cluster: &str| same_ns(meta, &c.metadata) && cluster == c.name();
    let mut workers = Row {
        name: "Workers".into(),
        ..Row::default()
    };
    let mut mds: Vec<&MachineDeployment> = snap
        .deployments
        .iter()
        .filter(|d| of_cluster(&d.metadata, &d.spec.cluster_name))
        .collect();
    mds.sort_by_key(|d| name(&d.metadata).to_string());
    workers
        .children
        .extend(mds.into_iter().map(|d| deployment_row(d, snap, now)));
    let md_uids: Vec<&str> = snap
        .deployments
        .iter()
        .filter_map(|d| d.metadata.uid.as_deref())
        .collect();
    let mut sets: Vec<&MachineSet> = snap
        .sets
        .iter()
        .filter(|s| of_cluster(&s.metadata, &s.spec.cluster_name))
        .filter(|s| controller_uid(&s.metadata).is_none_or(|u| !md_uids.contains(&u)))
        .collect();
    sets.sort_by_key(|s| name(&s.metadata).to_string());
    workers
        .children
        .extend(sets.into_iter().map(|s| set_row(s, snap, now)));
    let set_uids: Vec<&str> = snap
        .sets
        .iter()
        .filter_map(|s| s.metadata.uid.as_deref())
        .collect();
    let mut machines: Vec<&Machine> = snap
        .machines
        .iter()
        .filter(|m| of_cluster(&m.metadata, &m.spec.cluster_name))
        .filter(|m| controller_uid(&m.metadata).is_none_or(|u| !set_uids.contains(&u)))
        .collect();
    machines.sort_by_key(|m| m.name().to_string());
    workers
        .children
        .extend(machines.into_iter().map(|m| machine_row(m, snap, now)));
    if !workers.children.is_empty() {
        r.children.push(workers);
    }
    r
}

/// The machine tree and the Cluster API tree together: only the latter
/// when there are no MCM objects to show.
pub fn join(mcm_tree: String, capi_tree: &str) -> String {
    if capi_tree.is_empty() {
        mcm_tree
    } else if mcm_tree.starts_with("No shoots, machine deployments") {
        capi_tree.to_string()
    } else {
        format!("{mcm_tree}\n{capi_tree}")
    }
}

/// Flattens a row tree into lines with the tree drawn in front of names.
fn flatten(r: &Row, prefix: &str, branch: &str, out: &mut Vec<Row>) {
    let mut line = r.clone();
    line.name = format!("{prefix}{branch}{}", r.name);
    line.children.clear();
    out.push(line);
    let child_prefix = format!(
        "{prefix}{}",
        match branch {
            "├─" => "│ ",
            "└─" => "  ",
            _ => "",
        }
    );
    for (i, c) in r.children.iter().enumerate() {
        let last = i + 1 == r.children.len();
        flatten(c, &child_prefix, if last { "└─" } else { "├─" }, out);
    }
}

/// The tree of every Cluster (and of Machines whose Cluster is missing).
pub fn render(snap: &CapiSnapshot, now: Timestamp, paint: Paint, message_width: usize) -> String {
    let mut roots: Vec<Row> = Vec::new();
    let mut clusters: Vec<&Cluster> = snap.clusters.iter().collect();
    clusters.sort_by_key(|c| (c.namespace().to_string(), c.name().to_string()));
    for c in &clusters {
        roots.push(cluster_row(c, snap, now));
    }
    // Objects naming a Cluster that does not exist.
    let mut orphans: BTreeMap<(String, String), Vec<&Machine>> = BTreeMap::new();
    for m in &snap.machines {
        let known = clusters.iter().any(|c| {
            c.name() == m.spec.cluster_name && c.metadata.namespace == m.metadata.namespace
        });
        if !known {
            orphans
                .entry((m.namespace().to_string(), m.spec.cluster_name.clone()))
                .or_default()
                .push(m);
        }
    }
    for ((_, cluster), machines) in orphans {
        let mut r = Row {
            name: format!("Cluster/{cluster}"),
            message: "the Cluster does not exist".into(),
            ready: "False".into(),
            severity: "Error".into(),
            ..Row::default()
        };
        r.children = machines
            .into_iter()
            .map(|m| machine_row(m, snap, now))
            .collect();
        roots.push(r);
    }
    if roots.is_empty() {
        return String::new();
    }
    let mut lines = Vec::new();
    for r in &roots {
        flatten(r, "", "", &mut lines);
    }
    let header = Row {
        name: "NAME".into(),
        ready: "READY".into(),
        severity: "SEVERITY".into(),
        reason: "REASON".into(),
        since: "SINCE".into(),
        message: "MESSAGE".into(),
        children: Vec::new(),
    };
    let width = |f: fn(&Row) -> &str| {
        std::iter::once(&header)
            .chain(&lines)
            .map(|r| f(r).chars().count())
            .max()
            .unwrap_or(0)
    };
    let (wn, wr, ws, wre, wsi) = (
        width(|r| &r.name),
        width(|r| &r.ready),
        width(|r| &r.severity),
        width(|r| &r.reason),
        width(|r| &r.since),
    );
    let mut out = String::new();
    for (i, r) in std::iter::once(&header).chain(&lines).enumerate() {
        let ready = format!("{:wr$}", r.ready);
        let ready = if i == 0 {
            ready
        } else {
            match (r.ready.as_str(), r.severity.as_str()) {
                ("True", _) => paint.green(&ready),
                ("False", "Error") => paint.red(&ready),
                ("False", _) | ("Unknown", _) => paint.yellow(&ready),
                _ => ready,
            }
        };
        let line = format!(
            "{:wn$}  {ready}  {:ws$}  {:wre$}  {:wsi$}  {}",
            r.name,
            r.severity,
            r.reason,
            r.since,
            truncate(&r.message, message_width),
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn conditions(list: &[(&str, &str, &str, &str)]) -> Vec<Condition> {
        list.iter()
            .map(|(ty, status, reason, message)| Condition {
                type_: ty.to_string(),
                status: status.to_string(),
                severity: if *status == "False" {
                    "Info".into()
                } else {
                    String::new()
                },
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: Some(t(1_000)),
            })
            .collect()
    }

    fn meta(name: &str, uid: &str, owner: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            creation_timestamp: Some(t(1_000)),
            owner_references: owner.map(|o| {
                vec![capi::meta::owner_ref(
                    "cluster.x-k8s.io/v1beta1",
                    "Owner",
                    "o",
                    o,
                    true,
                )]
            }),
            ..ObjectMeta::default()
        }
    }

    fn snapshot() -> CapiSnapshot {
        let mut c = Cluster::new("demo", Default::default());
        c.metadata = meta("demo", "c", None);
        c.spec.infrastructure_ref = Some(capi::testing::reference(
            capi::testing::INFRA_API,
            "LocalCluster",
            "demo",
        ));
        c.status = Some(capi::ClusterStatus {
            phase: Some("Provisioned".into()),
            conditions: conditions(&[
                ("Ready", "True", "", ""),
                ("InfrastructureReady", "True", "", ""),
            ]),
            ..Default::default()
        });
        let mut md = MachineDeployment::new("md-0", Default::default());
        md.metadata = meta("md-0", "md", None);
        md.spec.cluster_name = "demo".into();
        md.spec.replicas = Some(2);
        md.status = Some(capi::MachineDeploymentStatus {
            phase: Some("ScalingUp".into()),
            ready_replicas: 1,
            updated_replicas: 2,
            conditions: conditions(&[(
                "Ready",
                "False",
                "WaitingForAvailableMachines",
                "1 of 2 available",
            )]),
            ..Default::default()
        });
        let mut ms = MachineSet::new("md-0-abcde", Default::default());
        ms.metadata = meta("md-0-abcde", "ms", Some("md"));
        ms.spec.cluster_name = "demo".into();
        ms.spec.replicas = Some(2);
        ms.status = Some(capi::MachineSetStatus {
            ready_replicas: 1,
            conditions: conditions(&[("Ready", "True", "", "")]),
            ..Default::default()
        });
        let machine = |name: &str, running: bool| {
            let mut m = Machine::new(name, capi::testing::machine(name).spec);
            m.metadata = meta(name, name, Some("ms"));
            m.spec.cluster_name = "demo".into();
            m.spec.provider_id = running.then(|| format!("local:///default/{name}"));
            m.status = Some(if running {
                capi::MachineStatus {
                    phase: Some("Running".into()),
                    node_ref: Some(ObjectReference {
                        name: Some(name.into()),
                        ..Default::default()
                    }),
                    conditions: conditions(&[
                        ("Ready", "True", "", ""),
                        ("BootstrapReady", "True", "", ""),
                        ("InfrastructureReady", "True", "", ""),
                        ("NodeHealthy", "True", "", ""),
                    ]),
                    ..Default::default()
                }
            } else {
                capi::MachineStatus {
                    phase: Some("Pending".into()),
                    conditions: conditions(&[
                        (
                            "Ready",
                            "False",
                            "WaitingForClusterInfrastructure",
                            "Waiting for Cluster \"demo\" infrastructure",
                        ),
                        (
                            "BootstrapReady",
                            "False",
                            "WaitingForClusterInfrastructure",
                            "Waiting for Cluster \"demo\" infrastructure",
                        ),
                        (
                            "InfrastructureReady",
                            "False",
                            "WaitingForInfrastructure",
                            "",
                        ),
                    ]),
                    ..Default::default()
                }
            });
            m
        };
        CapiSnapshot {
            clusters: vec![c],
            deployments: vec![md],
            sets: vec![ms],
            machines: vec![
                machine("md-0-abcde-aaaaa", true),
                machine("md-0-abcde-bbbbb", false),
            ],
            nodes: BTreeMap::from([("md-0-abcde-aaaaa".to_string(), true)]),
        }
    }

    #[test]
    fn the_tree_reads_like_clusterctl_describe() {
        let out = render(
            &snapshot(),
            Timestamp::from_second(1_300).unwrap(),
            Paint::none(),
            60,
        );
        let want = "\
NAME                                                             READY  SEVERITY  REASON                           SINCE  MESSAGE
Cluster/demo                                                     True                                              5m     Provisioned
├─ClusterInfrastructure - LocalCluster/demo                      True                                              5m
└─Workers
  └─MachineDeployment/md-0                                       False  Info      WaitingForAvailableMachines      5m     ScalingUp 1/2 ready, 2 up to date: 1 of 2 available
    └─MachineSet/md-0-abcde                                      True                                              5m     1/2 ready
      ├─Machine/md-0-abcde-aaaaa                                 True                                              5m     Running
      │ ├─BootstrapConfig - TrellisConfig/md-0-abcde-aaaaa       True                                              5m
      │ ├─MachineInfrastructure - LocalMachine/md-0-abcde-aaaaa  True                                              5m     local:///default/md-0-abcde-aaaaa
      │ └─Node/md-0-abcde-aaaaa                                  True                                              5m
      └─Machine/md-0-abcde-bbbbb                                 False  Info      WaitingForClusterInfrastructure  5m     Pending: Waiting for Cluster \"demo\" infrastructure
        ├─BootstrapConfig - TrellisConfig/md-0-abcde-bbbbb       False  Info      WaitingForClusterInfrastructure  5m     Waiting for Cluster \"demo\" infrastructure
        └─MachineInfrastructure - LocalMachine/md-0-abcde-bbbbb  False  Info      WaitingForInfrastructure         5m
";
        assert_eq!(out, want, "\n{out}");
    }

    #[test]
    fn machines_of_a_missing_cluster_and_an_empty_snapshot() {
        let mut snap = snapshot();
        snap.clusters.clear();
        snap.deployments.clear();
        snap.sets.clear();
        let out = render(
            &snap,
            Timestamp::from_second(1_300).unwrap(),
            Paint::none(),
            60,
        );
        assert!(
            out.lines().nth(1).unwrap().starts_with("Cluster/demo"),
            "{out}"
        );
        assert!(out.contains("the Cluster does not exist"), "{out}");
        assert!(out.contains("├─Machine/md-0-abcde-aaaaa"), "{out}");
        assert_eq!(
            render(
                &CapiSnapshot::default(),
                Timestamp::from_second(0).unwrap(),
                Paint::none(),
                60
            ),
            ""
        );
    }
}
