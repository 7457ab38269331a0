//! Probes, decided purely: when each probe of a container is due, what it
//! checks (an HTTP GET, a TCP connect or a command beside the container,
//! with named ports resolved and the pod IP as the default host), and the
//! threshold state machine that turns single results into the container's
//! `ready`, `started` and "restart it" verdicts. The checks themselves run
//! in [`crate::prober`].

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::view::ProbeView;

/// The three kinds of probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Startup,
    Liveness,
    Readiness,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Startup => "Startup",
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
        }
    }

    fn of(self, c: &Container) -> Option<&Probe> {
        match self {
            Kind::Startup => c.startup_probe.as_ref(),
            Kind::Liveness => c.liveness_probe.as_ref(),
            Kind::Readiness => c.readiness_probe.as_ref(),
        }
    }
}

/// A probe's timing, with kube's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

fn secs(v: Option<i32>, default: u64, min: u64) -> Duration {
    Duration::from_secs(v.map_or(default, |s| s.max(0) as u64).max(min))
}

impl Timing {
    pub fn of(p: &Probe) -> Timing {
        Timing {
            initial_delay: secs(p.initial_delay_seconds, 0, 0),
            period: secs(p.period_seconds, 10, 1),
            timeout: secs(p.timeout_seconds, 1, 1),
            success_threshold: p.success_threshold.map_or(1, |v| v.max(1) as u32),
            failure_threshold: p.failure_threshold.map_or(3, |v| v.max(1) as u32),
        }
    }
}

/// What a probe checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    Http {
        https: bool,
        host: String,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    Tcp {
        host: String,
        port: u16,
    },
    Exec {
        command: Vec<String>,
    },
    /// A handler this runtime cannot run (gRPC), or a port it cannot
    /// resolve; it always fails, with this message.
    Invalid(String),
}

/// A port number, or a named container port.
fn port(p: &IntOrString, c: &Container) -> Result<u16, String> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("invalid port {n}")),
        IntOrString::String(name) => {
            if let Ok(n) = name.parse::<u16>() {
                return Ok(n);
            }
            c.ports
                .iter()
                .flatten()
                .find(|cp| cp.name.as_deref() == Some(name.as_str()))
                .and_then(|cp| u16::try_from(cp.container_port).ok())
                .ok_or_else(|| format!("couldn't find port {name:?} in container {:?}", c.name))
        }
    }
}

/// What `probe` of container `c` checks in a pod at `pod_ip`.
pub fn check(p: &Probe, c: &Container, pod_ip: &str) -> Check {
    let host = |h: &Option<String>| {
        h.clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| pod_ip.to_string())
    };
    if let Some(h) = &p.http_get {
        return match port(&h.port, c) {
            Ok(port) => Check::Http {
                https: h.scheme.as_deref() == Some("HTTPS"),
                host: host(&h.host),
                port,
                path: h
                    .path
                    .clone()
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "/".into()),
                headers: h
                    .http_headers
                    .iter()
                    .flatten()
                    .map(|hh| (hh.name.clone(), hh.value.clone()))
                    .collect(),
            },
            Err(e) => Check::Invalid(e),
        };
    }
    if let Some(t) = &p.tcp_socket {
        return match port(&t.port, c) {
            Ok(port) => Check::Tcp {
                host: host(&t.host),
                port,
            },
            Err(e) => Check::Invalid(e),
        };
    }
    if let Some(e) = &p.exec {
        return Check::Exec {
            command: e.command.clone().unwrap_or_default(),
        };
    }
    if p.grpc.is_some() {
        return Check::Invalid("gRPC probes are not supported by the process runtime".into());
    }
    Check::Invalid("the probe has no handler".into())
}

/// One probe's running state for the current attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct State {
    successes: u32,
    failures: u32,
    /// The verdict once a threshold was reached.
    pub result: Option<bool>,
    /// When it last ran (Unix ms).
    pub last_run_ms: Option<u64>,
}

impl State {
    /// How long until the probe is due, for a container that started at
    /// `started_ms`; zero when due now.
    pub fn due_in(&self, t: &Timing, started_ms: u64, now_ms: u64) -> Duration {
        let first = started_ms + t.initial_delay.as_millis() as u64;
        let next = match self.last_run_ms {
            None => first,
            Some(last) => (last + t.period.as_millis() as u64).max(first),
        };
        Duration::from_millis(next.saturating_sub(now_ms))
    }

    /// The state after one result.
    pub fn observe(&self, t: &Timing, ok: bool, now_ms: u64) -> State {
        let mut s = *self;
        s.last_run_ms = Some(now_ms);
        if ok {
            s.successes += 1;
            s.failures = 0;
            if s.successes >= t.success_threshold {
                s.result = Some(true);
            }
        } else {
            s.failures += 1;
            s.successes = 0;
            if s.failures >= t.failure_threshold {
                s.result = Some(false);
            }
        }
        s
    }
}

/// A container's probes in one place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    pub startup: State,
    pub liveness: State,
    pub readiness: State,
}

impl Probes {
    pub fn get(&self, k: Kind) -> &State {
        match k {
            Kind::Startup => &self.startup,
            Kind::Liveness => &self.liveness,
            Kind::Readiness => &self.readiness,
        }
    }

    pub fn set(&mut self, k: Kind, s: State) {
        match k {
            Kind::Startup => self.startup = s,
            Kind::Liveness => self.liveness = s,
            Kind::Readiness => self.readiness = s,
        }
    }

    /// The probes due now, and how long until the next one otherwise.
    /// Liveness and readiness wait for the startup probe, as upstream.
    pub fn due(
        &self,
        c: &Container,
        started_ms: u64,
        now_ms: u64,
    ) -> (Vec<Kind>, Option<Duration>) {
        let started = self.verdict(c).started;
        let mut due = Vec::new();
        let mut next: Option<Duration> = None;
        for k in [Kind::Startup, Kind::Liveness, Kind::Readiness] {
            let Some(p) = k.of(c) else { continue };
            // Startup stops once it succeeded; the others start then.
            if (k == Kind::Startup) == started {
                continue;
            }
            let wait = self.get(k).due_in(&Timing::of(p), started_ms, now_ms);
            if wait.is_zero() {
                due.push(k);
            } else {
                next = Some(next.map_or(wait, |n| n.min(wait)));
            }
        }
        (due, next)
    }

    /// The container's verdicts.
    pub fn verdict(&self, c: &Container) -> ProbeView {
        let started = c.startup_probe.is_none() || self.startup.result == Some(true);
        ProbeView {
            ready: started && (c.readiness_probe.is_none() || self.readiness.result == Some(true)),
            started,
            failed: (c.liveness_probe.is_some() && self.liveness.result == Some(false))
                || (c.startup_probe.is_some() && self.startup.result == Some(false)),
        }
    }
}

/// The probe of kind `k` of container `c`, if it has one.
pub fn probe_of(c: &Container, k: Kind) -> Option<&Probe> {
    k.of(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(v: serde_json::Value) -> Container {
        let mut v = v;
        v["name"] = json!("c");
        v["ports"] = json!([{"name": "http", "containerPort": 8080}]);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn checks_resolve_ports_and_hosts() {
        let c = container(json!({}));
        let p = |v| serde_json::from_value::<Probe>(v).unwrap();
        assert_eq!(
            check(
                &p(
                    json!({"httpGet": {"port": "http", "path": "/healthz", "httpHeaders": [{"name": "X", "value": "1"}]}})
                ),
                &c,
                "127.1.0.3"
            ),
            Check::Http {
                https: false,
                host: "127.1.0.3".into(),
                port: 8080,
                path: "/healthz".into(),
                headers: vec![("X".into(), "1".into())]
            }
        );
        assert_eq!(
            check(
                &p(json!({"httpGet": {"port": 443, "scheme": "HTTPS", "host": "127.0.0.1"}})),
                &c,
                "127.1.0.3"
            ),
            Check::Http {
                https: true,
                host: "127.0.0.1".into(),
                port: 443,
                path: "/".into(),
                headers: vec![]
            }
        );
        assert_eq!(
            check(&p(json!({"tcpSocket": {"port": 2379}})), &c, "ip"),
            Check::Tcp {
                host: "ip".into(),
                port: 2379
            }
        );
        assert!(
            matches!(check(&p(json!({"tcpSocket": {"port": "nope"}})), &c, "ip"), Check::Invalid(m) if m.contains("nope"))
        );
        assert!(matches!(
            check(&p(json!({"tcpSocket": {"port": 70000}})), &c, "ip"),
            Check::Invalid(_)
        ));
        assert_eq!(
            check(&p(json!({"exec": {"command": ["true"]}})), &c, "ip"),
            Check::Exec {
                command: vec!["true".into()]
            }
        );
        assert!(matches!(
            check(&p(json!({"grpc": {"port": 1}})), &c, "ip"),
            Check::Invalid(_)
        ));
    }

    #[test]
    fn thresholds_flip_the_verdict() {
        let t = Timing::of(
            &serde_json::from_value(json!({"successThreshold": 2, "failureThreshold": 3})).unwrap(),
        );
        let mut s = State::default();
        for (ok, want) in [
            (true, None),
            (true, Some(true)),
            (false, Some(true)),
            (false, Some(true)),
            (true, Some(true)),
            (false, Some(true)),
            (false, Some(true)),
            (false, Some(false)),
            (true, Some(false)),
            (true, Some(true)),
        ] {
            s = s.observe(&t, ok, 0);
            assert_eq!(s.result, want);
        }
    }

    #[test]
    fn schedule_waits_for_initial_delay_and_period() {
        let t = Timing::of(
            &serde_json::from_value(json!({"initialDelaySeconds": 5, "periodSeconds": 2})).unwrap(),
        );
        let s = State::default();
        assert_eq!(s.due_in(&t, 1_000, 1_000), Duration::from_secs(5));
        assert_eq!(s.due_in(&t, 1_000, 6_000), Duration::ZERO);
        let s = s.observe(&t, true, 6_000);
        assert_eq!(s.due_in(&t, 1_000, 7_000), Duration::from_secs(1));
        let defaults = Timing::of(&Probe::default());
        assert_eq!(
            (
                defaults.period,
                defaults.timeout,
                defaults.failure_threshold
            ),
            (Duration::from_secs(10), Duration::from_secs(1), 3)
        );
    }

    #[test]
    fn startup_gates_the_others_and_verdicts_follow() {
        let c = container(json!({
            "startupProbe": {"exec": {"command": ["a"]}, "failureThreshold": 1},
            "livenessProbe": {"exec": {"command": ["b"]}, "failureThreshold": 1},
            "readinessProbe": {"exec": {"command": ["c"]}},
        }));
        let mut ps = Probes::default();
        assert_eq!(ps.due(&c, 0, 0).0, [Kind::Startup]);
        assert_eq!(
            ps.verdict(&c),
            ProbeView {
                ready: false,
                started: false,
                failed: false
            }
        );
        let t = Timing::of(c.startup_probe.as_ref().unwrap());
        ps.startup = ps.startup.observe(&t, true, 0);
        assert_eq!(ps.due(&c, 0, 0).0, [Kind::Liveness, Kind::Readiness]);
        assert_eq!(
            ps.verdict(&c),
            ProbeView {
                ready: false,
                started: true,
                failed: false
            }
        );
        ps.readiness = ps.readiness.observe(&t, true, 0);
        assert!(ps.verdict(&c).ready);
        ps.liveness = ps.liveness.observe(&t, false, 0);
        assert!(ps.verdict(&c).failed);
        let plain = container(json!({}));
        assert_eq!(
            Probes::default().verdict(&plain),
            ProbeView {
                ready: true,
                started: true,
                failed: false
            }
        );
        assert_eq!(Probes::default().due(&plain, 0, 0), (vec![], None));
    }
}
