//! Standard five-field cron expressions (minute, hour, day of month, month,
//! day of week) in a time zone, as Gardener's hibernation schedules use
//! them: lists, ranges, steps, `*` and `?`, month and weekday names, `7` for
//! Sunday, and the descriptors `@yearly`, `@annually`, `@monthly`,
//! `@weekly`, `@daily`, `@midnight` and `@hourly`.
//!
//! When both day fields are restricted a day matches if either does (the
//! classic cron rule); otherwise both must. Local times skipped by a
//! daylight-saving change never fire; a local time that occurs twice fires
//! at its first occurrence.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// The day-of-month field was `*` or `?`.
    any_day: bool,
    /// The day-of-week field was `*` or `?`.
    any_weekday: bool,
}

/// Why an expression does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid cron expression {expr:?}: {why}")]
pub struct CronError {
    /// The expression.
    pub expr: String,
    /// What is wrong with it.
    pub why: String,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// Value of the first name (1 for months, 0 for weekdays).
    first_name: u32,
}

const FIELDS: [Field; 5] = [
    Field {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
        first_name: 0,
    },
    Field {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
        first_name: 0,
    },
    Field {
        name: "day of month",
        min: 1,
        max: 31,
        names: &[],
        first_name: 0,
    },
    Field {
        name: "month",
        min: 1,
        max: 12,
        names: &MONTHS,
        first_name: 1,
    },
    Field {
        // 7 is accepted for Sunday and folded onto 0.
        name: "day of week",
        min: 0,
        max: 7,
        names: &WEEKDAYS,
        first_name: 0,
    },
];

fn value(field: &Field, s: &str) -> Result<u32, String> {
    if let Some(i) = field.names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
        return Ok(i as u32 + field.first_name);
    }
    let v: u32 = s
        .parse()
        .map_err(|_| format!("{} {s:?} is not a number", field.name))?;
    if v < field.min || v > field.max {
        return Err(format!(
            "{} {v} is outside {}-{}",
            field.name, field.min, field.max
        ));
    }
    Ok(v)
}

/// The bit set of one field, and whether it was a wildcard.
fn parse_field(field: &Field, text: &str) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let wildcard = text == "*" || text == "?";
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 =
                    s.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                        format!("{} step {s:?} is not a positive number", field.name)
                    })?;
                (r, Some(step))
            }
            None => (part, None),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(field, a)?, value(field, b)?)
        } else {
            let v = value(field, range)?;
            // `a/n` means from a to the end in steps of n.
            (v, if step.is_some() { field.max } else { v })
        };
        if lo > hi {
            return Err(format!("{} range {range:?} runs backwards", field.name));
        }
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    if bits == 0 {
        return Err(format!("{} {text:?} is empty", field.name));
    }
    Ok((bits, wildcard))
}

impl Cron {
    /// Parses `expr`.
    pub fn parse(expr: &str) -> Result<Cron, CronError> {
        let err = |why: String| CronError {
            expr: expr.to_string(),
            why,
        };
        let expanded = match expr.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(err(format!("unknown descriptor {other:?}")));
            }
            other => other,
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        if parts.len() != 5 {
            return Err(err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
                parts.len()
            )));
        }
        let mut sets = [(0u64, false); 5];
        for (i, (field, text)) in FIELDS.iter().zip(&parts).enumerate() {
            sets[i] = parse_field(field, text).map_err(err)?;
        }
        let mut weekdays = sets[4].0;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays & !(1 << 7)) | 1;
        }
        Ok(Cron {
            minutes: sets[0].0,
            hours: sets[1].0,
            days: sets[2].0,
            months: sets[3].0,
            weekdays,
            any_day: sets[2].1,
            any_weekday: sets[4].1,
        })
    }

    fn day_matches(&self, d: NaiveDate) -> bool {
        let dom = self.days & (1 << d.day()) != 0;
        let dow = self.weekdays & (1 << d.weekday().num_days_from_sunday()) != 0;
        if self.any_day || self.any_weekday {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first time strictly after `after` at which the expression fires
    /// in `tz`, or `None` if it never fires within eight years (e.g.
    /// February 30th).
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&tz).naive_local();
        let mut t: NaiveDateTime =
            local.date().and_hms_opt(local.hour(), local.minute(), 0)? + Duration::minutes(1);
        let limit = local + Duration::days(8 * 366);
        while t <= limit {
            if self.months & (1 << t.month()) == 0 {
                let (y, m) = if t.month() == 12 {
                    (t.year() + 1, 1)
                } else {
                    (t.year(), t.month() + 1)
                };
                t = NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)?;
                continue;
            }
            if !self.day_matches(t.date()) {
                t = t.date().succ_opt()?.and_hms_opt(0, 0, 0)?;
                continue;
            }
            if self.hours & (1 << t.hour()) == 0 {
                t = t.date().and_hms_opt(t.hour(), 0, 0)? + Duration::hours(1);
                continue;
            }
            if self.minutes & (1 << t.minute()) == 0 {
                t += Duration::minutes(1);
                continue;
            }
            // A local time skipped by a DST change does not exist.
            if let Some(utc) = tz.from_local_datetime(&t).earliest() {
                let utc = utc.with_timezone(&Utc);
                if utc > after {
                    return Some(utc);
                }
            }
            t += Duration::minutes(1);
        }
        None
    }

    /// The last time in `(since, until]` at which the expression fires in
    /// `tz`, if any.
    pub fn last_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        tz: Tz,
    ) -> Option<DateTime<Utc>> {
        // Look back in widening windows so a frequent expression is not
        // walked from a distant `since`.
        for back in [
            Duration::hours(2),
            Duration::days(2),
            Duration::days(32),
            Duration::days(400),
            Duration::days(8 * 366),
        ] {
            let from = (until - back).max(since);
            let mut last = None;
            let mut t = from;
            while let Some(next) = self.next_after(t, tz) {
                if next > until {
                    break;
                }
                last = Some(next);
                t = next;
            }
            if last.is_some() || from == since {
                return last;
            }
        }
        None
    }
}

/// Parses a time zone name (`Europe/Berlin`); empty means UTC.
pub fn location(name: Option<&str>) -> Result<Tz, String> {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        None => Ok(Tz::UTC),
        Some(n) => n
            .parse::<Tz>()
            .map_err(|_| format!("unknown time zone {n:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn parses_and_rejects() {
        let ok = [
            "0 17 * * 1-5",
            "00 08 * * MON-FRI",
            "*/15 * * * *",
            "5-50/5 0,12 1,15 JAN,jul ?",
            "0 0 * * 7",
            "30 6 * * 0/2",
            "@daily",
            "@weekly",
            "  0 1 * * *  ",
        ];
        for e in ok {
            assert!(Cron::parse(e).is_ok(), "{e}");
        }
        let bad = [
            ("", "expected 5 fields"),
            ("0 17 * *", "expected 5 fields"),
            ("0 17 * * * *", "expected 5 fields"),
            ("60 * * * *", "minute 60 is outside 0-59"),
            ("0 24 * * *", "hour 24 is outside 0-23"),
            ("0 0 0 * *", "day of month 0 is outside 1-31"),
            ("0 0 * 13 *", "month 13 is outside 1-12"),
            ("0 0 * * 8", "day of week 8 is outside 0-7"),
            ("0 0 * * FUN", "day of week \"FUN\" is not a number"),
            ("*/0 * * * *", "step \"0\""),
            ("5-1 * * * *", "runs backwards"),
            ("@sometimes", "unknown descriptor"),
        ];
        for (e, why) in bad {
            let err = Cron::parse(e).unwrap_err();
            assert!(err.to_string().contains(why), "{e}: {err}");
        }
        // 7 and 0 both mean Sunday.
        assert_eq!(
            Cron::parse("0 0 * * 7").unwrap(),
            Cron::parse("0 0 * * SUN").unwrap()
        );
    }

    #[test]
    fn next_firing_times() {
        let berlin: Tz = "Europe/Berlin".parse().unwrap();
        // 2026-01-05 is a Monday.
        let rows: [(&str, Tz, &str, &str); 11] = [
            (
                "0 17 * * 1-5",
                Tz::UTC,
                "2026-01-05T16:59:59Z",
                "2026-01-05T17:00:00Z",
            ),
            (
                "0 17 * * 1-5",
                Tz::UTC,
                "2026-01-05T17:00:00Z",
                "2026-01-06T17:00:00Z",
            ),
            (
                "0 17 * * 1-5",
                Tz::UTC,
                "2026-01-09T17:00:00Z",
                "2026-01-12T17:00:00Z",
            ),
            // 17:00 in Berlin is 16:00 UTC in winter and 15:00 in summer.
            (
                "0 17 * * *",
                berlin,
                "2026-01-05T12:00:00Z",
                "2026-01-05T16:00:00Z",
            ),
            (
                "0 17 * * *",
                berlin,
                "2026-07-01T12:00:00Z",
                "2026-07-01T15:00:00Z",
            ),
            // 02:30 does not exist on 2026-03-29 in Berlin: the next day's.
            (
                "30 2 * * *",
                berlin,
                "2026-03-28T12:00:00Z",
                "2026-03-30T00:30:00Z",
            ),
            // 02:30 happens twice on 2026-10-25: the first one fires.
            (
                "30 2 * * *",
                berlin,
                "2026-10-24T12:00:00Z",
                "2026-10-25T00:30:00Z",
            ),
            (
                "*/15 * * * *",
                Tz::UTC,
                "2026-01-05T10:07:00Z",
                "2026-01-05T10:15:00Z",
            ),
            // Both day fields restricted: either matches (the 13th, a Tuesday, or a Friday).
            (
                "0 0 13 * 5",
                Tz::UTC,
                "2026-01-10T00:00:00Z",
                "2026-01-13T00:00:00Z",
            ),
            (
                "0 0 13 * 5",
                Tz::UTC,
                "2026-01-13T00:00:00Z",
                "2026-01-16T00:00:00Z",
            ),
            (
                "@yearly",
                Tz::UTC,
                "2026-03-01T00:00:00Z",
                "2027-01-01T00:00:00Z",
            ),
        ];
        for (expr, tz, after, want) in rows {
            let c = Cron::parse(expr).unwrap();
            assert_eq!(
                c.next_after(utc(after), tz),
                Some(utc(want)),
                "{expr} after {after} in {tz}"
            );
        }
        assert_eq!(
            Cron::parse("0 0 30 2 *")
                .unwrap()
                .next_after(utc("2026-01-01T00:00:00Z"), Tz::UTC),
            None,
            "February 30th never comes"
        );
    }

    #[test]
    fn last_firing_in_an_interval() {
        let c = Cron::parse("0 17 * * 1-5").unwrap();
        let rows: [(&str, &str, Option<&str>); 5] = [
            ("2026-01-05T00:00:00Z", "2026-01-05T16:59:00Z", None),
            (
                "2026-01-05T00:00:00Z",
                "2026-01-05T17:00:00Z",
                Some("2026-01-05T17:00:00Z"),
            ),
            (
                "2026-01-05T00:00:00Z",
                "2026-01-11T12:00:00Z",
                Some("2026-01-09T17:00:00Z"),
            ),
            // `since` itself is excluded.
            ("2026-01-09T17:00:00Z", "2026-01-11T12:00:00Z", None),
            // Far back: found through the widening windows.
            (
                "2020-01-01T00:00:00Z",
                "2026-01-11T12:00:00Z",
                Some("2026-01-09T17:00:00Z"),
            ),
        ];
        for (since, until, want) in rows {
            assert_eq!(
                c.last_between(utc(since), utc(until), Tz::UTC),
                want.map(utc),
                "({since}, {until}]"
            );
        }
        let yearly = Cron::parse("@yearly").unwrap();
        assert_eq!(
            yearly.last_between(
                utc("2020-06-01T00:00:00Z"),
                utc("2026-06-01T00:00:00Z"),
                Tz::UTC
            ),
            Some(utc("2026-01-01T00:00:00Z"))
        );
        let every_minute = Cron::parse("* * * * *").unwrap();
        assert_eq!(
            every_minute.last_between(
                utc("2000-01-01T00:00:00Z"),
                utc("2026-06-01T10:00:30Z"),
                Tz::UTC
            ),
            Some(utc("2026-06-01T10:00:00Z"))
        );
    }

    #[test]
    fn locations() {
        assert_eq!(location(None), Ok(Tz::UTC));
        assert_eq!(location(Some("")), Ok(Tz::UTC));
        assert_eq!(location(Some("Europe/Berlin")), Ok(Tz::Europe__Berlin));
        assert!(
            location(Some("Mars/Olympus"))
                .unwrap_err()
                .contains("Mars/Olympus")
        );
    }
}
