//! The container's root, planned as a list of mount operations: a fresh
//! tmpfs that mirrors the host's `/` through read-only bind mounts (so any
//! program of the machine runs), `/dev` writable, a fresh `/proc`, the data
//! dir hidden, and the pod's volumes bound at their mount paths.
//!
//! A mount path needs a directory to mount on, and creating one inside a
//! bind of the host would create it on the host. So every ancestor of a
//! mount path is *synthetic*: a directory on the tmpfs whose entries are
//! bound one by one from the host, with the mount point added among them.
//! Nothing on the host is ever created or written; the only writable places
//! are the volumes, `/dev` and `/tmp` (the pod's own).
//!
//! Planning reads the host through [`Host`], so it is tested on a made-up
//! tree; [`super::mount`] carries the plan out.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// What kind of entry a host path is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink(PathBuf),
    Missing,
}

/// The host file system, as planning sees it.
pub trait Host {
    fn kind(&self, path: &Path) -> Kind;
    /// Entry names of a directory, sorted.
    fn list(&self, dir: &Path) -> Vec<String>;
}

/// One step; paths are inside the new root (absolute, from its `/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Mkdir(PathBuf),
    Touch(PathBuf),
    Symlink {
        target: PathBuf,
        link: PathBuf,
    },
    /// Bind `source` (a host path) recursively onto `target`.
    Bind {
        source: PathBuf,
        target: PathBuf,
        read_only: bool,
    },
    /// An empty tmpfs over `target` (hides what is below).
    Tmpfs(PathBuf),
    /// A fresh procfs of the container's pid namespace.
    Proc(PathBuf),
}

/// A mount the container asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Want {
    pub source: PathBuf,
    pub target: PathBuf,
    pub read_only: bool,
    pub source_is_dir: bool,
}

/// `/a/./b/../c` → `/a/c`; never above `/`.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// `p` with symlinks in its existing prefix resolved as the host resolves
/// them: the new root mirrors the host, so a mount path through a symlink
/// (`/var/run/x` with `/var/run -> /run`) lands where the container will
/// look for it.
pub fn resolve(host: &dyn Host, p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut rest: Vec<PathBuf> = normalize(p)
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(PathBuf::from(s)),
            _ => None,
        })
        .collect();
    rest.reverse();
    let mut hops = 0;
    while let Some(next) = rest.pop() {
        let candidate = out.join(&next);
        match host.kind(&candidate) {
            Kind::Symlink(target) if hops < 40 => {
                hops += 1;
                let base = if target.is_absolute() {
                    PathBuf::from("/")
                } else {
                    out.clone()
                };
                let mut expanded: Vec<PathBuf> = normalize(&base.join(&target))
                    .components()
                    .filter_map(|c| match c {
                        Component::Normal(s) => Some(PathBuf::from(s)),
                        _ => None,
                    })
                    .collect();
                expanded.reverse();
                rest.extend(expanded);
                out = PathBuf::from("/");
            }
            _ => out = candidate,
        }
    }
    out
}

/// Host paths that are not bound: procfs comes fresh, and the kernel's
/// per-process views make no sense from another pid namespace.
const FRESH: &[&str] = &["/proc"];
/// Host paths bound writable: devices must open for writing.
const WRITABLE: &[&str] = &["/dev"];

/// The plan for a root that mirrors `host` with `wants` mounted and
/// `masks` hidden.
pub fn plan(host: &dyn Host, wants: &[Want], masks: &[PathBuf]) -> Vec<Op> {
    let mut wants: Vec<Want> = wants
        .iter()
        .map(|w| Want {
            target: resolve(host, &w.target),
            ..w.clone()
        })
        .collect();
    // Parents before children, so a nested mount lands inside its parent.
    wants.sort_by_key(|w| w.target.components().count());
    let targets: BTreeSet<PathBuf> = wants.iter().map(|w| w.target.clone()).collect();
    let mut ops = Vec::new();
    mirror(host, Path::new("/"), &targets, &wants, &mut ops);
    for m in masks {
        let m = normalize(m);
        // A mask only matters where the host is mirrored.
        if host.kind(&m) == Kind::Dir
            && !targets
                .iter()
                .any(|t| m.starts_with(t) || t.starts_with(&m))
        {
            ops.push(Op::Tmpfs(m));
        }
    }
    ops.push(Op::Proc(PathBuf::from("/proc")));
    for w in &wants {
        // Mount points of top-level targets exist already; a nested one is
        // made inside its parent volume (the pod's own data).
        ops.push(if w.source_is_dir {
            Op::Mkdir(w.target.clone())
        } else {
            Op::Touch(w.target.clone())
        });
        ops.push(Op::Bind {
            source: w.source.clone(),
            target: w.target.clone(),
            read_only: w.read_only,
        });
    }
    ops
}

/// Mirrors the synthetic directory `dir` (already made on the tmpfs).
fn mirror(
    host: &dyn Host,
    dir: &Path,
    targets: &BTreeSet<PathBuf>,
    wants: &[Want],
    ops: &mut Vec<Op>,
) {
    let below = |p: &Path| targets.iter().any(|t| t != p && t.starts_with(p));
    let mut names: BTreeSet<String> = host.list(dir).into_iter().collect();
    // Mount points and synthetic ancestors the host lacks.
    for t in targets {
        if let Ok(rest) = t.strip_prefix(dir)
            && let Some(Component::Normal(first)) = rest.components().next()
        {
            names.insert(first.to_string_lossy().into_owned());
        }
    }
    for name in names {
        let path = dir.join(&name);
        if FRESH.iter().any(|f| Path::new(f) == path) {
            ops.push(Op::Mkdir(path));
            continue;
        }
        if targets.contains(&path) {
            let is_dir = wants
                .iter()
                .find(|w| w.target == path)
                .is_none_or(|w| w.source_is_dir);
            // Targets nested below it are made inside this volume later.
            ops.push(if is_dir {
                Op::Mkdir(path)
            } else {
                Op::Touch(path)
            });
            continue;
        }
        if below(&path) {
            ops.push(Op::Mkdir(path.clone()));
            // A file or symlink in the way of a mount path is shadowed by
            // the synthetic directory (resolve() already followed symlinks).
            if host.kind(&path) == Kind::Dir {
                mirror(host, &path, targets, wants, ops);
            } else {
                mirror_missing(&path, targets, wants, ops);
            }
            continue;
        }
        let read_only = !WRITABLE.iter().any(|w| Path::new(w) == path);
        match host.kind(&path) {
            Kind::Dir => {
                ops.push(Op::Mkdir(path.clone()));
                ops.push(Op::Bind {
                    source: path.clone(),
                    target: path,
                    read_only,
                });
            }
            Kind::Symlink(target) => ops.push(Op::Symlink { target, link: path }),
            Kind::File => {
                ops.push(Op::Touch(path.clone()));
                ops.push(Op::Bind {
                    source: path.clone(),
                    target: path,
                    read_only,
                });
            }
            Kind::Missing => {}
        }
    }
}

/// A synthetic directory with nothing of the host in it.
fn mirror_missing(dir: &Path, targets: &BTreeSet<PathBuf>, wants: &[Want], ops: &mut Vec<Op>) {
    struct Nothing;
    impl Host for Nothing {
        fn kind(&self, _: &Path) -> Kind {
            Kind::Missing
        }
        fn list(&self, _: &Path) -> Vec<String> {
            Vec::new()
        }
    }
    mirror(&Nothing, dir, targets, wants, ops);
}

/// The real file system.
pub struct RealHost;

impl Host for RealHost {
    fn kind(&self, path: &Path) -> Kind {
        match std::fs::symlink_metadata(path) {
            Err(_) => Kind::Missing,
            Ok(m) if m.file_type().is_symlink() => {
                std::fs::read_link(path).map_or(Kind::Missing, Kind::Symlink)
            }
            Ok(m) if m.is_dir() => Kind::Dir,
            Ok(_) => Kind::File,
        }
    }

    fn list(&self, dir: &Path) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A made-up host: paths to kinds.
    struct Fake(BTreeMap<PathBuf, Kind>);

    impl Fake {
        fn new(entries: &[(&str, Kind)]) -> Fake {
            Fake(
                entries
                    .iter()
                    .map(|(p, k)| (PathBuf::from(p), k.clone()))
                    .collect(),
            )
        }
    }

    impl Host for Fake {
        fn kind(&self, path: &Path) -> Kind {
            if path == Path::new("/") {
                return Kind::Dir;
            }
            self.0.get(path).cloned().unwrap_or(Kind::Missing)
        }
        fn list(&self, dir: &Path) -> Vec<String> {
            self.0
                .keys()
                .filter(|p| p.parent() == Some(dir))
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        }
    }

    fn host() -> Fake {
        Fake::new(&[
            ("/bin", Kind::Symlink("usr/bin".into())),
            ("/usr", Kind::Dir),
            ("/usr/bin", Kind::Dir),
            ("/dev", Kind::Dir),
            ("/proc", Kind::Dir),
            ("/etc", Kind::Dir),
            ("/etc/hosts", Kind::File),
            ("/etc/passwd", Kind::File),
            ("/var", Kind::Dir),
            ("/var/lib", Kind::Dir),
            ("/var/run", Kind::Symlink("/run".into())),
            ("/run", Kind::Dir),
            ("/data", Kind::Dir),
            ("/data/trellis", Kind::Dir),
        ])
    }

    fn want(src: &str, target: &str, dir: bool) -> Want {
        Want {
            source: src.into(),
            target: target.into(),
            read_only: false,
            source_is_dir: dir,
        }
    }

    fn bind(src: &str, target: &str, ro: bool) -> Op {
        Op::Bind {
            source: src.into(),
            target: target.into(),
            read_only: ro,
        }
    }

    #[test]
    fn the_host_is_mirrored_read_only_with_dev_writable_and_proc_fresh() {
        let ops = plan(&host(), &[], &[PathBuf::from("/data/trellis")]);
        assert!(ops.contains(&Op::Symlink {
            target: "usr/bin".into(),
            link: "/bin".into()
        }));
        assert!(ops.contains(&bind("/usr", "/usr", true)));
        assert!(ops.contains(&bind("/etc", "/etc", true)));
        assert!(ops.contains(&bind("/dev", "/dev", false)));
        assert!(
            !ops.iter()
                .any(|o| matches!(o, Op::Bind { source, .. } if source == Path::new("/proc")))
        );
        assert!(ops.contains(&Op::Proc("/proc".into())));
        assert!(ops.contains(&Op::Tmpfs("/data/trellis".into())));
    }

    #[test]
    fn mount_paths_get_synthetic_ancestors_and_never_touch_the_host() {
        let wants = [
            want("/data/trellis/pvc/1", "/var/etcd/data", true),
            want("/data/trellis/hosts", "/etc/hosts", false),
            want("/data/trellis/cm", "/var/etcd/data/config", true),
        ];
        let ops = plan(&host(), &wants, &[]);
        // /var is synthetic: its entries are bound one by one …
        assert!(!ops.contains(&bind("/var", "/var", true)));
        assert!(ops.contains(&bind("/var/lib", "/var/lib", true)));
        assert!(ops.contains(&Op::Symlink {
            target: "/run".into(),
            link: "/var/run".into()
        }));
        // … /var/etcd, missing on the host, is made on the tmpfs …
        assert!(ops.contains(&Op::Mkdir("/var/etcd".into())));
        // … and the volume is bound onto its own mount point.
        let pos = |op: &Op| ops.iter().position(|o| o == op).unwrap();
        assert!(
            pos(&Op::Mkdir("/var/etcd/data".into()))
                < pos(&bind("/data/trellis/pvc/1", "/var/etcd/data", false))
        );
        // A nested mount comes after its parent volume.
        assert!(
            pos(&bind("/data/trellis/pvc/1", "/var/etcd/data", false))
                < pos(&bind("/data/trellis/cm", "/var/etcd/data/config", false))
        );
        // /etc/hosts: the pod's file over a touched mount point, the rest of /etc bound.
        assert!(ops.contains(&Op::Touch("/etc/hosts".into())));
        assert!(ops.contains(&bind("/etc/passwd", "/etc/passwd", true)));
        assert!(!ops.contains(&bind("/etc/hosts", "/etc/hosts", true)));
        // Every bind source that is not a volume is the same path on the host.
        for op in &ops {
            if let Op::Bind {
                source,
                target,
                read_only: true,
            } = op
            {
                assert_eq!(source, target);
            }
        }
    }

    #[test]
    fn mount_paths_through_symlinks_resolve_like_the_host() {
        let h = host();
        assert_eq!(
            resolve(&h, Path::new("/var/run/secrets/x")),
            PathBuf::from("/run/secrets/x")
        );
        assert_eq!(
            resolve(&h, Path::new("/bin/../etc/./hosts")),
            PathBuf::from("/etc/hosts")
        );
        assert_eq!(
            resolve(&h, Path::new("/bin/tool")),
            PathBuf::from("/usr/bin/tool")
        );
        let ops = plan(&h, &[want("/v", "/var/run/secrets/token", true)], &[]);
        assert!(ops.contains(&Op::Mkdir("/run/secrets".into())));
        assert!(ops.contains(&bind("/v", "/run/secrets/token", false)));
        // A symlink loop ends instead of spinning.
        let looped = Fake::new(&[
            ("/a", Kind::Symlink("/b".into())),
            ("/b", Kind::Symlink("/a".into())),
        ]);
        let _ = resolve(&looped, Path::new("/a/x"));
    }
}
