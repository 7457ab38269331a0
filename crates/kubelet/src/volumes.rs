//! Volumes as directories. Each volume of a pod becomes a directory the
//! shim binds at the container's mount paths: `emptyDir` (and its
//! `Memory` medium: still a directory) under the pod's directory,
//! `configMap`, `secret`, `downwardAPI` and `projected` as files written
//! from the API, `persistentVolumeClaim` as a directory per claim UID that
//! outlives the pod (deleted with the claim), `hostPath` as the host path.
//!
//! [`files`] decides what a projected volume contains (pure); [`Volumes`]
//! is the thin executor that writes it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{KeyToPath, Pod, Volume};

use crate::env::{Sources, config_map_entries, field_value, secret_entries};

/// A volume made ready: where it is on the host and whether containers
/// may write it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ready {
    pub path: PathBuf,
    pub writable: bool,
}

/// Why a volume cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    #[error("volume {volume:?}: {message}")]
    Mount { volume: String, message: String },
    #[error("{0}")]
    Config(#[from] crate::env::ConfigError),
}

fn mount_err(volume: &str, message: impl Into<String>) -> VolumeError {
    VolumeError::Mount {
        volume: volume.to_string(),
        message: message.into(),
    }
}

/// The files of a file-backed volume: relative path → (bytes, mode).
pub type Files = BTreeMap<String, (Vec<u8>, u32)>;

fn project(
    out: &mut Files,
    entries: BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<KeyToPath>>,
    mode: u32,
    optional: bool,
) -> Result<(), String> {
    match items {
        None => {
            for (k, v) in entries {
                out.insert(k, (v, mode));
            }
        }
        Some(items) => {
            for item in items {
                match entries.get(&item.key) {
                    Some(v) => {
                        out.insert(
                            item.path.clone(),
                            (v.clone(), item.mode.map_or(mode, |m| m as u32)),
                        );
                    }
                    None if optional => {}
                    None => return Err(format!("key {:?} not found", item.key)),
                }
            }
        }
    }
    Ok(())
}

/// A relative path that stays inside the volume.
fn safe(rel: &str) -> bool {
    !rel.is_empty() && !rel.starts_with('/') && !rel.split('/').any(|c| c == ".." || c.is_empty())
}

/// The contents of a `configMap`, `secret`, `downwardAPI` or `projected`
/// volume; `None` for other kinds.
pub fn files(pod: &Pod, v: &Volume, src: &Sources) -> Option<Result<Files, VolumeError>> {
    let mut out = Files::new();
    let name = v.name.as_str();
    let result: Result<(), VolumeError> = (|| {
        if let Some(c) = &v.config_map {
            let mode = c.default_mode.map_or(0o644, |m| m as u32);
            let optional = c.optional.unwrap_or(false);
            match src.config_maps.get(&c.name).and_then(Option::as_ref) {
                Some(cm) => project(
                    &mut out,
                    config_map_entries(cm),
                    c.items.as_ref(),
                    mode,
                    optional,
                )
                .map_err(|e| mount_err(name, e))?,
                None if optional => {}
                None => {
                    return Err(crate::env::ConfigError::ConfigMapMissing(c.name.clone()).into());
                }
            }
        } else if let Some(s) = &v.secret {
            let mode = s.default_mode.map_or(0o644, |m| m as u32);
            let optional = s.optional.unwrap_or(false);
            let secret = s.secret_name.clone().unwrap_or_default();
            match src.secrets.get(&secret).and_then(Option::as_ref) {
                Some(sec) => project(
                    &mut out,
                    secret_entries(sec),
                    s.items.as_ref(),
                    mode,
                    optional,
                )
                .map_err(|e| mount_err(name, e))?,
                None if optional => {}
                None => return Err(crate::env::ConfigError::SecretMissing(secret).into()),
            }
        } else if let Some(d) = &v.downward_api {
            let mode = d.default_mode.map_or(0o644, |m| m as u32);
            for item in d.items.iter().flatten() {
                downward(
                    &mut out,
                    pod,
                    &item.path,
                    item.field_ref.as_ref().map(|f| f.field_path.as_str()),
                    item.mode,
                    mode,
                    src,
                    name,
                )?;
            }
        } else if let Some(p) = &v.projected {
            let mode = p.default_mode.map_or(0o644, |m| m as u32);
            for s in p.sources.iter().flatten() {
                if let Some(c) = &s.config_map {
                    let optional = c.optional.unwrap_or(false);
                    match src.config_maps.get(&c.name).and_then(Option::as_ref) {
                        Some(cm) => project(
                            &mut out,
                            config_map_entries(cm),
                            c.items.as_ref(),
                            mode,
                            optional,
                        )
                        .map_err(|e| mount_err(name, e))?,
                        None if optional => {}
                        None => {
                            return Err(
                                crate::env::ConfigError::ConfigMapMissing(c.name.clone()).into()
                            );
                        }
                    }
                }
                if let Some(sec) = &s.secret {
                    let optional = sec.optional.unwrap_or(false);
                    match src.secrets.get(&sec.name).and_then(Option::as_ref) {
                        Some(found) => project(
                            &mut out,
                            secret_entries(found),
                            sec.items.as_ref(),
                            mode,
                            optional,
                        )
                        .map_err(|e| mount_err(name, e))?,
                        None if optional => {}
                        None => {
                            return Err(
                                crate::env::ConfigError::SecretMissing(sec.name.clone()).into()
                            );
                        }
                    }
                }
                if let Some(d) = &s.downward_api {
                    for item in d.items.iter().flatten() {
                        downward(
                            &mut out,
                            pod,
                            &item.path,
                            item.field_ref.as_ref().map(|f| f.field_path.as_str()),
                            item.mode,
                            mode,
                            src,
                            name,
                        )?;
                    }
                }
                // serviceAccountToken sources are left out: the only
                // token a pod gets is the automatic mount
                // (`crate::serviceaccount`).
            }
        } else {
            return Err(mount_err(name, "not a file volume"));
        }
        Ok(())
    })();
    if v.config_map.is_none()
        && v.secret.is_none()
        && v.downward_api.is_none()
        && v.projected.is_none()
    {
        return None;
    }
    if let Some(bad) = out.keys().find(|k| !safe(k)) {
        return Some(Err(mount_err(
            name,
            format!("path {bad:?} leaves the volume"),
        )));
    }
    Some(result.map(|()| out))
}

#[allow(clippy::too_many_arguments)]
fn downward(
    out: &mut Files,
    pod: &Pod,
    path: &str,
    field: Option<&str>,
    mode: Option<i32>,
    default: u32,
    src: &Sources,
    volume: &str,
) -> Result<(), VolumeError> {
    let Some(field) = field else {
        return Err(mount_err(
            volume,
            "resourceFieldRef items are not supported by the process runtime",
        ));
    };
    let value = match field {
        // Whole maps render as kube does: key="value" lines, sorted.
        "metadata.labels" | "metadata.annotations" => {
            let m = if field == "metadata.labels" {
                &pod.metadata.labels
            } else {
                &pod.metadata.annotations
            };
            m.iter()
                .flatten()
                .map(|(k, v)| format!("{k}={v:?}\n"))
                .collect::<String>()
        }
        f => field_value(pod, f, src)?,
    };
    out.insert(
        path.to_string(),
        (value.into_bytes(), mode.map_or(default, |m| m as u32)),
    );
    Ok(())
}

/// Writes `files` into `dir`: changed files are replaced (written aside and
/// renamed, so a reader sees old or new, never half), stale ones removed.
pub fn write_files(dir: &Path, files: &Files) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    for (rel, (bytes, mode)) in files {
        let path = dir.join(rel);
        if std::fs::read(&path).ok().as_deref() == Some(bytes.as_slice()) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = path.with_extension("trellis-tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(*mode & 0o777))?;
        std::fs::rename(&tmp, &path)?;
    }
    remove_stale(dir, dir, files)
}

fn remove_stale(root: &Path, dir: &Path, files: &Files) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)?.flatten() {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        if e.file_type()?.is_dir() {
            remove_stale(root, &path, files)?;
            if std::fs::read_dir(&path)?.next().is_none()
                && !files.keys().any(|k| k.starts_with(&format!("{rel}/")))
            {
                std::fs::remove_dir(&path)?;
            }
        } else if !files.contains_key(&rel) {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "a"}},
            "spec": {"containers": []},
        }))
        .unwrap()
    }

    fn vol(v: serde_json::Value) -> Volume {
        serde_json::from_value(v).unwrap()
    }

    fn sources() -> Sources {
        let cm: ConfigMap =
            serde_json::from_value(json!({"data": {"a.conf": "A", "b.conf": "B"}})).unwrap();
        let s: Secret = serde_json::from_value(json!({"data": {"tls.key": "S0VZ"}})).unwrap();
        Sources {
            config_maps: [("cm".into(), Some(cm)), ("gone".into(), None)].into(),
            secrets: [("s".into(), Some(s))].into(),
            pod_ip: "127.1.0.9".into(),
            ..Sources::default()
        }
    }

    #[test]
    fn file_volumes_table() {
        let p = pod();
        let src = sources();
        let got = |v| files(&p, &vol(v), &src).unwrap();
        let f = got(json!({"name": "v", "configMap": {"name": "cm"}})).unwrap();
        assert_eq!(f.keys().collect::<Vec<_>>(), ["a.conf", "b.conf"]);
        assert_eq!(f["a.conf"], (b"A".to_vec(), 0o644));
        let f = got(json!({"name": "v", "configMap": {"name": "cm", "defaultMode": 0o400, "items": [{"key": "b.conf", "path": "sub/b"}]}})).unwrap();
        assert_eq!(
            f.into_iter().collect::<Vec<_>>(),
            [("sub/b".to_string(), (b"B".to_vec(), 0o400))]
        );
        let f = got(json!({"name": "v", "secret": {"secretName": "s"}})).unwrap();
        assert_eq!(f["tls.key"].0, b"KEY");
        assert!(matches!(
            got(json!({"name": "v", "configMap": {"name": "gone"}})),
            Err(VolumeError::Config(_))
        ));
        assert_eq!(
            got(json!({"name": "v", "configMap": {"name": "gone", "optional": true}}))
                .unwrap()
                .len(),
            0
        );
        let f = got(json!({"name": "v", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}]}}))
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&f["labels"].0),
            "app=\"web\"\ntier=\"a\"\n"
        );
        assert_eq!(f["ip"].0, b"127.1.0.9");
        let f = got(json!({"name": "v", "projected": {"sources": [
            {"configMap": {"name": "cm", "items": [{"key": "a.conf", "path": "a"}]}},
            {"secret": {"name": "s"}},
            {"serviceAccountToken": {"path": "token"}}]}}))
        .unwrap();
        assert_eq!(f.keys().collect::<Vec<_>>(), ["a", "tls.key"]);
        assert!(files(&p, &vol(json!({"name": "v", "emptyDir": {}})), &src).is_none());
        let escape = got(
            json!({"name": "v", "configMap": {"name": "cm", "items": [{"key": "a.conf", "path": "../x"}]}}),
        );
        assert!(matches!(escape, Err(VolumeError::Mount { .. })));
    }

    #[test]
    fn writing_replaces_changed_files_and_removes_stale_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = Files::new();
        f.insert("a".into(), (b"1".to_vec(), 0o600));
        f.insert("d/b".into(), (b"2".to_vec(), 0o644));
        write_files(dir.path(), &f).unwrap();
        assert_eq!(std::fs::read(dir.path().join("d/b")).unwrap(), b"2");
        f.remove("d/b");
        f.insert("a".into(), (b"changed".to_vec(), 0o600));
        write_files(dir.path(), &f).unwrap();
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"changed");
        assert!(!dir.path().join("d").exists());
    }
}
