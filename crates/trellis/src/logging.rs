//! Log setup: human-readable by default, JSON lines on request, always on
//! stderr (stdout belongs to the command's output).

use std::ffi::OsString;
use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

pub fn init(level: &str, json: bool) {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        let ansi = colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        );
        builder.with_ansi(ansi).init();
    }
}

/// Whether log lines may carry colour codes: only on a terminal, and not
/// when `NO_COLOR` is set to anything non-empty (no-color.org). A file or
/// a pipe (CI logs, `2>log`) would otherwise keep the raw escape codes.
pub fn colour(stderr_is_terminal: bool, no_color: Option<OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some(OsString::new())), "an empty NO_COLOR");
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None), "a pipe or a file");
        assert!(!colour(false, Some("1".into())));
    }
}
