//! When a shoot is maintained: its daily window in UTC, whether maintenance
//! is due at `now`, and when to look again. Pure functions of the shoot and
//! the clock.
//!
//! Facts carried over from upstream Gardener: a window is written
//! `HHMMSS+ZZZZ` (local time and offset from UTC); a shoot without a window
//! (or with one that does not parse) may be maintained at any time of day
//! (`000000+0000`–`235959+0000`); the *effective* window ends 15 minutes
//! early so that maintenance has a chance to finish inside it; and the
//! annotation `gardener.cloud/operation: maintain` maintains a shoot at
//! once, wherever the clock stands.
//!
//! Unlike upstream, which only relies on its requeue to maintain once per
//! window, the decision here also reads `status.lastMaintenance`: a shoot
//! whose last maintenance was triggered inside the current occurrence of its
//! window is not maintained again until the next one, so a restart or a
//! stray watch event never maintains twice.

use chrono::{DateTime, Duration, Timelike, Utc};
use gardener::{LastMaintenance, MaintenanceTimeWindow, ShootSpec};

/// Seconds in a day.
const DAY: u32 = 86_400;

/// How much earlier than written a window effectively ends.
pub const EFFECTIVE_END_MARGIN_SECS: u32 = 15 * 60;

/// The annotation that asks for an operation on a shoot.
pub const OPERATION_ANNOTATION: &str = "gardener.cloud/operation";
/// The operation that maintains a shoot now.
pub const OPERATION_MAINTAIN: &str = "maintain";
/// Separator of several operations in one annotation value.
const OPERATIONS_SEPARATOR: char = ';';

/// `status.lastMaintenance.state` values this controller writes.
pub mod state {
    /// Written before the spec is patched; seeing it later means the
    /// maintenance was interrupted.
    pub const PROCESSING: &str = "Processing";
    /// Every planned change applied.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Something could not be maintained; see `failureReason`.
    pub const FAILED: &str = "Failed";
}

/// A daily window as seconds after midnight UTC, both ends included. An
/// `end` before `begin` wraps midnight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// First second of the window.
    pub begin: u32,
    /// Last second of the window.
    pub end: u32,
}

impl Window {
    /// The whole day (upstream's window for shoots that set none).
    pub const ALWAYS: Window = Window {
        begin: 0,
        end: DAY - 1,
    };

    /// Parses a written window; `None` if either end is not `HHMMSS+ZZZZ`.
    pub fn parse(window: &MaintenanceTimeWindow) -> Option<Window> {
        Some(Window {
            begin: utc_second(&window.begin)?,
            end: utc_second(&window.end)?,
        })
    }

    /// The window maintenance of `spec` runs in: the written one (or
    /// [`Window::ALWAYS`]) with its end moved [`EFFECTIVE_END_MARGIN_SECS`]
    /// earlier. A window too short to lose the margin keeps its end.
    pub fn effective(spec: &ShootSpec) -> Window {
        let written = spec
            .maintenance
            .as_ref()
            .and_then(|m| m.time_window.as_ref())
            .and_then(Window::parse)
            .unwrap_or(Window::ALWAYS);
        written.shortened(EFFECTIVE_END_MARGIN_SECS)
    }

    /// The window with its end `secs` earlier, unless it lasts no longer
    /// than that.
    pub fn shortened(self, secs: u32) -> Window {
        if self.length() <= secs {
            return self;
        }
        Window {
            begin: self.begin,
            end: (self.end + DAY - secs) % DAY,
        }
    }

    /// Seconds from the first to the last second of the window.
    fn length(self) -> u32 {
        (self.end + DAY - self.begin) % DAY
    }

    /// Whether `now` lies inside the window.
    pub fn contains(self, now: DateTime<Utc>) -> bool {
        let t = now.num_seconds_from_midnight();
        if self.begin <= self.end {
            self.begin <= t && t <= self.end
        } else {
            t >= self.begin || t <= self.end
        }
    }

    /// When the occurrence of the window that contains `now` began; `None`
    /// outside the window.
    pub fn current_start(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if !self.contains(now) {
            return None;
        }
        let today = at_second(now, self.begin);
        Some(if now.num_seconds_from_midnight() >= self.begin {
            today
        } else {
            // Inside a window that wrapped midnight: it began yesterday.
            today - Duration::days(1)
        })
    }

    /// The first start of the window strictly after `now`.
    pub fn next_start(self, now: DateTime<Utc>) -> DateTime<Utc> {
        let today = at_second(now, self.begin);
        if today > now {
            today
        } else {
            today + Duration::days(1)
        }
    }
}

/// `now`'s date at `second` after midnight UTC.
fn at_second(now: DateTime<Utc>, second: u32) -> DateTime<Utc> {
    let midnight = now
        - Duration::seconds(i64::from(now.num_seconds_from_midnight()))
        - Duration::nanoseconds(i64::from(now.nanosecond()));
    midnight + Duration::seconds(i64::from(second))
}

/// Parses `HHMMSS+ZZZZ` into seconds after midnight UTC.
fn utc_second(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    if b.len() != 11 || !matches!(b[6], b'+' | b'-') {
        return None;
    }
    let num = |from: usize| -> Option<u32> {
        let part = s.get(from..from + 2)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (h, m, sec, oh, om) = (num(0)?, num(2)?, num(4)?, num(7)?, num(9)?);
    if h > 23 || m > 59 || sec > 59 || oh > 14 || om > 59 {
        return None;
    }
    let local = (h * 3600 + m * 60 + sec) as i64;
    let offset = (oh * 3600 + om * 60) as i64 * if b[6] == b'-' { -1 } else { 1 };
    Some((local - offset).rem_euclid(i64::from(DAY)) as u32)
}

/// Why a shoot is maintained now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// It carries `gardener.cloud/operation: maintain`.
    Annotation,
    /// Its last maintenance stopped between writing `Processing` and
    /// finishing.
    Interrupted,
    /// Its window is open and it has not been maintained in it yet.
    Window,
}

/// Whether to maintain a shoot now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Maintain now.
    Maintain(Trigger),
    /// Nothing to do before `until`.
    Wait {
        /// The next start of the shoot's window.
        until: DateTime<Utc>,
    },
}

/// Whether the annotations ask for maintenance now.
pub fn wants_maintenance(annotations: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(OPERATION_ANNOTATION))
        .is_some_and(|v| {
            v.split(OPERATIONS_SEPARATOR)
                .any(|op| op.trim() == OPERATION_MAINTAIN)
        })
}

/// The operation annotation once maintenance has run: the value without
/// `maintain`, or `None` to remove the annotation.
pub fn annotation_after_maintenance(value: &str) -> Option<String> {
    let rest: Vec<&str> = value
        .split(OPERATIONS_SEPARATOR)
        .map(str::trim)
        .filter(|op| !op.is_empty() && *op != OPERATION_MAINTAIN)
        .collect();
    (!rest.is_empty()).then(|| rest.join(";"))
}

/// Decides whether a shoot is maintained at `now`: when asked by
/// annotation, when its last maintenance was interrupted, or when its
/// window is open and its last maintenance was triggered before this
/// occurrence of the window began.
pub fn decide(
    maintain_annotation: bool,
    last: Option<&LastMaintenance>,
    window: Window,
    now: DateTime<Utc>,
) -> Decision {
    if maintain_annotation {
        return Decision::Maintain(Trigger::Annotation);
    }
    if last.is_some_and(|l| l.state == state::PROCESSING) {
        return Decision::Maintain(Trigger::Interrupted);
    }
    let wait = Decision::Wait {
        until: window.next_start(now),
    };
    let Some(start) = window.current_start(now) else {
        return wait;
    };
    let done = last
        .and_then(|l| l.triggered_time)
        .is_some_and(|t| t.0 >= start && t.0 <= now);
    if done {
        wait
    } else {
        Decision::Maintain(Trigger::Window)
    }
}

/// How long to wait from `now` until `until`, at least a second so that a
/// timer firing a hair early does not spin.
pub fn delay_until(now: DateTime<Utc>, until: DateTime<Utc>) -> std::time::Duration {
    (until - now)
        .to_std()
        .unwrap_or_default()
        .max(std::time::Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use gardener::{Maintenance, Time};

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 10, h, m, s).unwrap()
    }

    fn tw(begin: &str, end: &str) -> MaintenanceTimeWindow {
        MaintenanceTimeWindow {
            begin: begin.into(),
            end: end.into(),
        }
    }

    fn spec_with(window: Option<MaintenanceTimeWindow>) -> ShootSpec {
        ShootSpec {
            maintenance: Some(Maintenance {
                time_window: window,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn last(state: &str, triggered: Option<DateTime<Utc>>) -> LastMaintenance {
        LastMaintenance {
            description: "x".into(),
            triggered_time: triggered.map(Time),
            state: state.into(),
            failure_reason: None,
        }
    }

    #[test]
    fn parse_windows() {
        type Row<'a> = (&'a str, &'a str, Option<(u32, u32)>);
        let cases: &[Row] = &[
            ("220000+0000", "230000+0000", Some((79_200, 82_800))),
            // +0100 is an hour ahead of UTC: 22:00 local is 21:00 UTC.
            ("220000+0100", "230000+0100", Some((75_600, 79_200))),
            // -0530: 01:00 local is 06:30 UTC.
            ("010000-0530", "020000-0530", Some((23_400, 27_000))),
            // An offset that moves the begin over midnight.
            ("003000+0100", "013000+0100", Some((84_600, 1_800))),
            ("235959+0000", "000000+0000", Some((86_399, 0))),
            ("22:00", "230000+0000", None),
            ("250000+0000", "230000+0000", None),
            ("220000+1500", "230000+0000", None),
            ("2200000+000", "230000+0000", None),
            ("22000a+0000", "230000+0000", None),
            ("", "", None),
        ];
        for (b, e, want) in cases {
            let got = Window::parse(&tw(b, e)).map(|w| (w.begin, w.end));
            assert_eq!(got, *want, "{b}–{e}");
        }
    }

    #[test]
    fn parse_agrees_with_the_domain_layer() {
        // The same strings are valid here and in gardener::maintenance,
        // and both read the window the same way (without the margin).
        let windows = [
            ("220000+0000", "230000+0000"),
            ("230000+0000", "010000+0000"),
            ("220000+0100", "230000+0100"),
            ("003000+0100", "013000+0100"),
            ("22:00", "230000+0000"),
            ("250000+0000", "230000+0000"),
        ];
        let times = [
            at(0, 0, 0),
            at(0, 30, 0),
            at(21, 30, 0),
            at(22, 0, 0),
            at(23, 45, 0),
        ];
        for (b, e) in windows {
            let ours = Window::parse(&tw(b, e));
            for now in times {
                let theirs = gardener::maintenance::in_time_window(&tw(b, e), now);
                match (ours, theirs) {
                    (Some(w), Ok(inside)) => {
                        assert_eq!(w.contains(now), inside, "{b}–{e} at {now}")
                    }
                    (None, Err(_)) => {}
                    (o, t) => panic!("{b}–{e}: ours {o:?}, theirs {t:?}"),
                }
            }
        }
    }

    #[test]
    fn effective_window() {
        let cases: &[(Option<(&str, &str)>, Window)] = &[
            // Unset: the whole day, less the margin.
            (
                None,
                Window {
                    begin: 0,
                    end: 86_399 - 900,
                },
            ),
            (
                Some(("220000+0000", "230000+0000")),
                Window {
                    begin: 79_200,
                    end: 82_800 - 900,
                },
            ),
            // The margin moves a wrapped end back over midnight.
            (
                Some(("230000+0000", "000500+0000")),
                Window {
                    begin: 82_800,
                    end: 86_400 - 600,
                },
            ),
            // Unparseable: the whole day, as upstream.
            (
                Some(("nonsense", "230000+0000")),
                Window {
                    begin: 0,
                    end: 85_499,
                },
            ),
            // Too short to lose 15 minutes: kept as written.
            (
                Some(("220000+0000", "221000+0000")),
                Window {
                    begin: 79_200,
                    end: 79_800,
                },
            ),
        ];
        for (written, want) in cases {
            let spec = spec_with(written.map(|(b, e)| tw(b, e)));
            assert_eq!(Window::effective(&spec), *want, "{written:?}");
        }
        assert_eq!(Window::effective(&ShootSpec::default()), cases[0].1);
    }

    #[test]
    fn contains_and_starts() {
        let plain = Window {
            begin: 79_200,
            end: 82_800,
        }; // 22:00–23:00
        let wrapped = Window {
            begin: 82_800,
            end: 3_600,
        }; // 23:00–01:00
        let day = |d: u32, h: u32, m: u32| Utc.with_ymd_and_hms(2026, 3, d, h, m, 0).unwrap();
        type Row = (Window, DateTime<Utc>, Option<DateTime<Utc>>, DateTime<Utc>);
        let cases: &[Row] = &[
            // Before the window: not in it, it starts later today.
            (plain, day(10, 12, 0), None, day(10, 22, 0)),
            // At its first second: in it, next start tomorrow.
            (plain, day(10, 22, 0), Some(day(10, 22, 0)), day(11, 22, 0)),
            (plain, day(10, 22, 30), Some(day(10, 22, 0)), day(11, 22, 0)),
            // At its last second: still in it.
            (plain, day(10, 23, 0), Some(day(10, 22, 0)), day(11, 22, 0)),
            (plain, day(10, 23, 1), None, day(11, 22, 0)),
            // Wrapped, before midnight: began today.
            (
                wrapped,
                day(10, 23, 30),
                Some(day(10, 23, 0)),
                day(11, 23, 0),
            ),
            // Wrapped, after midnight: began yesterday.
            (
                wrapped,
                day(11, 0, 30),
                Some(day(10, 23, 0)),
                day(11, 23, 0),
            ),
            (wrapped, day(11, 1, 30), None, day(11, 23, 0)),
            (
                Window::ALWAYS,
                day(10, 0, 0),
                Some(day(10, 0, 0)),
                day(11, 0, 0),
            ),
        ];
        for (w, now, start, next) in cases {
            assert_eq!(w.contains(*now), start.is_some(), "{w:?} at {now}");
            assert_eq!(w.current_start(*now), *start, "{w:?} at {now}");
            assert_eq!(w.next_start(*now), *next, "{w:?} at {now}");
        }
    }

    #[test]
    fn next_start_with_offsets_and_sub_seconds() {
        // 220000+0100 begins 21:00 UTC.
        let w = Window::parse(&tw("220000+0100", "230000+0100")).unwrap();
        let now = at(20, 59, 59) + Duration::milliseconds(500);
        assert_eq!(w.next_start(now), at(21, 0, 0));
        assert_eq!(
            delay_until(now, w.next_start(now)),
            std::time::Duration::from_secs(1)
        );
        assert_eq!(
            delay_until(at(12, 0, 0), w.next_start(at(12, 0, 0))),
            std::time::Duration::from_secs(9 * 3600)
        );
        // Already past: at least a second.
        assert_eq!(
            delay_until(at(12, 0, 0), at(11, 0, 0)),
            std::time::Duration::from_secs(1)
        );
    }

    #[test]
    fn whether_to_maintain_now() {
        let w = Window {
            begin: 79_200,
            end: 82_800,
        }; // 22:00–23:00 UTC
        let wrapped = Window {
            begin: 82_800,
            end: 3_600,
        }; // 23:00–01:00
        let tomorrow_22 = at(22, 0, 0) + Duration::days(1);
        let yesterday = |h, m| at(h, m, 0) - Duration::days(1);
        type Row = (
            &'static str,
            bool,
            Option<LastMaintenance>,
            Window,
            DateTime<Utc>,
            Decision,
        );
        let cases: Vec<Row> = vec![
            (
                "outside, never maintained",
                false,
                None,
                w,
                at(12, 0, 0),
                Decision::Wait {
                    until: at(22, 0, 0),
                },
            ),
            (
                "inside, never maintained",
                false,
                None,
                w,
                at(22, 10, 0),
                Decision::Maintain(Trigger::Window),
            ),
            (
                "inside, maintained yesterday",
                false,
                Some(last(state::SUCCEEDED, Some(yesterday(22, 5)))),
                w,
                at(22, 10, 0),
                Decision::Maintain(Trigger::Window),
            ),
            (
                "inside, maintained in this window",
                false,
                Some(last(state::SUCCEEDED, Some(at(22, 1, 0)))),
                w,
                at(22, 10, 0),
                Decision::Wait { until: tomorrow_22 },
            ),
            (
                "inside, failed in this window: next window retries",
                false,
                Some(last(state::FAILED, Some(at(22, 1, 0)))),
                w,
                at(22, 10, 0),
                Decision::Wait { until: tomorrow_22 },
            ),
            (
                "inside, maintained by annotation earlier today (before the window)",
                false,
                Some(last(state::SUCCEEDED, Some(at(9, 0, 0)))),
                w,
                at(22, 10, 0),
                Decision::Maintain(Trigger::Window),
            ),
            (
                "annotation outside the window",
                true,
                Some(last(state::SUCCEEDED, Some(at(9, 0, 0)))),
                w,
                at(12, 0, 0),
                Decision::Maintain(Trigger::Annotation),
            ),
            (
                "annotation right after a maintenance in the window",
                true,
                Some(last(state::SUCCEEDED, Some(at(22, 1, 0)))),
                w,
                at(22, 10, 0),
                Decision::Maintain(Trigger::Annotation),
            ),
            (
                "interrupted, outside the window",
                false,
                Some(last(state::PROCESSING, Some(at(9, 0, 0)))),
                w,
                at(12, 0, 0),
                Decision::Maintain(Trigger::Interrupted),
            ),
            (
                "wrapped window after midnight, maintained before midnight",
                false,
                Some(last(state::SUCCEEDED, Some(yesterday(23, 30)))),
                wrapped,
                at(0, 30, 0),
                Decision::Wait {
                    until: at(23, 0, 0),
                },
            ),
            (
                "wrapped window after midnight, maintained the night before",
                false,
                Some(last(state::SUCCEEDED, Some(yesterday(0, 30)))),
                wrapped,
                at(0, 30, 0),
                Decision::Maintain(Trigger::Window),
            ),
            (
                "triggered time in the future (clock skew) counts as not done",
                false,
                Some(last(state::SUCCEEDED, Some(at(22, 50, 0)))),
                w,
                at(22, 10, 0),
                Decision::Maintain(Trigger::Window),
            ),
            (
                "no triggered time",
                false,
                Some(last(state::SUCCEEDED, None)),
                w,
                at(22, 10, 0),
                Decision::Maintain(Trigger::Window),
            ),
        ];
        for (name, ann, last, window, now, want) in cases {
            assert_eq!(decide(ann, last.as_ref(), window, now), want, "{name}");
        }
    }

    #[test]
    fn maintain_annotation() {
        use std::collections::BTreeMap;
        let ann = |v: &str| BTreeMap::from([(OPERATION_ANNOTATION.to_string(), v.to_string())]);
        let cases: &[(Option<&str>, bool, Option<&str>)] = &[
            (Some("maintain"), true, None),
            (Some("reconcile;maintain"), true, Some("reconcile")),
            (
                Some("maintain; rotate-ssh-keypair"),
                true,
                Some("rotate-ssh-keypair"),
            ),
            (Some("reconcile"), false, Some("reconcile")),
            (Some("maintained"), false, Some("maintained")),
            (Some(""), false, None),
            (None, false, None),
        ];
        for (value, wants, after) in cases {
            let map = value.map(ann);
            assert_eq!(wants_maintenance(map.as_ref()), *wants, "{value:?}");
            if let Some(v) = value {
                assert_eq!(
                    annotation_after_maintenance(v).as_deref(),
                    *after,
                    "{value:?}"
                );
            }
        }
        let other = BTreeMap::from([(
            "shoot.gardener.cloud/operation".to_string(),
            "maintain".to_string(),
        )]);
        assert!(!wants_maintenance(Some(&other)));
    }
}
