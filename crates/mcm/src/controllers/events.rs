//! Event publishing spread over several kube-rs [`Recorder`]s.
//!
//! A `Recorder` keeps the events it published in the last few minutes (to
//! turn repeats into a series) and prunes that whole cache on every
//! publish, so one recorder for a fleet costs O(recent events) per event:
//! with 10,000 machines each reporting its creation, a tenth of the
//! controller's CPU went to that pruning. Each object's events always go
//! to the same shard, so repeats still become a series, and a shard holds
//! a [`SHARDS`]th of the cache.

use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder, Reporter};

/// How many recorders the events are spread over.
pub const SHARDS: usize = 64;

/// Recorders sharded by the object an event is about. Cheap to clone.
#[derive(Clone)]
pub struct ShardedRecorder {
    shards: Vec<Recorder>,
}

impl ShardedRecorder {
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        ShardedRecorder {
            shards: (0..SHARDS)
                .map(|_| Recorder::new(client.clone(), reporter.clone()))
                .collect(),
        }
    }

    /// The shard of `reference`: by UID, or by namespace and name.
    fn shard(&self, reference: &ObjectReference) -> &Recorder {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        match &reference.uid {
            Some(uid) => uid.hash(&mut h),
            None => (&reference.namespace, &reference.name).hash(&mut h),
        }
        &self.shards[(h.finish() % self.shards.len() as u64) as usize]
    }

    /// Publishes `ev` about `reference`, as [`Recorder::publish`].
    pub async fn publish(
        &self,
        ev: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        self.shard(reference).publish(ev, reference).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(uid: Option<&str>, name: &str) -> ObjectReference {
        ObjectReference {
            uid: uid.map(str::to_string),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        }
    }

    #[tokio::test]
    async fn one_object_always_has_one_shard_and_objects_spread() {
        // Never connected to: nothing here makes a request.
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let r = ShardedRecorder::new(
            client,
            Reporter {
                controller: "test".into(),
                instance: None,
            },
        );
        let index = |o: &ObjectReference| {
            let s = r.shard(o) as *const Recorder;
            r.shards.iter().position(|x| std::ptr::eq(x, s)).unwrap()
        };
        let a = obj(Some("uid-a"), "a");
        assert_eq!(index(&a), index(&a.clone()));
        // The name does not move an object with a UID.
        assert_eq!(index(&a), index(&obj(Some("uid-a"), "renamed")));
        let used: std::collections::HashSet<usize> = (0..1000)
            .map(|i| index(&obj(Some(&format!("uid-{i}")), "m")))
            .collect();
        assert!(used.len() > SHARDS / 2, "{} shards used", used.len());
    }
}
