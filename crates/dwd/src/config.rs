//! The prober's and the weeder's config files (spec §1.1 and §2.1): plain
//! YAML with upstream's camelCase keys and Go durations, so upstream's
//! ConfigMaps (`example/01-dwd-prober-configmap.yaml`,
//! `example/02-dwd-weeder-configmap.yaml`) apply unchanged.
//!
//! Parsing fills upstream's defaults and validates; every problem is
//! reported at once, and a binary refuses to start on any of them. Keys
//! upstream does not know are ignored, as its decoder does.

use std::collections::BTreeMap;
use std::time::Duration;

use apimachinery::selector::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

/// `probeInterval` when absent.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(10);
/// `initialDelay` when absent.
pub const DEFAULT_INITIAL_DELAY: Duration = Duration::from_secs(30);
/// `probeTimeout` when absent.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// `backoffJitterFactor` when absent.
pub const DEFAULT_BACKOFF_JITTER_FACTOR: f64 = 0.2;
/// `kcmNodeMonitorGraceDuration` when absent: kube-controller-manager's
/// `--node-monitor-grace-period` default.
pub const DEFAULT_KCM_NODE_MONITOR_GRACE: Duration = Duration::from_secs(40);
/// `nodeLeaseFailureFraction` when absent.
pub const DEFAULT_NODE_LEASE_FAILURE_FRACTION: f64 = 0.60;
/// A ScaleInfo's `timeout` when absent.
pub const DEFAULT_SCALE_TIMEOUT: Duration = Duration::from_secs(30);
/// The weeder's `watchDuration` when absent.
pub const DEFAULT_WATCH_DURATION: Duration = Duration::from_secs(5 * 60);

/// A config file that cannot be used, with every problem found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("the config file is not valid YAML: {0}")]
    Syntax(String),
    #[error("the config file is invalid: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

/// `autoscalingv1.CrossVersionObjectReference`: the resource to scale, in
/// the shoot's control namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

impl ResourceRef {
    /// The group ("" for the core group) and version of `api_version`.
    pub fn group_version(&self) -> (&str, &str) {
        match self.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", self.api_version.as_str()),
        }
    }
}

impl std::fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// How one resource is scaled in one direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleInfo {
    /// Lower levels run first; a level starts when all lower ones ended.
    pub level: i32,
    /// Slept before the resource is touched.
    pub initial_delay: Duration,
    /// Bounds each `/scale` read and update.
    pub timeout: Duration,
}

/// One dependant of the shoot's API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DependentResourceInfo {
    pub reference: ResourceRef,
    /// An absent optional resource is skipped; an absent mandatory one
    /// fails its level.
    pub optional: bool,
    pub scale_up: ScaleInfo,
    pub scale_down: ScaleInfo,
}

/// The prober's configuration, defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct ProberConfig {
    /// The Secret (in each shoot namespace) whose `kubeconfig` key reaches
    /// the shoot's API server.
    pub kube_config_secret_name: String,
    pub probe_interval: Duration,
    pub initial_delay: Duration,
    pub probe_timeout: Duration,
    pub backoff_jitter_factor: f64,
    pub kcm_node_monitor_grace_duration: Duration,
    pub node_lease_failure_fraction: f64,
    pub dependent_resource_infos: Vec<DependentResourceInfo>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawProber {
    #[serde(default)]
    kube_config_secret_name: Option<String>,
    #[serde(default)]
    probe_interval: Option<String>,
    #[serde(default)]
    initial_delay: Option<String>,
    #[serde(default)]
    probe_timeout: Option<String>,
    #[serde(default)]
    backoff_jitter_factor: Option<f64>,
    #[serde(default)]
    kcm_node_monitor_grace_duration: Option<String>,
    #[serde(default)]
    node_lease_failure_fraction: Option<f64>,
    #[serde(default)]
    dependent_resource_infos: Option<Vec<RawDependent>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDependent {
    #[serde(default, rename = "ref")]
    reference: Option<RawRef>,
    #[serde(default)]
    optional: bool,
    #[serde(default)]
    scale_up: Option<RawScaleInfo>,
    #[serde(default)]
    scale_down: Option<RawScaleInfo>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRef {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawScaleInfo {
    #[serde(default)]
    level: i32,
    #[serde(default)]
    initial_delay: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
}

/// Collects problems while the raw file is turned into a config.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    /// A Go duration, or the default when absent. Negative durations are
    /// refused: none of these knobs means anything below zero.
    fn duration(&mut self, field: &str, raw: Option<&str>, default: Duration) -> Duration {
        let Some(s) = raw else {
            return default;
        };
        match api::parse_signed_duration(s.trim()) {
            Ok((false, d)) => d,
            Ok((true, d)) if d.is_zero() => d,
            Ok((true, _)) => {
                self.0.push(format!("{field}: {s:?} is negative"));
                default
            }
            Err(e) => {
                self.0
                    .push(format!("{field}: {s:?} is not a duration ({e})"));
                default
            }
        }
    }

    fn scale_info(&mut self, field: &str, raw: Option<&RawScaleInfo>) -> ScaleInfo {
        let Some(raw) = raw else {
            // Upstream's validator requires both directions, although its
            // docs call them optional (spec §1.1).
            self.0.push(format!("{field}: required"));
            return ScaleInfo {
                level: 0,
                initial_delay: Duration::ZERO,
                timeout: DEFAULT_SCALE_TIMEOUT,
            };
        };
        ScaleInfo {
            level: raw.level,
            initial_delay: self.duration(
                &format!("{field}.initialDelay"),
                raw.initial_delay.as_deref(),
                Duration::ZERO,
            ),
            timeout: self.duration(
                &format!("{field}.timeout"),
                raw.timeout.as_deref(),
                DEFAULT_SCALE_TIMEOUT,
            ),
        }
    }
}

/// Whether `api_version` is `group/version` or a core `version`.
fn valid_api_version(api_version: &str) -> bool {
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    };
    match api_version.split_once('/') {
        Some((g, v)) => ok(g) && ok(v) && !v.contains('.'),
        None => ok(api_version) && !api_version.contains('.'),
    }
}

impl ProberConfig {
    /// Parses, defaults and validates a prober config file.
    pub fn from_yaml(yaml: &str) -> Result<ProberConfig, ConfigError> {
        let raw: RawProber =
            serde_yaml::from_str(yaml).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        let mut p = Problems::default();
        let kube_config_secret_name = raw
            .kube_config_secret_name
            .unwrap_or_default()
            .trim()
            .to_string();
        if kube_config_secret_name.is_empty() {
            p.0.push("kubeConfigSecretName: must not be blank".into());
        }
        let probe_interval = p.duration(
            "probeInterval",
            raw.probe_interval.as_deref(),
            DEFAULT_PROBE_INTERVAL,
        );
        if probe_interval.is_zero() {
            // Upstream would probe in a busy loop.
            p.0.push("probeInterval: must be greater than 0".into());
        }
        let kcm = p.duration(
            "kcmNodeMonitorGraceDuration",
            raw.kcm_node_monitor_grace_duration.as_deref(),
            DEFAULT_KCM_NODE_MONITOR_GRACE,
        );
        if raw.kcm_node_monitor_grace_duration.is_some() && kcm.is_zero() {
            p.0.push("kcmNodeMonitorGraceDuration: must not be 0".into());
        }
        let fraction = raw
            .node_lease_failure_fraction
            .unwrap_or(DEFAULT_NODE_LEASE_FAILURE_FRACTION);
        if !fraction.is_finite() {
            p.0.push("nodeLeaseFailureFraction: must be a number".into());
        }
        let jitter = raw
            .backoff_jitter_factor
            .unwrap_or(DEFAULT_BACKOFF_JITTER_FACTOR);
        if !jitter.is_finite() {
            p.0.push("backoffJitterFactor: must be a number".into());
        }
        let raw_infos = raw.dependent_resource_infos.unwrap_or_default();
        if raw_infos.is_empty() {
            p.0.push("dependentResourceInfos: must not be empty".into());
        }
        let mut infos = Vec::with_capacity(raw_infos.len());
        for (i, d) in raw_infos.iter().enumerate() {
            let field = format!("dependentResourceInfos[{i}]");
            let reference = match &d.reference {
                Some(r) => {
                    if !valid_api_version(&r.api_version) {
                        p.0.push(format!(
                            "{field}.ref.apiVersion: {:?} is not group/version",
                            r.api_version
                        ));
                    }
                    if r.kind.trim().is_empty() {
                        p.0.push(format!("{field}.ref.kind: must not be blank"));
                    }
                    if r.name.trim().is_empty() {
                        p.0.push(format!("{field}.ref.name: must not be blank"));
                    }
                    ResourceRef {
                        api_version: r.api_version.clone(),
                        kind: r.kind.clone(),
                        name: r.name.clone(),
                    }
                }
                None => {
                    p.0.push(format!("{field}.ref: required"));
                    ResourceRef {
                        api_version: String::new(),
                        kind: String::new(),
                        name: String::new(),
                    }
                }
            };
            let scale_up = p.scale_info(&format!("{field}.scaleUp"), d.scale_up.as_ref());
            let scale_down = p.scale_info(&format!("{field}.scaleDown"), d.scale_down.as_ref());
            infos.push(DependentResourceInfo {
                reference,
                optional: d.optional,
                scale_up,
                scale_down,
            });
        }
        let config = ProberConfig {
            kube_config_secret_name,
            probe_interval,
            initial_delay: p.duration(
                "initialDelay",
                raw.initial_delay.as_deref(),
                DEFAULT_INITIAL_DELAY,
            ),
            probe_timeout: p.duration(
                "probeTimeout",
                raw.probe_timeout.as_deref(),
                DEFAULT_PROBE_TIMEOUT,
            ),
            backoff_jitter_factor: jitter,
            kcm_node_monitor_grace_duration: kcm,
            node_lease_failure_fraction: fraction,
            dependent_resource_infos: infos,
        };
        if p.0.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid(p.0))
        }
    }
}

/// One dependant pod selector of the weeder: the `metav1.LabelSelector` as
/// written, and its parsed form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSelector {
    pub raw: Value,
    pub selector: LabelSelector,
}

impl PodSelector {
    /// The selector in the `labelSelector` query syntax, or `None` for a
    /// null selector, which matches no pod (so nothing is watched).
    pub fn query(&self) -> Option<String> {
        (!self.selector.matches_nothing()).then(|| self.selector.to_string())
    }
}

/// The weeder's configuration, defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct WeederConfig {
    pub watch_duration: Duration,
    /// Service name → the selectors of the pods that depend on it.
    pub services_and_dependant_selectors: BTreeMap<String, Vec<PodSelector>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawWeeder {
    #[serde(default)]
    watch_duration: Option<String>,
    #[serde(default)]
    services_and_dependant_selectors: Option<BTreeMap<String, RawDependantSelectors>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDependantSelectors {
    #[serde(default)]
    pod_selectors: Option<Vec<Value>>,
}

impl WeederConfig {
    /// Parses, defaults and validates a weeder config file.
    pub fn from_yaml(yaml: &str) -> Result<WeederConfig, ConfigError> {
        let raw: RawWeeder =
            serde_yaml::from_str(yaml).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        let mut p = Problems::default();
        let watch_duration = p.duration(
            "watchDuration",
            raw.watch_duration.as_deref(),
            DEFAULT_WATCH_DURATION,
        );
        let raw_map = raw.services_and_dependant_selectors.unwrap_or_default();
        if raw_map.is_empty() {
            p.0.push("servicesAndDependantSelectors: must not be empty".into());
        }
        let mut services = BTreeMap::new();
        for (service, deps) in raw_map {
            let field = format!("servicesAndDependantSelectors[{service}].podSelectors");
            let raw_selectors = deps.pod_selectors.unwrap_or_default();
            if raw_selectors.is_empty() {
                p.0.push(format!("{field}: must not be empty"));
            }
            let mut selectors = Vec::new();
            for (i, raw) in raw_selectors.into_iter().enumerate() {
                match LabelSelector::from_json(&raw) {
                    Ok(selector) => selectors.push(PodSelector { raw, selector }),
                    Err(e) => p.0.push(format!("{field}[{i}]: {}", e.message)),
                }
            }
            services.insert(service, selectors);
        }
        if p.0.is_empty() {
            Ok(WeederConfig {
                watch_duration,
                services_and_dependant_selectors: services,
            })
        } else {
            Err(ConfigError::Invalid(p.0))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
