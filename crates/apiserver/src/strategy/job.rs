//! Jobs and CronJobs (batch/v1).
//!
//! A new Job gets kube's generated selector: its pod template is labelled
//! with the Job's name and UID (`batch.kubernetes.io/job-name`,
//! `batch.kubernetes.io/controller-uid` and their unprefixed forms) and
//! the selector matches the UID, unless `manualSelector` is set; the Job's
//! own labels default to its template's. Validation follows
//! `ValidateJob`/`ValidateCronJob` where clients notice: non-negative
//! counts, a selector matching the template, pods that restart `Never` or
//! `OnFailure`, an immutable selector and template, a schedule with five
//! fields or a descriptor, and CronJob names short enough for their Jobs'.

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::batch::v1 as batch;
use serde_json::{Map, Value, json};

use crate::object;
use crate::storage::registry::{Resource, Strategy};

/// The labels of a Job's generated selector and pod template.
const JOB_NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];
const CONTROLLER_UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];

/// CronJob names leave room for the 11-character suffix of their Jobs'.
const MAX_CRON_JOB_NAME: usize = 52;

#[derive(Debug)]
pub struct Job;

#[derive(Debug)]
pub struct CronJob;

impl Strategy for Job {
    fn has_generation(&self) -> bool {
        true
    }

    fn initial_status(&self, _given: Option<Value>) -> Option<Value> {
        Some(json!({}))
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        generate_selector(obj);
    }

    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, super::defaults::job);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        let job = super::typed::<batch::Job>(obj)?;
        let mut causes = Vec::new();
        match &job.spec {
            None => causes.push(Cause::required("spec")),
            Some(spec) => job_spec(spec, "spec", true, &mut causes),
        }
        Ok(causes)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        for (path, ptr) in [
            ("spec.selector", "/spec/selector"),
            ("spec.completions", "/spec/completions"),
            ("spec.completionMode", "/spec/completionMode"),
        ] {
            immutable(new, old, path, ptr, &mut causes);
        }
        // A suspended Job's template may change (kube lets queueing
        // controllers adjust it before the Job starts); otherwise not.
        let suspended = old.pointer("/spec/suspend") == Some(&json!(true));
        if !suspended {
            immutable(new, old, "spec.template", "/spec/template", &mut causes);
        }
        causes
    }
}

impl Strategy for CronJob {
    fn has_generation(&self) -> bool {
        true
    }

    fn initial_status(&self, _given: Option<Value>) -> Option<Value> {
        Some(json!({}))
    }

    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, super::defaults::cron_job);
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        let cj = super::typed::<batch::CronJob>(obj)?;
        let mut causes = Vec::new();
        let name = object::name(obj);
        if name.len() > MAX_CRON_JOB_NAME {
            causes.push(Cause::invalid(
                "metadata.name",
                format!(
                    "Invalid value: {name:?}: must be no more than {MAX_CRON_JOB_NAME} characters"
                ),
            ));
        }
        let Some(spec) = &cj.spec else {
            causes.push(Cause::required("spec"));
            return Ok(causes);
        };
        if spec.schedule.is_empty() {
            causes.push(Cause::required("spec.schedule"));
        } else if let Err(why) = check_schedule(&spec.schedule) {
            causes.push(Cause::invalid(
                "spec.schedule",
                format!("Invalid value: {:?}: {why}", spec.schedule),
            ));
        }
        if let Some(tz) = &spec.time_zone
            && (tz.is_empty() || tz.contains(' ') || tz.starts_with('/') || tz.contains(".."))
        {
            causes.push(Cause::invalid(
                "spec.timeZone",
                format!("Invalid value: {tz:?}: unknown time zone {tz}"),
            ));
        }
        if let Some(p) = &spec.concurrency_policy
            && !matches!(p.as_str(), "Allow" | "Forbid" | "Replace")
        {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                "spec.concurrencyPolicy",
                format!(
                    "Unsupported value: {p:?}: supported values: \"Allow\", \"Forbid\", \"Replace\""
                ),
            ));
        }
        for (path, v) in [
            (
                "spec.startingDeadlineSeconds",
                spec.starting_deadline_seconds,
            ),
            (
                "spec.successfulJobsHistoryLimit",
                spec.successful_jobs_history_limit.map(i64::from),
            ),
            (
                "spec.failedJobsHistoryLimit",
                spec.failed_jobs_history_limit.map(i64::from),
            ),
        ] {
            non_negative(path, v, &mut causes);
        }
        match &spec.job_template.spec {
            Some(js) => job_spec(js, "spec.jobTemplate.spec", false, &mut causes),
            None => causes.push(Cause::required("spec.jobTemplate.spec")),
        }
        Ok(causes)
    }
}

fn non_negative(path: &str, v: Option<i64>, causes: &mut Vec<Cause>) {
    if let Some(v) = v
        && v < 0
    {
        causes.push(Cause::invalid(
            path,
            format!("Invalid value: {v}: must be greater than or equal to 0"),
        ));
    }
}

/// The rules of a Job spec at `path`; `selector_required` for Jobs (a
/// CronJob's Jobs get theirs when created).
fn job_spec(spec: &batch::JobSpec, path: &str, selector_required: bool, causes: &mut Vec<Cause>) {
    for (field, v) in [
        ("parallelism", spec.parallelism),
        ("completions", spec.completions),
        ("backoffLimit", spec.backoff_limit),
        ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished),
    ] {
        non_negative(&format!("{path}.{field}"), v.map(i64::from), causes);
    }
    if let Some(d) = spec.active_deadline_seconds
        && d <= 0
    {
        causes.push(Cause::invalid(
            format!("{path}.activeDeadlineSeconds"),
            format!("Invalid value: {d}: must be greater than 0"),
        ));
    }
    if let Some(m) = &spec.completion_mode
        && !matches!(m.as_str(), "NonIndexed" | "Indexed")
    {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!("{path}.completionMode"),
            format!("Unsupported value: {m:?}: supported values: \"NonIndexed\", \"Indexed\""),
        ));
    }
    let template = &spec.template;
    let restart = template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    if !matches!(restart, "OnFailure" | "Never") {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!("{path}.template.spec.restartPolicy"),
            format!("Unsupported value: {restart:?}: supported values: \"OnFailure\", \"Never\""),
        ));
    }
    if template
        .spec
        .as_ref()
        .is_none_or(|s| s.containers.is_empty())
    {
        causes.push(Cause::required(format!("{path}.template.spec.containers")));
    }
    match &spec.selector {
        None if selector_required => causes.push(Cause::required(format!("{path}.selector"))),
        None => {}
        Some(sel) => {
            let sel_json = serde_json::to_value(sel).unwrap_or(Value::Null);
            let labels: Map<String, Value> = template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, json!(v)))
                .collect();
            match apimachinery::selector::LabelSelector::from_json(&sel_json) {
                Ok(s) if s.is_empty() => {
                    causes.push(Cause::required(format!("{path}.selector")));
                }
                Ok(s) if !s.matches(&labels) => causes.push(Cause::invalid(
                    format!("{path}.template.metadata.labels"),
                    "`selector` does not match template `labels`",
                )),
                Ok(_) => {}
                Err(e) => causes.push(Cause::invalid(format!("{path}.selector"), e.message)),
            }
        }
    }
}

fn immutable(new: &Value, old: &Value, path: &str, ptr: &str, causes: &mut Vec<Cause>) {
    if new.pointer(ptr) != old.pointer(ptr) {
        causes.push(Cause::invalid(path, "field is immutable"));
    }
}

/// kube's `generateSelector`: label the template with the Job's name and
/// UID and select the UID, unless the client manages the selector.
fn generate_selector(obj: &mut Value) {
    if obj.pointer("/spec/manualSelector") == Some(&json!(true)) {
        return;
    }
    let name = object::name(obj).to_string();
    let uid = object::meta_str(obj, "uid").unwrap_or_default().to_string();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let template = spec
        .entry("template")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(t) = template {
        let meta = t.entry("metadata").or_insert_with(|| json!({}));
        if meta.is_null() {
            *meta = json!({});
        }
        if let Some(m) = meta.as_object_mut() {
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if labels.is_null() {
                *labels = json!({});
            }
            if let Some(l) = labels.as_object_mut() {
                for key in JOB_NAME_LABELS {
                    l.entry(key).or_insert_with(|| json!(name));
                }
                for key in CONTROLLER_UID_LABELS {
                    l.entry(key).or_insert_with(|| json!(uid));
                }
            }
        }
    }
    let selector = spec.entry("selector").or_insert_with(|| json!({}));
    if selector.is_null() {
        *selector = json!({});
    }
    if let Some(s) = selector.as_object_mut() {
        let ml = s.entry("matchLabels").or_insert_with(|| json!({}));
        if ml.is_null() {
            *ml = json!({});
        }
        if let Some(ml) = ml.as_object_mut() {
            ml.entry(CONTROLLER_UID_LABELS[1])
                .or_insert_with(|| json!(uid));
        }
    }
    // `SetDefaults_Job` labels the Job with its template's labels when it
    // has none; kube applies it again when reading the stored Job, after
    // the selector was generated, so the generated labels show there.
    let template_labels = obj.pointer("/spec/template/metadata/labels").cloned();
    if let Some(labels) = template_labels
        && let Some(m) = object::meta_mut(obj)
        && m.get("labels")
            .and_then(Value::as_object)
            .is_none_or(|l| l.is_empty())
    {
        m.insert("labels".into(), labels);
    }
}

/// Whether `schedule` has the shape robfig/cron's standard parser accepts:
/// a descriptor, or five fields of numbers, names, `*`, `?`, ranges, lists
/// and steps. The controller parses it fully; this catches what a user
/// would mistype.
pub fn check_schedule(schedule: &str) -> Result<(), String> {
    let s = schedule.trim();
    if s.starts_with("TZ=") || s.starts_with("CRON_TZ=") {
        return Err("cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into());
    }
    if let Some(d) = s.strip_prefix('@') {
        return match d {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => {
                Ok(())
            }
            _ if d.starts_with("every ") => Ok(()),
            _ => Err(format!("unrecognized descriptor: {s}")),
        };
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: {s}",
            fields.len()
        ));
    }
    let ranges = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)];
    for (field, (lo, hi)) in fields.iter().zip(ranges) {
        for part in field.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((r, st)) => (r, Some(st)),
                None => (part, None),
            };
            if let Some(st) = step
                && st.parse::<u32>().map_or(true, |n| n == 0)
            {
                return Err(format!("failed to parse int from {st}"));
            }
            if range == "*" || range == "?" {
                continue;
            }
            let bounds: Vec<&str> = range.split('-').collect();
            if bounds.len() > 2 || bounds.iter().any(|b| b.is_empty()) {
                return Err(format!("failed to parse {part}"));
            }
            for b in &bounds {
                // Month and weekday names are checked by the controller.
                if b.chars().all(|c| c.is_ascii_alphabetic()) && b.len() == 3 {
                    continue;
                }
                match b.parse::<u32>() {
                    Ok(n) if (lo..=hi).contains(&n) => {}
                    Ok(n) => {
                        return Err(format!("end of range ({n}) above maximum ({hi}): {part}"));
                    }
                    Err(_) => return Err(format!("failed to parse int from {b}")),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(kind: &str) -> Resource {
        crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == kind)
            .unwrap()
    }

    fn job() -> Value {
        json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]}}}})
    }

    #[test]
    fn a_new_job_selects_its_own_pods() {
        let mut j = job();
        Job.prepare_for_create(&mut j);
        let labels = &j["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["batch.kubernetes.io/job-name"], "pi");
        assert_eq!(labels["job-name"], "pi");
        assert_eq!(labels["batch.kubernetes.io/controller-uid"], "u-1");
        assert_eq!(labels["controller-uid"], "u-1");
        assert_eq!(
            j["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            "u-1"
        );
        assert_eq!(j["metadata"]["labels"]["job-name"], "pi");
        assert!(Job.validate(&res("Job"), &j).unwrap().is_empty());
        // A manual selector is left alone (and must be given).
        let mut m = job();
        m["spec"]["manualSelector"] = json!(true);
        Job.prepare_for_create(&mut m);
        assert!(m["spec"].get("selector").is_none());
        let fields: Vec<String> = Job
            .validate(&res("Job"), &m)
            .unwrap()
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.selector"]);
    }

    #[test]
    fn jobs_need_pods_that_do_not_restart_always_and_keep_their_selector() {
        let mut j = job();
        Job.prepare_for_create(&mut j);
        j["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        j["spec"]["backoffLimit"] = json!(-1);
        let causes = Job.validate(&res("Job"), &j).unwrap();
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.backoffLimit", "spec.template.spec.restartPolicy"]
        );
        assert_eq!(causes[1].reason, "FieldValueNotSupported");
        let old = j.clone();
        j["spec"]["selector"]["matchLabels"]["x"] = json!("y");
        j["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
        let fields: Vec<String> = Job
            .validate_update(&j, &old)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.selector", "spec.template"]);
    }

    #[test]
    fn cron_jobs() {
        let good = json!({"metadata": {"name": "hello"}, "spec": {"schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        assert!(CronJob.validate(&res("CronJob"), &good).unwrap().is_empty());
        let mut bad = good.clone();
        bad["metadata"]["name"] = json!("x".repeat(53));
        bad["spec"]["schedule"] = json!("TZ=UTC * * * * *");
        bad["spec"]["concurrencyPolicy"] = json!("Sometimes");
        let fields: Vec<String> = CronJob
            .validate(&res("CronJob"), &bad)
            .unwrap()
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["metadata.name", "spec.schedule", "spec.concurrencyPolicy"]
        );
        for ok in [
            "@hourly",
            "0 17 * * 1-5",
            "30 6-16/4 * JAN,FEB MON",
            "0 0 1 */2 ?",
        ] {
            assert_eq!(check_schedule(ok), Ok(()), "{ok}");
        }
        for bad in [
            "* * * *",
            "61 * * * *",
            "@sometimes",
            "*/0 * * * *",
            "a-b-c * * * *",
        ] {
            assert!(check_schedule(bad).is_err(), "{bad}");
        }
    }
}
