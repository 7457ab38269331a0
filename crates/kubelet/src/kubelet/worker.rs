//! A pod's worker: one task per pod bound to this node, looping over
//! [`sync`] — observe (the Pod, its attempts on disk, probe results,
//! volumes and environment sources), ask [`crate::plan`] what to do, do it
//! through the runtime, post the status the plan computed — and sleeping
//! until the pod changes, a container exits or the plan's next timer.
//! Also the pod's sandbox: its IP, and its hosts and hostname files.

use super::*;

/// The worker's own memory of a pod (probe states, stops in flight, what
/// it posted last); rebuilt from scratch after a restart.
#[derive(Default)]
struct Memory {
    probes: HashMap<(String, u32), Probes>,
    stopping: HashSet<(String, u32)>,
    watched: HashSet<(String, u32)>,
    last_status: Option<serde_json::Value>,
    reported: HashSet<String>,
    last_hosts: String,
    sources_at: Option<std::time::Instant>,
    sources: Sources,
    volumes: Option<Result<BTreeMap<String, Ready>, Blocked>>,
    token: crate::serviceaccount::State,
}

/// One pod's worker.
pub(super) async fn worker(shared: Arc<Shared>, entry: Arc<Entry>) {
    let mut mem = Memory::default();
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let next = match sync(&shared, &entry, &mut mem).await {
            Some(d) => d,
            None => break,
        };
        tokio::select! {
            _ = entry.wake.notified() => {},
            _ = tokio::time::sleep(next) => {},
        }
    }
    shared.pods.lock().remove(&entry.uid);
}

/// The pod's IP: the recorded one, or a new one from the range.
fn sandbox(shared: &Shared, pod: &Pod, uid: &str) -> Result<PodRecord, String> {
    let dir = shared.rt.layout.pod(uid);
    if let Some(r) = state::read_json::<PodRecord>(&dir, state::POD) {
        return Ok(r);
    }
    let _guard = shared.ips.lock();
    let used: std::collections::BTreeSet<Ipv4Addr> = shared
        .rt
        .pod_uids()
        .iter()
        .filter_map(|u| state::read_json::<PodRecord>(&shared.rt.layout.pod(u), state::POD))
        .filter_map(|r| r.ip.parse().ok())
        .collect();
    let ip = crate::ipam::allocate(shared.cfg.pod_range, &used, uid)
        .ok_or("no free pod IP in the range")?;
    std::fs::create_dir_all(dir.join("tmp")).map_err(|e| e.to_string())?;
    let record = PodRecord {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: uid.to_string(),
        ip: ip.to_string(),
    };
    state::write_json(&dir, state::POD, &record).map_err(|e| e.to_string())?;
    Ok(record)
}

fn pod_files(shared: &Shared, uid: &str) -> PodFiles {
    let dir = shared.rt.layout.pod(uid);
    PodFiles {
        hosts: dir.join("hosts"),
        hostname: dir.join("hostname"),
        tmp: dir.join("tmp"),
    }
}

/// Writes the pod's hosts and hostname files when they changed.
fn write_names(shared: &Shared, pod: &Pod, record: &PodRecord, mem: &mut Memory) {
    let me = PodName {
        namespace: record.namespace.clone(),
        hostname: crate::launch::hostname(pod),
        subdomain: pod
            .spec
            .as_ref()
            .and_then(|s| s.subdomain.clone())
            .filter(|s| !s.is_empty()),
        ip: record.ip.clone(),
    };
    let names = shared.names.borrow().clone();
    let text = crate::hosts::render(&me, &names.pods, &names.services);
    if text != mem.last_hosts {
        let files = pod_files(shared, &record.uid);
        let mut all = crate::volumes::Files::new();
        all.insert("hosts".into(), (text.clone().into_bytes(), 0o644));
        all.insert(
            "hostname".into(),
            (format!("{}\n", me.hostname).into_bytes(), 0o644),
        );
        // In place, not renamed: the containers' bind mounts hold the
        // inodes, so a rename would go unseen.
        for (file, (bytes, _)) in [
            (&files.hosts, &all["hosts"]),
            (&files.hostname, &all["hostname"]),
        ] {
            if let Err(e) = std::fs::write(file, bytes) {
                warn!(error = %e, file = %file.display(), "writing a pod file");
            }
        }
        mem.last_hosts = text;
    }
}

/// How often file volumes and the environment sources are re-read while
/// the pod runs (upstream syncs configMap volumes about every minute).
const SOURCES_REFRESH: Duration = Duration::from_secs(60);

/// One pass over a pod; `None` once the pod is finished with.
async fn sync(shared: &Arc<Shared>, entry: &Entry, mem: &mut Memory) -> Option<Duration> {
    let pod = entry.pod.lock().clone();
    let gone = entry.gone.load(Ordering::SeqCst);
    let uid = entry.uid.clone();
    let spec = pod.spec.clone().unwrap_or_default();
    let deleting = gone || pod.metadata.deletion_timestamp.is_some();
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let rt = &shared.rt;
    let containers: Vec<_> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| (c, true))
        .chain(spec.containers.iter().map(|c| (c, false)))
        .collect();

    let mut obs = Observed {
        host_ip: shared.cfg.address.clone(),
        gone,
        ..Observed::default()
    };
    for (c, _) in &containers {
        obs.containers
            .insert(c.name.clone(), rt.container(&uid, &c.name));
        obs.spec_hashes
            .insert(c.name.clone(), crate::launch::spec_hash(c));
    }
    let record = if deleting || finished {
        state::read_json::<PodRecord>(&rt.layout.pod(&uid), state::POD)
    } else {
        match sandbox(shared, &pod, &uid) {
            Ok(r) => Some(r),
            Err(e) => {
                warn!(pod_uid = %uid, error = %e, "pod sandbox");
                None
            }
        }
    };
    obs.pod_ip = record.as_ref().map(|r| r.ip.clone());
    let mut launch: BTreeMap<String, LaunchSpec> = BTreeMap::new();
    if let (Some(record), false, false) = (&record, deleting, finished) {
        write_names(shared, &pod, record, mem);
        let needs_start = containers.iter().any(|(c, _)| {
            !obs.containers[&c.name]
                .current
                .as_ref()
                .is_some_and(|a| a.alive())
        });
        let stale = mem.sources_at.is_none_or(|t| t.elapsed() > SOURCES_REFRESH);
        if needs_start || stale {
            match crate::fetch::sources(shared, &pod, &record.ip).await {
                Ok(src) => {
                    mem.volumes = Some(crate::fetch::volumes(shared, &pod, &uid, &src).await);
                    mem.sources = src;
                    mem.sources_at = Some(std::time::Instant::now());
                }
                Err(e) => warn!(error = %e, "reading the pod's sources"),
            }
        }
        let token =
            crate::serviceaccount::sync(shared, &pod, &uid, &mut mem.token, state::now_ms()).await;
        if let Err(b) = &token
            && mem.reported.insert(format!("token:{}", b.message))
        {
            let note = b.message.clone();
            shared
                .event(&pod, EventType::Warning, "FailedMount", note)
                .await;
        }
        let files = pod_files(shared, &uid);
        for (c, _) in &containers {
            let token_dir = match &token {
                Ok(dir) => dir.as_deref(),
                Err(b) => {
                    obs.blocked.insert(c.name.clone(), b.clone());
                    continue;
                }
            };
            let blocked = match &mem.volumes {
                None => Err(Blocked {
                    reason: "ContainerCreating".into(),
                    message: "waiting for the pod's volumes".into(),
                }),
                Some(Err(b)) => Err(b.clone()),
                Some(Ok(volumes)) => {
                    let inputs = Inputs {
                        images: &shared.cfg.images,
                        sources: &mem.sources,
                        volumes,
                        files: &files,
                        data_dir: &shared.cfg.data_dir,
                        path: &shared.path_env,
                        api_server: shared.cfg.api_server.as_ref(),
                        service_account: token_dir,
                    };
                    crate::launch::launch_spec(&pod, c, &inputs)
                }
            };
            match blocked {
                Ok(s) => {
                    launch.insert(c.name.clone(), s);
                }
                Err(b) => {
                    let key = format!("{}:{}:{}", c.name, b.reason, b.message);
                    if !mem.reported.contains(&key) {
                        let note = if b.reason == "ErrImagePull" {
                            format!(
                                "Failed to pull image {:?}: {}",
                                c.image.as_deref().unwrap_or(""),
                                b.message
                            )
                        } else {
                            format!("Error: {}", b.message)
                        };
                        shared.event(&pod, EventType::Warning, "Failed", note).await;
                        mem.reported.insert(key);
                    }
                    obs.blocked.insert(c.name.clone(), b);
                }
            }
        }
    }

    // Probes of running attempts.
    let now = state::now_ms();
    for (c, init) in &containers {
        let rtc = &obs.containers[&c.name];
        let verdict = match rtc.current.as_ref() {
            Some(a) if matches!(a.state, AttemptState::Running { .. }) && !init => mem
                .probes
                .entry((c.name.clone(), a.index))
                .or_default()
                .verdict(c),
            _ => crate::view::ProbeView::default(),
        };
        obs.probes.insert(c.name.clone(), verdict);
    }

    let plan = crate::plan::plan(&pod, &obs, now);

    // Act.
    for action in &plan.actions {
        if shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        match action {
            Action::Start {
                container, restart, ..
            } => {
                let Some(spec) = launch.get(container) else {
                    continue;
                };
                let rtc = &obs.containers[container];
                let index = rtc.current.as_ref().map_or(0, |a| a.index + 1);
                if let Some(finished_ms) = restart {
                    let _ = rt.save_backoff(&uid, container, &rtc.backoff.next(*finished_ms));
                }
                match rt.start(&uid, container, index, spec) {
                    Ok(_) => {
                        rt.prune(&uid, container);
                        shared
                            .event(
                                &pod,
                                EventType::Normal,
                                "Started",
                                format!("Started container {container}"),
                            )
                            .await;
                    }
                    Err(e) => {
                        warn!(pod_uid = %uid, %container, error = %e, "starting a container");
                        shared
                            .event(
                                &pod,
                                EventType::Warning,
                                "Failed",
                                format!("Error: starting container {container}: {e}"),
                            )
                            .await;
                    }
                }
                entry.wake.notify_one();
            }
            Action::Kill {
                container,
                grace_secs,
                reason,
            } => {
                let Some(cur) = obs.containers[container].current.as_ref() else {
                    continue;
                };
                let key = (container.clone(), cur.index);
                if !mem.stopping.insert(key) {
                    continue;
                }
                let note = match reason {
                    KillReason::Unhealthy => {
                        format!("Container {container} failed liveness probe, will be restarted")
                    }
                    KillReason::Changed => {
                        format!("Container {container} definition changed, will be restarted")
                    }
                    KillReason::PodDeleted => format!("Stopping container {container}"),
                };
                shared.event(&pod, EventType::Normal, "Killing", note).await;
                let (rt2, uid2, name2, index, grace) = (
                    rt.clone(),
                    uid.clone(),
                    container.clone(),
                    cur.index,
                    *grace_secs,
                );
                tokio::spawn(async move { stop_attempt(&rt2, &uid2, &name2, index, grace).await });
            }
        }
    }
    for (name, left) in &plan.backing_off {
        let index = obs.containers[name].current.as_ref().map_or(0, |a| a.index);
        let key = format!("backoff:{name}:{index}");
        if mem.reported.insert(key) {
            shared
                .event(
                    &pod,
                    EventType::Warning,
                    "BackOff",
                    format!(
                        "Back-off restarting failed container {name} in pod {}_{}({uid}) for {}",
                        pod.metadata.name.as_deref().unwrap_or(""),
                        pod.metadata.namespace.as_deref().unwrap_or(""),
                        crate::plan::human(*left)
                    ),
                )
                .await;
        }
    }

    // Watch every live attempt's shim, so its end wakes this worker.
    for (c, _) in &containers {
        if let Some(a) = rt.container(&uid, &c.name).current.filter(|a| a.alive()) {
            let key = (c.name.clone(), a.index);
            if mem.watched.insert(key)
                && let Some(shim) = rt.shim_of(&uid, &c.name, a.index)
            {
                let e = shared.pods.lock().get(&uid).cloned();
                tokio::spawn(async move {
                    crate::runtime::exited(shim).await;
                    if let Some(e) = e {
                        e.wake.notify_one();
                    }
                });
            }
        }
    }

    let pods: Api<Pod> = Api::namespaced(
        shared.client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or(""),
    );
    let name = pod.metadata.name.clone().unwrap_or_default();
    if plan.terminated {
        if !gone {
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match pods.delete(&name, &dp).await {
                Ok(_) => {}
                Err(e) if matches!(api_code(&e), Some(404 | 409)) => {}
                Err(e) => {
                    warn!(error = %e, "finishing the deletion of a pod");
                    return Some(Duration::from_secs(2));
                }
            }
        }
        rt.remove_pod(&uid);
        return None;
    }

    // Status, when it changed.
    if !gone {
        let body = json!({ "status": plan.status });
        if mem.last_status.as_ref() != Some(&body) {
            match pods
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Strategic(body.clone()),
                )
                .await
            {
                Ok(_) => mem.last_status = Some(body),
                Err(e) if api_code(&e) == Some(404) => {}
                Err(e) => {
                    warn!(error = %Error::StatusFailed { pod: format!("{}/{name}", pod.metadata.namespace.as_deref().unwrap_or("")), source: e }, "pod status")
                }
            }
        }
    }

    // Probes due now run; the verdicts change the next pass.
    let mut next = plan
        .wake_in
        .unwrap_or(shared.cfg.resync)
        .min(shared.cfg.resync);
    let mut probed = false;
    for (c, init) in &containers {
        if *init {
            continue;
        }
        let Some(a) = obs.containers[&c.name].current.as_ref() else {
            continue;
        };
        let AttemptState::Running { started_ms } = a.state else {
            continue;
        };
        let key = (c.name.clone(), a.index);
        let probes = mem.probes.entry(key.clone()).or_default().clone();
        let (due, wait) = probes.due(c, started_ms, now);
        if let Some(w) = wait {
            next = next.min(w);
        }
        if due.is_empty() {
            continue;
        }
        let init_id = rt.init_of(&uid, &c.name, a.index);
        let spec =
            state::read_json::<LaunchSpec>(&rt.layout.attempt(&uid, &c.name, a.index), state::SPEC)
                .unwrap_or_default();
        let ip = obs.pod_ip.clone().unwrap_or_default();
        let mut updated = probes.clone();
        for kind in due {
            let Some(p) = crate::probe::probe_of(c, kind) else {
                continue;
            };
            let timing = Timing::of(p);
            let check = crate::probe::check(p, c, &ip);
            let result = crate::prober::run(&check, timing.timeout, init_id, &spec).await;
            if let Err(msg) = &result {
                let key = format!("probe:{}:{}:{}", c.name, a.index, kind.as_str());
                if mem.reported.insert(key) {
                    shared
                        .event(
                            &pod,
                            EventType::Warning,
                            "Unhealthy",
                            format!("{} probe failed: {msg}", kind.as_str()),
                        )
                        .await;
                }
            }
            let before = updated.get(kind).result;
            updated.set(
                kind,
                updated
                    .get(kind)
                    .observe(&timing, result.is_ok(), state::now_ms()),
            );
            if updated.get(kind).result != before {
                probed = true;
            }
        }
        let (_, wait) = updated.due(c, started_ms, state::now_ms());
        if let Some(w) = wait {
            next = next.min(w);
        }
        mem.probes.insert(key, updated);
    }
    if probed {
        next = Duration::ZERO;
    }
    Some(next.max(Duration::from_millis(50)))
}
