//! Terminal colours (none on pipes, files and with `NO_COLOR`) and the
//! text helpers of trellis's tables: phase names, truncation, ages.

use std::io::IsTerminal;
use std::time::Duration;

use api::Machine;

/// Terminal colours, or none (pipes, files, `NO_COLOR`).
#[derive(Clone, Copy, Debug)]
pub struct Paint {
    pub(super) enabled: bool,
}

impl Paint {
    /// No colour at all.
    pub fn none() -> Paint {
        Paint { enabled: false }
    }

    /// Colour when stdout is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout() -> Paint {
        Paint {
            enabled: std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    fn wrap(self, code: &str, s: &str) -> String {
        if self.enabled && !s.is_empty() {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    pub fn green(self, s: &str) -> String {
        self.wrap("32", s)
    }
    pub fn red(self, s: &str) -> String {
        self.wrap("31", s)
    }
    pub fn yellow(self, s: &str) -> String {
        self.wrap("33", s)
    }
    pub fn dim(self, s: &str) -> String {
        self.wrap("2", s)
    }

    /// A phase name padded to `width` and coloured by how healthy it is.
    pub fn phase(self, phase: &str, width: usize) -> String {
        let padded = format!("{phase:width$}");
        match Tone::of_phase(phase) {
            Tone::Good => self.green(&padded),
            Tone::Busy => self.yellow(&padded),
            Tone::Bad => self.red(&padded),
            Tone::Plain => padded,
        }
    }

    pub(super) fn tone(self, tone: Tone, s: &str) -> String {
        match tone {
            Tone::Good => self.green(s),
            Tone::Busy => self.yellow(s),
            Tone::Bad => self.red(s),
            Tone::Plain => s.to_string(),
        }
    }
}

/// How a cell should be coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tone {
    Good,
    Busy,
    Bad,
    Plain,
}

impl Tone {
    pub(super) fn of_phase(phase: &str) -> Tone {
        match phase {
            "Running" | "Available" | "InPlaceUpdateSuccessful" => Tone::Good,
            "Failed" | "CrashLoopBackOff" | "InPlaceUpdateFailed" => Tone::Bad,
            "" => Tone::Plain,
            _ => Tone::Busy,
        }
    }
}

/// A machine's phase as shown: `Terminating` while it is being deleted,
/// `New` before the controller first touched it.
pub fn phase_name(m: &Machine) -> String {
    if m.metadata.deletion_timestamp.is_some() {
        return "Terminating".into();
    }
    match m.phase() {
        Some(p) => format!("{p:?}"),
        None => "New".into(),
    }
}

/// `s` cut to `max` characters with an ellipsis.
pub fn truncate(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// An age as kubectl prints it (`45s`, `3m12s`, `5h`, `2d3h`).
pub fn human_age(d: Duration) -> String {
    let s = d.as_secs();
    let (m, h, days) = (s / 60, s / 3600, s / 86_400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 && !s.is_multiple_of(60) => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 && !m.is_multiple_of(60) => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 && !h.is_multiple_of(24) => format!("{days}d{}h", h % 24),
        _ if days < 365 * 2 => format!("{days}d"),
        _ => format!("{}y", days / 365),
    }
}
