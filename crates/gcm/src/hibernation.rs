//! The hibernation schedule controller's decision, as a pure function of a
//! Shoot and the clock: whether a schedule's start (hibernate) or end (wake
//! up) has come since the schedules were last applied, and when to look
//! again.
//!
//! A trigger is applied once: the time it was applied is recorded in
//! `status.lastHibernationTriggerTime` and only triggers after that (or
//! after the shoot's creation) count. So a user who wakes a shoot by hand
//! in the middle of a hibernation window is not overruled until the next
//! scheduled start.

use std::time::Duration;

use chrono::{DateTime, Utc};
use gardener::Shoot;
use gardener::cron::{Cron, location};

/// The longest wait before a shoot with schedules is looked at again.
pub const MAX_REQUEUE: Duration = Duration::from_secs(12 * 3600);

/// What to do with a shoot now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The trigger that has come: its time and whether it hibernates
    /// (`true`, a start) or wakes (`false`, an end).
    pub trigger: Option<(DateTime<Utc>, bool)>,
    /// The value `spec.hibernation.enabled` must be set to, if it differs.
    pub set_enabled: Option<bool>,
    /// When to look again.
    pub requeue: Option<Duration>,
    /// Schedules that cannot be evaluated, as `schedules[i].field: why`
    /// (admission rejects them; this covers shoots created around it).
    pub invalid: Vec<String>,
}

/// Decides for `shoot` at `now`.
pub fn plan(shoot: &Shoot, now: DateTime<Utc>) -> Plan {
    let mut out = Plan::default();
    let Some(h) = &shoot.spec.hibernation else {
        return out;
    };
    if h.schedules.is_empty() || shoot.metadata.deletion_timestamp.is_some() {
        return out;
    }
    let since = shoot
        .status
        .as_ref()
        .and_then(|s| s.last_hibernation_trigger_time)
        .map(|t| t.0)
        .or_else(|| {
            let t = shoot.metadata.creation_timestamp.as_ref()?.0;
            DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32)
        })
        .unwrap_or(now);
    let mut next: Option<DateTime<Utc>> = None;
    for (i, s) in h.schedules.iter().enumerate() {
        let tz = match location(s.location.as_deref()) {
            Ok(tz) => tz,
            Err(why) => {
                out.invalid.push(format!("schedules[{i}].location: {why}"));
                continue;
            }
        };
        for (field, expr, hibernate) in [("start", &s.start, true), ("end", &s.end, false)] {
            let Some(expr) = expr.as_deref().filter(|e| !e.trim().is_empty()) else {
                continue;
            };
            let cron = match Cron::parse(expr) {
                Ok(c) => c,
                Err(e) => {
                    out.invalid
                        .push(format!("schedules[{i}].{field}: {}", e.why));
                    continue;
                }
            };
            if let Some(t) = cron.last_between(since, now, tz) {
                // The latest trigger wins; at the same minute, waking up
                // wins over hibernating.
                let better = match out.trigger {
                    None => true,
                    Some((best, best_hibernate)) => t > best || (t == best && best_hibernate),
                };
                if better {
                    out.trigger = Some((t, hibernate));
                }
            }
            if let Some(t) = cron.next_after(now, tz) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
    }
    if let Some((_, hibernate)) = out.trigger
        && h.enabled.unwrap_or(false) != hibernate
    {
        out.set_enabled = Some(hibernate);
    }
    out.requeue = next.map(|t| {
        let wait = (t - now).to_std().unwrap_or_default() + Duration::from_secs(1);
        wait.min(MAX_REQUEUE)
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    /// A shoot created at `created`, hibernation `enabled`, last trigger
    /// `last`, with `schedules`.
    fn shoot(
        created: &str,
        enabled: Option<bool>,
        last: Option<&str>,
        schedules: serde_json::Value,
    ) -> Shoot {
        let mut s: Shoot = serde_json::from_value(json!({
            "apiVersion": "core.gardener.cloud/v1beta1",
            "kind": "Shoot",
            "metadata": {"name": "s", "namespace": "garden-dev", "creationTimestamp": created},
            "spec": {"hibernation": {"schedules": schedules}},
        }))
        .unwrap();
        s.spec.hibernation.as_mut().unwrap().enabled = enabled;
        if let Some(last) = last {
            s.status =
                Some(serde_json::from_value(json!({"lastHibernationTriggerTime": last})).unwrap());
        }
        s
    }

    // Office hours in Berlin: hibernate at 17:00 on weekdays, wake at 08:00.
    fn office() -> serde_json::Value {
        json!([{"start": "00 17 * * 1,2,3,4,5", "end": "00 08 * * 1,2,3,4,5", "location": "Europe/Berlin"}])
    }

    #[test]
    fn triggers_since_the_last_one_decide() {
        // 2026-01-05 is a Monday; Berlin is UTC+1 in January.
        type Row = (
            &'static str,
            Option<bool>,
            Option<&'static str>,
            &'static str,
            Option<(&'static str, bool)>,
            Option<bool>,
        );
        let rows: [Row; 7] = [
            // created Monday morning, now 15:59 UTC (16:59 Berlin): nothing yet
            (
                "2026-01-05T07:30:00Z",
                None,
                None,
                "2026-01-05T15:59:00Z",
                None,
                None,
            ),
            // now 16:00:30 UTC: the start has come
            (
                "2026-01-05T07:30:00Z",
                None,
                None,
                "2026-01-05T16:00:30Z",
                Some(("2026-01-05T16:00:00Z", true)),
                Some(true),
            ),
            // applied (trigger recorded at 16:00:31): nothing more
            (
                "2026-01-05T07:30:00Z",
                Some(true),
                Some("2026-01-05T16:00:31Z"),
                "2026-01-05T20:00:00Z",
                None,
                None,
            ),
            // Tuesday 07:00 UTC = 08:00 Berlin: wake
            (
                "2026-01-05T07:30:00Z",
                Some(true),
                Some("2026-01-05T16:00:31Z"),
                "2026-01-06T07:00:10Z",
                Some(("2026-01-06T07:00:00Z", false)),
                Some(false),
            ),
            // woken by hand at 18:00 after the start: not hibernated again until the next start
            (
                "2026-01-05T07:30:00Z",
                Some(false),
                Some("2026-01-05T16:00:31Z"),
                "2026-01-05T23:00:00Z",
                None,
                None,
            ),
            // controller down over the weekend: the latest trigger (Friday's start) counts
            (
                "2026-01-05T07:30:00Z",
                Some(false),
                Some("2026-01-09T07:00:05Z"),
                "2026-01-11T12:00:00Z",
                Some(("2026-01-09T16:00:00Z", true)),
                Some(true),
            ),
            // trigger due but the spec already says so: only recorded
            (
                "2026-01-05T07:30:00Z",
                Some(true),
                None,
                "2026-01-05T16:05:00Z",
                Some(("2026-01-05T16:00:00Z", true)),
                None,
            ),
        ];
        for (created, enabled, last, now, trigger, set) in rows {
            let p = plan(&shoot(created, enabled, last, office()), utc(now));
            assert_eq!(
                p.trigger,
                trigger.map(|(t, h)| (utc(t), h)),
                "now {now}, last {last:?}"
            );
            assert_eq!(p.set_enabled, set, "now {now}, last {last:?}");
            assert!(p.invalid.is_empty());
        }
    }

    #[test]
    fn requeue_at_the_next_trigger() {
        let s = shoot("2026-01-05T07:30:00Z", None, None, office());
        // Monday 12:00 UTC: next is 16:00 UTC (17:00 Berlin), plus a second.
        assert_eq!(
            plan(&s, utc("2026-01-05T12:00:00Z")).requeue,
            Some(Duration::from_secs(4 * 3600 + 1))
        );
        // Friday 20:00 UTC: next is Monday 07:00 UTC, capped.
        assert_eq!(
            plan(&s, utc("2026-01-09T20:00:00Z")).requeue,
            Some(MAX_REQUEUE)
        );
    }

    #[test]
    fn several_schedules_and_ties() {
        // Two schedules: the later trigger wins; at the same minute wake wins.
        let schedules = json!([
            {"start": "0 16 * * *"},
            {"end": "30 16 * * *"},
            {"start": "0 18 * * *", "end": "0 18 * * *", "location": "UTC"},
        ]);
        let rows = [
            ("2026-01-05T16:10:00Z", Some(("2026-01-05T16:00:00Z", true))),
            (
                "2026-01-05T16:40:00Z",
                Some(("2026-01-05T16:30:00Z", false)),
            ),
            (
                "2026-01-05T18:00:01Z",
                Some(("2026-01-05T18:00:00Z", false)),
            ),
        ];
        for (now, want) in rows {
            let p = plan(
                &shoot("2026-01-05T15:00:00Z", None, None, schedules.clone()),
                utc(now),
            );
            assert_eq!(p.trigger, want.map(|(t, h)| (utc(t), h)), "{now}");
        }
    }

    #[test]
    fn nothing_without_schedules_invalid_ones_reported() {
        let none = shoot("2026-01-05T07:30:00Z", None, None, json!([]));
        assert_eq!(plan(&none, utc("2026-01-06T00:00:00Z")), Plan::default());
        let mut deleting = shoot("2026-01-05T07:30:00Z", None, None, office());
        deleting.metadata.deletion_timestamp = deleting.metadata.creation_timestamp.clone();
        assert_eq!(
            plan(&deleting, utc("2026-01-06T00:00:00Z")),
            Plan::default()
        );
        let bad = shoot(
            "2026-01-05T07:30:00Z",
            None,
            None,
            json!([{"start": "0 25 * * *"}, {"end": "0 8 * * *", "location": "Nowhere/City"},
                   {"start": "0 16 * * *"}]),
        );
        let p = plan(&bad, utc("2026-01-05T16:00:10Z"));
        assert_eq!(
            p.invalid,
            [
                "schedules[0].start: hour 25 is outside 0-23",
                "schedules[1].location: unknown time zone \"Nowhere/City\""
            ]
        );
        assert_eq!(
            p.set_enabled,
            Some(true),
            "the valid schedule still applies"
        );
    }
}
