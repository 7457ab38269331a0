//! Write-ahead log segments: framing of group-commit batches and the scan
//! that recovery runs over a segment, including torn-tail detection.
//!
//! A segment `wal-<first revision>.log` is a sequence of frames
//! `len:u32, crc32(payload):u32, payload`, where the payload is
//! `format:u8, commits:u32` and that many encoded commits (see `codec`).
//! One frame holds one whole batch, written with one `write` and made durable
//! with one `fdatasync`; so a crash can only damage the last frame of the last
//! segment, and a damaged frame followed by a valid one means the disk lost
//! data it had acknowledged.

use std::fs;
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

/// The payload of a structurally valid frame at `pos`, or `None`.
fn frame_at(data: &[u8], pos: usize) -> Option<&[u8]> {
    let header = data.get(pos..pos.checked_add(FRAME_HEADER)?)?;
    let len = u32::from_le_bytes(header[0..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().ok()?);
    if len == 0 || len > MAX_FRAME {
        return None;
    }
    let start = pos + FRAME_HEADER;
    let payload = data.get(start..start.checked_add(len)?)?;
    (crc32fast::hash(payload) == crc).then_some(payload)
}

/// Where the frame at `pos` ends according to a plausible header, or `None`
/// if there is no plausible header.
fn declared_end(data: &[u8], pos: usize) -> Option<usize> {
    let header = data.get(pos..pos.checked_add(FRAME_HEADER)?)?;
    let len = u32::from_le_bytes(header[0..4].try_into().ok()?) as usize;
    (len != 0 && len <= MAX_FRAME).then(|| pos + FRAME_HEADER + len)
}

/// The frames of one segment's bytes.
pub(crate) struct Scan<'a> {
    pub frames: Vec<&'a [u8]>,
    /// Where the valid frames end; less than the data length if a torn tail
    /// follows them.
    pub valid_len: usize,
}

/// Splits a segment into frames. In the last segment a bad frame with no
/// valid frame after it is a torn tail from a crash mid-write: it was never
/// acknowledged, so it is reported (via `valid_len`) for truncation. Anything
/// else that does not parse is corruption and an error.
pub(crate) fn scan_segment<'a>(data: &'a [u8], is_last: bool, path: &Path) -> io::Result<Scan<'a>> {
    let mut frames = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        match frame_at(data, pos) {
            Some(payload) => {
                frames.push(payload);
                pos += FRAME_HEADER + payload.len();
            }
            None => {
                if !is_last {
                    return Err(invalid(format!(
                        "{}: corrupt log record at offset {pos} in a sealed segment",
                        path.display()
                    )));
                }
                // Look for a valid frame after the bad one. A header that is
                // intact bounds the bad frame, and the bytes it covers are
                // not searched: they hold the unacknowledged batch's own keys
                // and values, which could contain frame-like bytes. A frame
                // running past the end is a cut-short write: nothing follows.
                let scan_from = match declared_end(data, pos) {
                    Some(end) if end > data.len() => data.len(),
                    Some(end) => end,
                    None => pos + 1,
                };
                if let Some(later) = (scan_from..data.len()).find(|&q| frame_at(data, q).is_some())
                {
                    return Err(invalid(format!(
                        "{}: corrupt log record at offset {pos} followed by a valid one at \
                         offset {later}",
                        path.display()
                    )));
                }
                return Ok(Scan {
                    frames,
                    valid_len: pos,
                });
            }
        }
    }
    Ok(Scan {
        frames,
        valid_len: pos,
    })
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

    #[test]
    fn torn_write_of_a_value_that_looks_like_a_frame_is_a_torn_tail() {
        let mut log = frames(&[commit(1, b"a".to_vec())]);
        let good = log.len();
        // A value that is itself a valid frame, in a batch cut short after it.
        let fake = frames(&[commit(99, b"evil".to_vec())]);
        let mut torn = frames(&[commit(2, fake.clone()), commit(3, vec![7; 100])]);
        torn.truncate(torn.len() - 50);
        log.extend_from_slice(&torn);
        let scan = scan_segment(&log, true, Path::new("x")).unwrap();
        assert_eq!((scan.frames.len(), scan.valid_len), (1, good));
    }

    #[test]
    fn damaged_header_before_valid_frames_is_corruption() {
        let mut log = frames(&[commit(1, b"a".to_vec())]);
        log.extend_from_slice(&frames(&[commit(2, b"b".to_vec())]));
        log[0..4].copy_from_slice(&[0; 4]);
        assert!(scan_segment(&log, true, Path::new("x")).is_err());
        // Zeros after the last frame are a torn tail.
        let mut log = frames(&[commit(1, b"a".to_vec())]);
        let good = log.len();
        log.extend_from_slice(&[0; 100]);
        let scan = scan_segment(&log, true, Path::new("x")).unwrap();
        assert_eq!((scan.frames.len(), scan.valid_len), (1, good));
        // ...but not in a sealed segment.
        assert!(scan_segment(&log, false, Path::new("x")).is_err());
    }
}
