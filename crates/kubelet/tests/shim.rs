//! The shim and the runtime executor against real processes: logs, exit
//! codes, start errors, volumes at their mount paths with the host left
//! untouched, SIGTERM then SIGKILL, exec beside a container, and what the
//! state directory says after a shim was killed. Needs Linux namespaces
//! (root, or unprivileged user namespaces).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kubelet::runtime::{Runtime, Stop};
use kubelet::state::{LaunchSpec, Mount};
use kubelet::view::AttemptState;
use testkit::eventually_blocking;

/// A data dir whose shims are all killed when the test ends, passed or not.
struct Fixture {
    dir: tempfile::TempDir,
    rt: Runtime,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        kubelet::runtime::kill_all(self.dir.path());
    }
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let shim = env!("CARGO_BIN_EXE_trellis-kubelet-shim");
    let rt = Runtime::new(dir.path(), vec![shim.into()]);
    Fixture { dir, rt }
}

fn spec(script: &str) -> LaunchSpec {
    LaunchSpec {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
        hostname: "pod-a".into(),
        ..LaunchSpec::default()
    }
}

fn exited(rt: &Runtime, name: &str, i: u32) -> kubelet::view::Exit {
    let mut out = None;
    eventually_blocking("the attempt to exit", 15, || {
        match rt.attempt("u1", name, i).state {
            AttemptState::Exited(e) => {
                out = Some(e);
                true
            }
            _ => false,
        }
    });
    out.unwrap()
}

fn running(rt: &Runtime, name: &str, i: u32) {
    eventually_blocking("the attempt to run", 15, || {
        matches!(
            rt.attempt("u1", name, i).state,
            AttemptState::Running { .. }
        )
    });
}

fn log(rt: &Runtime, name: &str, i: u32) -> String {
    String::from_utf8_lossy(&std::fs::read(rt.log_path("u1", name, i)).unwrap_or_default())
        .into_owned()
}

#[test]
fn logs_and_exit_codes_are_recorded() {
    let f = fixture();
    f.rt.start(
        "u1",
        "c",
        0,
        &spec("echo out; echo err >&2; printf partial; exit 3"),
    )
    .unwrap();
    let e = exited(&f.rt, "c", 0);
    assert_eq!((e.exit_code, e.reason.as_str()), (3, "Error"));
    assert!(e.started_ms.is_some());
    let text = log(&f.rt, "c", 0);
    let logs = kubelet::crilog::select(text.as_bytes(), &Default::default());
    assert_eq!(String::from_utf8_lossy(&logs), "out\nerr\npartial\n");
    assert!(
        text.contains(" stdout F out\n") && text.contains(" stderr F err\n"),
        "{text}"
    );
    assert!(f.rt.live().is_empty(), "nothing left running");
}

#[test]
fn a_missing_program_is_a_start_error() {
    let f = fixture();
    let mut s = spec("");
    s.argv = vec!["no-such-program-trellis".into()];
    f.rt.start("u1", "c", 0, &s).unwrap();
    let e = exited(&f.rt, "c", 0);
    assert_eq!((e.exit_code, e.reason.as_str()), (128, "StartError"));
    assert!(e.message.unwrap().contains("executable file not found"));
    assert_eq!(e.started_ms, None);
}

fn host_untouched(p: &Path) {
    assert!(!p.exists(), "{} was created on the host", p.display());
}

#[test]
fn volumes_appear_at_their_mount_paths_and_the_host_stays_as_it_was() {
    let f = fixture();
    let vol = f.dir.path().join("vol");
    std::fs::create_dir_all(&vol).unwrap();
    std::fs::write(vol.join("hello"), "from the volume\n").unwrap();
    let tmp = f.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut s = spec(&format!(
        "cat /var/trellis-test-volume/data/hello; echo written > /var/trellis-test-volume/data/out; \
         touch /usr/trellis-must-not-exist 2>/dev/null || echo host-read-only; \
         hostname; ls -A {} 2>/dev/null | wc -l; echo tmp > /tmp/x && echo tmp-writable",
        f.dir.path().display()
    ));
    s.mounts = vec![
        Mount {
            source: vol.clone(),
            target: "/var/trellis-test-volume/data".into(),
            read_only: false,
        },
        Mount {
            source: tmp.clone(),
            target: "/tmp".into(),
            read_only: false,
        },
    ];
    s.mask = vec![f.dir.path().to_path_buf()];
    f.rt.start("u1", "c", 0, &s).unwrap();
    let e = exited(&f.rt, "c", 0);
    let out = String::from_utf8_lossy(&kubelet::crilog::select(
        log(&f.rt, "c", 0).as_bytes(),
        &Default::default(),
    ))
    .into_owned();
    assert_eq!(e.exit_code, 0, "{out} {e:?}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "from the volume",
            "host-read-only",
            "pod-a",
            "0",
            "tmp-writable"
        ],
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(vol.join("out")).unwrap(),
        "written\n"
    );
    assert_eq!(std::fs::read_to_string(tmp.join("x")).unwrap(), "tmp\n");
    host_untouched(Path::new("/var/trellis-test-volume"));
    host_untouched(Path::new("/usr/trellis-must-not-exist"));
}

#[test]
fn stop_sends_sigterm_and_kill_ends_what_ignores_it() {
    let f = fixture();
    f.rt.start(
        "u1",
        "polite",
        0,
        &spec("trap 'echo bye; exit 0' TERM; echo up; while true; do sleep 0.1; done"),
    )
    .unwrap();
    f.rt.start(
        "u1",
        "stubborn",
        0,
        &spec("trap '' TERM; echo up; while true; do sleep 0.1; done"),
    )
    .unwrap();
    running(&f.rt, "polite", 0);
    running(&f.rt, "stubborn", 0);
    eventually_blocking("output", 15, || {
        log(&f.rt, "polite", 0).contains("up") && log(&f.rt, "stubborn", 0).contains("up")
    });
    assert!(f.rt.stop("u1", "polite", 0, Stop::Term));
    assert!(f.rt.stop("u1", "stubborn", 0, Stop::Term));
    let e = exited(&f.rt, "polite", 0);
    assert_eq!(e.exit_code, 0);
    assert!(log(&f.rt, "polite", 0).contains(" stdout F bye"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        matches!(
            f.rt.attempt("u1", "stubborn", 0).state,
            AttemptState::Running { .. }
        ),
        "SIGTERM ignored"
    );
    assert!(f.rt.stop("u1", "stubborn", 0, Stop::Kill));
    let e = exited(&f.rt, "stubborn", 0);
    assert_eq!((e.exit_code, e.signal), (137, Some(9)));
    assert!(
        !f.rt.stop("u1", "stubborn", 0, Stop::Term),
        "nothing left to signal"
    );
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn a_killed_shim_takes_its_container_and_daemons_along() {
    let f = fixture();
    let marker = format!("trellis-marker-{}", std::process::id());
    // A daemon that double-forks away from the container's process.
    let script = format!(
        "(bash -c 'exec -a {marker}-daemon sleep 1000' &) ; exec -a {marker}-main sleep 1000"
    );
    let mut s = spec(&script);
    s.argv = vec!["bash".into(), "-c".into(), script.clone()];
    f.rt.start("u1", "c", 0, &s).unwrap();
    running(&f.rt, "c", 0);
    eventually_blocking("both processes", 15, || processes_with(&marker).len() >= 2);
    let live = f.rt.live();
    assert_eq!(live.len(), 1);
    // A new Runtime (trellis restarted) sees the same attempt running.
    let again = Runtime::new(f.dir.path(), vec![]);
    assert!(matches!(
        again.attempt("u1", "c", 0).state,
        AttemptState::Running { .. }
    ));
    assert!(again.kill_shim("u1", "c", 0));
    eventually_blocking("every process of the container to end", 15, || {
        processes_with(&marker).is_empty()
    });
    let e = exited(&again, "c", 0);
    assert_eq!(e.reason, "ContainerStatusUnknown");
    assert!(again.live().is_empty());
}

#[tokio::test]
async fn exec_runs_beside_the_container_with_its_volumes_and_environment() {
    let f = fixture();
    let vol: PathBuf = f.dir.path().join("data");
    std::fs::create_dir_all(&vol).unwrap();
    std::fs::write(vol.join("member"), "etcd-1\n").unwrap();
    let mut s = spec("while true; do sleep 0.2; done");
    s.mounts = vec![Mount {
        source: vol,
        target: "/var/etcd/data".into(),
        read_only: false,
    }];
    s.env.push(("GREETING".into(), "hi".into()));
    s.working_dir = Some("/var/etcd".into());
    f.rt.start("u1", "c", 0, &s).unwrap();
    running(&f.rt, "c", 0);
    let init = f.rt.init_of("u1", "c", 0).expect("a running init");
    let argv: Vec<String> = ["sh", "-c", "cat data/member; hostname; echo $GREETING; pwd"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut cmd = kubelet::exec::command(init, &s, &argv).unwrap();
    cmd.command_mut().stdout(std::process::Stdio::piped());
    let out = cmd.spawn().unwrap().wait_with_output().await.unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "etcd-1\npod-a\nhi\n/var/etcd\n"
    );
    host_untouched(Path::new("/var/etcd/data/member"));
    f.rt.stop("u1", "c", 0, Stop::Kill);
    exited(&f.rt, "c", 0);
    assert!(matches!(
        kubelet::exec::command(init, &s, &argv),
        Err(kubelet::exec::ExecError::NotRunning)
    ));
}
