//! The Secret controller's decision (spec §9): every Secret an Etcd
//! references (its TLS secrets, the backup store's credentials, the auth
//! secret) carries the finalizer `druid.gardener.cloud/etcd-druid` so it
//! cannot vanish under a running cluster; the finalizer goes once no Etcd
//! of the namespace references it. Pure.

use std::collections::BTreeSet;

use crate::types::{Etcd, TlsConfig};

fn tls_refs(tls: Option<&TlsConfig>, out: &mut BTreeSet<String>) {
    if let Some(t) = tls {
        out.insert(t.tls_ca_secret_ref.name.clone());
        out.insert(t.server_tls_secret_ref.name.clone());
        if let Some(c) = &t.client_tls_secret_ref {
            out.insert(c.name.clone());
        }
    }
}

/// Names of the Secrets (in the Etcd's namespace) that `etcd` references.
pub fn referenced(etcd: &Etcd) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let e = &etcd.spec.etcd;
    tls_refs(e.client_url_tls.as_ref(), &mut out);
    tls_refs(e.peer_url_tls.as_ref(), &mut out);
    tls_refs(etcd.spec.backup.tls.as_ref(), &mut out);
    if let Some(s) = &e.auth_secret_ref {
        out.insert(s.name.clone());
    }
    if let Some(s) = etcd
        .spec
        .backup
        .store
        .as_ref()
        .and_then(|s| s.secret_ref.as_ref())
    {
        out.insert(s.name.clone());
    }
    out.remove("");
    out
}

/// What to do with a Secret's finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizerAction {
    Add,
    Remove,
    Keep,
}

/// `referenced_by_any`: an Etcd of the Secret's namespace that is not
/// itself gone references it.
pub fn finalizer_action(has_finalizer: bool, referenced_by_any: bool) -> FinalizerAction {
    match (has_finalizer, referenced_by_any) {
        (false, true) => FinalizerAction::Add,
        (true, false) => FinalizerAction::Remove,
        _ => FinalizerAction::Keep,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{CaSecretRef, SecretReference, StoreSpec};

    #[test]
    fn every_tls_and_store_secret_is_referenced() {
        let mut e = Etcd::new("e", Default::default());
        e.spec.etcd.client_url_tls = Some(TlsConfig {
            tls_ca_secret_ref: CaSecretRef {
                name: "ca".into(),
                ..Default::default()
            },
            server_tls_secret_ref: SecretReference {
                name: "server".into(),
                namespace: None,
            },
            client_tls_secret_ref: Some(SecretReference {
                name: "client".into(),
                namespace: None,
            }),
        });
        e.spec.backup.store = Some(StoreSpec {
            prefix: "p".into(),
            secret_ref: Some(SecretReference {
                name: "creds".into(),
                namespace: None,
            }),
            ..Default::default()
        });
        let names: Vec<String> = referenced(&e).into_iter().collect();
        assert_eq!(names, ["ca", "client", "creds", "server"]);
        assert!(referenced(&Etcd::new("x", Default::default())).is_empty());
    }

    #[test]
    fn the_finalizer_follows_the_references() {
        assert_eq!(finalizer_action(false, true), FinalizerAction::Add);
        assert_eq!(finalizer_action(true, false), FinalizerAction::Remove);
        assert_eq!(finalizer_action(true, true), FinalizerAction::Keep);
        assert_eq!(finalizer_action(false, false), FinalizerAction::Keep);
    }
}
