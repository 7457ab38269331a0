//! The router and the SDK over real gRPC connections on loopback: calls
//! reach the provider registered for the class's `provider`; a class
//! nobody serves answers `Unavailable` (retried soon, like any transient
//! error) until a provider registers; a provider that disconnects mid-call
//! fails the call over and, once back, the retried create finds the VM
//! instead of making a second; classes and secrets are fetched once per
//! version; a provider reads only what was sent to it; hung and panicking
//! drivers and malformed answers map to codes; TLS with client
//! certificates.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Memory, class, in_cluster, machine};
use driver::conformance::ClassFixture;
use driver::*;
use driver_grpc::pb;
use driver_grpc::pb::machine_driver_client::MachineDriverClient;
use driver_grpc::provider::Registration;
use driver_grpc::tls::{ClientTls, ServerTls};
use driver_grpc::{RouterConfig, SESSION_HEADER};
use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;

async fn create(
    d: &dyn Driver,
    c: &ClassFixture,
    name: &str,
) -> Result<CreateMachineResponse, DriverError> {
    let m = machine(name, c);
    d.create_machine(CreateMachineRequest {
        machine: &m,
        machine_class: &c.machine_class,
        secret: &c.secret,
    })
    .await
}

async fn list(d: &dyn Driver, c: &ClassFixture) -> Vec<String> {
    let r = d
        .list_machines(ListMachinesRequest {
            machine_class: &c.machine_class,
            secret: &c.secret,
        })
        .await
        .expect("list");
    r.machine_list.into_values().collect()
}

#[tokio::test]
async fn calls_reach_the_provider_of_the_class() {
    let mcm = common::mcm(RouterConfig::default()).await;
    let (alpha, beta) = (
        Arc::new(Memory::new("alpha")),
        Arc::new(Memory::new("beta")),
    );
    let _a = mcm.connect(alpha.clone(), &["alpha"]).await;
    let _b = mcm.connect(beta.clone(), &["beta", "beta-legacy"]).await;
    let (ca, cb, cb2) = (
        class("ca", "alpha", in_cluster("one")),
        class("cb", "beta", in_cluster("one")),
        class("cb2", "beta-legacy", in_cluster("two")),
    );
    let r = &mcm.router;
    let a1 = create(r, &ca, "a1").await.expect("create a1");
    assert!(a1.provider_id.starts_with("alpha:///"), "{a1:?}");
    create(r, &cb, "b1").await.expect("create b1");
    create(r, &cb2, "b2").await.expect("create b2");
    assert_eq!(alpha.vms().len(), 1);
    assert_eq!(beta.vms().len(), 2, "one session serves both of its names");
    assert_eq!(list(r, &ca).await, ["a1"]);
    assert_eq!(list(r, &cb).await, ["b1"]);

    // GetVolumeIDs names no class: every provider is asked, each claims
    // its own volumes.
    let csi = |driver: &str, handle: &str| PersistentVolumeSpec {
        csi: Some(CSIPersistentVolumeSource {
            driver: driver.into(),
            volume_handle: handle.into(),
            ..CSIPersistentVolumeSource::default()
        }),
        ..PersistentVolumeSpec::default()
    };
    let specs = [csi("alpha", "va"), csi("beta", "vb"), csi("nfs", "vn")];
    let mut ids = r
        .get_volume_ids(GetVolumeIDsRequest { pv_specs: &specs })
        .await
        .expect("volume IDs")
        .volume_ids;
    ids.sort();
    assert_eq!(ids, ["va", "vb"]);

    let names: Vec<Vec<String>> = r.providers().into_iter().map(|p| p.providers).collect();
    assert_eq!(
        names,
        [
            vec!["alpha".to_string()],
            vec!["beta".into(), "beta-legacy".into()]
        ]
    );
}

#[tokio::test]
async fn a_class_nobody_serves_waits_until_its_provider_registers() {
    let mcm = common::mcm(RouterConfig::default()).await;
    let c = class("c1", "alpha", in_cluster("one"));
    let e = create(&mcm.router, &c, "m1").await.unwrap_err();
    assert_eq!(e.code, Code::Unavailable);
    assert!(
        e.message
            .contains("no provider \"alpha\" is registered with the machine-controller-manager"),
        "{e}"
    );
    // The same retry as any transient error: soon, and the machine keeps
    // waiting rather than failing (the creation timeout decides that).
    assert_eq!(e.code.outcome(Step::Create), Outcome::Retry(Retry::Short));
    assert_eq!(
        e.code.outcome(Step::CreationStatus),
        Outcome::Retry(Retry::Short)
    );

    let beta = Arc::new(Memory::new("beta"));
    let _b = mcm.connect(beta, &["beta"]).await;
    let e = create(&mcm.router, &c, "m1").await.unwrap_err();
    assert!(e.message.contains("registered: beta"), "{e}");

    let alpha = Arc::new(Memory::new("alpha"));
    let _a = mcm.connect(alpha.clone(), &["alpha"]).await;
    create(&mcm.router, &c, "m1")
        .await
        .expect("create once alpha is there");
    assert_eq!(alpha.vms().len(), 1);
}

#[tokio::test]
async fn a_provider_that_disconnects_mid_create_creates_nothing_twice() {
    let mcm = common::mcm(RouterConfig::default()).await;
    let gate = Arc::new(Semaphore::new(0));
    let alpha = Arc::new(Memory::gated("alpha", gate.clone()));
    let c = class("c1", "alpha", in_cluster("one"));
    let session = mcm.connect(alpha.clone(), &["alpha"]).await;

    let router = mcm.router.clone();
    let c2 = c.clone();
    let call = tokio::spawn(async move { create(&router, &c2, "m1").await });
    // The create reached the driver and waits at the gate ...
    let deadline = Instant::now() + Duration::from_secs(10);
    while *alpha.waiting.lock() == 0 {
        assert!(
            Instant::now() < deadline,
            "the create never reached the driver"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // ... when the provider's connection goes.
    drop(session);
    let started = Instant::now();
    let e = call.await.unwrap().unwrap_err();
    assert_eq!(e.code, Code::Unavailable, "{e}");
    assert!(
        e.message
            .contains("disconnected before answering CreateMachine"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "failed over promptly"
    );
    assert!(
        !mcm.router
            .wait_for("alpha", Duration::from_millis(100))
            .await,
        "the session is gone"
    );

    // The driver finishes what it started; the provider comes back; the
    // controller retries, and the create finds that VM.
    gate.add_permits(1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alpha.vms().is_empty() {
        assert!(Instant::now() < deadline, "the first create never finished");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let first = alpha.vms().values().next().cloned().unwrap();
    let _back = mcm.connect(alpha.clone(), &["alpha"]).await;
    gate.add_permits(1);
    let again = create(&mcm.router, &c, "m1").await.expect("retried create");
    assert_eq!(again.provider_id, first, "the retry adopted the VM");
    assert_eq!(alpha.vms().len(), 1, "no second VM");
}

#[tokio::test]
async fn classes_and_secrets_are_fetched_once_per_version() {
    let mcm = common::mcm(RouterConfig::default()).await;
    let alpha = Arc::new(Memory::new("alpha"));
    let _a = mcm.connect(alpha.clone(), &["alpha"]).await;
    let mut c = class("c1", "alpha", in_cluster("one"));
    c.machine_class.metadata.resource_version = Some("100".into());
    for i in 0..10 {
        // userData is per machine (bootstrap token and machine name): it
        // travels with each call and must reach the driver unchanged.
        let mut per_machine = c.clone();
        per_machine.secret.string_data.as_mut().unwrap().insert(
            "userData".into(),
            format!("#cloud-config\ntoken: t{i}\nname: m{i}\n"),
        );
        create(&mcm.router, &per_machine, &format!("m{i}"))
            .await
            .expect("create");
    }
    let stats = mcm.router.stats();
    assert_eq!(
        (stats.class_fetches, stats.secret_fetches),
        (1, 1),
        "{stats:?}"
    );
    let seen = alpha.seen.lock().clone();
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(
            s.user_data.as_deref(),
            Some(format!("#cloud-config\ntoken: t{i}\nname: m{i}\n").as_str())
        );
        assert_eq!(s.token.as_deref(), Some("credential-of-c1"));
    }

    // A new version of the class is fetched once more; so is a changed
    // credential (the merged secret has no resourceVersion: its digest
    // changes with it).
    c.machine_class.metadata.resource_version = Some("101".into());
    create(&mcm.router, &c, "n1").await.expect("create");
    create(&mcm.router, &c, "n2").await.expect("create");
    c.secret
        .string_data
        .as_mut()
        .unwrap()
        .insert("token".into(), "rotated".into());
    create(&mcm.router, &c, "n3").await.expect("create");
    let stats = mcm.router.stats();
    assert_eq!(
        (stats.class_fetches, stats.secret_fetches),
        (2, 2),
        "{stats:?}"
    );
    assert_eq!(
        alpha.seen.lock().last().unwrap().token.as_deref(),
        Some("rotated")
    );
}

/// A raw provider: registers with `providers` and hands back the session
/// ID, the outbound sender and the inbound stream.
async fn raw(
    mcm: &common::Mcm,
    providers: &[&str],
) -> Result<
    (
        String,
        mpsc::Sender<pb::DriverSide>,
        tonic::Streaming<pb::McmSide>,
        MachineDriverClient<tonic::transport::Channel>,
    ),
    tonic::Status,
> {
    let mut client = MachineDriverClient::connect(format!("http://{}", mcm.addr))
        .await
        .expect("connecting");
    let (tx, rx) = mpsc::channel(16);
    tx.send(pb::DriverSide {
        message: Some(pb::driver_side::Message::Registration(pb::Registration {
            providers: providers.iter().map(|s| s.to_string()).collect(),
            class_kinds: vec![],
            instance: "raw".into(),
        })),
    })
    .await
    .unwrap();
    let mut inbound = client.register(ReceiverStream::new(rx)).await?.into_inner();
    match inbound.message().await?.and_then(|m| m.message) {
        Some(pb::mcm_side::Message::Registered(r)) => Ok((r.session, tx, inbound, client)),
        other => panic!("expected Registered, got {other:?}"),
    }
}

async fn next_operation(inbound: &mut tonic::Streaming<pb::McmSide>) -> pb::Operation {
    match inbound
        .message()
        .await
        .expect("the stream")
        .and_then(|m| m.message)
    {
        Some(pb::mcm_side::Message::Operation(op)) => op,
        other => panic!("expected an operation, got {other:?}"),
    }
}

#[tokio::test]
async fn a_provider_reads_only_what_was_sent_to_it() {
    let mcm = common::mcm(RouterConfig::default()).await;
    let alpha = Arc::new(Memory::new("alpha"));
    let _a = mcm.connect(alpha, &["alpha"]).await;
    let c = class("secret-class", "alpha", in_cluster("one"));
    create(&mcm.router, &c, "m1").await.expect("create");

    let (session, _tx, _inbound, mut client) = raw(&mcm, &["beta"]).await.expect("register");
    let meta = pb::MachineClassMeta {
        namespace: "default".into(),
        name: "secret-class".into(),
        resource_version: String::new(),
    };
    let with_session = |m: pb::MachineClassMeta, s: &str| {
        let mut req = tonic::Request::new(m);
        req.metadata_mut()
            .insert(SESSION_HEADER, s.parse().expect("ascii"));
        req
    };
    let e = client
        .get_machine_class(with_session(meta.clone(), &session))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e}");
    let e = client
        .get_machine_class(tonic::Request::new(meta.clone()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
    let e = client
        .get_machine_class(with_session(meta, "0123"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
    let e = client
        .get_secret(tonic::Request::new(pb::SecretMeta {
            namespace: "default".into(),
            name: "secret-class-secret".into(),
            resource_version: String::new(),
        }))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
}

#[tokio::test]
async fn registrations_that_cannot_be_served_are_refused() {
    let mcm = common::mcm(RouterConfig::default()).await;
    mcm.router
        .serve_in_process("local", Arc::new(Memory::new("local")));
    let Err(e) = raw(&mcm, &["local"]).await else {
        panic!("the registration must be refused");
    };
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("served in-process"), "{e}");
    let Err(e) = raw(&mcm, &[]).await else {
        panic!("the registration must be refused");
    };
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let Err(e) = raw(&mcm, &[" "]).await else {
        panic!("the registration must be refused");
    };
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // The in-process driver still takes its classes.
    let c = class("c1", "local", in_cluster("one"));
    create(&mcm.router, &c, "m1")
        .await
        .expect("in-process create");
}

#[tokio::test]
async fn malformed_answers_become_codes() {
    let mcm = common::mcm(RouterConfig::default()).await;
    let (_session, tx, mut inbound, _client) = raw(&mcm, &["alpha"]).await.expect("register");
    let c = class("c1", "alpha", in_cluster("one"));
    // (what the raw provider answers, the code the call must fail with)
    let cases = [
        (
            Some(pb::operation_result::Outcome::DeleteMachine(
                pb::DeleteMachineResponse::default(),
            )),
            Code::Internal,
            "with the answer to DeleteMachine",
        ),
        (None, Code::Internal, "empty result"),
        (
            Some(pb::operation_result::Outcome::Error(pb::Status {
                code: 99,
                message: "odd".into(),
            })),
            Code::Unknown,
            "unknown code 99",
        ),
        (
            Some(pb::operation_result::Outcome::Error(pb::Status {
                code: 17,
                message: String::new(),
            })),
            Code::Uninitialized,
            "no message",
        ),
    ];
    for (answer, code, words) in cases {
        let router = mcm.router.clone();
        let c2 = c.clone();
        let call = tokio::spawn(async move { create(&router, &c2, "m1").await });
        let op = next_operation(&mut inbound).await;
        assert!(matches!(
            op.call,
            Some(pb::operation::Call::CreateMachine(_))
        ));
        tx.send(pb::DriverSide {
            message: Some(pb::driver_side::Message::Result(pb::OperationResult {
                id: op.id,
                outcome: answer,
            })),
        })
        .await
        .unwrap();
        let e = call.await.unwrap().unwrap_err();
        assert_eq!(e.code, code, "{e}");
        assert!(e.message.contains(words), "{e}");
    }
    // An answer to an operation nobody waits for is dropped quietly.
    tx.send(pb::DriverSide {
        message: Some(pb::driver_side::Message::Result(pb::OperationResult {
            id: 999_999,
            outcome: None,
        })),
    })
    .await
    .unwrap();
    assert!(
        mcm.router
            .wait_for("alpha", Duration::from_millis(200))
            .await
    );
}

#[tokio::test]
async fn hung_and_panicking_drivers_answer_with_codes() {
    let mcm = common::mcm(RouterConfig {
        call_timeout: Duration::from_millis(300),
    })
    .await;
    // A gate that never opens: the create hangs.
    let hung = Arc::new(Memory::gated("alpha", Arc::new(Semaphore::new(0))));
    let _a = mcm.connect(hung, &["alpha"]).await;
    let c = class("c1", "alpha", in_cluster("one"));
    let e = create(&mcm.router, &c, "m1").await.unwrap_err();
    assert_eq!(e.code, Code::DeadlineExceeded, "{e}");
    assert_eq!(e.code.outcome(Step::Create), Outcome::Retry(Retry::Short));

    let _b = mcm.connect(Arc::new(Memory::new("beta")), &["beta"]).await;
    let b = class("cb", "beta", in_cluster("one"));
    let e = create(&mcm.router, &b, "panic").await.unwrap_err();
    assert_eq!(e.code, Code::Internal, "{e}");
    assert!(e.message.contains("CreateMachine"), "{e}");
    // The session survives the panic.
    create(&mcm.router, &b, "fine")
        .await
        .expect("the next call works");
}

#[tokio::test]
async fn the_newest_registration_takes_calls_and_an_older_one_takes_over() {
    let mcm = common::mcm(RouterConfig::default()).await;
    let (old, new) = (
        Arc::new(Memory::new("alpha")),
        Arc::new(Memory::new("alpha")),
    );
    let _old = mcm.connect(old.clone(), &["alpha"]).await;
    let newer = mcm.connect(new.clone(), &["alpha"]).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while mcm.router.providers().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the second session never registered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let c = class("c1", "alpha", in_cluster("one"));
    create(&mcm.router, &c, "m1").await.expect("create");
    assert_eq!((old.vms().len(), new.vms().len()), (0, 1));
    drop(newer);
    let deadline = Instant::now() + Duration::from_secs(10);
    while mcm.router.providers().len() > 1 {
        assert!(
            Instant::now() < deadline,
            "the dropped session never closed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    create(&mcm.router, &c, "m2").await.expect("create");
    assert_eq!(old.vms().len(), 1);
}

/// A CA and certificates signed by it, as PEM.
struct Pki {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, &ca_key);
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    Pki {
        ca: ca.pem(),
        server: leaf(vec!["localhost".into()]),
        client: leaf(vec!["provider".into()]),
    }
}

#[tokio::test]
async fn tls_with_client_certificates() {
    let pki = pki();
    let tls = ServerTls::new(
        pki.server.0.clone().into_bytes(),
        pki.server.1.clone().into_bytes(),
        Some(pki.ca.clone().into_bytes()),
    );
    let mcm = common::mcm_with(RouterConfig::default(), Some(tls)).await;
    let endpoint = format!("localhost:{}", mcm.addr.port());

    // Without a client certificate the handshake fails: no session.
    let trust = ClientTls::new(pki.ca.clone().into_bytes());
    let mut options = mcm.options();
    options.endpoint = endpoint.clone();
    let _anonymous = common::connect(
        Arc::new(Memory::new("alpha")),
        Registration::new(["alpha"]),
        options.clone().with_tls(trust.clone()),
    );
    assert!(!mcm.router.wait_for("alpha", Duration::from_secs(1)).await);

    // With one, calls go through.
    let alpha = Arc::new(Memory::new("alpha"));
    let identity = trust.with_identity(
        pki.client.0.clone().into_bytes(),
        pki.client.1.clone().into_bytes(),
    );
    let _a = common::connect(
        alpha.clone(),
        Registration::new(["alpha"]),
        options.with_tls(identity),
    );
    assert!(mcm.router.wait_for("alpha", Duration::from_secs(10)).await);
    let c = class("c1", "alpha", in_cluster("one"));
    create(&mcm.router, &c, "m1")
        .await
        .expect("create over TLS");
    assert_eq!(alpha.vms().len(), 1);
}
