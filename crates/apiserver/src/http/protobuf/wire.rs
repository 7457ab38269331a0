//! The protobuf wire format, read one field at a time.
//!
//! Only what Kubernetes objects use: varints, 64-bit and 32-bit fixed values
//! and length-delimited payloads. Groups (wire types 3 and 4) never occur in
//! Kubernetes messages, so they are treated as malformed input rather than
//! skipped. Every read is bounds-checked; a truncated or overlong field is an
//! error, never a panic.

/// One field's payload, by wire type. No Kubernetes message in the tables
/// has a fixed-width field (there are no `double`s, `fixed64`s, …), so those
/// are only skipped and their bits are not kept.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wire<'a> {
    Varint(u64),
    Fixed64,
    Len(&'a [u8]),
    Fixed32,
}

impl Wire<'_> {
    /// The wire type's name, for error messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Wire::Varint(_) => "varint",
            Wire::Fixed64 => "64-bit",
            Wire::Len(_) => "length-delimited",
            Wire::Fixed32 => "32-bit",
        }
    }
}

/// A cursor over an encoded message.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// A base-128 varint of at most ten bytes (the longest a u64 needs).
    pub(crate) fn varint(&mut self) -> Result<u64, &'static str> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.buf.split_first().ok_or("truncated varint")?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than ten bytes")
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if n > self.buf.len() {
            return Err("field runs past the end of its message");
        }
        let (b, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(b)
    }

    /// The next field's number and payload; `None` at the end of the message.
    pub(crate) fn field(&mut self) -> Result<Option<(u64, Wire<'a>)>, &'static str> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 {
            return Err("field number 0");
        }
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed64
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
                Wire::Len(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed32
            }
            _ => return Err("unsupported wire type (groups are not used by Kubernetes)"),
        };
        Ok(Some((number, wire)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_wire_type() {
        let buf = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0, // 2: fixed64 1
            0x1a, 2, b'h', b'i', // 3: "hi"
            0x25, 7, 0, 0, 0, // 4: fixed32 7
        ];
        let mut r = Reader::new(&buf);
        assert!(matches!(r.field(), Ok(Some((1, Wire::Varint(150))))));
        assert!(matches!(r.field(), Ok(Some((2, Wire::Fixed64)))));
        assert!(matches!(r.field(), Ok(Some((3, Wire::Len(b"hi"))))));
        assert!(matches!(r.field(), Ok(Some((4, Wire::Fixed32)))));
        assert!(matches!(r.field(), Ok(None)));
    }

    #[test]
    fn malformed_fields_are_errors() {
        for buf in [
            &[0x08][..],   // varint missing
            &[0x12, 5, 1], // length past the end
            &[0x0b],       // start group
            &[0x00, 0x01], // field number 0
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
            &[0x11, 1, 2], // short fixed64
            &[0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], // huge length
        ] {
            assert!(Reader::new(buf).field().is_err(), "{buf:?}");
        }
    }
}
