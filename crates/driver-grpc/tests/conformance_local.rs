//! The driver conformance kit against the local provider over gRPC: the
//! kit calls the machine-controller-manager's router, which sends every
//! call over a real connection on loopback to the provider SDK serving a
//! `LocalProvider` (on an embedded API server, fresh per check). Faults
//! are armed on the provider itself, so the kit sees every code cross the
//! wire both ways.

mod common;

use std::sync::Arc;

use driver::conformance::Subject;
use driver_grpc::RouterConfig;
use provider_local::LocalProvider;
use serde_json::json;

async fn subject() -> Subject {
    let srv = testkit::bare_cluster().await;
    let provider = LocalProvider::with_config(
        srv.client(),
        srv.client(),
        "conformance",
        testkit::sim::fast(),
    )
    .await
    .expect("provider starts");
    let mcm = common::mcm(RouterConfig::default()).await;
    let session = mcm.connect(Arc::new(provider.clone()), &["local"]).await;
    // The cluster, the server and the provider's session live as long as
    // the test's runtime.
    tokio::spawn(async move {
        let _keep = (srv, session);
        std::future::pending::<()>().await
    });
    let tagged = |cluster: &str| {
        json!({"zone": "zone-a", "tags": {
            format!("kubernetes.io/cluster/{cluster}"): "1",
            "kubernetes.io/role/node": "1",
        }})
    };
    let router = mcm.router.clone();
    tokio::spawn(async move {
        let _keep = mcm;
        std::future::pending::<()>().await
    });
    Subject {
        faults: provider.failpoints(),
        driver: Arc::new(router),
        classes: [
            common::class("class-a", "local", tagged("cluster-a")),
            common::class("class-b", "local", tagged("cluster-b")),
        ],
    }
}

driver::driver_conformance_tests!(|| async { subject().await });
