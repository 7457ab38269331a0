//! Write-ahead log segments: framing of group-commit batches and the scan
//! that recovery runs over a segment, including torn-tail detection.
//!
//! A segment `wal-<first revision>.log` is a sequence of frames
//! `len:u32, crc32(payload):u32, payload`, where the payload is
//! `format:u8, commits:u32` and that many encoded commits (see `codec`).
//! One frame holds one whole batch, written with one `write` and made durable
//! with one `fdatasync`; so a crash can only damage the last frame of the last
//! segment. A bad frame followed anywhere later in its segment by a valid one,
//! or a bad frame in a sealed segment, means the disk lost data it had
//! acknowledged: recovery stops there (see `file`), naming the file and the
//! offset, unless it was asked to repair.
//!
//! A segment may end in zeros: room reserved for appends by `fallocate`.
//! The scan ends the records at the first all-zero rest of the file.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::Revision;
use crate::engine::Commit;

use super::codec::{Reader, encode_commit, invalid, put_u32};

pub(crate) const FRAME_HEADER: usize = 8;
/// Largest frame payload. A batch bigger than this is split into several
/// frames, each made durable before the next is written (which keeps "a
/// valid frame after a bad one is corruption" true).
pub(crate) const MAX_FRAME: usize = 1 << 30;
pub(crate) const FORMAT_V1: u8 = 1;

pub(crate) fn segment_name(start: Revision) -> String {
    format!("wal-{start:020}.log")
}

pub(crate) fn parse_segment_name(name: &str) -> Option<Revision> {
    name.strip_prefix("wal-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// Every segment in `dir`, oldest first, with its first revision.
pub(crate) fn list_segments(dir: &Path) -> io::Result<Vec<(Revision, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(start) = entry.file_name().to_str().and_then(parse_segment_name) {
            out.push((start, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Makes `file` `len` bytes long with every block allocated (reading as
/// zeros past the old end), so writes below `len` change neither its size
/// nor its block map.
#[cfg(target_os = "linux")]
pub(crate) fn preallocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(io::Error::other)?;
    // SAFETY: plain syscall on a descriptor this `File` owns.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn preallocate(_file: &File, _len: u64) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Encodes `commits` into `buf` as one or more frames and returns the end
/// offset of each frame.
pub(crate) fn encode_frames(buf: &mut Vec<u8>, commits: &[Arc<Commit>]) -> io::Result<Vec<usize>> {
    buf.clear();
    let mut ends = Vec::new();
    let mut frame_start = 0;
    let mut in_frame = 0u32;
    begin_frame(buf);
    for commit in commits {
        let before = buf.len();
        encode_commit(buf, commit)?;
        if buf.len() - frame_start - FRAME_HEADER > MAX_FRAME {
            if in_frame == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("commit {} is larger than 1 GiB", commit.revision),
                ));
            }
            // Move this commit into a frame of its own.
            buf.truncate(before);
            finish_frame(buf, frame_start, in_frame);
            ends.push(buf.len());
            frame_start = buf.len();
            in_frame = 0;
            begin_frame(buf);
            encode_commit(buf, commit)?;
            if buf.len() - frame_start - FRAME_HEADER > MAX_FRAME {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("commit {} is larger than 1 GiB", commit.revision),
                ));
            }
        }
        in_frame += 1;
    }
    finish_frame(buf, frame_start, in_frame);
    ends.push(buf.len());
    Ok(ends)
}

fn begin_frame(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&[0u8; FRAME_HEADER]);
    buf.push(FORMAT_V1);
    put_u32(buf, 0); // commit count, filled in by finish_frame
}

fn finish_frame(buf: &mut [u8], start: usize, commits: u32) {
    let payload_start = start + FRAME_HEADER;
    buf[payload_start + 1..payload_start + 5].copy_from_slice(&commits.to_le_bytes());
    let payload = &buf[payload_start..];
    let len = payload.len() as u32; // <= MAX_FRAME, checked by the caller
    let crc = crc32fast::hash(payload);
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Smallest possible commit: revision and event count.
const MIN_COMMIT: usize = 12;
/// Smallest possible payload: format, commit count and one commit.
const MIN_PAYLOAD: usize = 5 + MIN_COMMIT;

/// Why the bytes at some offset are not a valid frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadFrame {
    /// Fewer bytes than a frame header are left.
    ShortHeader { left: usize },
    /// The length field is too small or too large to be a frame.
    BadLength { len: usize },
    /// The length field points past the end of the file.
    PastEnd { len: usize, left: usize },
    /// The payload does not start with a known format byte.
    BadFormat { format: u8 },
    /// The commit count cannot fit in the payload.
    BadCount { count: u32 },
    /// The payload does not match its checksum.
    Checksum,
}

impl std::fmt::Display for BadFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadFrame::ShortHeader { left } => {
                write!(
                    f,
                    "a record header cut short ({left} of {FRAME_HEADER} bytes)"
                )
            }
            BadFrame::BadLength { len } => write!(f, "a record length of {len} bytes"),
            BadFrame::PastEnd { len, left } => write!(
                f,
                "a record length of {len} bytes running past the end of the file \
                 ({left} bytes left)"
            ),
            BadFrame::BadFormat { format } => write!(f, "an unknown record format byte {format}"),
            BadFrame::BadCount { count } => write!(f, "an impossible commit count {count}"),
            BadFrame::Checksum => f.write_str("a record that does not match its checksum"),
        }
    }
}

/// The payload of the frame at `pos`, or why there is none. The cheap checks
/// (length, bounds, format byte, commit count) come before the checksum, so
/// searching every offset of a damaged segment for a later frame stays fast.
fn check_frame(data: &[u8], pos: usize) -> Result<&[u8], BadFrame> {
    let left = data.len().saturating_sub(pos);
    let Some(header) = data.get(pos..pos + FRAME_HEADER) else {
        return Err(BadFrame::ShortHeader { left });
    };
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let len = word(0) as usize;
    if !(MIN_PAYLOAD..=MAX_FRAME).contains(&len) {
        return Err(BadFrame::BadLength { len });
    }
    let start = pos + FRAME_HEADER;
    let Some(payload) = start.checked_add(len).and_then(|end| data.get(start..end)) else {
        return Err(BadFrame::PastEnd {
            len,
            left: left - FRAME_HEADER,
        });
    };
    if payload[0] != FORMAT_V1 {
        return Err(BadFrame::BadFormat { format: payload[0] });
    }
    let count = u32::from_le_bytes([payload[1], payload[2], payload[3], payload[4]]);
    if count == 0 || count as usize > (len - 5) / MIN_COMMIT {
        return Err(BadFrame::BadCount { count });
    }
    if crc32fast::hash(payload) != word(4) {
        return Err(BadFrame::Checksum);
    }
    Ok(payload)
}

/// The first offset at or after `from` where a structurally valid frame
/// starts.
fn next_valid_frame(data: &[u8], from: usize) -> Option<usize> {
    (from..data.len()).find(|&q| check_frame(data, q).is_ok())
}

/// Where a segment stops parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Damage {
    /// Byte offset of the first bad frame.
    pub offset: usize,
    /// What is there instead of a frame.
    pub found: BadFrame,
    /// Offset of a structurally valid frame somewhere after the bad one.
    pub next_valid: Option<usize>,
}

impl Damage {
    /// Whether this can be what a crash mid-write leaves: a bad frame with
    /// nothing valid after it, in the segment being appended to. Anything
    /// else is damage to data that was acknowledged.
    pub fn is_torn_tail(&self, is_last_segment: bool) -> bool {
        is_last_segment && self.next_valid.is_none()
    }

    /// What was found, for an operator.
    pub fn describe(&self, is_last_segment: bool) -> String {
        match self.next_valid {
            Some(q) => format!("{}, followed by a valid record at offset {q}", self.found),
            None if !is_last_segment => format!(
                "{} at the end of a sealed segment (a later segment follows)",
                self.found
            ),
            None => self.found.to_string(),
        }
    }
}

/// The frames of one segment's bytes.
pub(crate) struct Scan<'a> {
    /// Every valid frame before any damage, with its byte offset.
    pub frames: Vec<(usize, &'a [u8])>,
    /// Where the valid frames end; the data length if nothing is damaged.
    pub valid_len: usize,
    pub damage: Option<Damage>,
}

/// Splits a segment into frames, stopping at the first bad one. For a bad
/// frame it searches the whole rest of the segment, offset by offset, for a
/// structurally valid frame: the bad frame's own length field could be the
/// damaged part, so it cannot be trusted to say where to search. Deciding
/// between a torn tail and corruption is left to [`Damage::is_torn_tail`].
///
/// The price of not trusting the length: a crash that cuts short a batch
/// whose own keys or values contain a complete frame looks like corruption,
/// and recovery stops instead of truncating it; the repair option then keeps
/// every acknowledged record. The alternative silently truncated the
/// acknowledged records after a damaged length field.
pub(crate) fn scan_segment(data: &[u8]) -> Scan<'_> {
    let mut frames = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        match check_frame(data, pos) {
            Ok(payload) => {
                frames.push((pos, payload));
                pos += FRAME_HEADER + payload.len();
            }
            // Room reserved for appends (see `FileOptions::preallocate_bytes`),
            // never written: the records end here. A gap of zeros before
            // later records is not this, and neither is a sealed segment
            // missing records, which the next segment's start revision shows.
            Err(_) if data[pos..].iter().all(|&b| b == 0) => break,
            Err(found) => {
                return Scan {
                    frames,
                    valid_len: pos,
                    damage: Some(Damage {
                        offset: pos,
                        found,
                        next_valid: next_valid_frame(data, pos + 1),
                    }),
                };
            }
        }
    }
    Scan {
        frames,
        valid_len: pos,
        damage: None,
    }
}

/// Opens a frame payload: checks the format and returns a reader positioned
/// at the first commit together with the commit count.
pub(crate) fn open_payload(payload: &[u8]) -> io::Result<(Reader<'_>, u32)> {
    let mut r = Reader::new(payload);
    let format = r.u8()?;
    if format != FORMAT_V1 {
        return Err(invalid(format!("unknown log record format {format}")));
    }
    let n = r.u32()?;
    Ok((r, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, EventKind, KeyValue};
    use bytes::Bytes;

    fn commit(rev: Revision, value: Vec<u8>) -> Arc<Commit> {
        Arc::new(Commit {
            revision: rev,
            events: vec![Event {
                kind: EventKind::Put,
                kv: KeyValue {
                    key: Arc::from(format!("/k{rev}")),
                    value: Bytes::from(value),
                    create_revision: rev,
                    mod_revision: rev,
                    version: 1,
                },
                prev: None,
            }],
        })
    }

    fn frames(commits: &[Arc<Commit>]) -> Vec<u8> {
        let mut buf = Vec::new();
        encode_frames(&mut buf, commits).unwrap();
        buf
    }

    /// A crash cutting short a batch whose value is itself a complete frame.
    /// This used to be truncated as a torn tail (the bad frame's length was
    /// trusted to skip its own bytes); since that same trust turned a damaged
    /// length in the middle of the log into silent loss, it is now reported
    /// as corruption, and the repair option recovers it without loss.
    #[test]
    fn torn_write_of_a_value_that_looks_like_a_frame_is_reported_not_truncated() {
        let mut log = frames(&[commit(1, b"a".to_vec())]);
        let good = log.len();
        // A value that is itself a valid frame, in a batch cut short after it.
        let fake = frames(&[commit(99, b"evil".to_vec())]);
        let mut torn = frames(&[commit(2, fake.clone()), commit(3, vec![7; 100])]);
        torn.truncate(torn.len() - 50);
        log.extend_from_slice(&torn);
        let scan = scan_segment(&log);
        assert_eq!((scan.frames.len(), scan.valid_len), (1, good));
        let damage = scan.damage.expect("the torn frame is reported");
        assert_eq!(damage.offset, good);
        assert!(damage.next_valid.is_some(), "the embedded frame is found");
        assert!(!damage.is_torn_tail(true));
    }

    #[test]
    fn damaged_header_before_valid_frames_is_corruption() {
        let mut log = frames(&[commit(1, b"a".to_vec())]);
        log.extend_from_slice(&frames(&[commit(2, b"b".to_vec())]));
        log[0..4].copy_from_slice(&[0; 4]);
        let damage = scan_segment(&log).damage.unwrap();
        assert_eq!(damage.offset, 0);
        assert!(!damage.is_torn_tail(true));
    }

    /// Zeros to the end are room reserved for appends, in any segment; zeros
    /// with anything after them are not.
    #[test]
    fn an_all_zero_end_is_reserved_room() {
        let mut log = frames(&[commit(1, b"a".to_vec())]);
        let good = log.len();
        log.extend_from_slice(&[0; 100]);
        let scan = scan_segment(&log);
        assert_eq!((scan.frames.len(), scan.valid_len), (1, good));
        assert!(scan.damage.is_none());
        // A segment that is nothing but reserved room holds no records.
        let scan = scan_segment(&[0; 64]);
        assert_eq!((scan.frames.len(), scan.valid_len), (0, 0));
        assert!(scan.damage.is_none());
        // A half-written frame in the reserved room is a torn tail.
        let mut torn = log[..good].to_vec();
        let next = frames(&[commit(2, vec![b'b'; 40])]);
        torn.extend_from_slice(&next[..next.len() - 30]); // cut inside the value
        torn.extend_from_slice(&[0; 100]);
        let damage = scan_segment(&torn)
            .damage
            .expect("the torn frame is reported");
        assert_eq!(damage.offset, good);
        assert!(damage.is_torn_tail(true));
        assert!(!damage.is_torn_tail(false));
        // Zeros followed by a record: records are missing, not room.
        let mut gap = log.clone();
        gap.extend_from_slice(&next);
        let damage = scan_segment(&gap).damage.expect("the zeros are damage");
        assert_eq!((damage.offset, damage.next_valid), (good, Some(good + 100)));
        assert!(!damage.is_torn_tail(true));
        // One stray byte in the room makes it damage as well.
        let mut stray = log.clone();
        stray[good + 50] = 7;
        assert!(scan_segment(&stray).damage.is_some());
    }

    /// The case: a length field in the middle of the log damaged to
    /// point past the end of the file. The frames after it are found.
    #[test]
    fn length_pointing_past_the_end_mid_log_is_corruption() {
        let mut log = Vec::new();
        let mut starts = Vec::new();
        for rev in 1..=6 {
            starts.push(log.len());
            log.extend_from_slice(&frames(&[commit(rev, vec![b'v'; 40])]));
        }
        let mid = starts[2];
        log[mid..mid + 4].copy_from_slice(&(1u32 << 20).to_le_bytes());
        let scan = scan_segment(&log);
        assert_eq!(scan.frames.len(), 2);
        let damage = scan.damage.unwrap();
        assert_eq!(damage.offset, mid);
        assert!(matches!(damage.found, BadFrame::PastEnd { .. }));
        assert_eq!(damage.next_valid, Some(starts[3]));
        assert!(!damage.is_torn_tail(true));
        assert!(
            damage
                .describe(true)
                .contains(&format!("offset {}", starts[3]))
        );
    }

    #[test]
    fn undamaged_segments_and_every_cut_of_the_last_frame() {
        let mut log = frames(&[commit(1, b"a".to_vec()), commit(2, b"b".to_vec())]);
        let first = log.len();
        log.extend_from_slice(&frames(&[commit(3, vec![b'c'; 30])]));
        let scan = scan_segment(&log);
        assert_eq!((scan.frames.len(), scan.valid_len), (2, log.len()));
        assert!(scan.damage.is_none());
        // A cut anywhere in the last frame is a torn tail at its start.
        for cut in first + 1..log.len() {
            let scan = scan_segment(&log[..cut]);
            assert_eq!((scan.frames.len(), scan.valid_len), (1, first), "cut {cut}");
            assert!(scan.damage.unwrap().is_torn_tail(true), "cut {cut}");
        }
    }
}
