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
}

fn plugins() -> Vec<Arc<dyn apiserver::AdmissionPlugin>> {
    vec![Arc::new(MachineAdmission)]
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
    let router = apiserver::admission_server::router(plugins());
    apiserver::admission_server::serve_tls(router, listener, &tls, crate::shutdown_signal()).await
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
}
