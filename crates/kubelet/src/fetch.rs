//! What a pod needs from the API before its containers can start: the
//! ConfigMaps and Secrets its environment and volumes name, and its volumes
//! made ready as directories ([`crate::volumes`], [`crate::claims`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use kube::Api;

use crate::env::Sources;
use crate::error::Error;
use crate::kubelet::Shared;
use crate::view::Blocked;
use crate::volumes::Ready;

/// Fetches the ConfigMaps, Secrets and claims the pod needs.
pub(crate) async fn sources(shared: &Shared, pod: &Pod, ip: &str) -> Result<Sources, Error> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let (cms, secrets) = crate::env::referenced(pod);
    let pod_name = format!("{ns}/{}", pod.metadata.name.as_deref().unwrap_or(""));
    let read = |what: String| {
        let pod_name = pod_name.clone();
        move |source| Error::ReadFailed {
            what,
            pod: pod_name,
            source,
        }
    };
    let cm_api: Api<ConfigMap> = Api::namespaced(shared.client.clone(), &ns);
    let secret_api: Api<Secret> = Api::namespaced(shared.client.clone(), &ns);
    let mut src = Sources {
        pod_ip: ip.to_string(),
        host_ip: shared.cfg.address.clone(),
        ..Sources::default()
    };
    for name in cms {
        let got = cm_api
            .get_opt(&name)
            .await
            .map_err(read(format!("configmap {name}")))?;
        src.config_maps.insert(name, got);
    }
    for name in secrets {
        let got = secret_api
            .get_opt(&name)
            .await
            .map_err(read(format!("secret {name}")))?;
        src.secrets.insert(name, got);
    }
    let (cpus, mem) = crate::node::machine();
    src.allocatable.insert("cpu".into(), cpus.to_string());
    src.allocatable.insert("memory".into(), mem.to_string());
    Ok(src)
}

/// Makes every volume of the pod ready.
pub(crate) async fn volumes(
    shared: &Shared,
    pod: &Pod,
    uid: &str,
    src: &Sources,
) -> Result<BTreeMap<String, Ready>, Blocked> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let layout = &shared.rt.layout;
    let fail = |reason: &str, message: String| Blocked {
        reason: reason.into(),
        message,
    };
    let mut out = BTreeMap::new();
    for v in pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
    {
        let ready = if v.empty_dir.is_some() {
            let path = layout.pod_volume(uid, "empty-dir", &v.name);
            std::fs::create_dir_all(&path).map_err(|e| fail("ContainerCreating", e.to_string()))?;
            Ready {
                path,
                writable: true,
            }
        } else if let Some(files) = crate::volumes::files(pod, v, src) {
            let files = files.map_err(|e| fail("CreateContainerConfigError", e.to_string()))?;
            let path = layout.pod_volume(uid, "files", &v.name);
            crate::volumes::write_files(&path, &files)
                .map_err(|e| fail("ContainerCreating", e.to_string()))?;
            Ready {
                path,
                writable: false,
            }
        } else if let Some(claim) = &v.persistent_volume_claim {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(shared.client.clone(), &ns);
            let pvc = api
                .get_opt(&claim.claim_name)
                .await
                .map_err(|e| {
                    fail(
                        "ContainerCreating",
                        format!("reading persistentvolumeclaim {:?}: {e}", claim.claim_name),
                    )
                })?
                .ok_or_else(|| {
                    fail(
                        "ContainerCreating",
                        format!("persistentvolumeclaim {:?} not found", claim.claim_name),
                    )
                })?;
            let claim_uid = pvc.metadata.uid.clone().unwrap_or_default();
            let path = crate::claims::ensure(layout, &ns, &claim.claim_name, &claim_uid)
                .map_err(|e| fail("ContainerCreating", e.to_string()))?;
            Ready {
                path,
                writable: !claim.read_only.unwrap_or(false),
            }
        } else if let Some(h) = &v.host_path {
            let path = PathBuf::from(&h.path);
            match h.type_.as_deref().unwrap_or("") {
                "DirectoryOrCreate" => std::fs::create_dir_all(&path)
                    .map_err(|e| fail("ContainerCreating", e.to_string()))?,
                "FileOrCreate" if !path.exists() => {
                    std::fs::File::create(&path)
                        .map_err(|e| fail("ContainerCreating", e.to_string()))?;
                }
                _ if !path.exists() => {
                    return Err(fail(
                        "ContainerCreating",
                        format!("hostPath {:?} does not exist", h.path),
                    ));
                }
                _ => {}
            }
            Ready {
                path,
                writable: true,
            }
        } else {
            return Err(fail(
                "ContainerCreating",
                format!(
                    "volume {:?}: this kind of volume is not supported by the process runtime",
                    v.name
                ),
            ));
        };
        out.insert(v.name.clone(), ready);
    }
    Ok(out)
}
