//! PersistentVolumeClaims as directories: `volumes/pvc/<claim uid>/` under
//! the runtime's state directory, made when a pod first mounts the claim,
//! kept across pod restarts and deletions, and deleted once the claim is
//! gone from the API (a new claim of the same name has a new UID, so it
//! never sees the old data).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::kubelet::Shared;
use crate::state::{self, Layout};

/// Which claim a directory belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRecord {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

const RECORD: &str = "claim.json";
const DATA: &str = "data";

/// The data directory of a claim, made (with its record) if missing.
pub fn ensure(layout: &Layout, namespace: &str, name: &str, uid: &str) -> std::io::Result<PathBuf> {
    let dir = layout.claim(uid);
    let data = dir.join(DATA);
    if !data.exists() {
        std::fs::create_dir_all(&data)?;
        let r = ClaimRecord {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        };
        state::write_json(&dir, RECORD, &r)?;
    }
    Ok(data)
}

/// How often claim directories are checked against the API.
const PERIOD: Duration = Duration::from_secs(15);

/// Deletes the directories of claims that no longer exist. A directory is
/// deleted only after a live read of its claim says 404 or another UID.
pub(crate) async fn collect(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(PERIOD).await;
        for uid in state::subdirs(&shared.rt.layout.claims()) {
            let dir = shared.rt.layout.claim(&uid);
            let Some(r) = state::read_json::<ClaimRecord>(&dir, RECORD) else {
                continue;
            };
            let api: Api<PersistentVolumeClaim> =
                Api::namespaced(shared.client.clone(), &r.namespace);
            match api.get_opt(&r.name).await {
                Ok(Some(c)) if c.metadata.uid.as_deref() == Some(r.uid.as_str()) => {}
                Ok(_) => {
                    info!(claim = %format!("{}/{}", r.namespace, r.name), "deleting the data of a deleted claim");
                    if let Err(e) = std::fs::remove_dir_all(&dir) {
                        warn!(error = %e, dir = %dir.display(), "deleting claim data");
                    }
                }
                Err(e) => warn!(error = %e, "checking a claim"),
            }
        }
    }
}
