//! The cluster autoscaler's targeted deletions (spec §4, "CA targeted
//! deletion"): the deployment's trigger-deletion annotation turned into the
//! machines to mark for deletion.

/// One cluster-autoscaler deletion request from the deployment's
/// `node.machine.sapcloud.io/trigger-deletion-by-mcm` annotation
/// (`m1~T1,m2~T2`; the time may be missing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggeredDeletion {
    pub machine: String,
    /// When the autoscaler asked (RFC 3339).
    pub marked_at: String,
}

/// What to do with the trigger-deletion annotation: which machines to mark
/// (priority 1 and the marked-for-deletion time, so the machine set deletes
/// exactly them when the autoscaler lowers the replicas) and the annotation
/// value left afterwards (`None` removes it). Every entry is consumed:
/// applied when its machine exists and is not already Failed or
/// Terminating, dropped otherwise (gone, malformed or already on its way).
pub fn triggered_deletions(
    annotation: &str,
    default_time: &str,
    machine_phase: impl Fn(&str) -> Option<Option<api::MachinePhase>>,
) -> (Vec<TriggeredDeletion>, Option<String>) {
    let mut marks = Vec::new();
    for entry in annotation
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (name, time) = match entry.split_once('~') {
            Some((n, t)) => (n.trim(), t.trim()),
            None => (entry, default_time),
        };
        if name.is_empty() || chrono::DateTime::parse_from_rfc3339(time).is_err() {
            continue;
        }
        match machine_phase(name) {
            Some(Some(api::MachinePhase::Failed | api::MachinePhase::Terminating)) | None => {}
            Some(_) => marks.push(TriggeredDeletion {
                machine: name.to_string(),
                marked_at: time.to_string(),
            }),
        }
    }
    (marks, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::MachinePhase;

    #[test]
    fn trigger_deletion_entries() {
        let phase = |n: &str| match n {
            "m1" => Some(Some(MachinePhase::Running)),
            "m2" => Some(Some(MachinePhase::Failed)),
            "m3" => Some(Some(MachinePhase::Pending)),
            "m4" => Some(None),
            _ => None,
        };
        let now = "2026-11-21T10:00:00Z";
        let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
            ("m1", vec![("m1", now)]),
            (
                "m1~2026-11-21T09:00:00Z",
                vec![("m1", "2026-11-21T09:00:00Z")],
            ),
            ("m1,m2,gone,m3~bad,m4", vec![("m1", now), ("m4", now)]),
            (
                " m3 ~ 2026-11-21T08:00:00Z , ",
                vec![("m3", "2026-11-21T08:00:00Z")],
            ),
            ("", vec![]),
        ];
        for (ann, want) in cases {
            let (marks, left) = triggered_deletions(ann, now, phase);
            let got: Vec<(&str, &str)> = marks
                .iter()
                .map(|m| (m.machine.as_str(), m.marked_at.as_str()))
                .collect();
            assert_eq!(got, want, "{ann:?}");
            assert_eq!(left, None, "every entry is consumed");
        }
    }
}
