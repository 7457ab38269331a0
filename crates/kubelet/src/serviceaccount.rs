//! Service account credentials in pods, as kube's kubelet hands them out:
//! a token from the TokenRequest API for the pod's ServiceAccount (bound to
//! the pod, about an hour, renewed after 80 % of its lifetime), the API
//! server's CA and the pod's namespace, as files in a read-only directory
//! at [`MOUNT_PATH`] of every container; and the `KUBERNETES_SERVICE_*`
//! variables naming where the API server is reachable from pods.
//!
//! [`automount`], [`account_name`], [`service_env`], [`refresh_at`] and
//! [`files`] decide (pure); [`sync`] is the thin executor a pod's worker
//! calls on every pass. A ServiceAccount that does not exist (yet) fails
//! the mount: the containers wait, the worker retries.

use std::path::PathBuf;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use tracing::warn;

use crate::kubelet::Shared;
use crate::view::Blocked;
use crate::volumes::Files;

/// Where containers find the credentials.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The lifetime asked for (kube's kubelet asks for an hour too).
pub const EXPIRATION_SECS: i64 = 3600;

/// The name of the directory under the pod's volumes (kube's is
/// `kube-api-access-<random>`).
const VOLUME: &str = "kube-api-access";

/// Where pods reach the API server, and the CA its serving certificate
/// chains to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiServer {
    /// An address pods can connect to (pods share the host's network, so
    /// a loopback address works).
    pub host: String,
    pub port: u16,
    pub ca_pem: String,
}

/// The ServiceAccount a pod runs as: `serviceAccountName`, else the
/// deprecated `serviceAccount`, else `default`.
pub fn account_name(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.service_account_name.clone())
        .or_else(|| spec.and_then(|s| s.service_account.clone()))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

/// Whether the pod gets a token: the pod's `automountServiceAccountToken`,
/// else its ServiceAccount's, else yes. `None`: the pod leaves it to the
/// ServiceAccount, which is not known yet.
pub fn automount(pod: &Pod, sa: Option<&ServiceAccount>) -> Option<bool> {
    pod.spec
        .as_ref()
        .and_then(|s| s.automount_service_account_token)
        .or_else(|| sa.map(|sa| sa.automount_service_account_token.unwrap_or(true)))
}

/// The variables kube's kubelet sets for the `kubernetes` Service in every
/// container (the container's own environment wins over them).
pub fn service_env(api: &ApiServer) -> Vec<(String, String)> {
    let (h, p) = (&api.host, api.port);
    let url = format!("tcp://{h}:{p}");
    vec![
        ("KUBERNETES_SERVICE_HOST".into(), h.clone()),
        ("KUBERNETES_SERVICE_PORT".into(), p.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), p.to_string()),
        ("KUBERNETES_PORT".into(), url.clone()),
        (format!("KUBERNETES_PORT_{p}_TCP"), url),
        (format!("KUBERNETES_PORT_{p}_TCP_PROTO"), "tcp".into()),
        (format!("KUBERNETES_PORT_{p}_TCP_PORT"), p.to_string()),
        (format!("KUBERNETES_PORT_{p}_TCP_ADDR"), h.clone()),
    ]
}

/// When a token issued at `issued_ms` and expiring at `expires_ms` is
/// renewed: after 80 % of its lifetime, as kube's token manager.
pub fn refresh_at(issued_ms: u64, expires_ms: u64) -> u64 {
    issued_ms + expires_ms.saturating_sub(issued_ms) / 10 * 8
}

/// The directory's files (mode 0644, kube's default 420).
pub fn files(token: &str, ca_pem: &str, namespace: &str) -> Files {
    [
        ("token", token.as_bytes()),
        ("ca.crt", ca_pem.as_bytes()),
        ("namespace", namespace.as_bytes()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), (v.to_vec(), 0o644)))
    .collect()
}

/// A worker's memory of its pod's token.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Whether the pod gets a token, once known.
    mount: Option<bool>,
    /// The current token's expiry and renewal times (ms since the epoch).
    expires_ms: u64,
    refresh_ms: u64,
}

impl State {
    /// A token was written and has not expired.
    pub fn valid(&self, now_ms: u64) -> bool {
        self.mount == Some(true) && now_ms < self.expires_ms
    }
}

fn failed(message: String) -> Blocked {
    Blocked {
        reason: "ContainerCreating".into(),
        message,
    }
}

/// Makes the pod's credentials current. `Ok(Some(dir))`: mount `dir`;
/// `Ok(None)`: no credentials for this pod (or no API server configured);
/// `Err`: the mount failed this time (the ServiceAccount is missing, the
/// request failed), to be retried on the next pass.
pub(crate) async fn sync(
    shared: &Shared,
    pod: &Pod,
    uid: &str,
    state: &mut State,
    now_ms: u64,
) -> Result<Option<PathBuf>, Blocked> {
    let Some(api) = shared.cfg.api_server.as_ref() else {
        return Ok(None);
    };
    if state.mount == Some(false) || automount(pod, None) == Some(false) {
        state.mount = Some(false);
        return Ok(None);
    }
    let dir = shared.rt.layout.pod_volume(uid, "serviceaccount", VOLUME);
    if state.mount == Some(true) && now_ms < state.refresh_ms {
        return Ok(Some(dir));
    }
    match issue(shared, api, pod, uid, state, now_ms).await {
        Ok(true) => Ok(Some(dir)),
        Ok(false) => Ok(None),
        // A renewal that failed while the token is still good: the
        // containers keep it; the next pass tries again.
        Err(b) if state.valid(now_ms) => {
            warn!(pod_uid = %uid, error = %b.message, "renewing a service account token");
            Ok(Some(dir))
        }
        Err(b) => Err(b),
    }
}

/// Reads the ServiceAccount and, if the pod gets a token, requests one and
/// writes the directory; whether the pod gets one.
async fn issue(
    shared: &Shared,
    api: &ApiServer,
    pod: &Pod,
    uid: &str,
    state: &mut State,
    now_ms: u64,
) -> Result<bool, Blocked> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = account_name(pod);
    let sas: Api<ServiceAccount> = Api::namespaced(shared.client.clone(), &ns);
    let prefix = format!("MountVolume.SetUp failed for volume {VOLUME:?}");
    let sa = sas
        .get_opt(&name)
        .await
        .map_err(|e| failed(format!("{prefix}: reading serviceaccount {name:?}: {e}")))?
        .ok_or_else(|| {
            failed(format!(
                "{prefix}: failed to fetch token: serviceaccounts {name:?} not found"
            ))
        })?;
    if automount(pod, Some(&sa)) == Some(false) {
        state.mount = Some(false);
        return Ok(false);
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(EXPIRATION_SECS),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: Some(uid.to_string()),
            }),
        },
        ..TokenRequest::default()
    };
    let got = sas
        .create_token_request(&name, &PostParams::default(), &request)
        .await
        .map_err(|e| failed(format!("{prefix}: failed to fetch token: {e}")))?;
    let status = got
        .status
        .ok_or_else(|| failed(format!("{prefix}: the TokenRequest has no status")))?;
    let expires_ms = status.expiration_timestamp.0.as_millisecond().max(0) as u64;
    let dir = shared.rt.layout.pod_volume(uid, "serviceaccount", VOLUME);
    crate::volumes::write_files(&dir, &files(&status.token, &api.ca_pem, &ns))
        .map_err(|e| failed(format!("{prefix}: {e}")))?;
    state.mount = Some(true);
    state.expires_ms = expires_ms;
    state.refresh_ms = refresh_at(now_ms, expires_ms);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
            .unwrap()
    }

    fn sa(automount: Option<bool>) -> ServiceAccount {
        let mut v = json!({"metadata": {"name": "sa"}});
        if let Some(a) = automount {
            v["automountServiceAccountToken"] = a.into();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn which_account_and_whether_it_is_mounted() {
        let bare = pod(json!({"containers": []}));
        assert_eq!(account_name(&bare), "default");
        assert_eq!(
            account_name(&pod(
                json!({"containers": [], "serviceAccountName": "etcd", "serviceAccount": "old"})
            )),
            "etcd"
        );
        assert_eq!(
            account_name(&pod(json!({"containers": [], "serviceAccount": "old"}))),
            "old"
        );
        let off = pod(json!({"containers": [], "automountServiceAccountToken": false}));
        let on = pod(json!({"containers": [], "automountServiceAccountToken": true}));
        // (case, pod, its ServiceAccount, verdict)
        let cases = [
            ("pod says no", &off, Some(sa(Some(true))), Some(false)),
            (
                "pod says yes over the SA",
                &on,
                Some(sa(Some(false))),
                Some(true),
            ),
            ("SA says no", &bare, Some(sa(Some(false))), Some(false)),
            ("neither says: yes", &bare, Some(sa(None)), Some(true)),
            ("SA unknown yet", &bare, None, None),
            ("pod's no needs no SA", &off, None, Some(false)),
        ];
        for (case, p, s, want) in cases {
            assert_eq!(automount(p, s.as_ref()), want, "{case}");
        }
    }

    #[test]
    fn environment_files_and_renewal() {
        let api = ApiServer {
            host: "127.0.0.1".into(),
            port: 6443,
            ca_pem: "CA".into(),
        };
        let env = service_env(&api);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("127.0.0.1"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("6443"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT_HTTPS"), Some("6443"));
        assert_eq!(
            get("KUBERNETES_PORT_6443_TCP"),
            Some("tcp://127.0.0.1:6443")
        );
        let f = files("T", "CA", "ns");
        assert_eq!(
            f.keys().collect::<Vec<_>>(),
            ["ca.crt", "namespace", "token"]
        );
        assert_eq!(f["namespace"], (b"ns".to_vec(), 0o644));
        assert_eq!(refresh_at(1_000, 3_601_000), 1_000 + 2_880_000);
        assert_eq!(refresh_at(5_000, 1_000), 5_000, "an expired token now");
    }
}
