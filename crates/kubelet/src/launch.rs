//! What a container runs, decided purely from its Pod: the program from
//! the image table, the environment, the expanded arguments, the mounts
//! (its volumes, plus the pod's `/etc/hosts`, `/etc/hostname` and `/tmp`),
//! the data dir hidden, and a hash of the container's definition (a
//! changed definition restarts the container). Anything missing is a
//! [`Blocked`] reason the pod shows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::env::{Sources, container_env, expand_all};
use crate::imagemap::{ImageMap, bind_any_to};
use crate::state::{LaunchSpec, Mount};
use crate::view::Blocked;
use crate::volumes::Ready;

/// The pod's own files the runtime mounts into every container.
#[derive(Clone, Debug)]
pub struct PodFiles {
    pub hosts: PathBuf,
    pub hostname: PathBuf,
    pub tmp: PathBuf,
}

/// Where everything comes from.
pub struct Inputs<'a> {
    pub images: &'a ImageMap,
    pub sources: &'a Sources,
    pub volumes: &'a BTreeMap<String, Ready>,
    pub files: &'a PodFiles,
    pub data_dir: &'a Path,
    /// PATH for containers that set none: the kubelet's own, so "any
    /// program on the machine" is found as the user's shell finds it.
    pub path: &'a str,
    /// Where pods reach the API server (for `KUBERNETES_SERVICE_*`).
    pub api_server: Option<&'a crate::serviceaccount::ApiServer>,
    /// The pod's service account credentials, mounted read-only at
    /// [`crate::serviceaccount::MOUNT_PATH`] unless a volume is there.
    pub service_account: Option<&'a Path>,
}

/// FNV-1a over bytes, 64 bits.
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The hash of a container's definition.
pub fn spec_hash(c: &Container) -> u64 {
    fnv64(&serde_json::to_vec(c).unwrap_or_default())
}

/// The pod's hostname: `spec.hostname`, else its name (at most 63
/// characters, as upstream).
pub fn hostname(pod: &Pod) -> String {
    let h = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    h.chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches(['-', '.'])
        .to_string()
}

fn blocked(reason: &str, message: impl Into<String>) -> Blocked {
    Blocked {
        reason: reason.to_string(),
        message: message.into(),
    }
}

/// Where a container finds the trellis executable when its own path is
/// hidden from pods.
pub const POD_TRELLIS: &str = "/.trellis/bin/trellis";

/// Makes the trellis executable reachable from the container when the
/// path `$(TRELLIS)` stood for lies where a pod cannot see the host: under
/// `/tmp` (each pod has its own) or the data dir (masked). Such a binary
/// (a build in a temporary checkout, say) is bound read-only at
/// [`POD_TRELLIS`] and the arguments naming it are rewritten.
fn expose_trellis(argv: &mut [String], trellis: &str, data_dir: &Path) -> Option<Mount> {
    let host = Path::new(trellis);
    let hidden = host.is_absolute()
        && (host.starts_with("/tmp")
            || (!data_dir.as_os_str().is_empty() && host.starts_with(data_dir)));
    if !hidden || !argv.iter().any(|a| a.contains(trellis)) {
        return None;
    }
    for a in argv.iter_mut() {
        if a.contains(trellis) {
            *a = a.replace(trellis, POD_TRELLIS);
        }
    }
    Some(Mount {
        source: host.to_path_buf(),
        target: POD_TRELLIS.into(),
        read_only: true,
    })
}

/// The launch spec of container `c` of `pod`.
pub fn launch_spec(pod: &Pod, c: &Container, inputs: &Inputs<'_>) -> Result<LaunchSpec, Blocked> {
    let image = c.image.clone().unwrap_or_default();
    let resolved = inputs
        .images
        .resolve(
            &image,
            c.command.as_deref().unwrap_or(&[]),
            c.args.as_deref().unwrap_or(&[]),
        )
        .map_err(|e| match e {
            crate::imagemap::ImageError::Unknown(_) => blocked("ErrImagePull", e.to_string()),
            crate::imagemap::ImageError::NoCommand(_) => {
                blocked("CreateContainerError", e.to_string())
            }
        })?;
    let own = container_env(pod, c, inputs.sources)
        .map_err(|e| blocked("CreateContainerConfigError", e.to_string()))?;
    let host = hostname(pod);
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), inputs.path.to_string()),
        ("HOSTNAME".into(), host.clone()),
    ];
    let mut set = |k: &str, v: &str| match env.iter_mut().find(|(n, _)| n == k) {
        Some(slot) => slot.1 = v.to_string(),
        None => env.push((k.to_string(), v.to_string())),
    };
    for (k, v) in inputs
        .api_server
        .map(crate::serviceaccount::service_env)
        .unwrap_or_default()
    {
        set(&k, &v);
    }
    for (k, v) in &resolved.env {
        set(k, v);
    }
    for (k, v) in &own {
        set(k, v);
    }
    let mut argv = expand_all(&resolved.argv, &own);
    if resolved.bind_any_to_pod_ip {
        argv = bind_any_to(&argv, &inputs.sources.pod_ip);
    }
    let exposed = expose_trellis(&mut argv, inputs.images.trellis(), inputs.data_dir);
    let mut mounts = vec![
        Mount {
            source: inputs.files.hosts.clone(),
            target: "/etc/hosts".into(),
            read_only: true,
        },
        Mount {
            source: inputs.files.hostname.clone(),
            target: "/etc/hostname".into(),
            read_only: true,
        },
        Mount {
            source: inputs.files.tmp.clone(),
            target: "/tmp".into(),
            read_only: false,
        },
    ];
    for vm in c.volume_mounts.iter().flatten() {
        let Some(ready) = inputs.volumes.get(&vm.name) else {
            return Err(blocked(
                "CreateContainerConfigError",
                format!("volume {:?} not found in the pod", vm.name),
            ));
        };
        let sub = vm.sub_path.as_deref().unwrap_or("");
        if sub.starts_with('/') || sub.split('/').any(|p| p == "..") {
            return Err(blocked(
                "CreateContainerConfigError",
                format!("subPath {sub:?} must be a relative path inside the volume"),
            ));
        }
        let source = if sub.is_empty() {
            ready.path.clone()
        } else {
            ready.path.join(sub)
        };
        mounts.push(Mount {
            source,
            target: vm.mount_path.clone(),
            read_only: vm.read_only.unwrap_or(false) || !ready.writable,
        });
    }
    mounts.extend(exposed);
    if let Some(dir) = inputs.service_account {
        let target = crate::serviceaccount::MOUNT_PATH;
        if !mounts
            .iter()
            .any(|m| m.target.trim_end_matches('/') == target)
        {
            mounts.push(Mount {
                source: dir.to_path_buf(),
                target: target.into(),
                read_only: true,
            });
        }
    }
    Ok(LaunchSpec {
        argv,
        env,
        working_dir: c.working_dir.clone().filter(|d| !d.is_empty()),
        hostname: host,
        mounts,
        mask: vec![inputs.data_dir.to_path_buf()],
        spec_hash: spec_hash(c),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "etcd-0", "namespace": "ns"},
            "spec": {"hostname": "etcd-0", "subdomain": "peers", "containers": [{
                "name": "etcd", "image": "quay.io/coreos/etcd:v3.5.17",
                "args": ["--listen-peer-urls=http://0.0.0.0:2380", "--name=$(POD_NAME)"],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "PATH", "value": "/custom"}],
                "volumeMounts": [{"name": "data", "mountPath": "/var/etcd/data"},
                                 {"name": "cfg", "mountPath": "/etc/etcd", "subPath": "sub"}],
                "workingDir": "/var/etcd"}]},
        }))
        .unwrap()
    }

    fn run(
        p: &Pod,
        volumes: &BTreeMap<String, Ready>,
        images: &ImageMap,
    ) -> Result<LaunchSpec, Blocked> {
        let sources = Sources {
            pod_ip: "127.1.0.4".into(),
            ..Sources::default()
        };
        let files = PodFiles {
            hosts: "/d/hosts".into(),
            hostname: "/d/hostname".into(),
            tmp: "/d/tmp".into(),
        };
        let inputs = Inputs {
            images,
            sources: &sources,
            volumes,
            files: &files,
            data_dir: Path::new("/d"),
            path: "/usr/bin:/bin",
            api_server: None,
            service_account: None,
        };
        launch_spec(p, &p.spec.as_ref().unwrap().containers[0], &inputs)
    }

    #[test]
    fn an_etcd_member_gets_its_program_arguments_and_mounts() {
        let p = pod();
        let volumes: BTreeMap<String, Ready> = [
            (
                "data".to_string(),
                Ready {
                    path: "/d/pvc/1".into(),
                    writable: true,
                },
            ),
            (
                "cfg".to_string(),
                Ready {
                    path: "/d/cm".into(),
                    writable: false,
                },
            ),
        ]
        .into();
        let s = run(&p, &volumes, &ImageMap::new("/t")).unwrap();
        assert_eq!(
            s.argv,
            [
                "etcd",
                "--listen-peer-urls=http://127.1.0.4:2380",
                "--name=etcd-0"
            ]
        );
        assert!(
            s.env.contains(&("PATH".into(), "/custom".into())),
            "the container's PATH wins"
        );
        assert!(s.env.contains(&("HOSTNAME".into(), "etcd-0".into())));
        assert_eq!(s.hostname, "etcd-0");
        assert_eq!(s.working_dir.as_deref(), Some("/var/etcd"));
        assert!(s.mounts.contains(&Mount {
            source: "/d/pvc/1".into(),
            target: "/var/etcd/data".into(),
            read_only: false
        }));
        assert!(s.mounts.contains(&Mount {
            source: "/d/cm/sub".into(),
            target: "/etc/etcd".into(),
            read_only: true
        }));
        assert!(s.mounts.iter().any(|m| m.target == "/etc/hosts"));
        assert_eq!(s.mask, [PathBuf::from("/d")]);
        assert_eq!(
            s.spec_hash,
            spec_hash(&p.spec.as_ref().unwrap().containers[0])
        );
    }

    #[test]
    fn a_trellis_binary_pods_cannot_see_is_bound_where_they_can() {
        let etcd = |image: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": "etcd-0", "namespace": "ns"},
                "spec": {"containers": [{"name": "backup-restore", "image": image,
                    "command": ["/etcdbrctl"], "args": ["server", "--data-dir=/var/etcd/data"]}]},
            }))
            .unwrap()
        };
        let image = "europe-docker.pkg.dev/gardener-project/releases/gardener/etcdbrctl:v0.30.0";
        let none = BTreeMap::new();
        // Built in a temporary checkout: each pod has its own /tmp.
        let tmp = "/tmp/clone/target/debug/trellis";
        let s = run(&etcd(image), &none, &ImageMap::new(tmp)).unwrap();
        assert_eq!(s.argv[0], POD_TRELLIS);
        assert!(!s.argv.iter().any(|a| a.contains(tmp)), "{:?}", s.argv);
        assert!(s.mounts.contains(&Mount {
            source: tmp.into(),
            target: POD_TRELLIS.into(),
            read_only: true
        }));
        // Under the data dir, which pods never see.
        let s = run(&etcd(image), &none, &ImageMap::new("/d/bin/trellis")).unwrap();
        assert_eq!(s.argv[0], POD_TRELLIS);
        // A binary in plain sight is run where it is, with nothing added.
        let s = run(&etcd(image), &none, &ImageMap::new("/usr/bin/trellis")).unwrap();
        assert_eq!(s.argv[0], "/usr/bin/trellis");
        assert!(!s.mounts.iter().any(|m| m.target == POD_TRELLIS));
        // A container that does not run trellis gets no such mount.
        let mut plain = etcd("quay.io/coreos/etcd:v3.5.17");
        plain.spec.as_mut().unwrap().containers[0].command = None;
        let s = run(&plain, &none, &ImageMap::new(tmp)).unwrap();
        assert_eq!(s.argv[0], "etcd");
        assert!(!s.mounts.iter().any(|m| m.target == POD_TRELLIS));
    }

    #[test]
    fn the_api_server_environment_and_the_token_directory() {
        let p = pod();
        let volumes: BTreeMap<String, Ready> = ["data", "cfg"]
            .map(|n| {
                (
                    n.to_string(),
                    Ready {
                        path: format!("/d/{n}").into(),
                        writable: true,
                    },
                )
            })
            .into();
        let sources = Sources::default();
        let files = PodFiles {
            hosts: "/d/hosts".into(),
            hostname: "/d/hostname".into(),
            tmp: "/d/tmp".into(),
        };
        let api = crate::serviceaccount::ApiServer {
            host: "127.0.0.1".into(),
            port: 6443,
            ca_pem: String::new(),
        };
        let images = ImageMap::new("/t");
        let inputs = Inputs {
            images: &images,
            sources: &sources,
            volumes: &volumes,
            files: &files,
            data_dir: Path::new("/d"),
            path: "/usr/bin:/bin",
            api_server: Some(&api),
            service_account: Some(Path::new("/d/sa")),
        };
        let mut c = p.spec.as_ref().unwrap().containers[0].clone();
        let s = launch_spec(&p, &c, &inputs).unwrap();
        assert!(
            s.env
                .contains(&("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()))
        );
        assert!(
            s.env
                .contains(&("KUBERNETES_SERVICE_PORT".into(), "6443".into()))
        );
        let sa = crate::serviceaccount::MOUNT_PATH;
        assert!(s.mounts.contains(&Mount {
            source: "/d/sa".into(),
            target: sa.into(),
            read_only: true
        }));
        // A volume of the container's own at that path wins.
        c.volume_mounts.as_mut().unwrap()[0].mount_path = format!("{sa}/");
        let s = launch_spec(&p, &c, &inputs).unwrap();
        let at: Vec<_> = s
            .mounts
            .iter()
            .filter(|m| m.target.trim_end_matches('/') == sa)
            .collect();
        assert_eq!(at.len(), 1);
        assert_eq!(at[0].source, PathBuf::from("/d/data"));
    }

    #[test]
    fn missing_images_volumes_and_config_block_with_kubes_reasons() {
        let p = pod();
        let none = BTreeMap::new();
        assert_eq!(
            run(&p, &none, &ImageMap::new("/t")).unwrap_err().reason,
            "CreateContainerConfigError"
        );
        let mut p2 = p.clone();
        p2.spec.as_mut().unwrap().containers[0].image = Some("nginx:1".into());
        let b = run(&p2, &none, &ImageMap::new("/t")).unwrap_err();
        assert_eq!(b.reason, "ErrImagePull");
        assert!(b.message.contains("nginx:1"));
        assert_eq!(
            hostname(&serde_json::from_value(json!({"metadata": {"name": "web-abc"}})).unwrap()),
            "web-abc"
        );
    }
}
