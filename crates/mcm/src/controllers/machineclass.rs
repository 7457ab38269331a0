//! The machine class and secret controllers (spec §2.8): the executors of
//! `crate::machineclass`'s decisions. A class gets the MCM finalizer while
//! machines refer to it and keeps it through its deletion until the last
//! of them is gone; the secrets of a class in use get the machine
//! controller's finalizer.
//!
//! Both work from caches: the machines (the shared machine cache), the
//! classes and the secrets of the control namespace. Writes are merge
//! patches of the finalizer list guarded by the object's resourceVersion,
//! so a change someone made meanwhile is never overwritten; a conflict is
//! retried after the backoff. Every step is idempotent, so a crash anywhere
//! repeats at most a patch.
//!
//! A clean stop [`settle`]s what the caches might not have caught up with,
//! from live reads: finalizers nobody needs must not outlive the
//! controllers that would remove them (a shoot's namespace is deleted right
//! after its machine controllers stop).

use std::sync::Arc;
use std::time::Duration;

use api::{Machine, MachineClass, labels};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::cache::IndexKey;
use super::context::{Context, Error, MachineDeps};
use crate::machineclass::{self as decide, ClassAction, ClassUse};

/// Steady-state resync of classes and secrets (upstream: 10m).
pub const RESYNC: Duration = Duration::from_secs(600);

/// The class controller's name in metrics and its backoff.
pub const NAME: &str = "machineclass";

/// The secret controller's name in metrics and its backoff.
pub const SECRET_NAME: &str = "machineclass-secret";

/// How many of `machines` refer to the class `ns/name`.
fn machines_using<'a>(
    machines: impl IntoIterator<Item = &'a Machine>,
    ns: &str,
    name: &str,
) -> usize {
    machines
        .into_iter()
        .filter(|m| decide::uses_class(m, ns, name))
        .count()
}

/// Every class of `classes` with how many of `machines` use it.
fn class_uses<'a>(
    classes: impl IntoIterator<Item = &'a MachineClass>,
    machines: &[&Machine],
) -> Vec<ClassUse> {
    classes
        .into_iter()
        .map(|c| {
            let ns = c.metadata.namespace.as_deref().unwrap_or_default();
            ClassUse::of(
                c,
                machines_using(machines.iter().copied(), ns, &c.name_any()),
            )
        })
        .collect()
}

/// How many cached machines use the class `ns/name`: the size of the
/// machine cache's class index, which holds exactly the machines
/// [`decide::uses_class`] counts (namespace and `spec.class.name`).
fn cached_using(ctx: &Context, ns: &str, name: &str) -> usize {
    ctx.machines
        .count(&IndexKey::Class(ns.to_string(), name.to_string()))
}

/// The cached classes with how many cached machines use each.
fn cached_uses(ctx: &Context, deps: &MachineDeps) -> Vec<ClassUse> {
    deps.classes
        .state()
        .iter()
        .map(|c| {
            let ns = c.metadata.namespace.as_deref().unwrap_or_default();
            ClassUse::of(c, cached_using(ctx, ns, &c.name_any()))
        })
        .collect()
}

/// Adds or removes `finalizer` with a merge patch guarded by `meta`'s
/// resourceVersion. A gone object needs nothing.
async fn set_finalizer<K>(
    api: &Api<K>,
    meta: &ObjectMeta,
    finalizer: &str,
    present: bool,
) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut fins: Vec<String> = meta.finalizers.clone().unwrap_or_default();
    fins.retain(|f| f != finalizer);
    if present {
        fins.push(finalizer.to_string());
    }
    let name = meta.name.clone().unwrap_or_default();
    let patch = json!({"metadata": {"finalizers": fins, "resourceVersion": meta.resource_version}});
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::api(format!("finalizers of {name}"), e)),
    }
}

fn has_secret_finalizer(secret: &Secret) -> bool {
    secret
        .finalizers()
        .iter()
        .any(|f| f == labels::MC_FINALIZER)
}

/// Gives `secret` the machine controller's finalizer or takes it away, as
/// `uses` want it.
async fn apply_secret(ctx: &Context, secret: &Secret, uses: &[ClassUse]) -> Result<(), Error> {
    let ns = secret.metadata.namespace.clone().unwrap_or_default();
    let name = secret.name_any();
    let change = decide::secret_finalizer_change(
        has_secret_finalizer(secret),
        decide::secret_wanted(&ns, &name, uses),
        secret.metadata.deletion_timestamp.is_some(),
    );
    if let Some(present) = change {
        let api: Api<Secret> = Api::namespaced(ctx.control.clone(), &ns);
        set_finalizer(&api, &secret.metadata, labels::MC_FINALIZER, present).await?;
        tracing::info!(secret = %format!("{ns}/{name}"), present, "class secret finalizer changed");
    }
    Ok(())
}

/// Gives `class` the MCM finalizer or takes it away, as the `machines`
/// that use it want it.
async fn apply_class(ctx: &Context, class: &MachineClass, machines: usize) -> Result<(), Error> {
    let ns = class.metadata.namespace.clone().unwrap_or_default();
    let name = class.name_any();
    let api: Api<MachineClass> = Api::namespaced(ctx.control.clone(), &ns);
    let action = decide::class_action(
        class.metadata.deletion_timestamp.is_some(),
        decide::has_class_finalizer(class),
        machines,
    );
    match action {
        ClassAction::Keep => {}
        ClassAction::AddFinalizer => {
            set_finalizer(&api, &class.metadata, labels::MCM_FINALIZER, true).await?;
            tracing::info!(class = %name, machines, "machines use the class: finalizer added");
        }
        ClassAction::WaitForMachines(n) => {
            tracing::debug!(class = %name, machines = n, "class deletion waits for its machines");
        }
        ClassAction::RemoveFinalizer => {
            set_finalizer(&api, &class.metadata, labels::MCM_FINALIZER, false).await?;
            tracing::info!(class = %name, "no machine uses the class: finalizer removed");
        }
    }
    Ok(())
}

/// Reconciles one class: first its secrets, then its own finalizer, both
/// following the machines that use it.
pub async fn reconcile(class: Arc<MachineClass>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(deps) = ctx.machine.as_ref() else {
        return Ok(Action::await_change());
    };
    let ns = class.metadata.namespace.clone().unwrap_or_default();
    let uses = cached_uses(&ctx, deps);
    for (secret_ns, secret) in decide::secret_refs(&class, &ns) {
        if let Some(secret) = deps
            .secrets
            .get(&ObjectRef::new(&secret).within(&secret_ns))
        {
            apply_secret(&ctx, &secret, &uses).await?;
        }
    }
    let used_by = cached_using(&ctx, &ns, &class.name_any());
    apply_class(&ctx, &class, used_by).await?;
    Ok(Action::requeue(RESYNC))
}

/// Failures are retried after the class's backoff (see [`crate::backoff`]).
pub fn error_policy(class: Arc<MachineClass>, err: &Error, ctx: Arc<Context>) -> Action {
    let after = ctx.error_requeue(NAME, class.as_ref());
    tracing::warn!(class = %class.name_any(), error = %err, retry_in = ?after, "machine class reconcile failed");
    Action::requeue(after)
}

/// Reconciles one secret of the control namespace: it carries the machine
/// controller's finalizer while a class in use refers to it.
pub async fn reconcile_secret(secret: Arc<Secret>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(deps) = ctx.machine.as_ref() else {
        return Ok(Action::await_change());
    };
    apply_secret(&ctx, &secret, &cached_uses(&ctx, deps)).await?;
    Ok(Action::requeue(RESYNC))
}

/// Failures are retried after the secret's backoff.
pub fn secret_error_policy(secret: Arc<Secret>, err: &Error, ctx: Arc<Context>) -> Action {
    let after = ctx.error_requeue(SECRET_NAME, secret.as_ref());
    tracing::warn!(secret = %secret.name_any(), error = %err, retry_in = ?after, "machine class secret reconcile failed");
    Action::requeue(after)
}

/// One pass over every class and secret of `ns` from live reads (not the
/// caches, which may miss the last events before a stop): secrets first,
/// then the classes, as the reconcilers order them.
pub async fn settle(ctx: &Context, ns: &str) -> Result<(), Error> {
    let lp = ListParams::default();
    let classes = Api::<MachineClass>::namespaced(ctx.control.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| Error::api("machine classes", e))?
        .items;
    let machines = Api::<Machine>::namespaced(ctx.control.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| Error::api("machines", e))?
        .items;
    let secrets = Api::<Secret>::namespaced(ctx.control.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| Error::api("secrets", e))?
        .items;
    let machine_refs: Vec<&Machine> = machines.iter().collect();
    let uses = class_uses(&classes, &machine_refs);
    for secret in &secrets {
        apply_secret(ctx, secret, &uses).await?;
    }
    for (class, u) in classes.iter().zip(&uses) {
        apply_class(ctx, class, u.machines).await?;
    }
    Ok(())
}

/// Maps a machine to its class, so a machine that appears or goes changes
/// the class's finalizer.
pub fn class_of_machine(m: &Machine) -> Option<ObjectRef<MachineClass>> {
    let ns = m.metadata.namespace.as_deref()?;
    (!m.spec.class.name.is_empty()).then(|| ObjectRef::new(&m.spec.class.name).within(ns))
}

/// Maps a class to the secrets whose finalizer it may change: those it
/// refers to, and every cached secret that carries the finalizer (one it
/// no longer refers to may have lost its last user). Only secrets of the
/// controller's namespace, which the secret cache holds.
pub fn secrets_for_class(class: &MachineClass, secrets: &Store<Secret>) -> Vec<ObjectRef<Secret>> {
    let ns = class.metadata.namespace.clone().unwrap_or_default();
    let mut out: Vec<ObjectRef<Secret>> = decide::secret_refs(class, &ns)
        .into_iter()
        .filter(|(n, _)| *n == ns)
        .map(|(n, name)| ObjectRef::new(&name).within(&n))
        .collect();
    out.extend(
        secrets
            .state()
            .iter()
            .filter(|s| has_secret_finalizer(s))
            .map(|s| ObjectRef::from_obj(s.as_ref())),
    );
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::testing::{Fixture, TEST_NAMESPACE};
    use kube::runtime::reflector;
    use kube::runtime::watcher;

    #[test]
    fn machines_map_to_their_class() {
        let m = Machine::test("m1").class("c");
        assert_eq!(
            class_of_machine(&m),
            Some(ObjectRef::new("c").within(TEST_NAMESPACE))
        );
        let mut unnamed = m;
        unnamed.spec.class.name = String::new();
        assert_eq!(class_of_machine(&unnamed), None);
    }

    fn secret(name: &str, finalizer: bool) -> Secret {
        let mut s = Secret::default().in_namespace(TEST_NAMESPACE);
        s.metadata.name = Some(name.into());
        if finalizer {
            s = s.finalizer(labels::MC_FINALIZER);
        }
        s
    }

    #[test]
    fn classes_map_to_their_secrets_and_those_holding_the_finalizer() {
        let (store, mut writer) = reflector::store::<Secret>();
        for s in [
            secret("c-secret", false),
            secret("old", true),
            secret("unrelated", false),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(s));
        }
        let class = MachineClass::test("c");
        let names: Vec<String> = secrets_for_class(&class, &store)
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["c-secret", "old"]);
    }

    #[test]
    fn uses_count_machines_per_class() {
        let a = MachineClass::test("a");
        let b = MachineClass::test("b");
        let m1 = Machine::test("m1").class("a");
        let m2 = Machine::test("m2").class("a");
        let m3 = Machine::test("m3").class("b").in_namespace("elsewhere");
        let uses = class_uses([&a, &b], &[&m1, &m2, &m3]);
        assert_eq!(uses.iter().map(|u| u.machines).collect::<Vec<_>>(), [2, 0]);
    }
}
