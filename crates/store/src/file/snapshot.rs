//! Snapshot files: the full key-value state as of one revision.
//!
//! `snap-<revision>.snap` is `magic "TRLSNAP1", revision:i64, count:u64`, then
//! `count` entries `key:bytes, value:bytes, create:i64, mod:i64, version:i64`
//! in key order, then the CRC32 of everything before it. A snapshot is written
//! to a `.tmp` file, fsynced, renamed into place and the directory fsynced, so
//! a snapshot file that exists under its final name is complete. A write
//! that fails (a full disk) removes its `.tmp` file again, so a failed
//! snapshot does not keep holding the space the log needs.
//!
//! Reading validates everything; an error names the file and the byte offset
//! where reading stopped (for a checksum mismatch, the end of the checksummed
//! bytes: a CRC cannot say where inside them the damage is).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::{KeyValue, Revision};

use super::codec::{invalid, put_bytes, put_i64, put_u64};

const MAGIC: &[u8; 8] = b"TRLSNAP1";

pub(crate) fn snapshot_name(revision: Revision) -> String {
    format!("snap-{revision:020}.snap")
}

fn parse_snapshot_name(name: &str) -> Option<Revision> {
    name.strip_prefix("snap-")?
        .strip_suffix(".snap")?
        .parse()
        .ok()
}

/// Every snapshot in `dir`, oldest first.
pub(crate) fn list_snapshots(dir: &Path) -> io::Result<Vec<(Revision, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(rev) = entry.file_name().to_str().and_then(parse_snapshot_name) {
            out.push((rev, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A writer that feeds everything through a CRC32 on the way.
struct HashingWriter<W: Write> {
    inner: W,
    hasher: crc32fast::Hasher,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the state `kvs` (in key order) at `revision` durably into `dir` and
/// returns the snapshot's size in bytes.
pub(crate) fn write_snapshot(dir: &Path, revision: Revision, kvs: &[KeyValue]) -> io::Result<u64> {
    let final_path = dir.join(snapshot_name(revision));
    let tmp_path = final_path.with_extension("tmp");
    let result = write_snapshot_file(&tmp_path, revision, kvs);
    let size = match result {
        Ok(size) => size,
        Err(e) => {
            // Frees what the partial file holds; recovery would remove it
            // too, but only at the next start.
            let _ = fs::remove_file(&tmp_path);
            return Err(e);
        }
    };
    fs::rename(&tmp_path, &final_path)?;
    sync_dir(dir)?;
    Ok(size)
}

/// Writes and fsyncs the snapshot file at `tmp_path`; returns its size.
fn write_snapshot_file(tmp_path: &Path, revision: Revision, kvs: &[KeyValue]) -> io::Result<u64> {
    let file = File::create(tmp_path)?;
    let mut w = HashingWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        hasher: crc32fast::Hasher::new(),
    };
    let mut buf = Vec::with_capacity(64 * 1024);
    buf.extend_from_slice(MAGIC);
    put_i64(&mut buf, revision);
    put_u64(&mut buf, kvs.len() as u64);
    for kv in kvs {
        put_bytes(&mut buf, kv.key.as_bytes())?;
        put_bytes(&mut buf, &kv.value)?;
        put_i64(&mut buf, kv.create_revision);
        put_i64(&mut buf, kv.mod_revision);
        put_i64(&mut buf, kv.version);
        if buf.len() >= 32 * 1024 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)?;
    let crc = w.hasher.clone().finalize();
    let mut inner = w.inner;
    inner.write_all(&crc.to_le_bytes())?;
    let file = inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(file.metadata()?.len())
}

/// A reader that feeds everything through a CRC32 and refuses lengths that
/// cannot fit in what is left of the file (so a corrupt length cannot make us
/// allocate gigabytes).
struct SnapReader<R: Read> {
    inner: R,
    hasher: crc32fast::Hasher,
    left: u64,
}

impl<R: Read> SnapReader<R> {
    fn exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        if buf.len() as u64 > self.left {
            return Err(invalid("snapshot ends early"));
        }
        self.inner.read_exact(buf)?;
        self.hasher.update(buf);
        self.left -= buf.len() as u64;
        Ok(())
    }

    fn u32(&mut self) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn i64(&mut self) -> io::Result<i64> {
        let mut b = [0u8; 8];
        self.exact(&mut b)?;
        Ok(i64::from_le_bytes(b))
    }

    fn vec(&mut self) -> io::Result<Vec<u8>> {
        let len = self.u32()? as u64;
        if len > self.left {
            return Err(invalid("snapshot ends early"));
        }
        let mut v = vec![0u8; len as usize];
        self.exact(&mut v)?;
        Ok(v)
    }
}

/// Reads and fully validates a snapshot: its state and revision, and its size.
/// An error names the file and the byte offset where reading stopped.
pub(crate) fn read_snapshot(
    path: &Path,
) -> io::Result<(Revision, BTreeMap<Arc<str>, KeyValue>, u64)> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut r = SnapReader {
        inner: BufReader::with_capacity(1 << 20, file),
        hasher: crc32fast::Hasher::new(),
        left: size,
    };
    match read_entries(&mut r, size) {
        Ok((revision, kvs)) => Ok((revision, kvs, size)),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!(
                "{}: {e} (reading stopped at byte offset {} of {size})",
                path.display(),
                size - r.left
            ),
        )),
    }
}

fn read_entries<R: Read>(
    r: &mut SnapReader<R>,
    size: u64,
) -> io::Result<(Revision, BTreeMap<Arc<str>, KeyValue>)> {
    let mut magic = [0u8; 8];
    r.exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(invalid("not a snapshot file"));
    }
    let revision = r.i64()?;
    let count = r.i64()? as u64;
    let mut kvs: BTreeMap<Arc<str>, KeyValue> = BTreeMap::new();
    let mut last: Option<Arc<str>> = None;
    for _ in 0..count {
        let key = String::from_utf8(r.vec()?).map_err(|_| invalid("snapshot key is not UTF-8"))?;
        let key: Arc<str> = Arc::from(key);
        let value = Bytes::from(r.vec()?);
        let (create_revision, mod_revision, version) = (r.i64()?, r.i64()?, r.i64()?);
        let sane = create_revision >= 1
            && create_revision <= mod_revision
            && mod_revision <= revision
            && version >= 1;
        let ordered = last.as_ref().is_none_or(|l| *l < key);
        if !sane || !ordered {
            return Err(invalid(format!("malformed entry for {key:?}")));
        }
        last = Some(key.clone());
        kvs.insert(
            key.clone(),
            KeyValue {
                key,
                value,
                create_revision,
                mod_revision,
                version,
            },
        );
    }
    let computed = r.hasher.clone().finalize();
    let checked = size - r.left;
    let stored = r.u32()?;
    if computed != stored {
        return Err(invalid(format!(
            "the checksum of bytes 0..{checked} does not match (damage somewhere in them)"
        )));
    }
    if r.left != 0 {
        return Err(invalid(format!(
            "{} unexpected bytes after the checksum",
            r.left
        )));
    }
    Ok((revision, kvs))
}
