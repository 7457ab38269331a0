//! The driver conformance kit against the local provider, on the embedded
//! API server: every check, including the fault-injected error codes, with
//! a fresh server and provider per check. The two classes belong to two
//! clusters through their `kubernetes.io/cluster/<name>` tags.

mod common;

use std::sync::Arc;

use driver::conformance::Subject;
use provider_local::LocalProvider;
use serde_json::json;

async fn subject() -> Subject {
    let srv = common::start().await;
    let provider =
        LocalProvider::with_config(srv.client(), srv.client(), "conformance", common::fast())
            .await
            .expect("provider starts");
    let tagged = |cluster: &str| {
        json!({"zone": "zone-a", "tags": {
            format!("kubernetes.io/cluster/{cluster}"): "1",
            "kubernetes.io/role/node": "1",
        }})
    };
    Subject {
        faults: provider.failpoints(),
        driver: Arc::new(provider),
        classes: [
            common::class("class-a", tagged("cluster-a")),
            common::class("class-b", tagged("cluster-b")),
        ],
    }
}

driver::driver_conformance_tests!(|| async { subject().await });
