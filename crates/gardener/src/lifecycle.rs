//! Version lifecycles: which classification a Kubernetes or image version
//! has at a given time, and the static rules for lifecycle stages.
//!
//! A version either uses the legacy fields (`classification`,
//! `expirationDate`) or a list of timed `lifecycle` stages. Both are read
//! through one function so that nothing else has to know the difference.

use apimachinery::status::Cause;
use chrono::{DateTime, Utc};

use crate::types::{Classification, ExpirableVersion, LifecycleStage, Time};

/// The stages a version goes through, synthesized from the legacy fields
/// when it has no explicit lifecycle.
pub fn stages(v: &ExpirableVersion) -> Vec<LifecycleStage> {
    if !v.lifecycle.is_empty() {
        return v.lifecycle.clone();
    }
    let mut stages = vec![LifecycleStage {
        classification: v.classification.unwrap_or(Classification::Supported),
        start_time: None,
    }];
    if let Some(expiry) = v.expiration_date {
        stages.push(LifecycleStage {
            classification: Classification::Expired,
            start_time: Some(expiry),
        });
    }
    stages
}

/// The classification of `v` at `now`.
///
/// Without any lifecycle information a version is `supported`. With
/// explicit stages it is `unavailable` until the first stage starts, then
/// takes the classification of the last stage that has started (a stage
/// without start time started at the beginning of time).
pub fn classification(v: &ExpirableVersion, now: DateTime<Utc>) -> Classification {
    let mut current = Classification::Unavailable;
    for stage in stages(v) {
        let started = stage.start_time.is_none_or(|t| t.0 < now);
        if started {
            current = stage.classification;
        }
    }
    current
}

/// Whether the version may be chosen for new workers: neither expired nor
/// unavailable.
pub fn is_active(v: &ExpirableVersion, now: DateTime<Utc>) -> bool {
    !matches!(
        classification(v, now),
        Classification::Expired | Classification::Unavailable
    )
}

/// Whether the version has expired at `now`.
pub fn is_expired(v: &ExpirableVersion, now: DateTime<Utc>) -> bool {
    classification(v, now) == Classification::Expired
}

/// When the version expires, from either representation.
pub fn expiration(v: &ExpirableVersion) -> Option<Time> {
    stages(v)
        .into_iter()
        .find(|s| s.classification == Classification::Expired)
        .and_then(|s| s.start_time)
}

/// The next time the classification of `v` changes after `now`, so a
/// controller can requeue exactly then.
pub fn next_transition(v: &ExpirableVersion, now: DateTime<Utc>) -> Option<Time> {
    stages(v)
        .into_iter()
        .filter_map(|s| s.start_time)
        .filter(|t| t.0 >= now)
        .min()
}

/// Static rules for one version's lifecycle fields: legacy fields and
/// stages are exclusive; `expired` only appears as a stage; stages are
/// unique and in rank order (so nothing returns to `unavailable`); only the
/// first stage may omit its start; start times never decrease.
pub fn validate_version_lifecycle(v: &ExpirableVersion, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if v.classification == Some(Classification::Expired) {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!("{path}.classification"),
            "classification \"expired\" can only be reached through expirationDate or a lifecycle stage",
        ));
    }
    if v.classification == Some(Classification::Unavailable) {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!("{path}.classification"),
            "classification \"unavailable\" is only valid as a lifecycle stage",
        ));
    }
    if v.lifecycle.is_empty() {
        return causes;
    }
    if v.classification.is_some() || v.expiration_date.is_some() {
        causes.push(Cause::new(
            "FieldValueForbidden",
            format!("{path}.lifecycle"),
            "lifecycle cannot be combined with the legacy classification or expirationDate fields",
        ));
    }
    let mut previous: Option<&LifecycleStage> = None;
    for (i, stage) in v.lifecycle.iter().enumerate() {
        let field = format!("{path}.lifecycle[{i}]");
        if i > 0 && stage.start_time.is_none() {
            causes.push(Cause::required(format!("{field}.startTime")));
        }
        if let Some(prev) = previous {
            if stage.classification <= prev.classification {
                causes.push(Cause::invalid(
                    format!("{field}.classification"),
                    format!(
                        "stage {:?} cannot follow {:?}: stages must be unique and in the order unavailable, preview, supported, deprecated, expired",
                        stage.classification.as_str(),
                        prev.classification.as_str()
                    ),
                ));
            }
            if let (Some(a), Some(b)) = (prev.start_time, stage.start_time)
                && b < a
            {
                causes.push(Cause::invalid(
                    format!("{field}.startTime"),
                    format!("starts at {b}, before the previous stage's start {a}"),
                ));
            }
        }
        previous = Some(stage);
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(y: i32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, 1, 1, 0, 0, 0)
            .single()
            .unwrap_or_default()
    }

    #[test]
    fn legacy_fields_are_synthesized_into_stages() {
        let v = ExpirableVersion {
            version: "1.0.0".into(),
            classification: Some(Classification::Deprecated),
            expiration_date: Some(Time(at(2030))),
            ..Default::default()
        };
        assert_eq!(classification(&v, at(2029)), Classification::Deprecated);
        assert_eq!(classification(&v, at(2031)), Classification::Expired);
        assert!(!is_active(&v, at(2031)));
        assert_eq!(expiration(&v), Some(Time(at(2030))));
        assert_eq!(next_transition(&v, at(2029)), Some(Time(at(2030))));
    }

    #[test]
    fn no_information_means_supported() {
        let v = ExpirableVersion {
            version: "1.0.0".into(),
            ..Default::default()
        };
        assert_eq!(classification(&v, at(2000)), Classification::Supported);
    }

    #[test]
    fn explicit_stages_start_unavailable() {
        let v = ExpirableVersion {
            version: "1.0.0".into(),
            lifecycle: vec![
                LifecycleStage {
                    classification: Classification::Preview,
                    start_time: Some(Time(at(2025))),
                },
                LifecycleStage {
                    classification: Classification::Supported,
                    start_time: Some(Time(at(2026))),
                },
            ],
            ..Default::default()
        };
        assert_eq!(classification(&v, at(2024)), Classification::Unavailable);
        assert!(!is_active(&v, at(2024)));
        assert_eq!(
            classification(&v, at(2025) + chrono::Duration::days(1)),
            Classification::Preview
        );
        assert_eq!(classification(&v, at(2027)), Classification::Supported);
        assert!(validate_version_lifecycle(&v, "v").is_empty());
    }

    #[test]
    fn stage_rules() {
        let v = ExpirableVersion {
            version: "1.0.0".into(),
            expiration_date: Some(Time(at(2030))),
            lifecycle: vec![
                LifecycleStage {
                    classification: Classification::Supported,
                    start_time: Some(Time(at(2026))),
                },
                LifecycleStage {
                    classification: Classification::Preview,
                    start_time: Some(Time(at(2025))),
                },
                LifecycleStage {
                    classification: Classification::Expired,
                    start_time: None,
                },
            ],
            ..Default::default()
        };
        let fields: Vec<String> = validate_version_lifecycle(&v, "v")
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert!(fields.contains(&"v.lifecycle".to_string()));
        assert!(fields.contains(&"v.lifecycle[1].classification".to_string()));
        assert!(fields.contains(&"v.lifecycle[1].startTime".to_string()));
        assert!(fields.contains(&"v.lifecycle[2].startTime".to_string()));
    }
}
