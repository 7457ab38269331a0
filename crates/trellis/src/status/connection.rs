//! Which cluster a client command talks to (`--kubeconfig`, `$KUBECONFIG`,
//! or the admin kubeconfig of a trellis data directory), and what to say
//! in one sentence when it cannot: a missing kubeconfig, an unreachable
//! server, the command line that would work.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Which cluster a client command talks to, in this order: `--kubeconfig`,
/// else `$KUBECONFIG`, else the admin kubeconfig that `trellis up` writes
/// in its data directory (`--data-dir`, `TRELLIS_DATA_DIR`, or the same
/// default as `up`). Flatten it into any command that defaults to trellis's
/// own server.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Connection {
    /// The kubeconfig to use; default `$KUBECONFIG`, else DIR/admin.kubeconfig
    /// of --data-dir.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The data directory of the `trellis up` (or `server`) to talk to, whose
    /// admin.kubeconfig is used when neither --kubeconfig nor $KUBECONFIG is
    /// set [default: $XDG_DATA_HOME/trellis or ~/.local/share/trellis].
    #[arg(long, env = "TRELLIS_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Where the kubeconfig in use was named, for messages that say which file
/// was read and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Env,
    DataDir,
}

/// The kubeconfig a [`Connection`] resolved to: one file, or the list
/// `$KUBECONFIG` may hold (merged as kubectl does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kubeconfig {
    pub paths: Vec<PathBuf>,
    pub origin: Origin,
}

impl Kubeconfig {
    /// "the kubeconfig FILE (from $KUBECONFIG)" and the like.
    pub fn describe(&self) -> String {
        let paths = self
            .paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        match self.origin {
            Origin::Flag => format!("the kubeconfig {paths}"),
            Origin::Env => format!("the kubeconfig {paths} (from $KUBECONFIG)"),
            Origin::DataDir => format!("the admin kubeconfig {paths}"),
        }
    }
}

impl Connection {
    /// The kubeconfig to use, given `$KUBECONFIG` and the default data
    /// directory. Empty values count as unset, as kubectl has it.
    pub fn resolve(
        &self,
        env_kubeconfig: Option<OsString>,
        default_data_dir: impl FnOnce() -> PathBuf,
    ) -> Kubeconfig {
        if let Some(path) = self
            .kubeconfig
            .clone()
            .filter(|p| !p.as_os_str().is_empty())
        {
            return Kubeconfig {
                paths: vec![path],
                origin: Origin::Flag,
            };
        }
        let from_env: Vec<PathBuf> = env_kubeconfig
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !from_env.is_empty() {
            return Kubeconfig {
                paths: from_env,
                origin: Origin::Env,
            };
        }
        let dir = self
            .data_dir
            .clone()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(default_data_dir);
        Kubeconfig {
            paths: vec![dir.join("admin.kubeconfig")],
            origin: Origin::DataDir,
        }
    }

    /// A client for the resolved kubeconfig. Every error is one sentence
    /// naming the file and what to do; kube's own messages (which quote
    /// paths twice) are not shown.
    pub async fn connect(&self) -> anyhow::Result<Connected> {
        let kubeconfig = self.resolve(std::env::var_os("KUBECONFIG"), crate::default_data_dir);
        let config = read_kubeconfig(&kubeconfig)?;
        let unusable = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!("{} is not usable: {e}", kubeconfig.describe())
        };
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .map_err(|e| unusable(&e))?;
        let url = config.cluster_url.to_string();
        let url = url.trim_end_matches('/').to_string();
        let client = kube::Client::try_from(config).map_err(|e| unusable(&e))?;
        Ok(Connected {
            client,
            url,
            kubeconfig,
        })
    }
}

/// A client, with what its errors should name: the server's URL and the
/// kubeconfig that led there.
pub struct Connected {
    pub client: kube::Client,
    pub url: String,
    pub kubeconfig: Kubeconfig,
}

impl Connected {
    /// The one sentence [`unreachable`] says when `e` is a request that
    /// never got an answer from the server.
    pub fn unreachable(&self, e: &anyhow::Error) -> Option<String> {
        let reason = transport_failure(e)?;
        Some(unreachable(
            &self.kubeconfig,
            &self.url,
            &reason,
            &invocation(),
        ))
    }

    /// `e` as that sentence when the server did not answer (the library's
    /// error chain then only at debug level); any other error as it is.
    pub fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        tracing::debug!(error = format!("{e:#}"), "request failed");
        match self.unreachable(&e) {
            Some(sentence) => anyhow::anyhow!(sentence),
            None => e,
        }
    }
}

/// Reads (and merges) the kubeconfig files. Missing files of a
/// `$KUBECONFIG` list are skipped as kubectl skips them; a missing single
/// file says how to get one.
fn read_kubeconfig(kc: &Kubeconfig) -> anyhow::Result<kube::config::Kubeconfig> {
    use kube::config::KubeconfigError;
    let mut merged: Option<kube::config::Kubeconfig> = None;
    for path in &kc.paths {
        let one = match kube::config::Kubeconfig::read_from(path) {
            Ok(one) => one,
            Err(KubeconfigError::ReadConfig(e, _))
                if e.kind() == std::io::ErrorKind::NotFound && kc.paths.len() > 1 =>
            {
                continue;
            }
            Err(KubeconfigError::ReadConfig(e, _)) if e.kind() == std::io::ErrorKind::NotFound => {
                anyhow::bail!("{}", missing_kubeconfig(kc, &invocation()))
            }
            Err(KubeconfigError::ReadConfig(e, _)) => {
                anyhow::bail!("cannot read {}: {}", kc.describe(), io_reason(&e))
            }
            Err(e) => anyhow::bail!("{} is not a valid kubeconfig: {e}", kc.describe()),
        };
        merged = Some(match merged {
            None => one,
            Some(m) => m
                .merge(one)
                .map_err(|e| anyhow::anyhow!("cannot merge {}: {e}", kc.describe()))?,
        });
    }
    merged.ok_or_else(|| anyhow::anyhow!("{}", missing_kubeconfig(kc, &invocation())))
}

/// What to say when the kubeconfig does not exist; `cmd` runs trellis.
pub fn missing_kubeconfig(kc: &Kubeconfig, cmd: &str) -> String {
    let paths = kc
        .paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    match kc.origin {
        Origin::Flag => format!("there is no kubeconfig {paths} (given with --kubeconfig)"),
        Origin::Env => format!(
            "there is no kubeconfig {paths} (named by $KUBECONFIG): correct or unset KUBECONFIG, or pass --kubeconfig"
        ),
        Origin::DataDir => format!(
            "there is no admin kubeconfig {paths}: start trellis with `{cmd} up`, which writes it, or pass --data-dir or --kubeconfig"
        ),
    }
}

/// What to say when the server named by `kc` does not answer at all.
pub fn unreachable(kc: &Kubeconfig, url: &str, reason: &str, cmd: &str) -> String {
    format!(
        "cannot reach the API server at {url} ({reason}) named by {}: start trellis with `{cmd} up`, or choose another cluster with --kubeconfig or --data-dir",
        kc.describe()
    )
}

/// An I/O error's message without the `(os error N)` suffix, starting
/// lower-case to read inside a sentence.
fn io_reason(e: &dyn std::error::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// The innermost cause of a transport error (connection refused, a TLS
/// failure, an unknown host), when `e` is one: the request never got an
/// HTTP answer. API errors (a status from the server) are not.
pub fn transport_failure(e: &anyhow::Error) -> Option<String> {
    let kube_error = e.chain().find_map(|c| c.downcast_ref::<kube::Error>())?;
    if !matches!(
        kube_error,
        kube::Error::HyperError(_) | kube::Error::Service(_)
    ) {
        return None;
    }
    let mut innermost: &dyn std::error::Error = kube_error;
    while let Some(next) = innermost.source() {
        innermost = next;
    }
    Some(io_reason(innermost))
}

/// The command that runs this trellis binary, for hints that must work as
/// printed: `trellis` when that name on PATH is this very binary, `cargo
/// run [--release] -p trellis --` when it was built in the Cargo workspace
/// the user is in (the README's way), else its absolute path.
pub fn invocation() -> String {
    let Ok(exe) = std::env::current_exe().and_then(|e| e.canonicalize()) else {
        return "trellis".to_string();
    };
    let on_path = std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("trellis"))
                .find(|p| p.is_file())
        })
        .and_then(|p| p.canonicalize().ok())
        .is_some_and(|p| p == exe);
    let cwd = std::env::current_dir().and_then(|d| d.canonicalize()).ok();
    invocation_of(&exe, on_path, cwd.as_deref(), |root| {
        root.join("Cargo.toml").is_file()
    })
}

/// [`invocation`] as a function of what it looks at.
pub fn invocation_of(
    exe: &Path,
    on_path: bool,
    cwd: Option<&Path>,
    is_workspace: impl Fn(&Path) -> bool,
) -> String {
    if on_path {
        return "trellis".to_string();
    }
    let profile = exe.parent();
    let target = profile.and_then(Path::parent);
    let root = target.and_then(Path::parent);
    if let (Some(profile), Some(target), Some(root)) = (profile, target, root)
        && target.file_name().is_some_and(|n| n == "target")
        && is_workspace(root)
        && cwd.is_some_and(|c| c.starts_with(root))
    {
        match profile.file_name().and_then(|n| n.to_str()) {
            Some("release") => return "cargo run --release -p trellis --".to_string(),
            Some("debug") => return "cargo run -p trellis --".to_string(),
            _ => {}
        }
    }
    shell_quote(&exe.display().to_string())
}

/// `s` as one shell word: as it is when that is safe, else single-quoted.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=,@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
