//! A member joining a running cluster (etcd-druid's scale-out proposal,
//! spec §6): what the cluster says about this member, its addition as a
//! learner (removing a stale old self first), the `initial-cluster` etcd
//! must start with to join, and the promotion once the learner caught up.
//! The decisions are pure; [`Peers`] makes the calls.

use std::time::Duration;

use etcdv3::proto::Member;
use serde_yaml::{Mapping, Value};

use crate::init::ClusterView;

/// How long one call to another member may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts at adding this member as a learner (upstream's 6), and the
/// pause between them.
pub const ADD_ATTEMPTS: u32 = 6;
pub const ADD_PAUSE: Duration = Duration::from_secs(5);

/// The first URL of `member`'s entry in the map-valued `field` of druid's
/// configuration.
fn url_of(cfg: &Mapping, field: &str, member: &str) -> Option<String> {
    match cfg.get(field)? {
        v @ Value::Mapping(_) => crate::config::urls_for(v, member)?
            .split(',')
            .next()
            .map(str::to_string),
        _ => None,
    }
}

/// Members named in `initial-cluster`, in order.
fn members(cfg: &Mapping) -> Vec<String> {
    cfg.get("initial-cluster")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .split(',')
        .filter_map(|e| e.split_once('=').map(|(n, _)| n.to_string()))
        .collect()
}

/// This member's peer URL and the client URLs of the others.
pub fn addresses(yaml: &str, pod: &str) -> Option<(String, Vec<String>)> {
    let cfg: Mapping = serde_yaml::from_str(yaml).ok()?;
    let peer = url_of(&cfg, "initial-advertise-peer-urls", pod)?;
    let others = members(&cfg)
        .iter()
        .filter(|m| m.as_str() != pod)
        .filter_map(|m| url_of(&cfg, "advertise-client-urls", m))
        .collect();
    Some((peer, others))
}

/// What the member list says about the member with `peer_url`.
pub fn view(members: &[Member], peer_url: &str) -> ClusterView {
    match members
        .iter()
        .find(|m| m.peer_urls.iter().any(|u| u == peer_url))
    {
        None => ClusterView::NotMember,
        Some(m) => ClusterView::Member {
            started: !m.name.is_empty(),
            learner: m.is_learner,
        },
    }
}

/// `initial-cluster` for joining: every member of the list by its name,
/// the one not started yet (this member, just added) by `pod`. etcd
/// refuses to join with any other set of members.
pub fn initial_cluster(members: &[Member], pod: &str) -> String {
    members
        .iter()
        .filter_map(|m| {
            let url = m.peer_urls.first()?;
            let name = if m.name.is_empty() { pod } else { &m.name };
            Some(format!("{name}={url}"))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The member configuration with `initial-cluster` replaced.
pub fn with_initial_cluster(config: &str, initial: &str) -> Result<String, String> {
    let mut cfg: Mapping = serde_yaml::from_str(config).map_err(|e| e.to_string())?;
    cfg.insert("initial-cluster".into(), Value::String(initial.into()));
    serde_yaml::to_string(&cfg).map_err(|e| e.to_string())
}

/// The other members, reached one at a time (a write must go to a voting
/// member; a learner refuses).
pub struct Peers {
    clients: Vec<etcdv3::Client>,
}

impl Peers {
    pub fn new(urls: &[String]) -> Peers {
        Peers {
            clients: urls
                .iter()
                .filter_map(|u| etcdv3::Client::single(u, None).ok())
                .collect(),
        }
    }

    /// The member list from the first member that answers.
    pub async fn members(&self) -> Option<Vec<Member>> {
        for c in &self.clients {
            if let Ok(Ok(r)) = tokio::time::timeout(CALL_TIMEOUT, c.member_list()).await {
                return Some(r.members);
            }
        }
        None
    }

    async fn each<T, F, Fut>(&self, what: &str, f: F) -> Result<T, String>
    where
        F: Fn(etcdv3::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcdv3::Error>>,
    {
        let mut last = format!("no member to {what}");
        for c in &self.clients {
            match tokio::time::timeout(CALL_TIMEOUT, f(c.clone())).await {
                Ok(Ok(r)) => return Ok(r),
                Ok(Err(e)) => last = format!("{what}: {e}"),
                Err(_) => last = format!("{what}: no answer within {CALL_TIMEOUT:?}"),
            }
        }
        Err(last)
    }

    /// Removes the member with `peer_url`, if listed.
    pub async fn remove(&self, peer_url: &str) -> Result<(), String> {
        let Some(list) = self.members().await else {
            return Err("no member answers".into());
        };
        let Some(m) = list
            .iter()
            .find(|m| m.peer_urls.iter().any(|u| u == peer_url))
        else {
            return Ok(());
        };
        let id = m.id;
        self.each("remove the old member", |c| async move {
            c.member_remove(id).await
        })
        .await
        .map(|_| ())
    }

    /// Adds `peer_url` as a learner; the member list after.
    pub async fn add_learner(&self, peer_url: &str) -> Result<Vec<Member>, String> {
        let url = peer_url.to_string();
        self.each("add a learner", |c| {
            let url = url.clone();
            async move { c.member_add(vec![url], true).await }
        })
        .await
        .map(|r| r.members)
    }

    /// Promotes learner `id`; etcd refuses until it caught up.
    pub async fn promote(&self, id: u64) -> Result<(), String> {
        self.each("promote the learner", |c| async move {
            c.member_promote(id).await
        })
        .await
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRUID: &str = "initial-cluster: e-0=http://e-0.e-peer.ns.svc:2380,e-1=http://e-1.e-peer.ns.svc:2380,e-2=http://e-2.e-peer.ns.svc:2380\n\
advertise-client-urls:\n  e-0: [http://e-0.e-peer.ns.svc:2379]\n  e-1: [http://e-1.e-peer.ns.svc:2379]\n  e-2: [http://e-2.e-peer.ns.svc:2379]\n\
initial-advertise-peer-urls:\n  e-0: [http://e-0.e-peer.ns.svc:2380]\n  e-1: [http://e-1.e-peer.ns.svc:2380]\n  e-2: [http://e-2.e-peer.ns.svc:2380]\n";

    fn member(id: u64, name: &str, peer: &str, learner: bool) -> Member {
        Member {
            id,
            name: name.into(),
            peer_urls: vec![peer.into()],
            client_urls: Vec::new(),
            is_learner: learner,
        }
    }

    #[test]
    fn a_member_knows_its_peer_url_and_the_others_clients() {
        let (peer, others) = addresses(DRUID, "e-1").unwrap();
        assert_eq!(peer, "http://e-1.e-peer.ns.svc:2380");
        assert_eq!(
            others,
            [
                "http://e-0.e-peer.ns.svc:2379",
                "http://e-2.e-peer.ns.svc:2379"
            ]
        );
        assert!(addresses(DRUID, "e-9").is_none());
        assert!(addresses("[", "e-0").is_none());
    }

    #[test]
    fn the_member_list_says_what_this_member_is() {
        let p = "http://e-1.e-peer.ns.svc:2380";
        let table = [
            (
                "unknown",
                vec![member(1, "e-0", "http://e-0:2380", false)],
                ClusterView::NotMember,
            ),
            (
                "added, never started",
                vec![
                    member(1, "e-0", "http://e-0:2380", false),
                    member(2, "", p, true),
                ],
                ClusterView::Member {
                    started: false,
                    learner: true,
                },
            ),
            (
                "a started voter",
                vec![
                    member(1, "e-0", "http://e-0:2380", false),
                    member(2, "e-1", p, false),
                ],
                ClusterView::Member {
                    started: true,
                    learner: false,
                },
            ),
        ];
        for (name, list, want) in table {
            assert_eq!(view(&list, p), want, "{name}");
        }
    }

    #[test]
    fn joining_names_the_new_member_after_its_pod() {
        let list = vec![
            member(1, "e-0", "http://e-0:2380", false),
            member(2, "", "http://e-1:2380", true),
        ];
        assert_eq!(
            initial_cluster(&list, "e-1"),
            "e-0=http://e-0:2380,e-1=http://e-1:2380"
        );
        let cfg =
            with_initial_cluster("name: e-1\ninitial-cluster: a=b,c=d\n", "e-0=x,e-1=y").unwrap();
        let m: Mapping = serde_yaml::from_str(&cfg).unwrap();
        assert_eq!(m["initial-cluster"], Value::from("e-0=x,e-1=y"));
        assert_eq!(m["name"], Value::from("e-1"));
    }
}
