//! The tree as a pure function of a [`Snapshot`] and the time: shoots,
//! their Workers, deployments, sets, machines and nodes, aligned into
//! columns and coloured.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use api::{Machine, MachineDeployment, MachineSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::paint::{Paint, Tone, human_age, phase_name, truncate};

/// Everything the tree shows, as listed from the API.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub deployments: Vec<MachineDeployment>,
    pub sets: Vec<MachineSet>,
    pub machines: Vec<Machine>,
    /// Nodes by name with their readiness, when the machines' target
    /// cluster is known (a shoot's API): shown under their machines.
    pub nodes: BTreeMap<String, bool>,
    /// Namespaces holding machine objects that no machine controller
    /// serves, each with the sentence saying so (`mcm::serving::problem`):
    /// shown above the tree, since nobody writes a condition there.
    pub unserved: BTreeMap<String, String>,
}

/// A Shoot with what trellis made of it: its Worker and the machine objects
/// of its control namespace.
#[derive(Clone, Debug, Default)]
pub struct ShootView {
    pub shoot: gardener::Shoot,
    pub worker: Option<worker::Worker>,
    pub snap: Snapshot,
}

/// One line of the tree before alignment.
struct Line {
    namespace: String,
    name: String,
    state: (String, Tone),
    node: String,
    age: String,
    message: (String, Tone),
}

fn age(meta: &ObjectMeta, now: Timestamp) -> String {
    meta.creation_timestamp
        .as_ref()
        .map(|Time(t)| {
            let secs = now.as_second().saturating_sub(t.as_second()).max(0);
            human_age(Duration::from_secs(secs as u64))
        })
        .unwrap_or_default()
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn uid(meta: &ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or("")
}

fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn deployment_line(md: &MachineDeployment, now: Timestamp) -> Line {
    let st = md.status.clone().unwrap_or_default();
    let mut state = format!("{}/{} ready", st.ready_replicas, md.spec.replicas);
    if md.spec.paused {
        state.push_str(", paused");
    }
    let healthy = st.ready_replicas >= md.spec.replicas && st.updated_replicas >= md.spec.replicas;
    // The first condition that needs attention: a failure, a freeze, or
    // one that does not hold (e.g. a rollout past its deadline).
    let attention = st.conditions.iter().find(|c| {
        let ty = c.type_.as_str();
        let holds = c.status.as_str() == "True";
        matches!(ty, "ReplicaFailure" | "Frozen") == holds
            && (holds || matches!(ty, "Available" | "Progressing"))
    });
    let message = match attention {
        Some(c) => {
            let bad = matches!(c.type_.as_str(), "ReplicaFailure" | "Frozen")
                || c.reason == "ProgressDeadlineExceeded";
            (
                format!("{} {}: {}", c.type_.as_str(), c.reason, c.message),
                if bad { Tone::Bad } else { Tone::Busy },
            )
        }
        None if !st.failed_machines.is_empty() => (
            format!("{} failed machine(s)", st.failed_machines.len()),
            Tone::Bad,
        ),
        None => (String::new(), Tone::Plain),
    };
    Line {
        namespace: md.metadata.namespace.clone().unwrap_or_default(),
        name: format!("MachineDeployment/{}", name(&md.metadata)),
        state: (state, if healthy { Tone::Good } else { Tone::Busy }),
        node: String::new(),
        age: age(&md.metadata, now),
        message,
    }
}

fn set_line(ms: &MachineSet, now: Timestamp) -> Line {
    let st = ms.status.clone().unwrap_or_default();
    let healthy = st.ready_replicas >= ms.spec.replicas;
    Line {
        namespace: ms.metadata.namespace.clone().unwrap_or_default(),
        name: format!("MachineSet/{}", name(&ms.metadata)),
        state: (
            format!("{}/{} ready", st.ready_replicas, ms.spec.replicas),
            if healthy { Tone::Good } else { Tone::Busy },
        ),
        node: String::new(),
        age: age(&ms.metadata, now),
        message: (String::new(), Tone::Plain),
    }
}

fn machine_line(m: &Machine, now: Timestamp) -> Line {
    let phase = phase_name(m);
    let tone = Tone::of_phase(&phase);
    let node = m
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("node"))
        .cloned()
        .unwrap_or_default();
    let message = match m.status.as_ref().map(|s| &s.last_operation) {
        Some(op) if !op.description.is_empty() || op.state.is_some() => {
            let failed = op.state.map(|s| format!("{s:?}")).as_deref() == Some("Failed");
            let mut text = format!(
                "{} {}: {}",
                op.type_.map(|t| format!("{t:?}")).unwrap_or_default(),
                op.state.map(|s| format!("{s:?}")).unwrap_or_default(),
                op.description
            );
            if !op.error_code.is_empty() {
                text.push_str(&format!(" [{}]", op.error_code));
            }
            (text, if failed { Tone::Bad } else { Tone::Plain })
        }
        _ => (String::new(), Tone::Plain),
    };
    Line {
        namespace: m.metadata.namespace.clone().unwrap_or_default(),
        name: format!("Machine/{}", name(&m.metadata)),
        state: (phase, tone),
        node,
        age: age(&m.metadata, now),
        message,
    }
}

/// The tree: deployments with their sets and machines, then sets without a
/// deployment, then machines without a set. `message_width` bounds the
/// last column.
#[cfg(test)]
pub fn render(snap: &Snapshot, now: Timestamp, paint: Paint, message_width: usize) -> String {
    render_all(snap, &[], now, paint, message_width)
}

/// The tree of `snap` followed by one tree per shoot.
pub fn render_all(
    snap: &Snapshot,
    shoots: &[ShootView],
    now: Timestamp,
    paint: Paint,
    message_width: usize,
) -> String {
    let mut lines = tree_lines(snap, now);
    for view in shoots {
        lines.extend(shoot_lines(view, now));
    }
    if lines.is_empty() {
        return "No shoots, machine deployments, machine sets or machines.\n".to_string();
    }
    let mut out = String::new();
    let unserved = snap
        .unserved
        .values()
        .chain(shoots.iter().flat_map(|v| v.snap.unserved.values()));
    for problem in unserved {
        out.push_str(&paint.tone(Tone::Bad, &format!("! {problem}")));
        out.push('\n');
    }
    out + &format_lines(&lines, paint, message_width)
}

/// A Shoot, its Worker, and under the Worker the tree of its control
/// namespace.
fn shoot_lines(view: &ShootView, now: Timestamp) -> Vec<(String, Line)> {
    let sh = &view.shoot;
    let st = sh.status.clone().unwrap_or_default();
    let (op_state, op_text) = match &st.last_operation {
        Some(op) => (
            op.state.clone(),
            format!("{} {}: {}", op.type_, op.state, op.description),
        ),
        None => (String::new(), String::new()),
    };
    let tone = |state: &str| match state {
        "Succeeded" => Tone::Good,
        "Error" | "Failed" | "Aborted" => Tone::Bad,
        "" => Tone::Plain,
        _ => Tone::Busy,
    };
    let mut state = if op_state.is_empty() {
        "New".to_string()
    } else {
        op_state.clone()
    };
    if st.hibernated {
        state.push_str(", hibernated");
    }
    let mut lines = vec![(
        String::new(),
        Line {
            namespace: sh.metadata.namespace.clone().unwrap_or_default(),
            name: format!(
                "Shoot/{}/{}",
                sh.metadata.namespace.as_deref().unwrap_or(""),
                name(&sh.metadata)
            ),
            state: (state, tone(&op_state)),
            node: String::new(),
            age: age(&sh.metadata, now),
            message: (op_text, tone(&op_state)),
        },
    )];
    let Some(w) = &view.worker else {
        return lines;
    };
    let wop = w.status.as_ref().and_then(|s| s.last_operation.clone());
    let wstate = wop.as_ref().map(|o| o.state.clone()).unwrap_or_default();
    lines.push((
        "└─".to_string(),
        Line {
            namespace: w.metadata.namespace.clone().unwrap_or_default(),
            name: format!("Worker/{}", name(&w.metadata)),
            state: (
                if wstate.is_empty() {
                    "New".into()
                } else {
                    wstate.clone()
                },
                tone(&wstate),
            ),
            node: String::new(),
            age: age(&w.metadata, now),
            message: (
                wop.map(|o| o.description).unwrap_or_default(),
                if tone(&wstate) == Tone::Bad {
                    Tone::Bad
                } else {
                    Tone::Plain
                },
            ),
        },
    ));
    // The namespace's roots hang under the Worker; their subtrees move
    // along with them.
    let inner = tree_lines(&view.snap, now);
    let roots: Vec<usize> = inner
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| p.is_empty())
        .map(|(i, _)| i)
        .collect();
    let last_root = roots.last().copied().unwrap_or(0);
    for (i, (prefix, line)) in inner.into_iter().enumerate() {
        let under_last = i >= last_root;
        let p = if prefix.is_empty() {
            format!("  {}", if i == last_root { "└─" } else { "├─" })
        } else {
            format!("  {}{prefix}", if under_last { "  " } else { "│ " })
        };
        lines.push((p, line));
    }
    lines
}

/// The lines of the machine objects of `snap`: deployments with their
/// sets and machines (and nodes), then sets without a deployment, then
/// machines without a set.
fn tree_lines(snap: &Snapshot, now: Timestamp) -> Vec<(String, Line)> {
    // (indent prefix, line)
    let mut lines: Vec<(String, Line)> = Vec::new();
    let by_name = |a: &ObjectMeta, b: &ObjectMeta| {
        (a.namespace.as_deref(), name(a)).cmp(&(b.namespace.as_deref(), name(b)))
    };
    let mut deployments: Vec<&MachineDeployment> = snap.deployments.iter().collect();
    deployments.sort_by(|a, b| by_name(&a.metadata, &b.metadata));
    let mut sets: Vec<&MachineSet> = snap.sets.iter().collect();
    sets.sort_by(|a, b| by_name(&a.metadata, &b.metadata));
    let mut machines: Vec<&Machine> = snap.machines.iter().collect();
    machines.sort_by(|a, b| by_name(&a.metadata, &b.metadata));

    let mut sets_of: BTreeMap<&str, Vec<&MachineSet>> = BTreeMap::new();
    for s in &sets {
        if let Some(owner) = controller_uid(&s.metadata) {
            sets_of.entry(owner).or_default().push(s);
        }
    }
    let mut machines_of: BTreeMap<&str, Vec<&Machine>> = BTreeMap::new();
    for m in &machines {
        if let Some(owner) = controller_uid(&m.metadata) {
            machines_of.entry(owner).or_default().push(m);
        }
    }
    let md_uids: HashSet<&str> = deployments.iter().map(|d| uid(&d.metadata)).collect();
    let set_uids: HashSet<&str> = sets.iter().map(|s| uid(&s.metadata)).collect();
    let all_namespaces = deployments
        .iter()
        .map(|d| d.metadata.namespace.as_deref())
        .chain(sets.iter().map(|s| s.metadata.namespace.as_deref()))
        .chain(machines.iter().map(|m| m.metadata.namespace.as_deref()))
        .collect::<HashSet<_>>()
        .len()
        > 1;

    let push_node = |lines: &mut Vec<(String, Line)>, m: &Machine, indent: &str| {
        let Some(node) = m.metadata.labels.as_ref().and_then(|l| l.get("node")) else {
            return;
        };
        let Some(ready) = snap.nodes.get(node) else {
            return;
        };
        lines.push((
            format!("{indent}└─"),
            Line {
                namespace: String::new(),
                name: format!("Node/{node}"),
                state: if *ready {
                    ("Ready".into(), Tone::Good)
                } else {
                    ("NotReady".into(), Tone::Bad)
                },
                node: String::new(),
                age: String::new(),
                message: (String::new(), Tone::Plain),
            },
        ));
    };
    let push_machines = |lines: &mut Vec<(String, Line)>, owner: &str, indent: &str| {
        let ms = machines_of.get(owner).cloned().unwrap_or_default();
        for (i, m) in ms.iter().enumerate() {
            let last = i + 1 == ms.len();
            let branch = if last { "└─" } else { "├─" };
            lines.push((format!("{indent}{branch}"), machine_line(m, now)));
            let below = format!("{indent}{}", if last { "  " } else { "│ " });
            push_node(lines, m, &below);
        }
    };
    for d in &deployments {
        lines.push((String::new(), deployment_line(d, now)));
        let own = sets_of.get(uid(&d.metadata)).cloned().unwrap_or_default();
        for (i, s) in own.iter().enumerate() {
            // The set's own branch is drawn at the deployment's level.
            let last = i + 1 == own.len();
            let branch = if last { "└─" } else { "├─" };
            lines.push((branch.to_string(), set_line(s, now)));
            let indent = if last { "  " } else { "│ " };
            push_machines(&mut lines, uid(&s.metadata), indent);
        }
    }
    for s in &sets {
        let orphan = controller_uid(&s.metadata).is_none_or(|o| !md_uids.contains(o));
        if orphan {
            lines.push((String::new(), set_line(s, now)));
            push_machines(&mut lines, uid(&s.metadata), "");
        }
    }
    for m in &machines {
        let orphan = controller_uid(&m.metadata).is_none_or(|o| !set_uids.contains(o));
        if orphan {
            lines.push((String::new(), machine_line(m, now)));
            push_node(&mut lines, m, "");
        }
    }
    if all_namespaces {
        // Names are ambiguous across namespaces: qualify the rows.
        for (prefix, l) in &mut lines {
            if prefix.is_empty() {
                l.name = format!("{}/{}", l.namespace, l.name);
            }
        }
    }

    lines
}

/// Aligns the lines into columns, colours them, and cuts the last column
/// to `message_width`.
fn format_lines(lines: &[(String, Line)], paint: Paint, message_width: usize) -> String {
    let width = |f: &dyn Fn(&(String, Line)) -> usize| lines.iter().map(f).max().unwrap_or(0);
    let w_name = width(&|(p, l)| p.chars().count() + l.name.chars().count()).max(4);
    let w_state = width(&|(_, l)| l.state.0.chars().count()).max(5);
    let w_node = width(&|(_, l)| l.node.chars().count()).max(4);
    let w_age = width(&|(_, l)| l.age.chars().count()).max(3);
    let mut out = String::new();
    out.push_str(
        &paint.dim(
            format!(
                "{:w_name$}  {:w_state$}  {:w_node$}  {:w_age$}  LAST OPERATION",
                "NAME", "STATE", "NODE", "AGE"
            )
            .trim_end(),
        ),
    );
    out.push('\n');
    for (prefix, l) in lines {
        let name_pad = w_name - prefix.chars().count() - l.name.chars().count();
        let state = format!("{:w_state$}", l.state.0);
        let row = format!(
            "{}{}{}  {}  {:w_node$}  {:w_age$}  {}",
            paint.dim(prefix),
            l.name,
            " ".repeat(name_pad),
            paint.tone(l.state.1, &state),
            l.node,
            l.age,
            paint.tone(l.message.1, &truncate(&l.message.0, message_width)),
        );
        out.push_str(row.trim_end());
        out.push('\n');
    }
    out
}
