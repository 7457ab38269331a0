//! Real etcd members for tests: Debian's `etcd` binary (package
//! `etcd-server`, installed with apt-get when missing, as CI runs as root)
//! started on free loopback ports in a temporary directory, and killed when
//! the fixture is dropped, also when the test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `etcd` binary, installing `etcd-server` if it is missing. `Err` says
/// why it cannot be had (the caller prints it and skips).
pub fn etcd_binary() -> Result<PathBuf, String> {
    if let Some(p) = which("etcd") {
        return Ok(p);
    }
    // Several test binaries may get here at once: one installs under a
    // lock, the others wait for it and then find the binary.
    let status = Command::new("flock")
        .args([
            "/tmp/trellis-etcd-install.lock",
            "sh",
            "-c",
            "command -v etcd >/dev/null || { apt-get update -qq && \
             DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client; }",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| format!("running apt-get to install etcd-server: {e}"))?;
    if !status.success() {
        return Err(format!("apt-get install etcd-server failed: {status}"));
    }
    which("etcd").ok_or_else(|| "etcd-server installed but no etcd on PATH".to_string())
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// One member's addresses and process.
pub struct Member {
    pub name: String,
    pub client_url: String,
    pub peer_url: String,
    pub data_dir: PathBuf,
    child: Option<Child>,
}

/// An etcd cluster of real processes; every member is killed on drop.
pub struct EtcdCluster {
    pub members: Vec<Member>,
    binary: PathBuf,
    initial_cluster: String,
    _dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts `n` members and waits until the cluster answers reads. The
    /// members' ports are picked free just before etcd binds them, so a
    /// parallel test can take one in between: a member that exits, or a
    /// cluster that does not answer, is started again on fresh ports (three
    /// tries), and the error names the members' logs.
    pub async fn start(n: usize) -> Result<EtcdCluster, String> {
        let binary = etcd_binary()?;
        let mut last = String::new();
        for attempt in 1..=3 {
            let mut cluster = EtcdCluster::fresh(&binary, n)?;
            for i in 0..n {
                cluster.spawn(i)?;
            }
            match cluster.wait_started(Duration::from_secs(30)).await {
                Ok(()) => return Ok(cluster),
                Err(e) => {
                    eprintln!("etcd test cluster, attempt {attempt}: {e}");
                    last = e;
                }
            }
        }
        Err(last)
    }

    fn fresh(binary: &Path, n: usize) -> Result<EtcdCluster, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut members = Vec::new();
        for i in 0..n {
            members.push(Member {
                name: format!("m{i}"),
                client_url: format!("http://127.0.0.1:{}", free_port()),
                peer_url: format!("http://127.0.0.1:{}", free_port()),
                data_dir: dir.path().join(format!("m{i}")),
                child: None,
            });
        }
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect::<Vec<_>>()
            .join(",");
        Ok(EtcdCluster {
            members,
            binary: binary.to_path_buf(),
            initial_cluster,
            _dir: dir,
        })
    }

    /// [`EtcdCluster::wait_ready`], failing at once when a member exits.
    async fn wait_started(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            for m in &mut self.members {
                if let Some(status) = m.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    let log = std::fs::read_to_string(m.data_dir.with_extension("log"))
                        .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(5).collect();
                    return Err(format!(
                        "member {} exited ({status}): {}",
                        m.name,
                        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                    ));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return self.wait_ready(Duration::ZERO).await;
            }
            if self
                .wait_ready(left.min(Duration::from_secs(1)))
                .await
                .is_ok()
            {
                return Ok(());
            }
        }
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let m = &mut self.members[i];
        std::fs::create_dir_all(&m.data_dir).map_err(|e| e.to_string())?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(m.data_dir.with_extension("log"))
            .map_err(|e| e.to_string())?;
        let child = Command::new(&self.binary)
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-client-urls", &m.client_url])
            .args(["--advertise-client-urls", &m.client_url])
            .args(["--listen-peer-urls", &m.peer_url])
            .args(["--initial-advertise-peer-urls", &m.peer_url])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "trellis-test"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.binary.display()))?;
        m.child = Some(child);
        Ok(())
    }

    /// Client URLs, comma-separated (`--etcd-servers`).
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| m.client_url.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn client(&self) -> crate::Client {
        crate::Client::new(&crate::Config::from_list(&self.endpoints())).expect("valid endpoints")
    }

    /// Kills member `i` with SIGKILL.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts member `i` again on its data directory.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        self.kill(i);
        self.spawn(i)
    }

    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].child.as_ref().map(Child::id)
    }

    pub fn data_dir(&self, i: usize) -> &Path {
        &self.members[i].data_dir
    }

    /// Waits until a linearizable read succeeds.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), String> {
        let client = self.client();
        let deadline = Instant::now() + timeout;
        loop {
            let read = client
                .range(crate::proto::RangeRequest {
                    key: b"health".to_vec(),
                    ..Default::default()
                })
                .await;
            match read {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("etcd not ready after {timeout:?}: {e}"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// Starts a cluster, or prints why etcd cannot be had and returns `None`
/// so the test can skip (only when installing is impossible).
pub async fn cluster_or_skip(n: usize) -> Option<EtcdCluster> {
    match EtcdCluster::start(n).await {
        Ok(c) => Some(c),
        Err(e) if which("etcd").is_none() => {
            eprintln!("SKIPPED: no etcd: {e}");
            None
        }
        Err(e) => panic!("starting etcd: {e}"),
    }
}
