//! The pod planner: what to start and stop next and the status to report,
//! as a pure function of the Pod, what the runtime observed and the clock
//! (upstream's `computePodActions` and `generateAPIPodStatus` together).
//!
//! Init containers run one at a time, each to success; then every app
//! container runs. A finished container is restarted according to
//! `restartPolicy`, each restart after the crash-loop back-off
//! ([`crate::backoff`]); while it waits its state is `waiting` with reason
//! `CrashLoopBackOff`. A container whose liveness probe failed, or whose
//! definition changed, is stopped and then handled like any finished one.
//! A pod being deleted (or gone from the API) has every process stopped
//! with its grace period and is then `terminated`, so the executor can
//! remove the object.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::view::{Attempt, AttemptState, Exit, Observed};

/// Default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECS: i64 = 30;

/// Why a container is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillReason {
    /// The pod is being deleted.
    PodDeleted,
    /// The liveness or startup probe failed.
    Unhealthy,
    /// The container's definition changed (e.g. its image).
    Changed,
}

/// One step for the executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start a new attempt; `restart` when an earlier one exists (the
    /// executor advances the back-off record with `finished_ms`).
    Start {
        container: String,
        init: bool,
        restart: Option<u64>,
    },
    /// Stop the current attempt: SIGTERM, SIGKILL after `grace_secs`.
    Kill {
        container: String,
        grace_secs: i64,
        reason: KillReason,
    },
}

/// The planner's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct PodPlan {
    pub actions: Vec<Action>,
    pub status: PodStatus,
    /// Containers waiting in back-off, and for how long still.
    pub backing_off: Vec<(String, Duration)>,
    /// When to plan again even if nothing changes (a back-off ends).
    pub wake_in: Option<Duration>,
    /// Deletion was asked for and no process of the pod is left.
    pub terminated: bool,
}

fn ts(ms: u64) -> Time {
    Time(Timestamp::from_millisecond(ms as i64).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Whole seconds, as kube reports container times.
fn ts_secs(ms: u64) -> Time {
    ts(ms / 1000 * 1000)
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// Whether a finished container runs again under `policy`.
fn restarts(policy: &str, exit: &Exit) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit.exit_code != 0,
        _ => true,
    }
}

/// The grace period of a deletion: the deletion's, else the pod's.
pub fn deletion_grace(pod: &Pod) -> i64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(DEFAULT_GRACE_SECS)
        .max(0)
}

fn probe_grace(pod: &Pod, c: &Container) -> i64 {
    let probe = c.liveness_probe.as_ref().or(c.startup_probe.as_ref());
    probe
        .and_then(|p| p.termination_grace_period_seconds)
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(DEFAULT_GRACE_SECS)
        .max(0)
}

fn container_id(pod_uid: &str, name: &str, a: &Attempt) -> String {
    format!("trellis://{pod_uid}/{name}/{}", a.index)
}

fn terminated(pod_uid: &str, name: &str, a: &Attempt, e: &Exit) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: e.exit_code,
        signal: e.signal,
        reason: Some(e.reason.clone()),
        message: e.message.clone(),
        started_at: e.started_ms.map(ts_secs),
        finished_at: Some(ts_secs(e.finished_ms)),
        container_id: Some(container_id(pod_uid, name, a)),
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message,
        }),
        ..ContainerState::default()
    }
}

/// The planner's per-container outcome, before it becomes a status.
struct Decided {
    state: ContainerState,
    ready: bool,
    started: bool,
    /// Counts as running for the phase.
    running: bool,
    /// Finished for good: `Some(exit code)`.
    done: Option<i32>,
}

struct Ctx<'a> {
    pod: &'a Pod,
    obs: &'a Observed,
    now_ms: u64,
    uid: String,
    deleting: bool,
    policy: String,
    actions: Vec<Action>,
    backing_off: Vec<(String, Duration)>,
    wake_in: Option<Duration>,
}

impl Ctx<'_> {
    fn wake(&mut self, d: Duration) {
        self.wake_in = Some(self.wake_in.map_or(d, |w| w.min(d)));
    }

    /// The state of one container and what to do with it. `may_start`
    /// is false for app containers while init containers run.
    fn decide(&mut self, c: &Container, init: bool, may_start: bool) -> Decided {
        let name = c.name.as_str();
        let rt = self.obs.containers.get(name).cloned().unwrap_or_default();
        let probe = self.obs.probes.get(name).copied().unwrap_or_default();
        let hash = self.obs.spec_hashes.get(name).copied();
        let not_running = |state| Decided {
            state,
            ready: false,
            started: false,
            running: false,
            done: None,
        };
        let Some(cur) = rt.current.as_ref() else {
            if self.deleting || !may_start {
                return not_running(waiting("PodInitializing", None));
            }
            if let Some(b) = self.obs.blocked.get(name) {
                return not_running(waiting(&b.reason, Some(b.message.clone())));
            }
            if self.obs.pod_ip.is_none() {
                return not_running(waiting("ContainerCreating", None));
            }
            self.actions.push(Action::Start {
                container: name.to_string(),
                init,
                restart: None,
            });
            return not_running(waiting("ContainerCreating", None));
        };
        match &cur.state {
            AttemptState::Starting => {
                if self.deleting {
                    self.kill(name, deletion_grace(self.pod), KillReason::PodDeleted);
                }
                not_running(waiting("ContainerCreating", None))
            }
            AttemptState::Running { started_ms } => {
                if self.deleting {
                    self.kill(name, deletion_grace(self.pod), KillReason::PodDeleted);
                } else if probe.failed {
                    self.kill(name, probe_grace(self.pod, c), KillReason::Unhealthy);
                } else if hash.is_some_and(|h| h != cur.spec_hash) {
                    self.kill(name, probe_grace(self.pod, c), KillReason::Changed);
                }
                let state = ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(ts_secs(*started_ms)),
                    }),
                    ..ContainerState::default()
                };
                // Init containers are never ready; they are done or not.
                Decided {
                    state,
                    ready: !init && probe.ready && probe.started,
                    started: probe.started,
                    running: true,
                    done: None,
                }
            }
            AttemptState::Exited(exit) => {
                let term = ContainerState {
                    terminated: Some(terminated(&self.uid, name, cur, exit)),
                    ..ContainerState::default()
                };
                let done_for_good = Decided {
                    state: term.clone(),
                    ready: false,
                    started: false,
                    running: false,
                    done: Some(exit.exit_code),
                };
                // An init container that succeeded is done under any policy.
                let policy = if init && self.policy == "Always" {
                    "OnFailure"
                } else {
                    self.policy.as_str()
                };
                if self.deleting || !restarts(policy, exit) || !may_start {
                    return done_for_good;
                }
                if let Some(b) = self.obs.blocked.get(name) {
                    return not_running(waiting(&b.reason, Some(b.message.clone())));
                }
                match rt.backoff.remaining(exit.finished_ms, self.now_ms) {
                    Some(left) => {
                        self.backing_off.push((name.to_string(), left));
                        self.wake(left);
                        let delay = Duration::from_millis(rt.backoff.delay_ms);
                        let msg = format!(
                            "back-off {} restarting failed container={} pod={}_{}({})",
                            human(delay),
                            name,
                            self.pod.metadata.name.as_deref().unwrap_or(""),
                            self.pod.metadata.namespace.as_deref().unwrap_or(""),
                            self.uid
                        );
                        not_running(waiting("CrashLoopBackOff", Some(msg)))
                    }
                    None => {
                        self.actions.push(Action::Start {
                            container: name.to_string(),
                            init,
                            restart: Some(exit.finished_ms),
                        });
                        not_running(term)
                    }
                }
            }
        }
    }

    fn kill(&mut self, name: &str, grace_secs: i64, reason: KillReason) {
        self.actions.push(Action::Kill {
            container: name.to_string(),
            grace_secs,
            reason,
        });
    }
}

/// `5m0s`, `40s`: Go's duration format, as the back-off message shows it.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, s) => format!("{m}m{s}s"),
    }
}

fn last_state(pod_uid: &str, name: &str, prev: Option<&Attempt>) -> Option<ContainerState> {
    let a = prev?;
    let AttemptState::Exited(e) = &a.state else {
        return None;
    };
    Some(ContainerState {
        terminated: Some(terminated(pod_uid, name, a, e)),
        ..ContainerState::default()
    })
}

fn status_of(ctx: &Ctx<'_>, c: &Container, d: &Decided) -> ContainerStatus {
    let rt = ctx.obs.containers.get(&c.name).cloned().unwrap_or_default();
    // The attempt shown as `lastState`: the previous one while the current
    // runs, or the current one once it finished and waits to restart.
    let current_exited = rt.current.as_ref().is_some_and(|a| !a.alive());
    let shown_last = if current_exited && d.state.terminated.is_none() {
        rt.current.as_ref()
    } else {
        rt.previous.as_ref()
    };
    let image = c.image.clone().unwrap_or_default();
    ContainerStatus {
        name: c.name.clone(),
        image: image.clone(),
        image_id: format!("trellis://{}", crate::imagemap::repository(&image)),
        container_id: rt
            .current
            .as_ref()
            .map(|a| container_id(&ctx.uid, &c.name, a)),
        ready: d.ready,
        started: Some(d.started),
        restart_count: rt.current.as_ref().map_or(0, |a| a.index as i32),
        state: Some(d.state.clone()),
        last_state: Some(last_state(&ctx.uid, &c.name, shown_last).unwrap_or_default()),
        ..ContainerStatus::default()
    }
}

fn condition(pod: &Pod, type_: &str, ok: bool, reason: Option<&str>, now_ms: u64) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    // Keep the transition time while the status stays the same.
    let previous = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone());
    PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: if ok { None } else { reason.map(str::to_string) },
        last_transition_time: Some(previous.unwrap_or_else(|| ts_secs(now_ms))),
        ..PodCondition::default()
    }
}

/// Plans one pod.
pub fn plan(pod: &Pod, obs: &Observed, now_ms: u64) -> PodPlan {
    let empty = Vec::new();
    let spec = pod.spec.as_ref();
    let inits = spec
        .and_then(|s| s.init_containers.as_ref())
        .unwrap_or(&empty);
    let apps = spec.map(|s| &s.containers).unwrap_or(&empty);
    let mut ctx = Ctx {
        pod,
        obs,
        now_ms,
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        deleting: obs.gone || pod.metadata.deletion_timestamp.is_some(),
        policy: restart_policy(pod).to_string(),
        actions: Vec::new(),
        backing_off: Vec::new(),
        wake_in: None,
    };

    // Init containers, in order: each must have succeeded before the next.
    let mut init_statuses = Vec::new();
    let mut init_done = true;
    let mut init_failed = false;
    for c in inits {
        let d = ctx.decide(c, true, init_done && !init_failed);
        match d.done {
            Some(0) => {}
            Some(_) => {
                init_done = false;
                init_failed = true;
            }
            None => init_done = false,
        }
        init_statuses.push(status_of(&ctx, c, &d));
    }

    let mut statuses = Vec::new();
    let (mut running, mut waiting_n, mut stopped, mut succeeded) = (0, 0, 0, 0);
    let mut all_ready = !apps.is_empty();
    for c in apps {
        let d = ctx.decide(c, false, init_done);
        let st = status_of(&ctx, c, &d);
        all_ready &= d.ready;
        if d.running {
            running += 1;
        } else if let Some(t) = &d.state.terminated {
            // Finished for good, or about to be restarted.
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if st
            .last_state
            .as_ref()
            .is_some_and(|l| l.terminated.is_some())
        {
            // Waiting to restart counts as stopped, as upstream.
            stopped += 1;
        } else {
            waiting_n += 1;
        }
        statuses.push(st);
    }

    let policy = ctx.policy.clone();
    let phase = if init_failed && policy == "Never" {
        "Failed"
    } else if !init_done || waiting_n > 0 {
        "Pending"
    } else if running > 0 {
        "Running"
    } else if stopped > 0 {
        if policy == "Always" {
            "Running"
        } else if stopped == succeeded {
            "Succeeded"
        } else if policy == "Never" {
            "Failed"
        } else {
            "Running"
        }
    } else {
        "Pending"
    };
    // A pod that finished for good keeps its phase; nothing restarts it.
    let previous_phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let phase = match previous_phase {
        Some(p @ ("Succeeded" | "Failed")) => p,
        _ => phase,
    };

    let alive = obs
        .containers
        .values()
        .any(|rt| rt.current.as_ref().is_some_and(Attempt::alive));
    let terminated = ctx.deleting && !alive;
    let ready = all_ready && init_done && !ctx.deleting && phase == "Running";
    let sandbox = obs.pod_ip.is_some();
    let conditions = vec![
        condition(pod, "PodReadyToStartContainers", sandbox, None, now_ms),
        condition(
            pod,
            "Initialized",
            init_done,
            Some("ContainersNotInitialized"),
            now_ms,
        ),
        condition(pod, "Ready", ready, Some("ContainersNotReady"), now_ms),
        condition(
            pod,
            "ContainersReady",
            ready,
            Some("ContainersNotReady"),
            now_ms,
        ),
        condition(pod, "PodScheduled", true, None, now_ms),
    ];
    let start_time = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.clone())
        .unwrap_or_else(|| ts_secs(now_ms));
    let status = PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        container_statuses: Some(statuses),
        init_container_statuses: (!inits.is_empty()).then_some(init_statuses),
        host_ip: Some(obs.host_ip.clone()),
        host_ips: Some(vec![HostIP {
            ip: obs.host_ip.clone(),
        }]),
        pod_ip: obs.pod_ip.clone(),
        pod_ips: obs.pod_ip.clone().map(|ip| vec![PodIP { ip }]),
        start_time: Some(start_time),
        qos_class: pod.status.as_ref().and_then(|s| s.qos_class.clone()),
        ..PodStatus::default()
    };
    PodPlan {
        actions: ctx.actions,
        status,
        backing_off: ctx.backing_off,
        wake_in: ctx.wake_in,
        terminated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Backoff;
    use crate::view::{Blocked, ContainerRuntime, ProbeView};
    use serde_json::json;

    const NOW: u64 = 1_700_000_000_000;

    fn pod(policy: &str, inits: usize) -> Pod {
        let init: Vec<_> = (0..inits)
            .map(|i| json!({"name": format!("init{i}"), "image": "trellis.dev/exec"}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"restartPolicy": policy, "terminationGracePeriodSeconds": 7,
                     "initContainers": init,
                     "containers": [{"name": "c", "image": "trellis.dev/exec",
                                     "livenessProbe": {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 3}}]},
        }))
        .unwrap()
    }

    fn obs() -> Observed {
        Observed {
            pod_ip: Some("127.1.0.2".into()),
            host_ip: "127.0.0.1".into(),
            ..Observed::default()
        }
    }

    fn running(index: u32) -> Attempt {
        Attempt {
            index,
            state: AttemptState::Running {
                started_ms: NOW - 5_000,
            },
            spec_hash: 0,
        }
    }

    fn exited(index: u32, code: i32, finished_ms: u64) -> Attempt {
        Attempt {
            index,
            state: AttemptState::Exited(Exit {
                exit_code: code,
                signal: None,
                reason: if code == 0 { "Completed" } else { "Error" }.into(),
                message: None,
                started_ms: Some(finished_ms - 1_000),
                finished_ms,
            }),
            spec_hash: 0,
        }
    }

    fn with(
        mut o: Observed,
        name: &str,
        cur: Attempt,
        prev: Option<Attempt>,
        backoff: Backoff,
    ) -> Observed {
        o.containers.insert(
            name.into(),
            ContainerRuntime {
                current: Some(cur),
                previous: prev,
                backoff,
            },
        );
        o.probes.insert(
            name.into(),
            ProbeView {
                ready: true,
                started: true,
                failed: false,
            },
        );
        o
    }

    fn state(p: &PodPlan, i: usize) -> ContainerState {
        p.status.container_statuses.as_ref().unwrap()[i]
            .state
            .clone()
            .unwrap()
    }

    fn cond(p: &PodPlan, t: &str) -> String {
        p.status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
            .status
            .clone()
    }

    fn start(name: &str, init: bool, restart: Option<u64>) -> Action {
        Action::Start {
            container: name.into(),
            init,
            restart,
        }
    }

    #[test]
    fn a_new_pod_waits_for_its_sandbox_then_starts() {
        let p = pod("Always", 0);
        let no_ip = Observed {
            pod_ip: None,
            ..obs()
        };
        let plan = plan(&p, &no_ip, NOW);
        assert!(plan.actions.is_empty());
        assert_eq!(
            state(&plan, 0).waiting.unwrap().reason.as_deref(),
            Some("ContainerCreating")
        );
        assert_eq!(plan.status.phase.as_deref(), Some("Pending"));
        assert_eq!(cond(&plan, "PodReadyToStartContainers"), "False");
        let plan = super::plan(&p, &obs(), NOW);
        assert_eq!(plan.actions, [start("c", false, None)]);
        assert_eq!(plan.status.pod_ip.as_deref(), Some("127.1.0.2"));
    }

    #[test]
    fn running_and_ready() {
        let o = with(
            obs(),
            "c",
            running(2),
            Some(exited(1, 1, NOW - 9_000)),
            Backoff::default(),
        );
        let plan = plan(&pod("Always", 0), &o, NOW);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.status.phase.as_deref(), Some("Running"));
        assert_eq!(cond(&plan, "Ready"), "True");
        let st = &plan.status.container_statuses.as_ref().unwrap()[0];
        assert_eq!(st.restart_count, 2);
        assert!(st.ready);
        assert_eq!(st.container_id.as_deref(), Some("trellis://u1/c/2"));
        assert_eq!(
            st.last_state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            1
        );
        let mut o = o;
        o.probes.get_mut("c").unwrap().ready = false;
        let plan = super::plan(&pod("Always", 0), &o, NOW);
        assert_eq!(cond(&plan, "Ready"), "False");
        assert_eq!(plan.status.phase.as_deref(), Some("Running"));
    }

    #[test]
    fn restart_policy_table() {
        let finished = NOW - 500;
        // (policy, exit code, want restart, want phase)
        for (policy, code, restart, phase) in [
            ("Always", 0, true, "Running"),
            ("Always", 1, true, "Running"),
            ("OnFailure", 0, false, "Succeeded"),
            ("OnFailure", 1, true, "Running"),
            ("Never", 0, false, "Succeeded"),
            ("Never", 1, false, "Failed"),
        ] {
            let o = with(
                obs(),
                "c",
                exited(0, code, finished),
                None,
                Backoff::default(),
            );
            let plan = plan(&pod(policy, 0), &o, NOW);
            let want: Vec<Action> = if restart {
                vec![start("c", false, Some(finished))]
            } else {
                vec![]
            };
            assert_eq!(plan.actions, want, "{policy} exit {code}");
            assert_eq!(
                plan.status.phase.as_deref(),
                Some(phase),
                "{policy} exit {code}"
            );
        }
    }

    #[test]
    fn crash_loop_back_off_waits_and_says_so() {
        let finished = NOW - 4_000;
        let backoff = Backoff::default().next(NOW - 60_000);
        let o = with(
            obs(),
            "c",
            exited(1, 1, finished),
            Some(exited(0, 1, NOW - 60_000)),
            backoff,
        );
        let plan = plan(&pod("Always", 0), &o, NOW);
        assert!(plan.actions.is_empty());
        let w = state(&plan, 0).waiting.unwrap();
        assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
        assert_eq!(
            w.message.as_deref(),
            Some("back-off 10s restarting failed container=c pod=p_ns(u1)")
        );
        assert_eq!(plan.wake_in, Some(Duration::from_secs(6)));
        assert_eq!(
            plan.backing_off,
            [("c".to_string(), Duration::from_secs(6))]
        );
        let st = &plan.status.container_statuses.as_ref().unwrap()[0];
        assert_eq!(st.restart_count, 1);
        let last = st.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
        assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
        assert_eq!(plan.status.phase.as_deref(), Some("Running"));
        // Once the back-off is over it starts again.
        let later = super::plan(&pod("Always", 0), &o, finished + 10_000);
        assert_eq!(later.actions, [start("c", false, Some(finished))]);
    }

    #[test]
    fn deletion_stops_with_the_grace_period_then_terminates() {
        let mut p = pod("Always", 0);
        p.metadata.deletion_timestamp = Some(ts(NOW));
        p.metadata.deletion_grace_period_seconds = Some(4);
        let o = with(obs(), "c", running(0), None, Backoff::default());
        let plan = plan(&p, &o, NOW);
        assert_eq!(
            plan.actions,
            [Action::Kill {
                container: "c".into(),
                grace_secs: 4,
                reason: KillReason::PodDeleted
            }]
        );
        assert!(!plan.terminated);
        assert_eq!(cond(&plan, "Ready"), "False");
        let o = with(obs(), "c", exited(0, 143, NOW), None, Backoff::default());
        let plan = super::plan(&p, &o, NOW);
        assert!(plan.actions.is_empty(), "nothing restarts while deleting");
        assert!(plan.terminated);
        // A pod force-deleted from the API stops with its own grace period.
        let o = Observed {
            gone: true,
            ..with(obs(), "c", running(0), None, Backoff::default())
        };
        let plan = super::plan(&pod("Always", 0), &o, NOW);
        assert_eq!(
            plan.actions,
            [Action::Kill {
                container: "c".into(),
                grace_secs: 7,
                reason: KillReason::PodDeleted
            }]
        );
        // A pod deleted before anything ran is terminated at once.
        let plan = super::plan(&p, &obs(), NOW);
        assert!(plan.actions.is_empty() && plan.terminated);
    }

    #[test]
    fn failed_liveness_and_changed_definitions_stop_the_container() {
        let mut o = with(obs(), "c", running(0), None, Backoff::default());
        o.probes.get_mut("c").unwrap().failed = true;
        let plan = plan(&pod("Always", 0), &o, NOW);
        assert_eq!(
            plan.actions,
            [Action::Kill {
                container: "c".into(),
                grace_secs: 3,
                reason: KillReason::Unhealthy
            }]
        );
        let mut o = with(obs(), "c", running(0), None, Backoff::default());
        o.spec_hashes.insert("c".into(), 42);
        let plan = super::plan(&pod("Always", 0), &o, NOW);
        assert_eq!(
            plan.actions,
            [Action::Kill {
                container: "c".into(),
                grace_secs: 3,
                reason: KillReason::Changed
            }]
        );
    }

    #[test]
    fn init_containers_run_one_by_one_first() {
        let p = pod("Always", 2);
        let plan = plan(&p, &obs(), NOW);
        assert_eq!(plan.actions, [start("init0", true, None)]);
        assert_eq!(plan.status.phase.as_deref(), Some("Pending"));
        assert_eq!(cond(&plan, "Initialized"), "False");
        assert_eq!(
            state(&plan, 0).waiting.unwrap().reason.as_deref(),
            Some("PodInitializing")
        );
        let o = with(
            obs(),
            "init0",
            exited(0, 0, NOW - 10),
            None,
            Backoff::default(),
        );
        let plan = super::plan(&p, &o, NOW);
        assert_eq!(plan.actions, [start("init1", true, None)]);
        let o = with(o, "init1", exited(0, 0, NOW - 5), None, Backoff::default());
        let plan = super::plan(&p, &o, NOW);
        assert_eq!(plan.actions, [start("c", false, None)]);
        assert_eq!(cond(&plan, "Initialized"), "True");
        // A failing init container restarts under Always, fails the pod under Never.
        let o = with(
            obs(),
            "init0",
            exited(0, 2, NOW - 10),
            None,
            Backoff::default(),
        );
        assert_eq!(
            super::plan(&p, &o, NOW).actions,
            [start("init0", true, Some(NOW - 10))]
        );
        let plan = super::plan(&pod("Never", 2), &o, NOW);
        assert!(plan.actions.is_empty());
        assert_eq!(plan.status.phase.as_deref(), Some("Failed"));
    }

    #[test]
    fn blocked_containers_wait_with_their_reason() {
        let mut o = obs();
        o.blocked.insert(
            "c".into(),
            Blocked {
                reason: "ErrImagePull".into(),
                message: "image \"nginx\" has no entry".into(),
            },
        );
        let plan = plan(&pod("Always", 0), &o, NOW);
        assert!(plan.actions.is_empty());
        let w = state(&plan, 0).waiting.unwrap();
        assert_eq!(w.reason.as_deref(), Some("ErrImagePull"));
        assert!(w.message.unwrap().contains("nginx"));
        assert_eq!(plan.status.phase.as_deref(), Some("Pending"));
    }

    #[test]
    fn finished_pods_keep_their_phase_and_transition_times_stay() {
        let mut p = pod("Never", 0);
        p.status = Some(PodStatus {
            phase: Some("Succeeded".into()),
            ..PodStatus::default()
        });
        let plan = plan(&p, &obs(), NOW);
        assert_eq!(plan.status.phase.as_deref(), Some("Succeeded"));
        let o = with(obs(), "c", running(0), None, Backoff::default());
        let first = super::plan(&pod("Always", 0), &o, NOW);
        let mut p = pod("Always", 0);
        p.status = Some(first.status.clone());
        let again = super::plan(&p, &o, NOW + 60_000);
        assert_eq!(first.status.conditions, again.status.conditions);
        assert_eq!(human(Duration::from_secs(300)), "5m0s");
        assert_eq!(human(Duration::from_secs(40)), "40s");
    }
}
