//! The Deployment's status (upstream's `calculateStatus` and
//! `syncRolloutStatus`): replica counts from the sets as a pass leaves
//! them, and the Progressing, Available and ReplicaFailure conditions with
//! the progress-deadline arithmetic (`deploymentutil`'s condition helpers),
//! including the statuses written after a failed create or a hash
//! collision.

use super::*;

impl Pass<'_> {
    /// `calculateStatus` from the sets as this pass leaves them.
    pub(super) fn calculate_status(&self) -> DeploymentStatus {
        let available: i32 = self.sets.iter().map(|rs| rs_status(rs).2).sum();
        let total: i32 = self.sets.iter().map(rs_replicas).sum();
        let mut s = self.status.clone();
        s.observed_generation = self.d.metadata.generation;
        s.replicas = Some(self.sets.iter().map(|rs| rs_status(rs).0).sum());
        s.updated_replicas = Some(self.new.map_or(0, |n| rs_status(&self.sets[n]).0));
        s.ready_replicas = Some(self.sets.iter().map(|rs| rs_status(rs).1).sum());
        s.available_replicas = Some(available);
        s.unavailable_replicas = Some((total - available).max(0));
        let cond = if available >= replicas(self.d) - max_unavailable(self.d) {
            new_condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
                self.now,
            )
        } else {
            new_condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
                self.now,
            )
        };
        set_condition(&mut s, cond);
        s
    }

    /// `syncRolloutStatus`: the status with the Progressing condition
    /// moved on by what this rollout shows.
    pub(super) fn rollout_status(&self) -> (DeploymentStatus, Option<Duration>) {
        let d = self.d;
        let mut s = self.calculate_status();
        // Upstream compares with the Deployment as this pass changed it
        // (conditions set on finding or creating the new set).
        let old = self.status.clone();
        let Some(deadline) = progress_deadline(d) else {
            remove_condition(&mut s, "Progressing");
            return (s, None);
        };
        let current = condition(&old, "Progressing").cloned();
        let is_complete = s.replicas == s.updated_replicas
            && current.as_ref().and_then(|c| c.reason.as_deref()) == Some("NewReplicaSetAvailable");
        let new_name = self
            .new
            .map(|n| meta::name(&self.sets[n].metadata).to_string());
        let subject = |fallback: &str| match &new_name {
            Some(n) => format!("ReplicaSet {n:?}"),
            None => format!("Deployment {fallback:?}"),
        };
        let d_name = meta::name(&d.metadata).to_string();
        if !is_complete {
            if complete(d, Some(&s)) {
                let msg = format!("{} has successfully progressed.", subject(&d_name));
                set_condition(
                    &mut s,
                    new_condition(
                        "Progressing",
                        "True",
                        "NewReplicaSetAvailable",
                        msg,
                        self.now,
                    ),
                );
            } else if progressing(&old, &s) {
                let msg = format!("{} is progressing.", subject(&d_name));
                let mut c =
                    new_condition("Progressing", "True", "ReplicaSetUpdated", msg, self.now);
                if let Some(cur) = condition(&old, "Progressing").cloned() {
                    if cur.status == "True" {
                        c.last_transition_time = cur.last_transition_time;
                    }
                    remove_condition(&mut s, "Progressing");
                }
                set_condition(&mut s, c);
            } else if timed_out(d, &s, self.now) {
                let msg = format!("{} has timed out progressing.", subject(&d_name));
                set_condition(
                    &mut s,
                    new_condition(
                        "Progressing",
                        "False",
                        "ProgressDeadlineExceeded",
                        msg,
                        self.now,
                    ),
                );
            }
        }
        match self.replica_failure() {
            Some(c) => set_condition(&mut s, c),
            None => remove_condition(&mut s, "ReplicaFailure"),
        }
        // `requeueStuckDeployment`: check the deadline when it passes.
        let requeue = condition(&s, "Progressing")
            .filter(|c| c.reason.as_deref() != Some("ProgressDeadlineExceeded"))
            .filter(|_| !complete(d, Some(&s)))
            .and_then(|c| c.last_update_time.as_ref())
            .map(|t| {
                let at = to_chrono(t) + chrono::Duration::seconds(i64::from(deadline));
                (at - self.now).to_std().unwrap_or_default() + Duration::from_secs(1)
            });
        (s, requeue)
    }

    /// `getReplicaFailures`: the new set's failure, else an old set's.
    pub(super) fn replica_failure(&self) -> Option<DeploymentCondition> {
        let failure = |rs: &ReplicaSet| {
            rs.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "ReplicaFailure")
                .cloned()
        };
        let from_new = self.new.and_then(|n| failure(&self.sets[n]));
        let found =
            from_new.or_else(|| self.olds().iter().find_map(|i| failure(&self.sets[*i])))?;
        Some(DeploymentCondition {
            type_: "ReplicaFailure".into(),
            status: found.status,
            last_transition_time: found.last_transition_time.clone(),
            last_update_time: found.last_transition_time,
            reason: found.reason,
            message: found.message,
        })
    }
}

/// `DeploymentComplete`: every replica updated and available, and the
/// status is of the current generation.
pub(super) fn complete(d: &Deployment, s: Option<&DeploymentStatus>) -> bool {
    let Some(s) = s else {
        return false;
    };
    let want = Some(replicas(d));
    s.updated_replicas == want
        && s.replicas == want
        && s.available_replicas == want
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: more updated, ready or available replicas, or
/// fewer old ones, than the status recorded.
fn progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// `DeploymentTimedOut`: no progress since the Progressing condition was
/// last updated, for longer than the deadline.
fn timed_out(d: &Deployment, s: &DeploymentStatus, now: DateTime<Utc>) -> bool {
    let Some(deadline) = progress_deadline(d) else {
        return false;
    };
    let Some(c) = condition(s, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some("NewReplicaSetAvailable") => false,
        Some("ProgressDeadlineExceeded") => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| to_chrono(t) + chrono::Duration::seconds(i64::from(deadline)) < now),
    }
}

pub(super) fn condition<'a>(
    s: &'a DeploymentStatus,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    s.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

pub(super) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: DateTime<Utc>,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(to_time(now)),
        last_transition_time: Some(to_time(now)),
    }
}

/// `SetDeploymentCondition`: unchanged when status and reason are the
/// same; keeps the transition time when only the reason changes; the
/// condition moves to the end.
pub(super) fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = condition(s, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(s, &c.type_);
    s.conditions.get_or_insert_with(Vec::new).push(c);
}

fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = s.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
        if cs.is_empty() {
            s.conditions = None;
        }
    }
}

/// `checkPausedConditions`: Progressing is Unknown while paused.
pub(super) fn paused_conditions(pass: &mut Pass, paused: bool) {
    if progress_deadline(pass.d).is_none() {
        return;
    }
    let cond_paused = condition(&pass.status, "Progressing")
        .is_some_and(|c| c.reason.as_deref() == Some("DeploymentPaused"));
    if paused && !cond_paused {
        let c = new_condition(
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused".into(),
            pass.now,
        );
        set_condition(&mut pass.status, c);
    } else if !paused && cond_paused {
        let c = new_condition(
            "Progressing",
            "Unknown",
            "DeploymentResumed",
            "Deployment is resumed".into(),
            pass.now,
        );
        set_condition(&mut pass.status, c);
    }
}

/// The status after creating the new set failed (`ReplicaSetCreateError`).
pub fn create_failed(
    d: &Deployment,
    name: &str,
    error: &str,
    now: DateTime<Utc>,
) -> Option<DeploymentStatus> {
    progress_deadline(d)?;
    let mut s = d.status.clone().unwrap_or_default();
    let msg = format!("Failed to create new replica set {name:?}: {error}");
    set_condition(
        &mut s,
        new_condition("Progressing", "False", "ReplicaSetCreateError", msg, now),
    );
    Some(s)
}

/// The status after a hash collision: the collision count goes up, so
/// the next pass names the new set differently.
pub fn collided(d: &Deployment) -> DeploymentStatus {
    let mut s = d.status.clone().unwrap_or_default();
    s.collision_count = Some(s.collision_count.unwrap_or(0) + 1);
    s
}
