//! `trellis admission-webhook`: the machine.sapcloud.io admission that the
//! embedded API server runs in process ([`MachineAdmission`]), served as an
//! AdmissionReview v1 webhook so a real cluster gets the same defaulting and
//! validation. Register it with a MutatingWebhookConfiguration (defaulting)
//! and a ValidatingWebhookConfiguration for the machine.sapcloud.io
//! resources; one path serves both, since each review runs both phases.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use crate::gardener_admission::GardenerAdmission;
use crate::machine_admission::MachineAdmission;

#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:9443")]
    listen: SocketAddr,
    /// Serving certificate chain (PEM); kube-apiserver verifies it with the
    /// webhook configuration's caBundle.
    #[arg(long, value_name = "FILE")]
    tls_cert: PathBuf,
    /// The serving certificate's private key (PEM).
    #[arg(long, value_name = "FILE")]
    tls_key: PathBuf,
    /// Kubeconfig of the cluster whose CloudProfiles, NamespacedCloudProfiles
    /// and Shoots the core.gardener.cloud admission reads (and whose
    /// SubjectAccessReviews decide the custom verbs). Default: in-cluster
    /// or $KUBECONFIG.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Cloud profile features beyond upstream (see `trellis server --help`).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = crate::PROFILE_EXTENSIONS)]
    profile_extensions: Vec<String>,
}

fn plugins() -> Vec<Arc<dyn apiserver::AdmissionPlugin>> {
    vec![Arc::new(MachineAdmission)]
}

/// The machine admission, and with a client the core.gardener.cloud one,
/// which reads profiles through it and asks SubjectAccessReviews.
fn plugins_with(
    client: Option<kube::Client>,
    ext: gardener::Extensions,
) -> Vec<Arc<dyn apiserver::AdmissionPlugin>> {
    let mut plugins = plugins();
    if let Some(client) = client {
        plugins.push(Arc::new(
            crate::machine_admission::ServedNamespaces::remote(client.clone()),
        ));
        plugins.push(Arc::new(GardenerAdmission::remote(client, ext)));
    }
    plugins
}

/// The client for profile lookups: `--kubeconfig`, else in-cluster or
/// `$KUBECONFIG`; `None` (machine admission only) when there is none.
async fn client(args: &Args) -> anyhow::Result<Option<kube::Client>> {
    if let Some(path) = &args.kubeconfig {
        return Ok(Some(crate::controller_manager::client_from(path).await?));
    }
    match kube::Config::infer().await {
        Ok(config) => Ok(Some(kube::Client::try_from(config)?)),
        Err(e) => {
            tracing::warn!(error = %e, "no cluster to read cloud profiles from: serving machine admission only");
            Ok(None)
        }
    }
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
    };
    let tls = apiserver::TlsConfig {
        cert_chain_pem: read(&args.tls_cert)?,
        key_pem: read(&args.tls_key)?,
        client_ca_pem: None,
    };
    // Fail on a bad certificate now rather than on the first handshake.
    tls.server_config()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "admission webhook listening");
    println!("trellis admission webhook listening on https://{addr}");
    let ext = crate::profile_extensions(&args.profile_extensions);
    let router = apiserver::admission_server::router(plugins_with(client(&args).await?, ext));
    Ok(
        apiserver::admission_server::serve_tls(router, listener, &tls, crate::shutdown_signal())
            .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn review(md: &api::MachineDeployment) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "7c1d",
            "kind": {"group": api::API_GROUP, "version": "v1alpha1", "kind": "MachineDeployment"},
            "resource": {"group": api::API_GROUP, "version": "v1alpha1", "resource": "machinedeployments"},
            "name": md.metadata.name, "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "someone"},
            "object": serde_json::to_value(md).unwrap(),
        }})
    }

    async fn answer(md: &api::MachineDeployment) -> Value {
        let out = apiserver::admission_server::review(&plugins(), &review(md))
            .await
            .unwrap();
        assert_eq!(out["response"]["uid"], "7c1d");
        out["response"].clone()
    }

    #[tokio::test]
    async fn invalid_machine_deployments_are_refused_with_their_causes() {
        let resp = answer(&api::MachineDeployment::test("md").replicas(-1)).await;
        assert_eq!(resp["allowed"], false);
        assert_eq!(resp["status"]["code"], 422);
        let message = resp["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("MachineDeployment.machine.sapcloud.io \"md\" is invalid: "),
            "{message}"
        );
        assert!(message.contains("spec.replicas"), "{message}");
        assert!(resp.get("patch").is_none());
    }

    #[tokio::test]
    async fn valid_ones_are_allowed_with_a_patch_only_when_defaulted() {
        let resp = answer(&api::MachineDeployment::test("md")).await;
        assert_eq!(resp["allowed"], true);
        assert!(resp.get("patch").is_none(), "{resp}");

        let mut md = api::MachineDeployment::test("md");
        md.spec.strategy = Default::default();
        let resp = answer(&md).await;
        assert_eq!(resp["allowed"], true);
        assert_eq!(resp["patchType"], "JSONPatch");
        use base64::Engine as _;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(resp["patch"].as_str().unwrap())
            .unwrap();
        let ops: Value = serde_json::from_slice(&raw).unwrap();
        let mut patched = serde_json::to_value(&md).unwrap();
        apimachinery::patch::json_patch(&mut patched, &ops).unwrap();
        assert_eq!(patched["spec"]["strategy"]["type"], "RollingUpdate");
        assert!(patched["spec"]["strategy"]["rollingUpdate"]["maxSurge"].is_number());
    }

    /// The webhook's core.gardener.cloud admission reads the profile from
    /// a real API server through a client and refuses an incompatible pool.
    #[tokio::test]
    async fn shoots_are_judged_against_profiles_read_through_a_client() {
        let server = apiserver::Server::start(
            Arc::new(store::MemoryStore::new()),
            apiserver::Config::default(),
        )
        .await
        .unwrap();
        for crd in gardener::crds() {
            apiserver::crd::install(&server, &serde_json::to_value(&crd).unwrap())
                .await
                .unwrap();
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn({
            let server = server.clone();
            async move {
                server
                    .serve(listener, async {
                        let _ = stopped.await;
                    })
                    .await
            }
        });
        let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        config.default_retry = false;
        let client = kube::Client::try_from(config).unwrap();
        let profile: gardener::CloudProfile = serde_yaml::from_str(
            r#"
apiVersion: core.gardener.cloud/v1beta1
kind: CloudProfile
metadata: {name: local}
spec:
  type: local
  kubernetes: {versions: [{version: 1.31.2}]}
  machineCapabilities:
    - {name: architecture, values: [amd64]}
    - {name: hypervisorType, values: [gen2, gen1]}
  machineImages:
    - name: ubuntu
      versions:
        - {version: 1.0.0, capabilityFlavors: [{hypervisorType: [gen1]}]}
  machineTypes:
    - {name: gen2-only, cpu: "2", gpu: "0", memory: 4Gi, capabilities: {hypervisorType: [gen2]}}
  regions: [{name: local, zones: [{name: a}]}]
"#,
        )
        .unwrap();
        kube::Api::<gardener::CloudProfile>::all(client.clone())
            .create(&Default::default(), &profile)
            .await
            .unwrap();
        let plugins = plugins_with(Some(client), gardener::Extensions::default());
        let shoot = json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "s", "namespace": "garden-dev"},
            "spec": {"cloudProfile": {"kind": "CloudProfile", "name": "local"}, "region": "local",
                "kubernetes": {"version": "1.31.2"},
                "provider": {"type": "local", "workers": [{"name": "p", "minimum": 1, "maximum": 1,
                    "zones": ["a"], "machine": {"type": "gen2-only", "image": {"name": "ubuntu", "version": "1.0.0"}}}]}}
        });
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1",
            "kind": {"group": "core.gardener.cloud", "version": "v1beta1", "kind": "Shoot"},
            "resource": {"group": "core.gardener.cloud", "version": "v1beta1", "resource": "shoots"},
            "name": "s", "namespace": "garden-dev", "operation": "CREATE",
            "userInfo": {"username": "someone"},
            "object": shoot,
        }});
        let out = apiserver::admission_server::review(&plugins, &review)
            .await
            .unwrap();
        let resp = &out["response"];
        assert_eq!(resp["allowed"], false, "{resp:#}");
        assert_eq!(resp["status"]["code"], 422);
        let message = resp["status"]["message"].as_str().unwrap();
        assert!(message.contains("hypervisorType"), "{message}");
        let _ = stop.send(());
        let _ = serving.await;
    }
}
