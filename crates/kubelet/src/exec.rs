//! Running a command beside a container (`kubectl exec`, exec probes):
//! the new process joins the container's mount and UTS namespaces (and its
//! user namespace when rootless) through the container's init, so it sees
//! the container's root, volumes at their mount paths and hostname, and it
//! gets the container's environment and working directory.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;

use crate::state::{LaunchSpec, ProcessId};

/// Why the command could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("container is not running")]
    NotRunning,
    #[error("opening the container's namespaces: {0}")]
    Namespaces(std::io::Error),
    #[error("empty command")]
    EmptyCommand,
}

/// A command inside a container, with the namespace files its pre-exec
/// hook joins; they stay open until the child is spawned (they are
/// close-on-exec, so the child's copies go at its exec).
pub struct InContainer {
    cmd: tokio::process::Command,
    _namespaces: Vec<File>,
}

impl InContainer {
    /// The command, to set stdio and the like.
    pub fn command_mut(&mut self) -> &mut tokio::process::Command {
        &mut self.cmd
    }

    pub fn spawn(mut self) -> std::io::Result<tokio::process::Child> {
        self.cmd.spawn()
    }
}

/// A command for `argv` inside the container whose init is `init`.
pub fn command(
    init: ProcessId,
    spec: &LaunchSpec,
    argv: &[String],
) -> Result<InContainer, ExecError> {
    let (program, args) = argv.split_first().ok_or(ExecError::EmptyCommand)?;
    if !init.alive() {
        return Err(ExecError::NotRunning);
    }
    // SAFETY: geteuid cannot fail.
    let rootless = unsafe { libc::geteuid() } != 0;
    let mut kinds = Vec::new();
    if rootless {
        kinds.push(("user", libc::CLONE_NEWUSER));
    }
    kinds.push(("mnt", libc::CLONE_NEWNS));
    kinds.push(("uts", libc::CLONE_NEWUTS));
    let mut files = Vec::new();
    let mut fds = Vec::new();
    for (name, flag) in kinds {
        let f =
            File::open(format!("/proc/{}/ns/{name}", init.pid)).map_err(ExecError::Namespaces)?;
        fds.push((f.as_raw_fd(), flag));
        files.push(f);
    }
    // The init may have been replaced between the check and the opens.
    if !init.alive() {
        return Err(ExecError::NotRunning);
    }
    let dir = spec
        .working_dir
        .clone()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/".into());
    let dir = std::ffi::CString::new(dir).map_err(|_| ExecError::EmptyCommand)?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)));
    // SAFETY: setns and chdir are async-signal-safe; the forked child is
    // single-threaded, as setns into a mount namespace requires.
    unsafe {
        cmd.pre_exec(move || {
            for (fd, flag) in &fds {
                if libc::setns(*fd, *flag) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::chdir(dir.as_ptr()) != 0 {
                libc::chdir(c"/".as_ptr());
            }
            Ok(())
        });
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    Ok(InContainer {
        cmd,
        _namespaces: files,
    })
}
