//! Node sync (spec §2.3): the node template, the machine-name label and
//! the node finalizer kept on a live machine's node.

use api::labels;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};

use super::{Scope, is_status};
use crate::controllers::cache::IndexKey;
use crate::controllers::context::Error;
use crate::machine as decide;

impl Scope<'_> {
    /// Keeps the node template, the machine-name label and the node
    /// finalizer on the node (spec §2.3). The finalizer goes only on a node
    /// exactly one live machine maps to. A conflict is left to the next
    /// pass, which sees the newer node.
    pub(super) async fn sync_node(&self, node: &Node) -> Result<(), Error> {
        if node
            .annotations()
            .get(labels::NOT_MANAGED_BY_MCM)
            .is_some_and(|v| v == "1")
        {
            return Ok(());
        }
        let node_name = node.name_any();
        let owners = self
            .ctx
            .machines
            .by(&IndexKey::Node(node_name.clone()))
            .iter()
            .filter(|m| {
                m.metadata.deletion_timestamp.is_none()
                    && m.labels().get(labels::NODE) == Some(&node_name)
            })
            .count();
        let Some(patch) = decide::node_sync_patch(
            node,
            &self.name,
            &self.machine.spec.node_template,
            owners == 1,
        ) else {
            return Ok(());
        };
        match self
            .nodes()?
            .patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) || is_status(&e, 404) => Ok(()),
            Err(e) => Err(Error::api(format!("node {node_name}"), e)),
        }
    }
}
