//! The sidecar (`etcdbrctl server`): the initialization handshake the
//! etcd-wrapper drives over HTTP, then, while etcd runs, member-lease
//! renewal and — on the leading member only — full snapshots on the cron
//! schedule, delta snapshots, garbage collection and the snapshot Leases.
//! The HTTP handlers in [`router`] are thin: each calls one method here.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::gc::{self, Policy};
use crate::init::{self, ClusterView, InitAction, InitFacts};
use crate::lease::{Leases, Role};
use crate::restore::{self, Programs};
use crate::snapshot::{Compression, Kind, Snapshot};
use crate::snapshotter::{SnapshotError, Snapshotter};
use crate::snapstore::SnapStore;
use crate::validate;

/// What the sidecar was started with (br's `server` flags).
pub struct Settings {
    pub data_dir: PathBuf,
    pub temp_dir: PathBuf,
    /// druid's `etcd.conf.yaml`.
    pub config_path: PathBuf,
    pub pod_name: String,
    pub namespace: String,
    /// This member's client URL.
    pub endpoint: String,
    pub store: Option<Arc<dyn SnapStore>>,
    pub schedule: Option<gardener::cron::Cron>,
    pub defrag_schedule: Option<gardener::cron::Cron>,
    pub defrag_timeout: Duration,
    pub delta_period: Duration,
    pub delta_memory_limit: usize,
    pub gc_policy: Policy,
    pub gc_period: Duration,
    pub delta_retention: Duration,
    pub compression: Compression,
    pub snapshot_timeout: Duration,
    pub heartbeat: Duration,
    pub reelection_period: Duration,
    pub leases: Option<Leases>,
    pub programs: Programs,
}

/// The initialization state the wrapper polls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitStatus {
    New,
    Progress,
    Successful { cluster_state: &'static str },
    Failed(String),
}

impl InitStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            InitStatus::New => "New",
            InitStatus::Progress => "Progress",
            InitStatus::Successful { .. } => "Successful",
            InitStatus::Failed(_) => "Failed",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("no snapshot store is configured")]
    NoStore,
    #[error("this member does not lead: snapshots are taken by the leader")]
    NotLeader,
    #[error("initialization has not succeeded")]
    NotInitialized,
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("reading {path}: {source}")]
    ReadConfig {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("etcd client: {0}")]
    Etcd(#[from] etcdv3::Error),
}

/// The sidecar of one member.
pub struct Sidecar {
    pub settings: Settings,
    init: Mutex<InitStatus>,
    snapshotter: Option<Arc<Snapshotter>>,
    leading: Mutex<Vec<JoinHandle<()>>>,
    /// The `initial-cluster` of a member that joins a running cluster
    /// ([`crate::join`]); `None`: druid's, as configured.
    joining: Mutex<Option<String>>,
}

impl Sidecar {
    pub fn new(settings: Settings) -> Result<Arc<Sidecar>, SidecarError> {
        let snapshotter = match &settings.store {
            Some(store) => Some(Arc::new(Snapshotter::new(
                etcdv3::Client::single(&settings.endpoint, None)?,
                store.clone(),
                settings.compression,
                settings.temp_dir.clone(),
                settings.snapshot_timeout,
            ))),
            None => None,
        };
        Ok(Arc::new(Sidecar {
            settings,
            init: Mutex::new(InitStatus::New),
            snapshotter,
            leading: Mutex::new(Vec::new()),
            joining: Mutex::new(None),
        }))
    }

    pub async fn init_status(&self) -> InitStatus {
        self.init.lock().await.clone()
    }

    async fn read_config(&self) -> Result<String, SidecarError> {
        let p = &self.settings.config_path;
        tokio::fs::read_to_string(p)
            .await
            .map_err(|source| SidecarError::ReadConfig {
                path: p.display().to_string(),
                source,
            })
    }

    /// `/config`: this member's etcd configuration.
    pub async fn member_config(&self) -> Result<String, SidecarError> {
        let state = match self.init_status().await {
            InitStatus::Successful { cluster_state } => cluster_state,
            _ => return Err(SidecarError::NotInitialized),
        };
        let yaml = self.read_config().await?;
        let config = crate::config::member_config(&yaml, &self.settings.pod_name, state)?;
        match self.joining.lock().await.as_deref() {
            Some(initial) => crate::join::with_initial_cluster(&config, initial)
                .map_err(|e| SidecarError::Config(crate::config::ConfigError::Parse(e))),
            None => Ok(config),
        }
    }

    /// `/initialization/start`: starts initialization unless it runs or
    /// has succeeded.
    pub async fn start_initialization(self: &Arc<Self>, mode: &str) {
        {
            let mut s = self.init.lock().await;
            if matches!(*s, InitStatus::Progress | InitStatus::Successful { .. }) {
                return;
            }
            *s = InitStatus::Progress;
        }
        let me = self.clone();
        let mode = mode.to_string();
        tokio::spawn(async move {
            let result = me.initialize(&mode).await;
            let status = match result {
                Ok(state) => InitStatus::Successful {
                    cluster_state: state,
                },
                Err(why) => {
                    tracing::error!(%why, "initialization failed");
                    InitStatus::Failed(why)
                }
            };
            *me.init.lock().await = status;
        });
    }

    /// Validates the data directory and restores it when needed; returns
    /// the `initial-cluster-state` etcd starts with.
    pub async fn initialize(&self, mode: &str) -> Result<&'static str, String> {
        let s = &self.settings;
        let yaml = self.read_config().await.map_err(|e| e.to_string())?;
        let multi = crate::config::member_count(&yaml) > 1;
        let dir = validate::check(&validate::observe(&s.data_dir), &s.namespace);
        let backups = match &s.store {
            Some(store) => store
                .list()
                .await
                .map_err(|e| e.to_string())?
                .iter()
                .any(|x| x.kind == Kind::Full),
            None => false,
        };
        // A member of a larger cluster asks the others what they know of
        // it: nothing (a scale-out), or an old self.
        let (cluster, peers, peer_url) = match crate::join::addresses(&yaml, &s.pod_name) {
            Some((peer_url, others)) if multi => {
                let peers = crate::join::Peers::new(&others);
                let view = match peers.members().await {
                    Some(list) => crate::join::view(&list, &peer_url),
                    None => ClusterView::Unreachable,
                };
                (view, Some(peers), peer_url)
            }
            _ => (ClusterView::Unreachable, None, String::new()),
        };
        let facts = InitFacts {
            dir: dir.clone(),
            multi_member: multi,
            backups,
            cluster,
            ran_before: false,
        };
        let action = init::plan(&facts);
        tracing::info!(mode, ?dir, ?action, "initializing");
        let state = match action {
            InitAction::Refuse(why) | InitAction::Retry(why) => return Err(why),
            InitAction::Start(state) => state,
            InitAction::WipeAndStart(state) => {
                if state == init::ClusterState::Existing
                    && let Some(list) = match &peers {
                        Some(p) => p.members().await,
                        None => None,
                    }
                {
                    *self.joining.lock().await =
                        Some(crate::join::initial_cluster(&list, &s.pod_name));
                }
                let _ = tokio::fs::remove_dir_all(&s.data_dir).await;
                state
            }
            InitAction::Restore => {
                let store = s.store.as_ref().ok_or("restore without a store")?;
                let pod = &s.pod_name;
                let peer = crate::config::member_config(&yaml, pod, "new")
                    .ok()
                    .and_then(|c| crate::config::field(&c, "initial-advertise-peer-urls"))
                    .unwrap_or_default();
                let member = restore::Member {
                    name: pod.clone(),
                    initial_cluster: crate::config::field(&yaml, "initial-cluster")
                        .unwrap_or_default(),
                    initial_cluster_token: crate::config::field(&yaml, "initial-cluster-token")
                        .unwrap_or_else(|| "etcd-cluster".into()),
                    initial_advertise_peer_urls: peer,
                };
                let restore_dir = s.temp_dir.join("restore");
                restore::restore(
                    store.as_ref(),
                    &s.data_dir,
                    &restore_dir,
                    &member,
                    &s.programs,
                )
                .await
                .map_err(|e| e.to_string())?;
                init::ClusterState::New
            }
            InitAction::JoinAsLearner { remove_first } => {
                let peers = peers.ok_or("no other member to join")?;
                if remove_first {
                    peers.remove(&peer_url).await?;
                }
                let mut attempt = 1;
                let list = loop {
                    match peers.add_learner(&peer_url).await {
                        Ok(list) => break list,
                        Err(e) if attempt < crate::join::ADD_ATTEMPTS => {
                            tracing::warn!(attempt, error = %e, "adding this member as a learner failed; retrying");
                            attempt += 1;
                            tokio::time::sleep(crate::join::ADD_PAUSE).await;
                        }
                        Err(e) => return Err(e),
                    }
                };
                tracing::info!(peer = %peer_url, "added as a learner: joining the running cluster");
                *self.joining.lock().await = Some(crate::join::initial_cluster(&list, &s.pod_name));
                let _ = tokio::fs::remove_dir_all(&s.data_dir).await;
                init::ClusterState::Existing
            }
        };
        validate::write_safe_guard(&s.data_dir, &s.namespace).map_err(|e| e.to_string())?;
        Ok(state.as_str())
    }

    fn snapshotter(&self) -> Result<&Arc<Snapshotter>, SidecarError> {
        self.snapshotter.as_ref().ok_or(SidecarError::NoStore)
    }

    async fn is_leading(&self) -> bool {
        !self.leading.lock().await.is_empty()
    }

    /// `/snapshot/full`.
    pub async fn full_snapshot(&self, is_final: bool) -> Result<Snapshot, SidecarError> {
        let snap = self.snapshotter()?.full(is_final).await?;
        self.record(&snap).await;
        Ok(snap)
    }

    /// `/snapshot/delta`.
    pub async fn delta_snapshot(&self) -> Result<Option<Snapshot>, SidecarError> {
        if !self.is_leading().await {
            return Err(SidecarError::NotLeader);
        }
        let snap = self.snapshotter()?.flush_delta().await?;
        if let Some(s) = &snap {
            self.record(s).await;
        }
        Ok(snap)
    }

    pub async fn latest(&self) -> Result<crate::snapshotter::Latest, SidecarError> {
        Ok(self.snapshotter()?.latest().await)
    }

    async fn record(&self, snap: &Snapshot) {
        if let Some(l) = &self.settings.leases
            && let Err(e) = l.record_snapshot(snap).await
        {
            tracing::warn!(error = %e, name = %snap.name(), "could not update the snapshot lease");
        }
    }

    /// This member's role, from its etcd's status.
    async fn role(&self, client: &etcdv3::Client) -> Result<(Role, u64, u64, bool), etcdv3::Error> {
        let st = client.status().await?;
        let h = st.header.unwrap_or_default();
        let role = if st.leader == h.member_id {
            Role::Leader
        } else {
            Role::Member
        };
        Ok((role, h.member_id, h.cluster_id, st.is_learner))
    }

    /// A learner asks the voting members to promote it; they refuse until
    /// it caught up with the leader, so this runs every heartbeat.
    async fn promote(&self, id: u64) {
        let Ok(yaml) = self.read_config().await else {
            return;
        };
        let Some((_, others)) = crate::join::addresses(&yaml, &self.settings.pod_name) else {
            return;
        };
        match crate::join::Peers::new(&others).promote(id).await {
            Ok(()) => {
                tracing::info!(member = %format!("{id:x}"), "promoted from learner to voting member")
            }
            Err(e) => tracing::debug!(error = %e, "not promoted yet"),
        }
    }

    /// Runs until the process ends: renews the member lease every
    /// heartbeat and, while this member leads, the snapshot loops.
    pub async fn run(self: Arc<Self>) {
        let s = &self.settings;
        let client = match etcdv3::Client::single(&s.endpoint, None) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "bad etcd endpoint");
                return;
            }
        };
        let mut tick = tokio::time::interval(s.heartbeat.min(s.reelection_period));
        loop {
            tick.tick().await;
            if !matches!(self.init_status().await, InitStatus::Successful { .. }) {
                continue;
            }
            let (role, id, cluster, learner) = match self.role(&client).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(error = %e, "etcd not answering yet");
                    self.stop_leading().await;
                    continue;
                }
            };
            if learner {
                self.promote(id).await;
            }
            if let Some(l) = &s.leases {
                let holder = crate::lease::holder_identity(id, cluster, role);
                // What druid waits for while peer TLS changes: whether this
                // member's configuration has it.
                let peer_tls = self
                    .read_config()
                    .await
                    .ok()
                    .is_some_and(|y| crate::config::peer_tls(&y));
                if let Err(e) = l.renew_member(&holder, peer_tls).await {
                    tracing::warn!(error = %e, "could not renew the member lease");
                }
            }
            match role {
                Role::Leader if !self.is_leading().await => self.start_leading().await,
                Role::Member if self.is_leading().await => self.stop_leading().await,
                _ => {}
            }
        }
    }

    async fn stop_leading(&self) {
        for h in self.leading.lock().await.drain(..) {
            h.abort();
        }
    }

    async fn start_leading(self: &Arc<Self>) {
        let Ok(snapper) = self.snapshotter().cloned() else {
            // No store: a leader without backups has nothing to run, but
            // counts as leading for `/snapshot/delta`'s answer.
            self.leading.lock().await.push(tokio::spawn(async {}));
            return;
        };
        tracing::info!("leading: starting snapshots");
        let mut tasks = Vec::new();
        // Snapshots: a full first unless the store's newest set is usable.
        let me = self.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = snapper.load().await {
                tracing::warn!(error = %e, "could not list the store");
            }
            let latest = snapper.latest().await;
            let stale = full_due_at_start(
                latest.full.as_ref(),
                me.settings.schedule.as_ref(),
                chrono::Utc::now(),
            );
            if stale && let Err(e) = me.full_snapshot(false).await {
                tracing::warn!(error = %e, "initial full snapshot failed");
            }
            let s = &me.settings;
            loop {
                if s.delta_period >= Duration::from_secs(1) {
                    let lease_loop = me.clone();
                    let renew = tokio::spawn(async move { lease_loop.renew_delta_lease().await });
                    let watched = snapper
                        .run_deltas(s.delta_period, s.delta_memory_limit)
                        .await;
                    renew.abort();
                    if let Err(e) = watched {
                        tracing::warn!(error = %e, "delta snapshots stopped; a full snapshot, then again");
                        let _ = me.full_snapshot(false).await;
                    }
                } else {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
        if let Some(cron) = self.settings.schedule.clone() {
            let me = self.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let now = chrono::Utc::now();
                    let Some(next) = cron.next_after(now, chrono_tz::Tz::UTC) else {
                        return;
                    };
                    let wait = (next - now).to_std().unwrap_or_default();
                    tokio::time::sleep(wait).await;
                    if let Err(e) = me.full_snapshot(false).await {
                        tracing::warn!(error = %e, "scheduled full snapshot failed");
                    }
                }
            }));
        }
        if let Some(cron) = self.settings.defrag_schedule.clone() {
            let me = self.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let now = chrono::Utc::now();
                    let Some(next) = cron.next_after(now, chrono_tz::Tz::UTC) else {
                        return;
                    };
                    tokio::time::sleep((next - now).to_std().unwrap_or_default()).await;
                    me.defragment().await;
                }
            }));
        }
        if self.settings.gc_period > Duration::from_secs(1) {
            let me = self.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(me.settings.gc_period).await;
                    me.collect_garbage().await;
                }
            }));
        }
        *self.leading.lock().await = tasks;
    }

    /// Renews the delta-snapshot Lease every delta period, so druid sees
    /// deltas are taken even when nothing was written.
    async fn renew_delta_lease(self: Arc<Self>) {
        let Some(l) = &self.settings.leases else {
            return;
        };
        loop {
            let last = self.latest().await.ok().and_then(|l| l.delta.clone());
            if let Err(e) = l.renew_delta_idle(last.as_ref()).await {
                tracing::debug!(error = %e, "could not renew the delta-snapshot lease");
            }
            tokio::time::sleep(self.settings.delta_period).await;
        }
    }

    /// One defragmentation run over the cluster, then a full snapshot.
    pub async fn defragment(&self) {
        let client = match etcdv3::Client::single(&self.settings.endpoint, None) {
            Ok(c) => c,
            Err(e) => return tracing::warn!(error = %e, "defragmentation: bad endpoint"),
        };
        match crate::defrag::defragment_all(&client, self.settings.defrag_timeout).await {
            Ok(_) => {
                if self.snapshotter.is_some()
                    && let Err(e) = self.full_snapshot(false).await
                {
                    tracing::warn!(error = %e, "full snapshot after defragmentation failed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "defragmentation stopped"),
        }
    }

    /// One garbage collection pass.
    pub async fn collect_garbage(&self) -> usize {
        let Some(store) = &self.settings.store else {
            return 0;
        };
        let snaps = match store.list().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "garbage collection could not list the store");
                return 0;
            }
        };
        let now = chrono::Utc::now().timestamp();
        let doomed = gc::garbage(
            &snaps,
            self.settings.gc_policy,
            self.settings.delta_retention.as_secs() as i64,
            now,
        );
        let mut n = 0;
        for s in doomed {
            match store.delete(&s).await {
                Ok(()) => n += 1,
                Err(e) => tracing::warn!(error = %e, name = %s.name(), "could not delete"),
            }
        }
        n
    }
}

/// Whether a new leader takes a full snapshot before its deltas: when the
/// store has none, when the newest is final (the member stopped after it,
/// so deltas would start from a stale point), or when the schedule fired
/// since it was taken (a scheduled snapshot was missed). Pure.
pub fn full_due_at_start(
    latest: Option<&Snapshot>,
    schedule: Option<&gardener::cron::Cron>,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    let Some(full) = latest else { return true };
    if full.is_final {
        return true;
    }
    let Some(cron) = schedule else { return false };
    let taken = chrono::DateTime::from_timestamp(full.created, 0).unwrap_or_default();
    cron.next_after(taken, chrono_tz::Tz::UTC)
        .is_some_and(|next| next <= now)
}

/// The HTTP API (`br:pkg/server/httpAPI.go`).
pub fn router(sidecar: Arc<Sidecar>) -> axum::Router {
    use axum::extract::{Query, State};
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use std::collections::HashMap;

    type St = State<Arc<Sidecar>>;
    type Q = Query<HashMap<String, String>>;

    fn err(e: SidecarError) -> Response {
        let code = match e {
            SidecarError::NoStore | SidecarError::NotLeader | SidecarError::NotInitialized => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (code, e.to_string()).into_response()
    }

    axum::Router::new()
        .route(
            "/healthz",
            get(|State(s): St| async move {
                let failed = matches!(s.init_status().await, InitStatus::Failed(_));
                axum::Json(serde_json::json!({"health": !failed}))
            }),
        )
        .route(
            "/initialization/status",
            get(|State(s): St| async move { s.init_status().await.as_str() }),
        )
        .route(
            "/initialization/start",
            get(|State(s): St, Query(q): Q| async move {
                let mode = q.get("mode").map_or("sanity", String::as_str).to_string();
                s.start_initialization(&mode).await;
                StatusCode::OK
            }),
        )
        .route(
            "/config",
            get(|State(s): St| async move {
                match s.member_config().await {
                    Ok(c) => c.into_response(),
                    Err(e) => err(e),
                }
            }),
        )
        .route(
            "/snapshot/full",
            get(|State(s): St, Query(q): Q| async move {
                let is_final = q.get("final").is_some_and(|v| v == "true");
                match s.full_snapshot(is_final).await {
                    Ok(snap) => axum::Json(crate::snapshotter::describe(&snap)).into_response(),
                    Err(e) => err(e),
                }
            }),
        )
        .route(
            "/snapshot/delta",
            get(|State(s): St| async move {
                match s.delta_snapshot().await {
                    Ok(Some(snap)) => {
                        axum::Json(crate::snapshotter::describe(&snap)).into_response()
                    }
                    Ok(None) => (StatusCode::OK, "no events since the last snapshot").into_response(),
                    Err(e) => err(e),
                }
            }),
        )
        .route(
            "/snapshot/latest",
            get(|State(s): St| async move {
                match s.latest().await {
                    Ok(l) => axum::Json(serde_json::json!({
                        "fullSnapshot": l.full.as_ref().map(crate::snapshotter::describe),
                        "deltaSnapshots": l.delta.as_ref().map(crate::snapshotter::describe).into_iter().collect::<Vec<_>>(),
                    }))
                    .into_response(),
                    Err(e) => err(e),
                }
            }),
        )
        .with_state(sidecar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_leader_takes_a_full_when_none_is_usable() {
        let hourly = gardener::cron::Cron::parse("0 */1 * * *").unwrap();
        let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        let full = |t: &str, is_final: bool| Snapshot {
            is_final,
            ..Snapshot::full(10, at(t).timestamp(), Compression::None)
        };
        let now = at("2026-01-01T10:30:00Z");
        for (latest, schedule, want) in [
            (None, Some(&hourly), true),
            (
                Some(full("2026-01-01T10:10:00Z", true)),
                Some(&hourly),
                true,
            ),
            // Taken after the last firing (10:00): deltas can go on.
            (
                Some(full("2026-01-01T10:10:00Z", false)),
                Some(&hourly),
                false,
            ),
            // The 10:00 snapshot was missed.
            (
                Some(full("2026-01-01T09:50:00Z", false)),
                Some(&hourly),
                true,
            ),
            (Some(full("2025-01-01T09:50:00Z", false)), None, false),
        ] {
            assert_eq!(
                full_due_at_start(latest.as_ref(), schedule, now),
                want,
                "{latest:?}"
            );
        }
    }
}
