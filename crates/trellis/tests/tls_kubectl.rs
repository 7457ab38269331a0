//! The real `trellis server` binary with its default security, driven by the
//! real kubectl and curl: both verify the generated serving certificate
//! with `DATA_DIR/pki/ca.crt`, the admin kubeconfig authenticates with its
//! embedded client certificate, `kubectl auth can-i` and `--as` work, and a
//! restart reuses the PKI.

mod common;

use std::process::Command;

use common::*;

#[test]
fn kubectl_and_curl_verify_the_generated_certificate() {
    if !have("kubectl") || !have("curl") {
        eprintln!("SKIPPED: kubectl or curl is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "alice-token,alice,1001,\"dev\"\n").unwrap();
    let audit = dir.path().join("audit.log");
    let flags = [
        "--token-auth-file",
        tokens.to_str().unwrap(),
        "--audit-log",
        audit.to_str().unwrap(),
        "--tls-san",
        "trellis.test",
    ];
    let server = start(&data, &flags);
    let port = server.port;
    let kc = data.join("admin.kubeconfig");

    // curl: verified with the CA, refused without it, 401 without credentials.
    let out = curl(&data, port, "/version");
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("\"gitVersion\":\"v1.32"),
        "{}",
        stdout(&out)
    );
    let out = run(Command::new("curl")
        .args(["-sS", "--max-time", "5"])
        .arg(format!("https://127.0.0.1:{port}/version")));
    assert_eq!(
        out.status.code(),
        Some(60),
        "curl must not trust the server by default"
    );
    let out = curl(&data, port, "/api/v1/namespaces");
    assert!(stdout(&out).contains("\"code\":401"), "{}", stdout(&out));

    // kubectl with the admin kubeconfig.
    let out = kubectl(&kc, &["get", "ns"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("kube-system"));
    let out = kubectl(&kc, &["auth", "can-i", "*", "*"]);
    assert_eq!(stdout(&out).trim(), "yes");
    let out = kubectl(
        &kc,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(stdout(&out), "trellis-admin");
    let out = kubectl(&kc, &["--as", "alice", "auth", "can-i", "list", "pods"]);
    assert_eq!(stdout(&out).trim(), "no");
    let out = kubectl(&kc, &["--as", "alice", "get", "pods"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        ),
        "{out:?}"
    );
    // A token user may not impersonate.
    let as_alice = ["--token", "alice-token", "--as", "bob", "get", "pods"];
    let alice_kc = dir.path().join("alice.kubeconfig");
    let admin_kc = std::fs::read_to_string(&kc).unwrap();
    // Same cluster and CA, no client certificate.
    let cut = admin_kc.find("users:").unwrap();
    std::fs::write(
        &alice_kc,
        format!(
            "{}users:\n- name: trellis-admin\n  user: {{}}\n",
            &admin_kc[..cut]
        ),
    )
    .unwrap();
    let out = kubectl(&alice_kc, &as_alice);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\""
        ),
        "{out:?}"
    );
    let out = kubectl(
        &alice_kc,
        &[
            "--token",
            "alice-token",
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(stdout(&out), "alice");
    // ServiceAccount tokens from `kubectl create token` authenticate.
    let out = kubectl(
        &kc,
        &[
            "create",
            "token",
            "-n",
            "kube-system",
            "trellis-node-simulator",
        ],
    );
    assert!(out.status.success());
    let token = stdout(&out).trim().to_string();
    let out = kubectl(
        &alice_kc,
        &[
            "--token",
            &token,
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(
        stdout(&out),
        "system:serviceaccount:kube-system:trellis-node-simulator"
    );

    // The audit log saw the token request.
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(log.contains("\"subresource\":\"token\""), "{log}");

    // A restart reuses the PKI (clients keep trusting the same CA, the
    // admin keeps the same key); only the URL in the kubeconfig moves.
    let read = |f: &str| std::fs::read(data.join("pki").join(f)).unwrap();
    let (ca_before, admin_before) = (read("ca.crt"), read("admin.key"));
    drop(server);
    let server = start(&data, &flags);
    assert_eq!(read("ca.crt"), ca_before);
    assert_eq!(read("admin.key"), admin_before);
    let out = kubectl(&kc, &["get", "ns", "default", "-o", "name"]);
    assert_eq!(stdout(&out).trim(), "namespace/default");
    drop(server);
}
