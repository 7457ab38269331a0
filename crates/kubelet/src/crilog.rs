//! Container logs in the CRI format the real kubelet reads
//! (`<RFC 3339 time> <stdout|stderr> <F|P> <text>`, one record a line; `P`
//! marks a piece of a line longer than [`MAX_LINE`], continued by the next
//! record), written by the shim and read back for `kubectl logs`.

use std::io::Write;

use k8s_openapi::jiff::Timestamp;

/// Longest record; a longer line is split into partial records (as
/// containerd does at 16 KiB).
pub const MAX_LINE: usize = 16 * 1024;

/// Which output a record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Splits one stream's bytes into records.
#[derive(Debug, Default)]
pub struct Splitter {
    buf: Vec<u8>,
}

impl Splitter {
    /// Feeds `chunk`; returns the complete records as `(partial, text)`.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<(bool, Vec<u8>)> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        loop {
            let newline = self.buf.iter().position(|&b| b == b'\n');
            if let Some(nl) = newline.filter(|nl| *nl <= MAX_LINE) {
                let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
                line.pop();
                out.push((false, line));
                continue;
            }
            if self.buf.len() > MAX_LINE {
                let piece: Vec<u8> = self.buf.drain(..MAX_LINE).collect();
                out.push((true, piece));
                continue;
            }
            return out;
        }
    }

    /// What is left at the end of the stream, as a final full record.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        (!self.buf.is_empty()).then(|| std::mem::take(&mut self.buf))
    }
}

/// One record, newline included.
pub fn record(at: Timestamp, stream: Stream, partial: bool, text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 48);
    let _ = write!(
        out,
        "{} {} {} ",
        at,
        stream.as_str(),
        if partial { "P" } else { "F" }
    );
    out.extend_from_slice(text);
    out.push(b'\n');
    out
}

/// A parsed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub time: &'a str,
    pub stream: &'a str,
    pub partial: bool,
    pub text: &'a [u8],
}

/// Parses one record (without its newline); `None` for a malformed one.
pub fn parse(line: &[u8]) -> Option<Record<'_>> {
    let mut parts = line.splitn(4, |&b| b == b' ');
    let time = std::str::from_utf8(parts.next()?).ok()?;
    let stream = std::str::from_utf8(parts.next()?).ok()?;
    let tag = parts.next()?;
    let text = parts.next().unwrap_or(&[]);
    if !matches!(stream, "stdout" | "stderr") {
        return None;
    }
    Some(Record {
        time,
        stream,
        partial: tag.first() == Some(&b'P'),
        text,
    })
}

/// What `kubectl logs` asks for, as the kubelet's `containerLogs` options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub timestamps: bool,
    pub tail_lines: Option<usize>,
    /// Only records at or after this time (RFC 3339).
    pub since: Option<Timestamp>,
    pub limit_bytes: Option<usize>,
}

/// A log line reassembled from its records: time of the first record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub time: String,
    pub text: Vec<u8>,
}

/// Reassembles whole lines from a log file's contents; an incomplete last
/// line (partial records or no newline yet) is returned as `rest`, the
/// number of bytes not consumed.
pub fn lines(data: &[u8]) -> (Vec<Line>, usize) {
    let mut out = Vec::new();
    let mut pending: Option<Line> = None;
    let mut consumed = 0;
    let mut pos = 0;
    while let Some(nl) = data[pos..].iter().position(|&b| b == b'\n') {
        let raw = &data[pos..pos + nl];
        pos += nl + 1;
        let Some(r) = parse(raw) else {
            consumed = pos;
            continue;
        };
        let line = pending.get_or_insert_with(|| Line {
            time: r.time.to_string(),
            text: Vec::new(),
        });
        line.text.extend_from_slice(r.text);
        if !r.partial {
            out.extend(pending.take());
            consumed = pos;
        }
    }
    (out, consumed)
}

/// Renders lines for the client: optional timestamp prefix, newline.
pub fn render(line: &Line, timestamps: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(line.text.len() + 40);
    if timestamps {
        out.extend_from_slice(line.time.as_bytes());
        out.push(b' ');
    }
    out.extend_from_slice(&line.text);
    out.push(b'\n');
    out
}

/// Whether a line passes the `since` filter.
pub fn after(line: &Line, since: Option<Timestamp>) -> bool {
    match since {
        None => true,
        Some(t) => line.time.parse::<Timestamp>().map_or(true, |lt| lt >= t),
    }
}

/// The selected lines of a whole file, rendered (no follow).
pub fn select(data: &[u8], opts: &Options) -> Vec<u8> {
    let (all, _) = lines(data);
    let kept: Vec<&Line> = all.iter().filter(|l| after(l, opts.since)).collect();
    let from = opts.tail_lines.map_or(0, |n| kept.len().saturating_sub(n));
    let mut out = Vec::new();
    for l in &kept[from..] {
        out.extend(render(l, opts.timestamps));
    }
    if let Some(limit) = opts.limit_bytes {
        out.truncate(limit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_emits_lines_and_splits_long_ones() {
        let mut s = Splitter::default();
        assert_eq!(s.feed(b"a\nb"), [(false, b"a".to_vec())]);
        assert_eq!(
            s.feed(b"c\n\n"),
            [(false, b"bc".to_vec()), (false, Vec::new())]
        );
        let long = vec![b'x'; MAX_LINE + 10];
        let out = s.feed(&long);
        assert_eq!(out.len(), 1);
        assert!(out[0].0, "a piece of a long line is partial");
        assert_eq!(s.feed(b"\n"), [(false, vec![b'x'; 10])]);
        assert_eq!(s.feed(b"tail"), []);
        assert_eq!(s.finish(), Some(b"tail".to_vec()));
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn records_round_trip_and_partials_join() {
        let t: Timestamp = "2024-01-02T03:04:05.123456789Z".parse().unwrap();
        let mut file = record(t, Stream::Stdout, true, b"hel");
        file.extend(record(t, Stream::Stdout, false, b"lo world"));
        file.extend(record(t, Stream::Stderr, false, b"oops"));
        file.extend(b"garbage\n");
        file.extend(record(t, Stream::Stdout, true, b"incomp"));
        let (ls, consumed) = lines(&file);
        assert_eq!(ls.len(), 2);
        assert_eq!(ls[0].text, b"hello world");
        assert_eq!(ls[0].time, "2024-01-02T03:04:05.123456789Z");
        assert_eq!(ls[1].text, b"oops");
        assert!(
            consumed < file.len(),
            "the incomplete line is left for later"
        );
        assert_eq!(
            &file[consumed..],
            &record(t, Stream::Stdout, true, b"incomp")[..]
        );
    }

    #[test]
    fn select_honours_tail_since_timestamps_and_limit() {
        let mut file = Vec::new();
        for (i, s) in ["one", "two", "three"].iter().enumerate() {
            let t = Timestamp::from_second(1_700_000_000 + i as i64).unwrap();
            file.extend(record(t, Stream::Stdout, false, s.as_bytes()));
        }
        assert_eq!(select(&file, &Options::default()), b"one\ntwo\nthree\n");
        let tail = Options {
            tail_lines: Some(2),
            ..Options::default()
        };
        assert_eq!(select(&file, &tail), b"two\nthree\n");
        let since = Options {
            since: Some(Timestamp::from_second(1_700_000_001).unwrap()),
            ..Options::default()
        };
        assert_eq!(select(&file, &since), b"two\nthree\n");
        let ts = Options {
            timestamps: true,
            tail_lines: Some(1),
            ..Options::default()
        };
        assert_eq!(select(&file, &ts), b"2023-11-14T22:13:22Z three\n");
        let limit = Options {
            limit_bytes: Some(5),
            ..Options::default()
        };
        assert_eq!(select(&file, &limit), b"one\nt");
        assert_eq!(select(b"", &tail), b"");
    }
}
