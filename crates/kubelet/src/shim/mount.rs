//! Carries out a [`super::rootfs`] plan with mount(2), and moves into the
//! new root with pivot_root(2). Runs inside the container's own mount
//! namespace (made private first), so nothing here reaches the host's
//! mount table.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::rootfs::Op;

fn cstr(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{} contains NUL", p.display()))
}

fn errno(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn mount(
    src: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let src_c = src.map(cstr).transpose()?;
    let target_c = cstr(target)?;
    let fstype_c = fstype.map(|f| CString::new(f).expect("literal"));
    let data_c = data.map(|d| CString::new(d).expect("literal"));
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            ptr(&src_c),
            target_c.as_ptr(),
            ptr(&fstype_c),
            flags,
            data_c
                .as_ref()
                .map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    };
    if r != 0 {
        return Err(errno(&format!(
            "mounting {} on {}",
            src.map_or("-".into(), |s| s.display().to_string()),
            target.display()
        )));
    }
    Ok(())
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// Makes the mount at `target` and every mount below it read-only.
fn read_only(target: &Path) -> Result<(), String> {
    let c = cstr(target)?;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a valid path and a properly sized attribute struct.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(errno(&format!("making {} read-only", target.display())));
    }
    Ok(())
}

fn inside(root: &Path, p: &Path) -> PathBuf {
    root.join(p.strip_prefix("/").unwrap_or(p))
}

/// Makes every mount of this namespace private, so nothing done here
/// propagates to the host.
pub fn privatize() -> Result<(), String> {
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
}

/// Mounts a tmpfs on `root` and builds the container's root in it.
pub fn build(root: &Path, ops: &[Op]) -> Result<(), String> {
    mount(
        Some(Path::new("tmpfs")),
        root,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755"),
    )?;
    for op in ops {
        match op {
            Op::Mkdir(p) => std::fs::create_dir_all(inside(root, p))
                .map_err(|e| format!("creating {}: {e}", p.display()))?,
            Op::Touch(p) => {
                let at = inside(root, p);
                if !at.exists() {
                    std::fs::File::create(&at)
                        .map_err(|e| format!("creating {}: {e}", p.display()))?;
                }
            }
            Op::Symlink { target, link } => std::os::unix::fs::symlink(target, inside(root, link))
                .map_err(|e| format!("linking {}: {e}", link.display()))?,
            Op::Bind {
                source,
                target,
                read_only: ro,
            } => {
                let at = inside(root, target);
                mount(Some(source), &at, None, libc::MS_BIND | libc::MS_REC, None)?;
                if *ro {
                    read_only(&at)?;
                }
            }
            Op::Tmpfs(p) => mount(
                Some(Path::new("tmpfs")),
                &inside(root, p),
                Some("tmpfs"),
                libc::MS_NOSUID | libc::MS_NODEV,
                Some("mode=0755,size=64k"),
            )?,
            Op::Proc(p) => mount(
                Some(Path::new("proc")),
                &inside(root, p),
                Some("proc"),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                None,
            )?,
        }
    }
    Ok(())
}

/// Makes `root` the root of this mount namespace and lets go of the old
/// one.
pub fn pivot(root: &Path) -> Result<(), String> {
    std::env::set_current_dir(root).map_err(|e| format!("entering {}: {e}", root.display()))?;
    let dot = CString::new(".").expect("literal");
    // SAFETY: pivot_root(".", ".") stacks the old root on the new one; both
    // arguments are valid strings.
    if unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) } != 0 {
        return Err(errno("pivot_root"));
    }
    // SAFETY: detaches the old root, now mounted on ".".
    if unsafe { libc::umount2(dot.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(errno("detaching the old root"));
    }
    std::env::set_current_dir("/").map_err(|e| format!("entering /: {e}"))
}
