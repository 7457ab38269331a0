//! What initialization does with a member's data directory
//! (`br:pkg/initializer/initializer.go`, etcd-druid's scale-out proposal),
//! decided purely from the validation verdict, the store and what the rest
//! of the cluster says.
//!
//! A single member restores from its backups whenever its data is missing
//! or unusable. A member of a larger cluster never restores: the cluster
//! has its data. A fresh member that the running cluster does not know is
//! a scale-out and joins as a learner; one whose data is gone or corrupt
//! after it ran (its member lease was renewed before) is removed from the
//! cluster, wiped and joins again as a learner.

use crate::validate::DirStatus;

/// `initial-cluster-state` of the etcd configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterState {
    New,
    Existing,
}

impl ClusterState {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::New => "new",
            ClusterState::Existing => "existing",
        }
    }
}

/// What the running cluster says about this member (multi-member only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterView {
    /// No other member answered.
    Unreachable,
    /// The member list does not have our peer URL.
    NotMember,
    /// The member list has our peer URL.
    Member {
        /// The member has run (etcd fills in the name on first start).
        started: bool,
        learner: bool,
    },
}

/// Everything the decision needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitFacts {
    pub dir: DirStatus,
    pub multi_member: bool,
    /// A store is configured and holds at least one snapshot.
    pub backups: bool,
    pub cluster: ClusterView,
    /// This member's lease was renewed before: it has run.
    pub ran_before: bool,
}

/// What initialization does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitAction {
    /// Refuse to touch the volume; etcd does not start.
    Refuse(String),
    /// Try again later (the container restarts).
    Retry(String),
    /// Start etcd on the data directory as it is (or empty).
    Start(ClusterState),
    /// Delete the data directory, then start empty.
    WipeAndStart(ClusterState),
    /// Restore the newest full snapshot and its deltas, then start.
    Restore,
    /// Add this member as a learner (removing its old self first), wipe
    /// the data directory and start with `existing`.
    JoinAsLearner { remove_first: bool },
}

pub fn plan(f: &InitFacts) -> InitAction {
    if let DirStatus::WrongVolumeMounted(why) = &f.dir {
        return InitAction::Refuse(why.clone());
    }
    if !f.multi_member {
        return match (&f.dir, f.backups) {
            (DirStatus::Valid, _) => InitAction::Start(ClusterState::New),
            (_, true) => InitAction::Restore,
            (DirStatus::NotExist, false) => InitAction::Start(ClusterState::New),
            (_, false) => InitAction::WipeAndStart(ClusterState::New),
        };
    }
    match (&f.dir, f.cluster) {
        (DirStatus::Valid, _) => InitAction::Start(ClusterState::New),
        // Bootstrap: every member starts at once and none answers yet.
        (DirStatus::NotExist, ClusterView::Unreachable) => InitAction::Start(ClusterState::New),
        (DirStatus::NotExist, ClusterView::NotMember) => InitAction::JoinAsLearner {
            remove_first: false,
        },
        (DirStatus::NotExist, ClusterView::Member { started, learner }) => {
            if started || f.ran_before {
                // Its data is gone: the cluster still counts the old self.
                InitAction::JoinAsLearner { remove_first: true }
            } else if learner {
                // Added by an earlier attempt that stopped before etcd ran.
                InitAction::WipeAndStart(ClusterState::Existing)
            } else {
                // An initial member that is late to the bootstrap.
                InitAction::Start(ClusterState::New)
            }
        }
        (_, ClusterView::Unreachable) => InitAction::Retry(format!(
            "data directory unusable ({:?}) and no other member answers",
            f.dir
        )),
        (_, ClusterView::NotMember) => InitAction::JoinAsLearner {
            remove_first: false,
        },
        (_, ClusterView::Member { .. }) => InitAction::JoinAsLearner { remove_first: true },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(dir: DirStatus, multi: bool, backups: bool, cluster: ClusterView) -> InitFacts {
        InitFacts {
            dir,
            multi_member: multi,
            backups,
            cluster,
            ran_before: false,
        }
    }

    #[test]
    fn single_members_restore_when_their_data_is_unusable() {
        use DirStatus::*;
        let corrupt = || Corrupt("db".into());
        let behind = || Inconsistent {
            db_revision: 1,
            store_revision: 2,
        };
        let u = ClusterView::Unreachable;
        let cases = [
            (Valid, true, InitAction::Start(ClusterState::New)),
            (NotExist, true, InitAction::Restore),
            // Scenario 19: a corrupt database restores from the store.
            (corrupt(), true, InitAction::Restore),
            (behind(), true, InitAction::Restore),
            (NotExist, false, InitAction::Start(ClusterState::New)),
            (
                corrupt(),
                false,
                InitAction::WipeAndStart(ClusterState::New),
            ),
        ];
        for (dir, backups, want) in cases {
            assert_eq!(
                plan(&facts(dir.clone(), false, backups, u)),
                want,
                "{dir:?}"
            );
        }
    }

    #[test]
    fn scenario_21_a_foreign_volume_is_refused() {
        let f = facts(
            DirStatus::WrongVolumeMounted("x".into()),
            false,
            true,
            ClusterView::Unreachable,
        );
        assert_eq!(plan(&f), InitAction::Refuse("x".into()));
    }

    #[test]
    fn members_of_a_cluster_bootstrap_join_or_rejoin() {
        use ClusterView::*;
        use DirStatus::*;
        let join = InitAction::JoinAsLearner {
            remove_first: false,
        };
        let rejoin = InitAction::JoinAsLearner { remove_first: true };
        let fresh = |started, learner| Member { started, learner };
        let cases = [
            (
                Valid,
                Unreachable,
                false,
                InitAction::Start(ClusterState::New),
            ),
            (
                NotExist,
                Unreachable,
                false,
                InitAction::Start(ClusterState::New),
            ),
            // Scale-out (scenario 10): the cluster runs without us.
            (NotExist, NotMember, false, join.clone()),
            (
                NotExist,
                fresh(false, false),
                false,
                InitAction::Start(ClusterState::New),
            ),
            (
                NotExist,
                fresh(false, true),
                false,
                InitAction::WipeAndStart(ClusterState::Existing),
            ),
            (NotExist, fresh(true, false), false, rejoin.clone()),
            (NotExist, fresh(false, false), true, rejoin.clone()),
            (Corrupt("x".into()), fresh(true, false), true, rejoin),
            (Corrupt("x".into()), NotMember, true, join),
        ];
        for (dir, cluster, ran_before, want) in cases {
            let f = InitFacts {
                ran_before,
                ..facts(dir.clone(), true, true, cluster)
            };
            assert_eq!(
                plan(&f),
                want,
                "{dir:?} {cluster:?} ran_before={ran_before}"
            );
        }
        let f = facts(Corrupt("x".into()), true, true, Unreachable);
        assert!(matches!(plan(&f), InitAction::Retry(_)));
    }
}
