//! `trellis up --demo`: applies the example `local` MachineClass and a
//! MachineDeployment of three machines, then follows their progress live
//! until Ctrl-C: a scale, a rollout or a deletion shows up as it happens,
//! and each time every machine is Running again it says so.
//!
//! The manifests are the files in `examples/`, compiled in, so the demo and
//! the README's `kubectl apply -f examples/...` can never disagree. Objects
//! are created only when absent: a restart (or a user's edits in between)
//! keeps whatever is already there, so the demo never creates anything twice.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
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

    /// Whether the machines have settled: as many as desired, every one
    /// Running. Machines still being deleted after a scale-down keep it
    /// unsettled, so "Running" is announced once they are gone.
    pub fn done(&self) -> bool {
        self.desired > 0 && self.running == self.desired as usize && self.rows.len() == self.running
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
            let line = format!(
                "  {:w0$}  {}  {:w2$}  {}",
                r[0],
                paint.phase(&r[1], widths[1]),
                r[2],
                r[3],
                w0 = widths[0],
                w2 = widths[2],
            );
            lines.push(line.trim_end().to_string());
        }
        lines
    }
}

/// The example CloudProfile for the local provider (`--demo shoot`).
pub const SHOOT_PROFILE_MANIFEST: &str = include_str!("../../../examples/shoot/cloudprofile.yaml");
/// The example project namespace and Shoot (`--demo shoot`).
pub const SHOOT_MANIFEST: &str = include_str!("../../../examples/shoot/shoot.yaml");
/// The demo Shoot's name and project namespace (in `SHOOT_MANIFEST`).
pub const SHOOT: &str = "demo";
pub const SHOOT_NAMESPACE: &str = "garden-local";
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

/// How trellis was started, so that the hints print commands that work as
/// printed: the user may have no `trellis` on PATH (the README's `cargo
/// run`), another data directory, or nothing kept at all.
#[derive(Clone, Debug, Default)]
pub struct Launch {
    /// The command that runs this binary ([`status::invocation`]).
    pub command: String,
    /// The data directory named by `--data-dir` or `TRELLIS_DATA_DIR`.
    pub data_dir: Option<PathBuf>,
    /// `--in-memory`: nothing survives the process.
    pub in_memory: bool,
}

/// What to try next, printed once the demo's machines first run.
pub fn hints(which: Demo, launch: &Launch) -> Vec<String> {
    let cmd = &launch.command;
    let mut lines = match which {
        Demo::Shoot => vec![
            format!(
                "  kubectl get shoots -A; kubectl get worker,machinedeployments,machines -n {SHOOT_CONTROL_NAMESPACE}"
            ),
            format!("  {cmd} status -A     # Shoot → Worker → deployments → machines → nodes"),
        ],
        Demo::Machines => vec![
            "  kubectl get machinedeployments,machinesets,machines,nodes".to_string(),
            format!("  {cmd} status        # the tree; --watch to follow"),
            format!(
                "  kubectl scale machinedeployment {DEPLOYMENT} --replicas=5   # this view follows"
            ),
        ],
    };
    lines.push(if launch.in_memory {
        "Ctrl-C stops trellis; with --in-memory nothing is kept, the next start begins empty."
            .to_string()
    } else {
        let mut up = format!("{cmd} up");
        if let Some(dir) = &launch.data_dir {
            up.push_str(" --data-dir ");
            up.push_str(&status::shell_quote(&dir.display().to_string()));
        }
        format!("Ctrl-C stops trellis; `{up}` again resumes with everything as it was.")
    });
    lines
}

/// Runs `which` demo (see [`run`] and [`run_shoot`]); it follows the
/// machines until the task is dropped (Ctrl-C) and returns only on an
/// error, after which nothing is followed any more.
pub async fn run_demo(
    client: kube::Client,
    started: Instant,
    which: Demo,
    launch: Launch,
) -> anyhow::Result<()> {
    let hints = hints(which, &launch);
    match which {
        Demo::Machines => run(client, started, hints).await,
        Demo::Shoot => run_shoot(client, started, hints).await,
    }
}

/// Applies the example CloudProfile and Shoot and follows the machines of
/// the shoot's control namespace.
pub async fn run_shoot(
    client: kube::Client,
    started: Instant,
    hints: Vec<String>,
) -> anyhow::Result<()> {
    let created = apply_if_absent(&client, SHOOT_PROFILE_MANIFEST).await?
        + apply_if_absent(&client, SHOOT_MANIFEST).await?;
    let planned = shoot_machines()?;
    if created == 0 {
        println!("demo: the CloudProfile `local` and Shoot `garden-local/demo` are already there");
    } else {
        println!(
            "demo: applied the CloudProfile `local` and Shoot `garden-local/demo` (2 pools over 3 zones, {planned} machines)"
        );
    }
    let shoots: Api<gardener::Shoot> = Api::namespaced(client.clone(), SHOOT_NAMESPACE);
    let machines: Api<Machine> = Api::namespaced(client, SHOOT_CONTROL_NAMESPACE);
    follow(started, " of Shoot garden-local/demo", hints, || async {
        let shoot = shoots
            .get_opt(SHOOT)
            .await
            .context("reading the demo Shoot")?;
        let list = machines
            .list(&ListParams::default())
            .await
            .context("listing the shoot's machines")?;
        Ok(Progress::over(
            shoot_desired(shoot.as_ref()),
            list.items.iter().collect(),
        ))
    })
    .await
}

/// How many machines the Shoot asks for now: the sum of its pools'
/// minimums, none while it is hibernated or gone. Read from the Shoot on
/// each poll, so an edit of the pools is followed.
fn shoot_desired(shoot: Option<&gardener::Shoot>) -> i32 {
    let Some(shoot) = shoot else { return 0 };
    let hibernated = shoot
        .spec
        .hibernation
        .as_ref()
        .and_then(|h| h.enabled)
        .unwrap_or(false);
    if hibernated {
        return 0;
    }
    shoot.spec.provider.workers.iter().map(|w| w.minimum).sum()
}

/// Redraws the progress `observe` reports every [`POLL`], for as long as
/// the task runs. A failed observation is reported once and retried: the
/// API server runs in this process, so it is a passing hiccup.
async fn follow<F, Fut>(
    started: Instant,
    whose: &str,
    hints: Vec<String>,
    mut observe: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Progress>>,
{
    let tty = std::io::stdout().is_terminal();
    let mut view = View::new(tty, Paint::for_stdout(), whose, hints);
    loop {
        let text = match observe().await {
            Ok(progress) => view.update(&progress, started.elapsed()),
            Err(e) => view.failed(&format!("{e:#}")),
        };
        if !text.is_empty() {
            status::write_stdout(&text)?;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Applies the demo objects and follows the machines of the demo
/// deployment.
pub async fn run(client: kube::Client, started: Instant, hints: Vec<String>) -> anyhow::Result<()> {
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
    follow(started, "", hints, || async {
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

/// The live view as text, a pure function of what was observed (so the
/// whole output is golden-tested). On a terminal the table (summary and
/// one line per machine, rebuilt from the current list each time) is
/// redrawn in place, with announcements printed above it; elsewhere a
/// summary line is printed whenever it changes.
pub struct View {
    tty: bool,
    paint: Paint,
    whose: String,
    /// Printed with the first announcement, then empty.
    hints: Vec<String>,
    /// Lines of the table on screen, erased before the next frame.
    drawn: usize,
    /// The last summary printed (without the time), off a terminal.
    last_summary: String,
    /// Whether the last observation had settled ([`Progress::done`]).
    settled: bool,
    /// When the machines last stopped being settled, once they had been.
    unsettled_since: Option<Duration>,
    /// The desired count and time of the last observation: a scale that
    /// completes between two polls changes the count without ever being
    /// seen unsettled, and is announced all the same.
    last: Option<(i32, Duration)>,
    /// The last failure said, so a persisting one is said once.
    last_error: Option<String>,
}

impl View {
    pub fn new(tty: bool, paint: Paint, whose: &str, hints: Vec<String>) -> View {
        View {
            tty,
            paint,
            whose: whose.to_string(),
            hints,
            drawn: 0,
            last_summary: String::new(),
            settled: false,
            unsettled_since: None,
            last: None,
            last_error: None,
        }
    }

    /// Moves the cursor back over the table drawn last and clears it.
    fn erase(&mut self) -> String {
        let n = std::mem::take(&mut self.drawn);
        if self.tty && n > 0 {
            format!("\x1b[{n}F\x1b[J")
        } else {
            String::new()
        }
    }

    /// The text to write for one observation `elapsed` after the start.
    pub fn update(&mut self, progress: &Progress, elapsed: Duration) -> String {
        self.last_error = None;
        let mut notes = Vec::new();
        let settled = progress.done();
        let previous = self.last.replace((progress.desired, elapsed));
        if let Some((desired, at)) = previous
            && self.settled
            && settled
            && desired != progress.desired
        {
            // Settled before and after, at another size: the change
            // happened (and finished) since the last observation.
            self.settled = false;
            self.unsettled_since = Some(at);
        }
        if settled && !self.settled {
            let when = match self.unsettled_since {
                None => format!("after {:.1}s", elapsed.as_secs_f64()),
                Some(t) => format!(
                    "again, {:.1}s after the change",
                    elapsed.saturating_sub(t).as_secs_f64()
                ),
            };
            notes.push(format!(
                "demo: {}/{} machines{} Running {when}",
                progress.running, progress.desired, self.whose
            ));
            notes.append(&mut self.hints);
        } else if !settled && self.settled {
            self.unsettled_since = Some(elapsed);
        }
        self.settled = settled;

        let mut out = self.erase();
        if self.tty {
            for line in notes {
                out.push_str(&line);
                out.push('\n');
            }
            let table = progress.table(elapsed, self.paint);
            for line in &table {
                out.push_str(line);
                out.push('\n');
            }
            self.drawn = table.len();
        } else {
            let summary = progress.summary(Duration::ZERO, Paint::none());
            if summary != self.last_summary {
                out.push_str(&progress.summary(elapsed, Paint::none()));
                out.push('\n');
                self.last_summary = summary;
            }
            for line in notes {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }

    /// The text for an observation that failed: said once per distinct
    /// error, above the table, which is drawn anew by the next update.
    pub fn failed(&mut self, error: &str) -> String {
        if self.last_error.as_deref() == Some(error) {
            return String::new();
        }
        self.last_error = Some(error.to_string());
        let mut out = self.erase();
        out.push_str(&format!("demo: {error} (retrying)\n"));
        out
    }
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

    #[test]
    fn the_shoot_demo_follows_the_shoots_pools_and_hibernation() {
        let doc = documents(SHOOT_MANIFEST)
            .unwrap()
            .into_iter()
            .find(|d| d["kind"] == "Shoot")
            .unwrap();
        let mut shoot: gardener::Shoot = serde_json::from_value(doc).unwrap();
        assert_eq!(shoot.metadata.name.as_deref(), Some(SHOOT));
        assert_eq!(shoot.metadata.namespace.as_deref(), Some(SHOOT_NAMESPACE));
        assert_eq!(shoot_desired(Some(&shoot)), 10);
        shoot.spec.provider.workers[0].minimum += 3;
        assert_eq!(shoot_desired(Some(&shoot)), 13, "an edited pool");
        shoot.spec.hibernation = Some(gardener::Hibernation {
            enabled: Some(true),
            ..Default::default()
        });
        assert_eq!(shoot_desired(Some(&shoot)), 0, "hibernated");
        assert_eq!(shoot_desired(None), 0, "deleted");
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

    fn deployment(replicas: i32) -> MachineDeployment {
        MachineDeployment::test(DEPLOYMENT).replicas(replicas)
    }

    fn up(name: &str) -> Machine {
        machine(name, "demo", MachinePhase::Running).with_node(name)
    }

    fn pending(name: &str) -> Machine {
        machine(name, "demo", MachinePhase::Pending)
    }

    fn terminating(name: &str) -> Machine {
        let mut m = up(name);
        m.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1).unwrap(),
        ));
        m
    }

    fn launch() -> Launch {
        Launch {
            command: "cargo run --release -p trellis --".into(),
            data_dir: None,
            in_memory: false,
        }
    }

    /// Feeds `steps` (seconds since the start, replicas, machines) to a
    /// view and returns everything it wrote.
    fn play(mut view: View, steps: &[(f64, i32, Vec<Machine>)]) -> String {
        steps
            .iter()
            .map(|(secs, replicas, machines)| {
                let p = Progress::of(Some(&deployment(*replicas)), machines);
                view.update(&p, Duration::from_secs_f64(*secs))
            })
            .collect()
    }

    #[test]
    fn off_a_terminal_the_view_follows_scales_until_stopped() {
        let view = View::new(false, Paint::none(), "", hints(Demo::Machines, &launch()));
        let out = play(
            view,
            &[
                (
                    1.0,
                    3,
                    vec![pending("demo-a"), pending("demo-b"), pending("demo-c")],
                ),
                (
                    1.2,
                    3,
                    vec![pending("demo-a"), pending("demo-b"), pending("demo-c")],
                ),
                (5.0, 3, vec![up("demo-a"), up("demo-b"), pending("demo-c")]),
                (8.0, 3, vec![up("demo-a"), up("demo-b"), up("demo-c")]),
                (8.2, 3, vec![up("demo-a"), up("demo-b"), up("demo-c")]),
                (
                    10.0,
                    5,
                    vec![
                        up("demo-a"),
                        up("demo-b"),
                        up("demo-c"),
                        pending("demo-d"),
                        pending("demo-e"),
                    ],
                ),
                (
                    14.5,
                    5,
                    vec![
                        up("demo-a"),
                        up("demo-b"),
                        up("demo-c"),
                        up("demo-d"),
                        up("demo-e"),
                    ],
                ),
                (
                    20.0,
                    2,
                    vec![
                        up("demo-a"),
                        up("demo-b"),
                        terminating("demo-c"),
                        terminating("demo-d"),
                        terminating("demo-e"),
                    ],
                ),
                (23.0, 2, vec![up("demo-a"), up("demo-b")]),
                // A scale that finishes between two observations.
                (23.2, 1, vec![up("demo-a")]),
                (23.4, 1, vec![up("demo-a")]),
            ],
        );
        let want = "\
machines [....................] 0/3 Running  (3 Pending)  1.0s
machines [#############.......] 2/3 Running  (1 Pending)  5.0s
machines [####################] 3/3 Running  8.0s
demo: 3/3 machines Running after 8.0s
  kubectl get machinedeployments,machinesets,machines,nodes
  cargo run --release -p trellis -- status        # the tree; --watch to follow
  kubectl scale machinedeployment demo --replicas=5   # this view follows
Ctrl-C stops trellis; `cargo run --release -p trellis -- up` again resumes with everything as it was.
machines [############........] 3/5 Running  (2 Pending)  10.0s
machines [####################] 5/5 Running  14.5s
demo: 5/5 machines Running again, 4.5s after the change
machines [####################] 2/2 Running  (3 Terminating)  20.0s
machines [####################] 2/2 Running  23.0s
demo: 2/2 machines Running again, 3.0s after the change
machines [####################] 1/1 Running  23.2s
demo: 1/1 machines Running again, 0.2s after the change
";
        assert_eq!(out, want, "\n{out}");
    }

    #[test]
    fn on_a_terminal_the_table_is_redrawn_from_the_current_machines() {
        let view = View::new(true, Paint::none(), "", hints(Demo::Machines, &launch()));
        let out = play(
            view,
            &[
                (1.0, 2, vec![pending("demo-a"), pending("demo-b")]),
                (4.0, 2, vec![up("demo-a"), up("demo-b")]),
                (6.0, 1, vec![up("demo-a"), terminating("demo-b")]),
                (7.5, 1, vec![up("demo-a")]),
            ],
        );
        let want = "\
machines [....................] 0/2 Running  (2 Pending)  1.0s
  demo-a  Pending
  demo-b  Pending
\x1b[3F\x1b[Jdemo: 2/2 machines Running after 4.0s
  kubectl get machinedeployments,machinesets,machines,nodes
  cargo run --release -p trellis -- status        # the tree; --watch to follow
  kubectl scale machinedeployment demo --replicas=5   # this view follows
Ctrl-C stops trellis; `cargo run --release -p trellis -- up` again resumes with everything as it was.
machines [####################] 2/2 Running  4.0s
  demo-a  Running  demo-a
  demo-b  Running  demo-b
\x1b[3F\x1b[Jmachines [####################] 1/1 Running  (1 Terminating)  6.0s
  demo-a  Running      demo-a
  demo-b  Terminating  demo-b
\x1b[3F\x1b[Jdemo: 1/1 machines Running again, 1.5s after the change
machines [####################] 1/1 Running  7.5s
  demo-a  Running  demo-a
";
        assert_eq!(out, want, "\n{}", out.replace('\x1b', "<ESC>"));
    }

    #[test]
    fn a_failed_observation_is_said_once_and_the_table_redrawn_below() {
        let mut view = View::new(true, Paint::none(), "", Vec::new());
        let p = Progress::of(Some(&deployment(1)), &[pending("demo-a")]);
        let mut out = view.update(&p, Duration::from_secs(1));
        out += &view.failed("listing machines: connection reset");
        out += &view.failed("listing machines: connection reset");
        out += &view.update(&p, Duration::from_secs(2));
        let want = "\
machines [....................] 0/1 Running  (1 Pending)  1.0s
  demo-a  Pending
\x1b[2F\x1b[Jdemo: listing machines: connection reset (retrying)
machines [....................] 0/1 Running  (1 Pending)  2.0s
  demo-a  Pending
";
        assert_eq!(out, want, "\n{}", out.replace('\x1b', "<ESC>"));
    }

    #[test]
    fn hints_say_what_resumes_and_what_is_lost() {
        let mut l = launch();
        l.command = "trellis".into();
        l.data_dir = Some("/tmp/my data".into());
        let last = hints(Demo::Machines, &l).pop().unwrap();
        assert_eq!(
            last,
            "Ctrl-C stops trellis; `trellis up --data-dir '/tmp/my data'` again resumes with everything as it was."
        );
        l.in_memory = true;
        let last = hints(Demo::Machines, &l).pop().unwrap();
        assert_eq!(
            last,
            "Ctrl-C stops trellis; with --in-memory nothing is kept, the next start begins empty."
        );
        let shoot = hints(Demo::Shoot, &l);
        assert_eq!(
            shoot[1],
            "  trellis status -A     # Shoot → Worker → deployments → machines → nodes"
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
        let scaled_down = MachineDeployment::test(DEPLOYMENT).replicas(1);
        assert!(
            !Progress::of(Some(&scaled_down), &machines).done(),
            "a machine more than desired is still to go"
        );
    }
}
