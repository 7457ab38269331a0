//! `trellis up --demo`: applies the example `local` MachineClass and a
//! MachineDeployment of three machines, then shows their progress live until
//! all of them are Running.
//!
//! The manifests are the files in `examples/`, compiled in, so the demo and
//! the README's `kubectl apply -f examples/...` can never disagree. Objects
//! are created only when absent: a restart (or a user's edits in between)
//! keeps whatever is already there, so the demo never creates anything twice.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use api::{Machine, MachineDeployment, MachinePhase};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;

use crate::status::{self, Paint};

/// The example class (and its Secret) the demo applies.
pub const CLASS_MANIFEST: &str =
    include_str!("../../../examples/machine_classes/local-machine-class.yaml");
/// The example deployment the demo applies.
pub const DEPLOYMENT_MANIFEST: &str =
    include_str!("../../../examples/machine_objects/machine-deployment.yaml");
/// Name of the demo's MachineDeployment (in `DEPLOYMENT_MANIFEST`).
pub const DEPLOYMENT: &str = "demo";
/// Namespace of every demo object.
pub const NAMESPACE: &str = "default";

/// How often the progress display polls the machines.
const POLL: Duration = Duration::from_millis(200);

/// The documents of a multi-document YAML stream, as JSON.
pub fn documents(yaml: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    use serde::Deserialize as _;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value = serde_json::Value::deserialize(doc).context("parsing a demo manifest")?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// Creates every object of `yaml` that does not exist yet. Returns how
/// many were created.
pub async fn apply_if_absent(client: &kube::Client, yaml: &str) -> anyhow::Result<usize> {
    let mut created = 0;
    for doc in documents(yaml)? {
        let obj: DynamicObject = serde_json::from_value(doc).context("a demo manifest")?;
        let types = obj
            .types
            .clone()
            .context("a demo manifest without apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types).context("a demo manifest's apiVersion")?;
        let (resource, _caps) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .with_context(|| format!("discovering {}", types.kind))?;
        let (resource, caps) = (resource, _caps);
        let ns = obj.metadata.namespace.as_deref().unwrap_or(NAMESPACE);
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
        };
        let name = obj.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {
                created += 1;
                tracing::info!(kind = %types.kind, %name, "demo object created");
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                tracing::debug!(kind = %types.kind, %name, "demo object already there");
            }
            Err(e) => {
                return Err(e).with_context(|| format!("creating {} {name}", types.kind));
            }
        }
    }
    Ok(created)
}

/// Where the demo's machines are: how many are Running, and each machine's
/// row for the live table.
#[derive(Debug, Default, PartialEq)]
pub struct Progress {
    pub desired: i32,
    pub running: usize,
    pub by_phase: BTreeMap<String, usize>,
    pub rows: Vec<[String; 4]>,
}

impl Progress {
    /// The demo's progress from its deployment and the namespace's machines.
    pub fn of(md: Option<&MachineDeployment>, machines: &[Machine]) -> Progress {
        let desired = md.map_or(0, |md| md.spec.replicas);
        let selector = md
            .and_then(|md| md.spec.selector.as_ref())
            .and_then(|s| s.match_labels.clone())
            .unwrap_or_default();
        let mine: Vec<&Machine> = machines
            .iter()
            .filter(|m| {
                let labels = m.metadata.labels.clone().unwrap_or_default();
                !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .collect();
        Progress::over(desired, mine)
    }

    /// Progress of `machines` towards `desired` Running ones.
    pub fn over(desired: i32, mut mine: Vec<&Machine>) -> Progress {
        let mut p = Progress {
            desired,
            ..Progress::default()
        };
        mine.sort_by_key(|m| m.metadata.name.clone());
        for m in mine {
            let phase = status::phase_name(m);
            if m.phase() == Some(MachinePhase::Running) && m.metadata.deletion_timestamp.is_none() {
                p.running += 1;
            }
            *p.by_phase.entry(phase.clone()).or_default() += 1;
            let node = m
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("node"))
                .cloned()
                .unwrap_or_default();
            let op = m
                .status
                .as_ref()
                .map(|s| s.last_operation.description.clone())
                .unwrap_or_default();
            p.rows
                .push([m.metadata.name.clone().unwrap_or_default(), phase, node, op]);
        }
        p
    }

    /// Whether every desired machine is Running.
    pub fn done(&self) -> bool {
        self.desired > 0 && self.running >= self.desired as usize
    }

    /// One summary line: a bar, the count and the other phases.
    pub fn summary(&self, elapsed: Duration, paint: Paint) -> String {
        const WIDTH: usize = 20;
        let desired = self.desired.max(0) as usize;
        let filled = (self.running * WIDTH)
            .checked_div(desired)
            .unwrap_or(0)
            .min(WIDTH);
        let others: Vec<String> = self
            .by_phase
            .iter()
            .filter(|(phase, _)| phase.as_str() != "Running")
            .map(|(phase, n)| format!("{n} {phase}"))
            .collect();
        let others = if others.is_empty() {
            String::new()
        } else {
            format!("  ({})", others.join(", "))
        };
        format!(
            "machines [{}{}] {}/{} Running{}  {:.1}s",
            paint.green(&"#".repeat(filled)),
            ".".repeat(WIDTH - filled),
            self.running,
            desired,
            others,
            elapsed.as_secs_f64()
        )
    }

    /// The summary and one line per machine.
    pub fn table(&self, elapsed: Duration, paint: Paint) -> Vec<String> {
        let mut lines = vec![self.summary(elapsed, paint)];
        let rows = self.rows.iter().map(|r| {
            let mut r = r.clone();
            r[3] = status::truncate(&r[3], 60);
            r
        });
        let widths = rows.clone().fold([0usize; 4], |mut w, r| {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
            w
        });
        for r in rows {
            lines.push(format!(
                "  {:w0$}  {}  {:w2$}  {}",
                r[0],
                paint.phase(&r[1], widths[1]),
                r[2],
                r[3],
                w0 = widths[0],
                w2 = widths[2],
            ));
        }
        lines
    }
}

/// The example CloudProfile for the local provider (`--demo shoot`).
pub const SHOOT_PROFILE_MANIFEST: &str = include_str!("../../../examples/shoot/cloudprofile.yaml");
/// The example project namespace and Shoot (`--demo shoot`).
pub const SHOOT_MANIFEST: &str = include_str!("../../../examples/shoot/shoot.yaml");
/// The demo Shoot's control namespace, where its machines live.
pub const SHOOT_CONTROL_NAMESPACE: &str = "shoot--local--demo";

/// Which demo `trellis up --demo [NAME]` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Demo {
    /// A MachineDeployment of 3 machines of the local MachineClass.
    Machines,
    /// A CloudProfile and a Shoot with two pools over three zones: a
    /// Worker, six MachineDeployments, ten machines, ten nodes in the
    /// shoot's own API server.
    Shoot,
}

/// The machines the demo Shoot asks for: the sum of its pools' minimums.
fn shoot_machines() -> anyhow::Result<i32> {
    let docs = documents(SHOOT_MANIFEST)?;
    let shoot = docs
        .iter()
        .find(|d| d["kind"] == "Shoot")
        .context("the shoot example has a Shoot")?;
    Ok(shoot
        .pointer("/spec/provider/workers")
        .and_then(serde_json::Value::as_array)
        .map(|ws| ws.iter().filter_map(|w| w["minimum"].as_i64()).sum::<i64>() as i32)
        .unwrap_or(0))
}

/// Runs `which` demo (see [`run`] and [`run_shoot`]).
pub async fn run_demo(client: kube::Client, started: Instant, which: Demo) -> anyhow::Result<()> {
    match which {
        Demo::Machines => run(client, started).await,
        Demo::Shoot => run_shoot(client, started).await,
    }
}

/// Applies the example CloudProfile and Shoot and shows the shoot's
/// machines until every pool is at its minimum, all Running.
pub async fn run_shoot(client: kube::Client, started: Instant) -> anyhow::Result<()> {
    let created = apply_if_absent(&client, SHOOT_PROFILE_MANIFEST).await?
        + apply_if_absent(&client, SHOOT_MANIFEST).await?;
    let desired = shoot_machines()?;
    if created == 0 {
        println!("demo: the CloudProfile `local` and Shoot `garden-local/demo` are already there");
    } else {
        println!(
            "demo: applied the CloudProfile `local` and Shoot `garden-local/demo` (2 pools over 3 zones, {desired} machines)"
        );
    }
    let machines: Api<Machine> = Api::namespaced(client, SHOOT_CONTROL_NAMESPACE);
    follow(started, " of Shoot garden-local/demo", || async {
        let list = machines
            .list(&ListParams::default())
            .await
            .context("listing the shoot's machines")?;
        Ok(Progress::over(desired, list.items.iter().collect()))
    })
    .await
}

/// Redraws the progress `observe` reports every [`POLL`] until every
/// desired machine is Running, then says how long it took.
async fn follow<F, Fut>(started: Instant, whose: &str, mut observe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Progress>>,
{
    let tty = std::io::stdout().is_terminal();
    let paint = Paint::for_stdout();
    let mut drawn = 0usize;
    let mut last_summary = String::new();
    loop {
        let progress = observe().await?;
        let elapsed = started.elapsed();
        draw(
            &progress,
            elapsed,
            tty,
            paint,
            &mut drawn,
            &mut last_summary,
        )?;
        if progress.done() {
            println!(
                "demo: {}/{} machines{whose} Running after {:.1}s",
                progress.running,
                progress.desired,
                elapsed.as_secs_f64()
            );
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Applies the demo objects and shows progress until every machine of the
/// demo deployment is Running. On a terminal the table is redrawn in place;
/// otherwise a line is printed whenever the summary changes.
pub async fn run(client: kube::Client, started: Instant) -> anyhow::Result<()> {
    let created = apply_if_absent(&client, CLASS_MANIFEST).await?
        + apply_if_absent(&client, DEPLOYMENT_MANIFEST).await?;
    if created == 0 {
        println!("demo: the MachineClass `local` and MachineDeployment `demo` are already there");
    } else {
        println!(
            "demo: applied the `local` MachineClass and MachineDeployment `demo` (3 machines)"
        );
    }
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), NAMESPACE);
    let machines: Api<Machine> = Api::namespaced(client, NAMESPACE);
    follow(started, "", || async {
        let md = mds
            .get_opt(DEPLOYMENT)
            .await
            .context("reading the demo deployment")?;
        let list = machines
            .list(&ListParams::default())
            .await
            .context("listing machines")?;
        Ok(Progress::of(md.as_ref(), &list.items))
    })
    .await
}

/// One frame of the progress display (see [`run`]).
fn draw(
    progress: &Progress,
    elapsed: Duration,
    tty: bool,
    paint: Paint,
    drawn: &mut usize,
    last_summary: &mut String,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if tty {
        let lines = progress.table(elapsed, paint);
        if *drawn > 0 {
            // Back to the first line of the previous frame, cleared below.
            write!(out, "\x1b[{}F\x1b[J", *drawn)?;
        }
        for l in &lines {
            writeln!(out, "{l}")?;
        }
        *drawn = lines.len();
    } else {
        let summary = progress.summary(Duration::ZERO, Paint::none());
        if summary != *last_summary {
            writeln!(out, "{}", progress.summary(elapsed, Paint::none()))?;
            *last_summary = summary;
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::testing::Fixture;

    #[test]
    fn the_manifests_parse_and_pass_admission() {
        let docs = documents(CLASS_MANIFEST).unwrap();
        assert_eq!(docs.len(), 2, "a Secret and a MachineClass");
        let class: api::MachineClass = serde_json::from_value(docs[1].clone()).unwrap();
        assert!(api::validate_machine_class(&class).is_empty());
        let md_doc = documents(DEPLOYMENT_MANIFEST).unwrap().remove(0);
        let mut md: MachineDeployment = serde_json::from_value(md_doc).unwrap();
        assert_eq!(md.metadata.name.as_deref(), Some(DEPLOYMENT));
        assert_eq!(md.spec.replicas, 3);
        api::default_machine_deployment(&mut md);
        assert!(api::validate_machine_deployment(&md).is_empty());
    }

    #[test]
    fn the_shoot_demo_asks_for_ten_machines_and_passes_validation() {
        assert_eq!(shoot_machines().unwrap(), 10);
        let docs = documents(SHOOT_PROFILE_MANIFEST).unwrap();
        let profile: gardener::CloudProfile = serde_json::from_value(docs[0].clone()).unwrap();
        let causes = gardener::validation::validate_cloud_profile_spec(&profile.spec);
        assert!(causes.is_empty(), "{causes:?}");
        let shoot = documents(SHOOT_MANIFEST)
            .unwrap()
            .into_iter()
            .find(|d| d["kind"] == "Shoot")
            .unwrap();
        let mut shoot: gardener::Shoot = serde_json::from_value(shoot).unwrap();
        let now = chrono::Utc::now();
        let defaulting =
            gardener::shoot_admission::default_shoot(&mut shoot.spec, None, &profile.spec, now);
        assert!(defaulting.is_empty(), "{defaulting:?}");
        let causes =
            gardener::shoot_admission::validate_shoot(&shoot.spec, None, &profile.spec, now);
        assert!(causes.is_empty(), "{causes:?}");
    }

    fn machine(name: &str, pool: &str, phase: MachinePhase) -> Machine {
        Machine::test(name).label("name", pool).with_phase(phase)
    }

    #[test]
    fn progress_counts_only_the_deployments_running_machines() {
        let md = MachineDeployment::test(DEPLOYMENT).replicas(3);
        let machines = vec![
            machine("demo-a", "demo", MachinePhase::Running),
            machine("demo-b", "demo", MachinePhase::Pending),
            machine("other", "other", MachinePhase::Running),
        ];
        let p = Progress::of(Some(&md), &machines);
        assert_eq!(p.running, 1);
        assert_eq!(p.rows.len(), 2);
        assert!(!p.done());
        let line = p.summary(Duration::from_millis(1500), Paint::none());
        assert_eq!(
            line,
            "machines [######..............] 1/3 Running  (1 Pending)  1.5s"
        );
    }

    #[test]
    fn progress_is_done_when_every_desired_machine_runs() {
        let md = MachineDeployment::test(DEPLOYMENT).replicas(2);
        let machines = vec![
            machine("demo-a", "demo", MachinePhase::Running),
            machine("demo-b", "demo", MachinePhase::Running),
        ];
        assert!(Progress::of(Some(&md), &machines).done());
        assert!(!Progress::of(None, &machines).done(), "no deployment yet");
    }
}
