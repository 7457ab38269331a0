//! Writing the admin kubeconfig.

use std::path::Path;

use anyhow::Context;

/// A kubeconfig for a plain-HTTP server at `url` (TLS comes with the
/// security work).
pub fn write_plain(path: &Path, url: &str) -> anyhow::Result<()> {
    let doc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: trellis\n  cluster:\n    server: {url}\ncontexts:\n- name: trellis\n  context:\n    cluster: trellis\n    user: admin\n    namespace: default\ncurrent-context: trellis\nusers:\n- name: admin\n  user:\n    token: trellis-admin\n"
    );
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, doc).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
