//! The compact little-endian binary encoding of commits in the write-ahead
//! log, plus the small reader/writer helpers the snapshot format shares.
//!
//! A commit is `revision:i64, events:u32` followed by its events. An event is
//! `kind:u8, key:bytes, value:bytes, create:i64, mod:i64, version:i64`, then
//! the previous value's presence (`u8`) and, if present, its `create, mod,
//! version`. `bytes` is a `u32` length and the raw bytes.
//!
//! The previous value's *bytes* are not written: replay always runs on the
//! exact state the commit was made against (snapshot plus every earlier
//! commit, in order), so the value is taken from there, and the written
//! metadata is checked against it. That halves the log volume of updates,
//! the commonest write, and doubles as a consistency check of the replay.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use crate::engine::Commit;
use crate::{Event, EventKind, KeyValue, Revision};

const KIND_PUT: u8 = 0;
const KIND_DELETE: u8 = 1;

/// An `InvalidData` error: what recovery returns for anything malformed.
pub(crate) fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

pub(crate) fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_i64(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) -> io::Result<()> {
    let len = u32::try_from(b.len()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a key or value is larger than 4 GiB",
        )
    })?;
    put_u32(buf, len);
    buf.extend_from_slice(b);
    Ok(())
}

/// Bounds-checked reads from a byte slice; running off the end is an
/// `InvalidData` error, never a panic.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| invalid("record ends early"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn i64(&mut self) -> io::Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    pub(crate) fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    pub(crate) fn str(&mut self) -> io::Result<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| invalid("key is not UTF-8"))
    }
}

pub(crate) fn encode_commit(buf: &mut Vec<u8>, commit: &Commit) -> io::Result<()> {
    put_i64(buf, commit.revision);
    let n = u32::try_from(commit.events.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many events"))?;
    put_u32(buf, n);
    for ev in &commit.events {
        buf.push(match ev.kind {
            EventKind::Put => KIND_PUT,
            EventKind::Delete => KIND_DELETE,
        });
        put_bytes(buf, ev.kv.key.as_bytes())?;
        put_bytes(buf, &ev.kv.value)?;
        put_i64(buf, ev.kv.create_revision);
        put_i64(buf, ev.kv.mod_revision);
        put_i64(buf, ev.kv.version);
        match &ev.prev {
            None => buf.push(0),
            Some(p) => {
                buf.push(1);
                put_i64(buf, p.create_revision);
                put_i64(buf, p.mod_revision);
                put_i64(buf, p.version);
            }
        }
    }
    Ok(())
}

/// Decodes one commit.
///
/// If its revision is above `skip_through`, `state` must hold the state just
/// before the commit: each event's previous value is resolved from it and
/// checked, the commit is applied to it and returned. Otherwise the commit is
/// only parsed (it is already part of the snapshot `state` came from) and
/// `Ok((revision, None))` is returned. On an error `state` is left as it was,
/// so recovery can stop at the record before and keep a consistent state.
pub(crate) fn decode_commit(
    r: &mut Reader<'_>,
    state: &mut BTreeMap<Arc<str>, KeyValue>,
    skip_through: Revision,
) -> io::Result<(Revision, Option<Commit>)> {
    let revision = r.i64()?;
    let apply = revision > skip_through;
    let n = r.u32()? as usize;
    // Every event takes at least 34 bytes, so a huge count in a short record
    // cannot make us reserve a huge vector.
    let mut events = Vec::with_capacity(n.min(r.buf.len() / 34 + 1));
    if let Err(e) = decode_events(r, state, revision, apply, n, &mut events) {
        revert(state, &events);
        return Err(e);
    }
    if !apply {
        return Ok((revision, None));
    }
    if events.is_empty() {
        return Err(invalid(format!("commit {revision} has no events")));
    }
    Ok((revision, Some(Commit { revision, events })))
}

/// Undoes `events` (applied in order) on `state`, newest first.
pub(crate) fn revert(state: &mut BTreeMap<Arc<str>, KeyValue>, events: &[Event]) {
    for ev in events.iter().rev() {
        match &ev.prev {
            Some(p) => {
                state.insert(p.key.clone(), p.clone());
            }
            None => {
                state.remove(&ev.kv.key);
            }
        }
    }
}

/// Decodes the `n` events of the commit at `revision`, applying each to
/// `state` (if `apply`) and pushing it to `events` as it goes.
fn decode_events(
    r: &mut Reader<'_>,
    state: &mut BTreeMap<Arc<str>, KeyValue>,
    revision: Revision,
    apply: bool,
    n: usize,
    events: &mut Vec<Event>,
) -> io::Result<()> {
    for _ in 0..n {
        let kind = match r.u8()? {
            KIND_PUT => EventKind::Put,
            KIND_DELETE => EventKind::Delete,
            k => return Err(invalid(format!("unknown event kind {k}"))),
        };
        let key_str = r.str()?;
        let value = r.bytes()?;
        let (create_revision, mod_revision, version) = (r.i64()?, r.i64()?, r.i64()?);
        let prev_meta = match r.u8()? {
            0 => None,
            1 => Some((r.i64()?, r.i64()?, r.i64()?)),
            f => return Err(invalid(format!("bad previous-value flag {f}"))),
        };
        if mod_revision != revision {
            return Err(invalid(format!(
                "event of revision {revision} has mod revision {mod_revision}"
            )));
        }
        let well_formed = match kind {
            EventKind::Put => create_revision >= 1 && create_revision <= revision && version >= 1,
            EventKind::Delete => {
                value.is_empty() && create_revision == 0 && version == 0 && prev_meta.is_some()
            }
        };
        if !well_formed {
            return Err(invalid(format!(
                "malformed event for {key_str:?} at revision {revision}"
            )));
        }
        if !apply {
            continue;
        }
        let current = state.get(key_str);
        let prev = match (prev_meta, current) {
            (None, None) => None,
            (Some(meta), Some(cur))
                if meta == (cur.create_revision, cur.mod_revision, cur.version) =>
            {
                Some(cur.clone())
            }
            _ => {
                return Err(invalid(format!(
                    "log record for {key_str:?} at revision {revision} does not match the \
                     recovered state"
                )));
            }
        };
        // Share the key allocation with the existing entry when there is one.
        let key: Arc<str> = match &prev {
            Some(p) => p.key.clone(),
            None => Arc::from(key_str),
        };
        let kv = KeyValue {
            key: key.clone(),
            value: Bytes::copy_from_slice(value),
            create_revision,
            mod_revision,
            version,
        };
        match kind {
            EventKind::Put => {
                state.insert(key, kv.clone());
            }
            EventKind::Delete => {
                state.remove(&key);
            }
        }
        events.push(Event { kind, kv, prev });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str, c: i64, m: i64, v: i64) -> KeyValue {
        KeyValue {
            key: Arc::from(key),
            value: Bytes::copy_from_slice(value.as_bytes()),
            create_revision: c,
            mod_revision: m,
            version: v,
        }
    }

    #[test]
    fn round_trip_resolves_prev_from_state() {
        let a1 = kv("/a", "1", 1, 1, 1);
        let a2 = kv("/a", "2", 1, 2, 2);
        let commit = Commit {
            revision: 2,
            events: vec![
                Event {
                    kind: EventKind::Put,
                    kv: a2.clone(),
                    prev: Some(a1.clone()),
                },
                Event {
                    kind: EventKind::Put,
                    kv: kv("/b", "x", 2, 2, 1),
                    prev: None,
                },
            ],
        };
        let mut buf = Vec::new();
        encode_commit(&mut buf, &commit).unwrap();
        let mut state = BTreeMap::new();
        state.insert(a1.key.clone(), a1.clone());
        let (rev, got) = decode_commit(&mut Reader::new(&buf), &mut state, 0).unwrap();
        assert_eq!(rev, 2);
        assert_eq!(got.unwrap(), commit);
        assert_eq!(state.get("/a"), Some(&a2));
        assert_eq!(state.len(), 2);
        // A state that does not match the record is an error, not a panic.
        let mut wrong = BTreeMap::new();
        assert!(decode_commit(&mut Reader::new(&buf), &mut wrong, 0).is_err());
        // Every truncation is an error, never a panic, and leaves the state
        // as it was (the first event may already have been applied).
        for cut in 0..buf.len() {
            let mut state = BTreeMap::new();
            state.insert(a1.key.clone(), a1.clone());
            let before = state.clone();
            assert!(decode_commit(&mut Reader::new(&buf[..cut]), &mut state, 0).is_err());
            assert_eq!(state, before, "cut at {cut}");
        }
    }
}
