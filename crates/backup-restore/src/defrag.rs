//! Defragmentation on `--defragmentation-schedule`
//! (`br:pkg/defragmentor`): run by the leader's sidecar, one member at a
//! time — the followers first, the leader last, since defragmenting
//! blocks the member's reads and writes — and then a full snapshot of the
//! now smaller database. [`order`] decides purely.

use std::time::Duration;

use etcdv3::proto;

/// The client URL of each member to defragment, in order: followers (by
/// name, so runs are reproducible), then the leader. Learners and members
/// without a client URL (not started yet) are skipped.
pub fn order(members: &[proto::Member], leader: u64) -> Vec<String> {
    let mut followers: Vec<&proto::Member> = members
        .iter()
        .filter(|m| m.id != leader && !m.is_learner && !m.client_urls.is_empty())
        .collect();
    followers.sort_by(|a, b| a.name.cmp(&b.name));
    followers
        .into_iter()
        .chain(members.iter().filter(|m| m.id == leader))
        .filter_map(|m| m.client_urls.first().cloned())
        .collect()
}

/// Defragments every member through `client` (any member's client);
/// stops at the first failure, leaving the rest for the next run.
pub async fn defragment_all(
    client: &etcdv3::Client,
    timeout: Duration,
) -> Result<usize, etcdv3::Error> {
    let members = client.member_list().await?.members;
    let leader = client.status().await?.leader;
    let urls = order(&members, leader);
    for url in &urls {
        let one = etcdv3::Client::single(url, None)?;
        one.defragment(timeout).await?;
        tracing::info!(%url, "defragmented");
    }
    Ok(urls.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: u64, name: &str, learner: bool, started: bool) -> proto::Member {
        proto::Member {
            id,
            name: name.into(),
            peer_urls: vec![format!("http://{name}:2380")],
            client_urls: if started {
                vec![format!("http://{name}:2379")]
            } else {
                vec![]
            },
            is_learner: learner,
        }
    }

    #[test]
    fn followers_first_then_the_leader_and_never_learners() {
        let members = vec![
            m(1, "e-1", false, true),
            m(2, "e-0", false, true),
            m(3, "e-2", false, true),
            m(4, "e-3", true, true),
            m(5, "e-4", false, false),
        ];
        assert_eq!(
            order(&members, 2),
            vec!["http://e-1:2379", "http://e-2:2379", "http://e-0:2379"]
        );
        assert_eq!(
            order(&[m(9, "solo", false, true)], 9),
            vec!["http://solo:2379"]
        );
        assert!(order(&[], 1).is_empty());
    }
}

#[cfg(test)]
mod etcd_tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_member_of_a_real_cluster_is_defragmented() {
        let Some(cluster) = etcdv3::testing::cluster_or_skip(3).await else {
            return;
        };
        let n = super::defragment_all(&cluster.client(), std::time::Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(n, 3);
    }
}
