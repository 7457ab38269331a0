//! The container supervisor (`trellis kubelet shim run DIR`), one per
//! attempt, like conmon: it outlives trellis, so a trellis crash or restart
//! never touches a running container.
//!
//! Three processes:
//!
//! * the **shim** (in the host's namespaces, its own session) keeps the
//!   attempt's lock, writes `shim.json`, `started.json` and `exit.json`,
//!   turns the container's stdout and stderr into the CRI log, and forwards
//!   SIGTERM; SIGUSR1 means "kill now";
//! * the **init**, pid 1 of a new pid namespace (and of a new user
//!   namespace when not root), in a new mount and UTS namespace: it builds
//!   the container's root ([`rootfs`], [`mount`]), pivots into it, starts
//!   the container's process, forwards signals to it and reaps orphans. It
//!   dies with the shim (PR_SET_PDEATHSIG), and when it dies the kernel
//!   kills every process of its pid namespace: a container can neither
//!   outlive its shim nor leave a daemon behind;
//! * the **container process**, in its own session, with the container's
//!   argv, environment, working directory and hostname.
//!
//! The shim must start single-threaded (unshare of user namespaces and
//! setns of mount namespaces refuse threaded callers): `trellis` runs it
//! before it starts its async runtime.
//!
//! The init tells the shim what happened over a pipe, one line each:
//! `S` (the process runs), `F <message>` (setting up failed), `E <errno>`
//! (exec failed) and `X <code> <signal>` (the process ended).

pub mod mount;
pub mod rootfs;

use std::ffi::CString;
use std::io::Write;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use k8s_openapi::jiff::Timestamp;

use crate::crilog::{self, Splitter, Stream};
use crate::state::{self, Exited, LaunchSpec, ProcessId, Started};

/// The descriptor on which the kubelet hands the attempt's lock over.
pub const LOCK_FD: RawFd = 3;

/// Entry point: `run DIR`. Returns the process exit code.
pub fn main(args: &[String]) -> i32 {
    match args {
        [cmd, dir] if cmd == "run" => match run(Path::new(dir)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("trellis shim: {e}");
                1
            }
        },
        _ => {
            eprintln!("usage: trellis kubelet shim run ATTEMPT_DIR");
            2
        }
    }
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn pipe() -> Result<(RawFd, RawFd), String> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_err("pipe"));
    }
    Ok((fds[0], fds[1]))
}

fn close(fd: RawFd) {
    // SAFETY: closing a descriptor this process owns.
    unsafe { libc::close(fd) };
}

fn write_fd(fd: RawFd, bytes: &[u8]) {
    // SAFETY: writing from a valid buffer; a short or failed write only
    // loses a message the reader treats as missing.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// The signals the shim and the init handle synchronously.
fn handled() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGUSR1,
            libc::SIGCHLD,
        ] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// What the shim learned from the init.
#[derive(Default)]
struct Outcome {
    started_ms: Option<u64>,
    setup_error: Option<String>,
    exec_errno: Option<i32>,
    ended: Option<(i32, Option<i32>)>,
}

fn run(dir: &Path) -> Result<(), String> {
    let spec: LaunchSpec = state::read_json(dir, state::SPEC).ok_or("no readable spec.json")?;
    // SAFETY: F_GETFD/F_SETFD on a descriptor number; no memory involved.
    if unsafe { libc::fcntl(LOCK_FD, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err("the attempt's lock was not handed over on descriptor 3".into());
    }
    let me = ProcessId::current().ok_or("cannot read our own /proc entry")?;
    state::write_json(dir, state::SHIM, &me).map_err(|e| format!("writing shim.json: {e}"))?;
    let mut log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(dir.join(state::LOG))
        .map_err(|e| format!("opening the log: {e}"))?;
    let outcome = supervise(dir, &spec, &mut log);
    let exited = exit_record(&spec, outcome);
    state::write_json(dir, state::EXIT, &exited).map_err(|e| format!("writing exit.json: {e}"))
}

/// How the attempt ended, in kube's terms.
fn exit_record(spec: &LaunchSpec, o: Outcome) -> Exited {
    let finished_ms = state::now_ms();
    let (exit_code, signal, reason, message) = if let Some((code, sig)) = o.ended {
        let code = sig.map_or(code, |s| 128 + s);
        let reason = if code == 0 { "Completed" } else { "Error" };
        (code, sig, reason.to_string(), None)
    } else if let Some(errno) = o.exec_errno {
        let program = spec.argv.first().cloned().unwrap_or_default();
        let why = if errno == libc::ENOENT {
            "executable file not found in $PATH".to_string()
        } else {
            std::io::Error::from_raw_os_error(errno).to_string()
        };
        (
            128,
            None,
            "StartError".into(),
            Some(format!("exec: {program:?}: {why}")),
        )
    } else if let Some(e) = o.setup_error {
        (128, None, "StartError".into(), Some(e))
    } else {
        // The init was killed (SIGUSR1 from the kubelet, or worse).
        (137, Some(libc::SIGKILL), "Error".into(), None)
    };
    Exited {
        exit_code,
        signal,
        reason,
        message,
        started_ms: o.started_ms,
        finished_ms,
    }
}

fn supervise(dir: &Path, spec: &LaunchSpec, log: &mut std::fs::File) -> Outcome {
    let mut out = Outcome::default();
    let fail = |mut out: Outcome, e: String| {
        out.setup_error = Some(e);
        out
    };
    let (Ok((out_r, out_w)), Ok((err_r, err_w)), Ok((st_r, st_w))) = (pipe(), pipe(), pipe())
    else {
        return fail(out, os_err("pipe"));
    };
    let set = handled();
    // SAFETY: blocking signals and opening a signalfd for them; the set is
    // initialised.
    let sfd = unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC)
    };
    if sfd < 0 {
        return fail(out, os_err("signalfd"));
    }
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let rootless = uid != 0;
    let mut flags = libc::CLONE_NEWPID;
    if rootless {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: unshare of a single-threaded process.
    if unsafe { libc::unshare(flags) } != 0 {
        return fail(out, os_err("creating the container's namespaces"));
    }
    if rootless {
        // Root inside maps to us outside, as rootless runtimes do.
        let maps = [
            ("/proc/self/setgroups", "deny".to_string()),
            ("/proc/self/uid_map", format!("0 {uid} 1")),
            ("/proc/self/gid_map", format!("0 {gid} 1")),
        ];
        for (file, content) in maps {
            if let Err(e) = std::fs::write(file, content) {
                return fail(out, format!("writing {file}: {e}"));
            }
        }
    }
    let rootfs = dir.join(state::ROOTFS);
    if let Err(e) = std::fs::create_dir_all(&rootfs) {
        return fail(out, format!("creating {}: {e}", rootfs.display()));
    }
    // SAFETY: the shim is single-threaded, so the child is a faithful copy.
    let init = unsafe { libc::fork() };
    if init < 0 {
        return fail(out, os_err("fork"));
    }
    if init == 0 {
        close(out_r);
        close(err_r);
        close(st_r);
        close(sfd);
        let code = init_main(spec, &rootfs, out_w, err_w, st_w, &set);
        // SAFETY: leaving the child without running the parent's atexit work.
        unsafe { libc::_exit(code) };
    }
    close(out_w);
    close(err_w);
    close(st_w);
    let init_id = ProcessId::of(init);
    pump(log, out_r, err_r, st_r, sfd, init, init_id, dir, &mut out);
    out
}

/// The shim's loop: logs, messages from the init, signals; until the init
/// is gone and the container's output is drained.
#[allow(clippy::too_many_arguments)]
fn pump(
    log: &mut std::fs::File,
    out_r: RawFd,
    err_r: RawFd,
    st_r: RawFd,
    sfd: RawFd,
    init: libc::pid_t,
    init_id: Option<ProcessId>,
    dir: &Path,
    out: &mut Outcome,
) {
    let mut splitters = [Splitter::default(), Splitter::default()];
    let mut open = [true, true, true];
    let mut init_done = false;
    let mut status_buf = Vec::new();
    let mut drain_deadline: Option<std::time::Instant> = None;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if init_done && !open[0] && !open[1] {
            break;
        }
        if let Some(d) = drain_deadline
            && std::time::Instant::now() > d
        {
            break;
        }
        let fds = [out_r, err_r, st_r];
        let mut polls: Vec<libc::pollfd> = fds
            .iter()
            .zip(open)
            .filter(|(_, o)| *o)
            .map(|(fd, _)| libc::pollfd {
                fd: *fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        polls.push(libc::pollfd {
            fd: sfd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: polls is a valid array of pollfd.
        let n = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, 500) };
        if n < 0 {
            continue;
        }
        for p in polls.iter().filter(|p| p.revents != 0) {
            if p.fd == sfd {
                on_signal(sfd, init, &mut init_done);
                if init_done && drain_deadline.is_none() {
                    drain_deadline =
                        Some(std::time::Instant::now() + std::time::Duration::from_secs(2));
                }
                continue;
            }
            // SAFETY: reading into our buffer.
            let got = unsafe { libc::read(p.fd, buf.as_mut_ptr().cast(), buf.len()) };
            let idx = fds.iter().position(|f| *f == p.fd).unwrap_or(2);
            if got <= 0 {
                open[idx] = false;
                continue;
            }
            let chunk = &buf[..got as usize];
            if idx == 2 {
                status_buf.extend_from_slice(chunk);
                while let Some(nl) = status_buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = status_buf.drain(..=nl).collect();
                    on_status(
                        &String::from_utf8_lossy(&line[..line.len() - 1]),
                        init_id,
                        dir,
                        out,
                    );
                }
                continue;
            }
            let stream = if idx == 0 {
                Stream::Stdout
            } else {
                Stream::Stderr
            };
            for (partial, text) in splitters[idx].feed(chunk) {
                let _ = log.write_all(&crilog::record(Timestamp::now(), stream, partial, &text));
            }
        }
    }
    for (i, s) in splitters.iter_mut().enumerate() {
        if let Some(rest) = s.finish() {
            let stream = if i == 0 {
                Stream::Stdout
            } else {
                Stream::Stderr
            };
            let _ = log.write_all(&crilog::record(Timestamp::now(), stream, false, &rest));
        }
    }
    let _ = log.sync_data();
}

fn on_status(line: &str, init: Option<ProcessId>, dir: &Path, out: &mut Outcome) {
    let mut words = line.splitn(3, ' ');
    match words.next() {
        Some("S") => {
            let now = state::now_ms();
            out.started_ms = Some(now);
            if let Some(init) = init {
                let _ = state::write_json(
                    dir,
                    state::STARTED,
                    &Started {
                        started_ms: now,
                        init,
                    },
                );
            }
        }
        Some("F") => out.setup_error = Some(line.get(2..).unwrap_or("").to_string()),
        Some("E") => out.exec_errno = words.next().and_then(|e| e.parse().ok()),
        Some("X") => {
            let code = words.next().and_then(|c| c.parse().ok()).unwrap_or(0);
            let sig = words
                .next()
                .and_then(|s| s.parse().ok())
                .filter(|s| *s != 0);
            out.ended = Some((code, sig));
        }
        _ => {}
    }
}

fn on_signal(sfd: RawFd, init: libc::pid_t, init_done: &mut bool) {
    // SAFETY: signalfd_siginfo is plain data; the read fills it.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: reading one record into `info`.
    let got = unsafe { libc::read(sfd, (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
    if got != size as isize {
        return;
    }
    match info.ssi_signo as i32 {
        // The init forwards a polite stop to the container's process.
        libc::SIGTERM | libc::SIGINT | libc::SIGHUP => {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(init, libc::SIGTERM) };
        }
        // Kill the init: the kernel then kills its whole pid namespace.
        libc::SIGUSR1 => {
            // SAFETY: as above.
            unsafe { libc::kill(init, libc::SIGKILL) };
        }
        _ => {}
    }
    // Reap the init if it ended (SIGCHLD may be merged with others).
    let mut status = 0;
    // SAFETY: waiting for our own child.
    if unsafe { libc::waitpid(init, &mut status, libc::WNOHANG) } == init {
        *init_done = true;
    }
}

/// The init: pid 1 of the container. Returns its exit code (unused: the
/// outcome goes over the status pipe).
fn init_main(
    spec: &LaunchSpec,
    rootfs: &Path,
    out_w: RawFd,
    err_w: RawFd,
    st_w: RawFd,
    set: &libc::sigset_t,
) -> i32 {
    // SAFETY: asks the kernel to kill us when the shim dies.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let report = |msg: String| write_fd(st_w, format!("{msg}\n").as_bytes());
    if let Err(e) = prepare(spec, rootfs) {
        report(format!("F {e}"));
        return 1;
    }
    let Ok((exec_r, exec_w)) = pipe() else {
        report(format!("F {}", os_err("pipe")));
        return 1;
    };
    // SAFETY: the init is single-threaded.
    let child = unsafe { libc::fork() };
    if child < 0 {
        report(format!("F {}", os_err("fork")));
        return 1;
    }
    if child == 0 {
        close(exec_r);
        close(st_w);
        let errno = exec_container(spec, out_w, err_w, set);
        write_fd(exec_w, &errno.to_ne_bytes());
        // SAFETY: exec failed; leave without the parent's cleanup.
        unsafe { libc::_exit(127) };
    }
    close(exec_w);
    close(out_w);
    close(err_w);
    let mut errno_buf = [0u8; 4];
    // SAFETY: reading into a 4-byte buffer; EOF (0) means exec succeeded.
    let got = unsafe { libc::read(exec_r, errno_buf.as_mut_ptr().cast(), 4) };
    close(exec_r);
    if got == 4 {
        report(format!("E {}", i32::from_ne_bytes(errno_buf)));
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(child, &mut status, 0) };
        return 1;
    }
    report("S".into());
    loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: waits for one of the blocked signals.
        if unsafe { libc::sigwait(set, &mut sig) } != 0 {
            continue;
        }
        match sig {
            libc::SIGTERM | libc::SIGINT | libc::SIGHUP => {
                // SAFETY: signalling the container's process.
                unsafe { libc::kill(child, sig) };
            }
            libc::SIGCHLD => loop {
                let mut status = 0;
                // SAFETY: reaping any child of ours (orphans included).
                let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if pid <= 0 {
                    break;
                }
                if pid == child {
                    let (code, signal) = if libc::WIFSIGNALED(status) {
                        (0, libc::WTERMSIG(status))
                    } else {
                        (libc::WEXITSTATUS(status), 0)
                    };
                    report(format!("X {code} {signal}"));
                    return 0;
                }
            },
            _ => {}
        }
    }
}

/// Namespaces, hostname and root of the container.
fn prepare(spec: &LaunchSpec, rootfs: &Path) -> Result<(), String> {
    // SAFETY: unshare of a single-threaded process.
    if unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS) } != 0 {
        return Err(os_err("creating the mount namespace"));
    }
    mount::privatize()?;
    if !spec.hostname.is_empty() {
        // SAFETY: a valid buffer and its length.
        if unsafe { libc::sethostname(spec.hostname.as_ptr().cast(), spec.hostname.len()) } != 0 {
            return Err(os_err("setting the hostname"));
        }
    }
    let wants: Vec<rootfs::Want> = spec
        .mounts
        .iter()
        .map(|m| rootfs::Want {
            source: m.source.clone(),
            target: PathBuf::from(&m.target),
            read_only: m.read_only,
            source_is_dir: m.source.is_dir(),
        })
        .collect();
    let ops = rootfs::plan(&rootfs::RealHost, &wants, &spec.mask);
    mount::build(rootfs, &ops)?;
    mount::pivot(rootfs)
}

/// In the container's process: stdio, session, directory, environment,
/// exec. Returns the errno if exec failed.
fn exec_container(spec: &LaunchSpec, out_w: RawFd, err_w: RawFd, set: &libc::sigset_t) -> i32 {
    // SAFETY: plain descriptor and signal-mask calls in the new process.
    unsafe {
        libc::sigprocmask(libc::SIG_UNBLOCK, set, std::ptr::null_mut());
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if null >= 0 {
            libc::dup2(null, 0);
        }
        libc::dup2(out_w, 1);
        libc::dup2(err_w, 2);
    }
    let dir = spec
        .working_dir
        .as_deref()
        .filter(|d| !d.is_empty())
        .unwrap_or("/");
    if std::env::set_current_dir(dir).is_err() {
        return libc::ENOENT;
    }
    // SAFETY: the process is single-threaded; nothing else reads the
    // environment while it is replaced.
    unsafe {
        for (k, _) in std::env::vars_os() {
            std::env::remove_var(k);
        }
        for (k, v) in &spec.env {
            if !k.is_empty() && !k.contains('=') && !k.contains('\0') && !v.contains('\0') {
                std::env::set_var(k, v);
            }
        }
    }
    let Ok(argv): Result<Vec<CString>, _> = spec
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect()
    else {
        return libc::EINVAL;
    };
    if argv.is_empty() {
        return libc::ENOENT;
    }
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: a NUL-terminated argv of valid strings.
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::ENOENT)
}
