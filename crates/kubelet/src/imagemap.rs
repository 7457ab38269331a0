//! The image → command table: what a container of a given image runs on
//! this machine, since the runtime has no images, only the programs that
//! are installed.
//!
//! An entry stands for an image's `ENTRYPOINT`, `CMD` and `ENV`, and the
//! container's `command` and `args` combine with them exactly as they do
//! with an image in Kubernetes: `command` replaces the entrypoint, `args`
//! replace the image's arguments, and `command` without `args` drops them.
//!
//! The file format (`--image-map FILE`, YAML; its entries come before the
//! built-in ones, so a file can override any of them):
//!
//! ```yaml
//! images:
//! - image: quay.io/coreos/etcd      # repository; any tag or digest matches
//!   entrypoint: [etcd]              # the image's ENTRYPOINT, a program here
//!   cmd: []                         # the image's CMD
//!   env: {ETCDCTL_API: "3"}         # the image's ENV (the container's wins)
//!   programs:                       # paths inside the image that are other
//!     /usr/local/bin/etcd: etcd     #   programs here
//!   bindAnyToPodIP: true            # 0.0.0.0 and [::] in arguments become
//!                                   #   the pod IP (pods share loopback)
//! - image: example.com/tools/*      # a trailing /* matches every image below
//!   entrypoint: [/opt/tools/run]
//! ```
//!
//! In `entrypoint`, `cmd` and `programs`, `$(TRELLIS)` stands for the
//! trellis binary that runs the kubelet. An image without an entry cannot
//! run: the pod stays Pending with an `ErrImagePull` reason and an event
//! that names the image.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The image every program of the machine runs under: the container's
/// `command` and `args` as given.
pub const EXEC_IMAGE: &str = "trellis.dev/exec";

/// One row of the table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    /// A repository (`registry/path`, no tag), or a prefix ending in `/*`.
    pub image: String,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub cmd: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub programs: BTreeMap<String, String>,
    #[serde(default)]
    pub bind_any_to_pod_ip: bool,
}

/// The table file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    #[serde(default)]
    pub images: Vec<Entry>,
}

/// The table: a file's entries, then the built-in ones; the first match
/// wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageMap {
    entries: Vec<Entry>,
    trellis: String,
}

/// What a container runs: the program and its arguments, and the image's
/// environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub bind_any_to_pod_ip: bool,
}

/// Why a container cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("image {0:?} has no entry in the image → command table (see --image-map)")]
    Unknown(String),
    #[error("image {0:?} gives no command: the container must set `command`")]
    NoCommand(String),
}

/// Debian's etcd for every etcd image we know: upstream's and the one
/// Kubernetes builds.
const ETCD_IMAGES: &[&str] = &[
    "quay.io/coreos/etcd",
    "gcr.io/etcd-development/etcd",
    "registry.k8s.io/etcd",
];

/// Gardener's etcd images whose programs are trellis subcommands: the
/// etcd-wrapper (`start-etcd …`, which runs Debian's etcd once
/// backup-restore has initialized the data) and etcd-backup-restore's
/// `etcdbrctl` (`server`, `compact`, `copy`).
const GARDENER_ETCD_IMAGES: &[(&str, &str)] = &[
    (
        "europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper",
        "etcd-wrapper",
    ),
    (
        "europe-docker.pkg.dev/gardener-project/releases/gardener/etcd-wrapper",
        "etcd-wrapper",
    ),
    (
        "europe-docker.pkg.dev/gardener-project/public/gardener/etcdbrctl",
        "etcd-backup-restore",
    ),
    (
        "europe-docker.pkg.dev/gardener-project/releases/gardener/etcdbrctl",
        "etcd-backup-restore",
    ),
];

/// trellis's own images: the trellis binary, its subcommand first among
/// the container's arguments.
const TRELLIS_IMAGES: &[&str] = &["trellis.dev/trellis", "ghcr.io/trellis/trellis"];

/// The built-in entries.
pub fn defaults() -> Vec<Entry> {
    let mut out = vec![Entry {
        image: EXEC_IMAGE.to_string(),
        ..Entry::default()
    }];
    for image in TRELLIS_IMAGES {
        out.push(Entry {
            image: image.to_string(),
            entrypoint: vec!["$(TRELLIS)".to_string()],
            programs: [("trellis", "$(TRELLIS)"), ("/trellis", "$(TRELLIS)")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Entry::default()
        });
    }
    for (image, subcommand) in GARDENER_ETCD_IMAGES {
        out.push(Entry {
            image: image.to_string(),
            entrypoint: vec!["$(TRELLIS)".to_string(), subcommand.to_string()],
            programs: [
                ("/etcd-wrapper", "$(TRELLIS)"),
                ("/etcdbrctl", "$(TRELLIS)"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..Entry::default()
        });
    }
    for image in ETCD_IMAGES {
        out.push(Entry {
            image: image.to_string(),
            entrypoint: vec!["etcd".to_string()],
            programs: [
                "/usr/local/bin/etcd",
                "/usr/bin/etcd",
                "/etcd",
                "/etcd-wrapper",
            ]
            .into_iter()
            .map(|k| (k.to_string(), "etcd".to_string()))
            .chain(
                ["/usr/local/bin/etcdctl", "/etcdctl"]
                    .into_iter()
                    .map(|k| (k.to_string(), "etcdctl".to_string())),
            )
            .collect(),
            bind_any_to_pod_ip: true,
            ..Entry::default()
        });
    }
    out
}

/// The repository of an image reference: without `@digest` and without a
/// `:tag` after the last `/` (a `:` before it is a registry port).
pub fn repository(image: &str) -> &str {
    let image = image.split('@').next().unwrap_or(image);
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].find(':') {
        Some(colon) => &image[..last_slash + colon],
        None => image,
    }
}

fn matches(pattern: &str, repo: &str) -> bool {
    match pattern.strip_suffix("/*") {
        Some(prefix) => repo
            .strip_prefix(prefix)
            .is_some_and(|r| r.starts_with('/')),
        None => pattern == repo,
    }
}

impl ImageMap {
    /// The built-in table; `trellis` is the path `$(TRELLIS)` stands for.
    pub fn new(trellis: impl Into<String>) -> ImageMap {
        ImageMap {
            entries: defaults(),
            trellis: trellis.into(),
        }
    }

    /// The table with a file's entries in front of the built-in ones.
    pub fn with_file(trellis: impl Into<String>, yaml: &str) -> Result<ImageMap, String> {
        let file: File = if yaml.trim().is_empty() {
            File::default()
        } else {
            serde_yaml::from_str(yaml).map_err(|e| e.to_string())?
        };
        if let Some(bad) = file.images.iter().find(|e| e.image.trim().is_empty()) {
            return Err(format!("an entry has an empty image: {bad:?}"));
        }
        let mut map = ImageMap::new(trellis);
        let mut entries = file.images;
        entries.append(&mut map.entries);
        map.entries = entries;
        Ok(map)
    }

    /// The host path `$(TRELLIS)` stands for.
    pub fn trellis(&self) -> &str {
        &self.trellis
    }

    /// The entries, first match first.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn subst(&self, s: &str) -> String {
        s.replace("$(TRELLIS)", &self.trellis)
    }

    /// What a container of `image` with `command` and `args` runs.
    pub fn resolve(
        &self,
        image: &str,
        command: &[String],
        args: &[String],
    ) -> Result<Resolved, ImageError> {
        let repo = repository(image.trim());
        let entry = self
            .entries
            .iter()
            .find(|e| matches(&e.image, repo))
            .ok_or_else(|| ImageError::Unknown(image.to_string()))?;
        // Kubernetes' rule for ENTRYPOINT/CMD against command/args.
        let mut argv: Vec<String> = if command.is_empty() {
            let tail = if args.is_empty() { &entry.cmd } else { args };
            entry
                .entrypoint
                .iter()
                .map(|s| self.subst(s))
                .chain(tail.iter().map(|s| self.subst(s)))
                .collect()
        } else {
            command.iter().chain(args).cloned().collect()
        };
        if argv.is_empty() {
            return Err(ImageError::NoCommand(image.to_string()));
        }
        if let Some(program) = entry.programs.get(&argv[0]) {
            argv[0] = self.subst(program);
        }
        Ok(Resolved {
            argv,
            env: entry.env.clone(),
            bind_any_to_pod_ip: entry.bind_any_to_pod_ip,
        })
    }
}

/// `0.0.0.0` and `[::]` in arguments become the pod IP: every pod shares
/// the host's loopback, so a wildcard listener would take the port from
/// every other pod.
pub fn bind_any_to(argv: &[String], pod_ip: &str) -> Vec<String> {
    argv.iter()
        .map(|a| a.replace("0.0.0.0", pod_ip).replace("[::]", pod_ip))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn repository_drops_tag_and_digest_but_not_a_port() {
        for (image, repo) in [
            ("trellis.dev/exec", "trellis.dev/exec"),
            ("trellis.dev/exec:v1", "trellis.dev/exec"),
            (
                "quay.io/coreos/etcd:v3.5.9@sha256:abc",
                "quay.io/coreos/etcd",
            ),
            ("localhost:5000/etcd", "localhost:5000/etcd"),
            ("localhost:5000/etcd:3", "localhost:5000/etcd"),
            ("busybox", "busybox"),
        ] {
            assert_eq!(repository(image), repo, "{image}");
        }
    }

    #[test]
    fn exec_image_runs_command_and_args_as_given() {
        let m = ImageMap::new("/bin/trellis");
        let r = m
            .resolve(
                "trellis.dev/exec:latest",
                &s(&["python3", "-m"]),
                &s(&["http.server"]),
            )
            .unwrap();
        assert_eq!(r.argv, s(&["python3", "-m", "http.server"]));
        // Without an entrypoint, args alone are the command (Docker's CMD).
        assert_eq!(
            m.resolve("trellis.dev/exec", &[], &s(&["ls"]))
                .unwrap()
                .argv,
            s(&["ls"])
        );
        assert_eq!(
            m.resolve("trellis.dev/exec", &[], &[]),
            Err(ImageError::NoCommand("trellis.dev/exec".into()))
        );
    }

    #[test]
    fn entrypoint_and_cmd_combine_with_command_and_args_as_in_kubernetes() {
        let yaml = "images:\n- image: example.com/app\n  entrypoint: [app]\n  cmd: [--default]\n";
        let m = ImageMap::with_file("/t", yaml).unwrap();
        let run =
            |c: &[&str], a: &[&str]| m.resolve("example.com/app:1", &s(c), &s(a)).unwrap().argv;
        assert_eq!(run(&[], &[]), s(&["app", "--default"]));
        assert_eq!(run(&[], &["--x"]), s(&["app", "--x"]));
        assert_eq!(run(&["other"], &[]), s(&["other"]));
        assert_eq!(run(&["other"], &["--y"]), s(&["other", "--y"]));
    }

    #[test]
    fn etcd_images_run_debians_etcd_and_trellis_images_trellis() {
        let m = ImageMap::new("/usr/local/bin/trellis");
        let r = m
            .resolve("quay.io/coreos/etcd:v3.5.17", &[], &s(&["--name", "e0"]))
            .unwrap();
        assert_eq!(r.argv, s(&["etcd", "--name", "e0"]));
        assert!(r.bind_any_to_pod_ip);
        let r = m
            .resolve(
                "registry.k8s.io/etcd:3.5",
                &s(&["/usr/local/bin/etcd"]),
                &s(&["--data-dir=/var/etcd"]),
            )
            .unwrap();
        assert_eq!(r.argv, s(&["etcd", "--data-dir=/var/etcd"]));
        let r = m
            .resolve("trellis.dev/trellis:dev", &[], &s(&["controller-manager"]))
            .unwrap();
        assert_eq!(r.argv, s(&["/usr/local/bin/trellis", "controller-manager"]));
    }

    #[test]
    fn gardeners_etcd_images_run_trellis_subcommands() {
        let m = ImageMap::new("/bin/trellis");
        for (image, args, want) in [
            (
                "europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.6.1",
                &["start-etcd", "--backup-restore-host-port=e-local:8080"][..],
                &[
                    "/bin/trellis",
                    "etcd-wrapper",
                    "start-etcd",
                    "--backup-restore-host-port=e-local:8080",
                ][..],
            ),
            (
                "europe-docker.pkg.dev/gardener-project/public/gardener/etcdbrctl:v0.37.0",
                &["server", "--data-dir=/var/etcd/data/new.etcd"][..],
                &[
                    "/bin/trellis",
                    "etcd-backup-restore",
                    "server",
                    "--data-dir=/var/etcd/data/new.etcd",
                ][..],
            ),
            (
                "europe-docker.pkg.dev/gardener-project/releases/gardener/etcdbrctl:v0.30.0",
                &["compact"][..],
                &["/bin/trellis", "etcd-backup-restore", "compact"][..],
            ),
        ] {
            let r = m.resolve(image, &[], &s(args)).unwrap();
            assert_eq!(r.argv, s(want), "{image}");
            // The wrapper binds etcd to the pod IP itself.
            assert!(!r.bind_any_to_pod_ip, "{image}");
        }
        // Upstream's etcd images stay Debian's etcd.
        let r = m.resolve("quay.io/coreos/etcd:v3.4", &[], &[]).unwrap();
        assert_eq!(r.argv, s(&["etcd"]));
    }

    #[test]
    fn unknown_images_are_named_and_files_override_defaults() {
        let m = ImageMap::new("/t");
        let err = m.resolve("nginx:1.27", &s(&["nginx"]), &[]).unwrap_err();
        assert_eq!(err, ImageError::Unknown("nginx:1.27".into()));
        assert!(err.to_string().contains("\"nginx:1.27\""));
        let yaml = "images:\n- image: quay.io/coreos/etcd\n  entrypoint: [/opt/etcd]\n- image: example.com/tools/*\n  entrypoint: [tool]\n";
        let m = ImageMap::with_file("/t", yaml).unwrap();
        let r = m.resolve("quay.io/coreos/etcd", &[], &[]).unwrap();
        assert_eq!(r.argv, s(&["/opt/etcd"]));
        assert!(m.resolve("example.com/tools/a/b:1", &[], &[]).is_ok());
        assert!(m.resolve("example.com/toolsx", &[], &[]).is_err());
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        assert!(ImageMap::with_file("/t", "images: [{image: x, bogus: 1}]").is_err());
        assert!(ImageMap::with_file("/t", "images: [{image: ''}]").is_err());
        assert!(ImageMap::with_file("/t", "- not a map").is_err());
        assert!(ImageMap::with_file("/t", "").is_ok());
    }

    #[test]
    fn wildcard_listeners_become_the_pod_ip() {
        let argv = s(&["--listen-client-urls=http://0.0.0.0:2379,http://[::]:2379"]);
        assert_eq!(
            bind_any_to(&argv, "127.1.0.7"),
            s(&["--listen-client-urls=http://127.1.0.7:2379,http://127.1.0.7:2379"])
        );
    }
}
