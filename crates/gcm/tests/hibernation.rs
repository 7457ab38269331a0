//! The hibernation schedule controller against the embedded API server,
//! with a clock the test moves: a schedule's start hibernates the shoot,
//! its end wakes it, each applied once and recorded.

mod common;

use std::sync::Arc;

use chrono::{DateTime, Duration, Timelike, Utc};
use common::*;
use gardener::Shoot;
use kube::api::{Patch, PatchParams};
use parking_lot::Mutex;
use serde_json::json;

fn daily_at(t: DateTime<Utc>) -> String {
    format!("{} {} * * *", t.minute(), t.hour())
}

fn enabled(s: &Shoot) -> Option<bool> {
    s.spec.hibernation.as_ref().and_then(|h| h.enabled)
}

fn trigger_time(s: &Shoot) -> Option<DateTime<Utc>> {
    s.status
        .as_ref()
        .and_then(|st| st.last_hibernation_trigger_time)
        .map(|t| t.0)
}

#[tokio::test]
async fn schedules_hibernate_and_wake_the_shoot_once_each() {
    let client = server().await;
    let real = Utc::now();
    let clock = Arc::new(Mutex::new(real + Duration::hours(1)));
    let read = clock.clone();
    let running = start(
        &client,
        gcm::Config {
            clock: gcm::Clock::new(move || *read.lock()),
            ..Default::default()
        },
    );
    create(
        &cloud_profiles(&client),
        cloud_profile("local", vec![version("1.0.0")], "major"),
    )
    .await;
    // Created now; hibernates daily at now+30m and wakes at now+90m, so at
    // the clock's now+1h the start has come and the end has not.
    let mut s = shoot(
        "web",
        json!({"kind": "CloudProfile", "name": "local"}),
        "1.0.0",
        None,
    );
    s["spec"]["hibernation"] = json!({"schedules": [{
        "start": daily_at(real + Duration::minutes(30)),
        "end": daily_at(real + Duration::minutes(90)),
        "location": "UTC",
    }]});
    create(&shoots(&client), s).await;
    let api = shoots(&client);

    eventually("the start to hibernate the shoot", 10, async || {
        let s = api.get("web").await.unwrap();
        enabled(&s) == Some(true) && trigger_time(&s).is_some()
    })
    .await;
    let first = api.get("web").await.unwrap();
    let recorded = trigger_time(&first).unwrap();
    assert!(
        (recorded - (real + Duration::hours(1))).num_seconds().abs() <= 1,
        "the trigger is recorded at the controller's now: {recorded}"
    );
    eventually("the HibernationScheduled event", 10, async || {
        events_of(&client, "web")
            .await
            .iter()
            .any(|(t, reason, _)| t == "Normal" && reason == "HibernationScheduled")
    })
    .await;

    // Woken by hand within the window: not overruled while no new trigger
    // comes (a change of the shoot makes the controller look again).
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"hibernation": {"enabled": false}}})),
    )
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let by_hand = api.get("web").await.unwrap();
    assert_eq!(enabled(&by_hand), Some(false), "the manual wake-up stands");
    assert_eq!(trigger_time(&by_hand), Some(recorded));

    // Hibernated by hand again, then the end comes: woken by the schedule.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"hibernation": {"enabled": true}}})),
    )
    .await
    .unwrap();
    *clock.lock() = real + Duration::hours(2);
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"touch": "1"}}})),
    )
    .await
    .unwrap();
    eventually("the end to wake the shoot", 10, async || {
        let s = api.get("web").await.unwrap();
        enabled(&s) == Some(false) && trigger_time(&s) > Some(recorded)
    })
    .await;

    running.stop().await;
}
