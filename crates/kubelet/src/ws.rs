//! Just enough WebSocket (RFC 6455) for the kubelet's exec stream: the
//! handshake's accept key, and reading and writing frames (masked from
//! clients, unmasked from servers; fragments joined; control frames
//! returned as they come). Hand-written over ring's SHA-1 rather than a
//! new dependency: the exec stream needs a few dozen lines of it.
//!
//! Kubernetes' channel protocols (`v4.channel.k8s.io`,
//! `v5.channel.k8s.io`) put the stream number in the first byte of each
//! binary message: 0 stdin, 1 stdout, 2 stderr, 3 error (a metav1.Status),
//! 4 resize, and in v5 255 closes a stream.

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const OP_CONT: u8 = 0x0;
pub const OP_TEXT: u8 = 0x1;
pub const OP_BINARY: u8 = 0x2;
pub const OP_CLOSE: u8 = 0x8;
pub const OP_PING: u8 = 0x9;
pub const OP_PONG: u8 = 0xA;

/// Largest message accepted.
pub const MAX_MESSAGE: usize = 16 << 20;

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    let mut input = key.trim().as_bytes().to_vec();
    input.extend_from_slice(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &input);
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// One message: its opcode and payload (fragments joined).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// Reads messages; keeps a fragmented message across the control frames
/// that may arrive between its fragments.
#[derive(Debug, Default)]
pub struct Reader {
    payload: Vec<u8>,
    first_op: Option<u8>,
}

impl Reader {
    /// Reads one message; `Ok(None)` at a clean end of stream.
    pub async fn next<R: AsyncRead + Unpin>(
        &mut self,
        r: &mut R,
    ) -> std::io::Result<Option<Message>> {
        read_message(self, r).await
    }
}

async fn read_message<R: AsyncRead + Unpin>(
    st: &mut Reader,
    r: &mut R,
) -> std::io::Result<Option<Message>> {
    loop {
        let (payload, first_op) = (&mut st.payload, &mut st.first_op);
        let mut head = [0u8; 2];
        match r.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && first_op.is_none() => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        let fin = head[0] & 0x80 != 0;
        let op = head[0] & 0x0f;
        let masked = head[1] & 0x80 != 0;
        let len = match head[1] & 0x7f {
            126 => {
                let mut b = [0u8; 2];
                r.read_exact(&mut b).await?;
                u16::from_be_bytes(b) as u64
            }
            127 => {
                let mut b = [0u8; 8];
                r.read_exact(&mut b).await?;
                u64::from_be_bytes(b)
            }
            n => n as u64,
        };
        if len as usize > MAX_MESSAGE || payload.len() + len as usize > MAX_MESSAGE {
            return Err(std::io::Error::other("WebSocket message too large"));
        }
        let mut mask = [0u8; 4];
        if masked {
            r.read_exact(&mut mask).await?;
        }
        let mut data = vec![0u8; len as usize];
        r.read_exact(&mut data).await?;
        if masked {
            for (i, b) in data.iter_mut().enumerate() {
                *b ^= mask[i % 4];
            }
        }
        // Control frames may come between fragments; hand them out alone.
        if op >= OP_CLOSE {
            return Ok(Some(Message {
                opcode: op,
                payload: data,
            }));
        }
        if first_op.is_none() {
            *first_op = Some(op);
        }
        payload.extend_from_slice(&data);
        if fin {
            let opcode = first_op.take().unwrap_or(OP_BINARY);
            return Ok(Some(Message {
                opcode,
                payload: std::mem::take(payload),
            }));
        }
    }
}

/// Encodes one final frame; `mask` for a client.
pub fn frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(0x80 | opcode);
    let m = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(m | n as u8),
        n if n <= u16::MAX as usize => {
            out.push(m | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(m | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(k) => {
            out.extend_from_slice(&k);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ k[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
    out
}

/// Writes one unmasked (server) frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    opcode: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    w.write_all(&frame(opcode, payload, None)).await?;
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_matches_the_rfc_example() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[tokio::test]
    async fn frames_round_trip_masked_fragmented_and_large() {
        let mut wire = Vec::new();
        // A fragmented, masked message with a ping in the middle.
        let mut first = frame(OP_BINARY, b"\x01hel", Some([1, 2, 3, 4]));
        first[0] &= 0x7f;
        wire.extend(first);
        wire.extend(frame(OP_PING, b"p", Some([9, 9, 9, 9])));
        wire.extend(frame(OP_CONT, b"lo", Some([5, 6, 7, 8])));
        let big = vec![7u8; 70_000];
        wire.extend(frame(OP_BINARY, &big, None));
        wire.extend(frame(OP_BINARY, &[0u8; 300], Some([1, 1, 1, 1])));
        let mut r = &wire[..];
        let mut rd = Reader::default();
        assert_eq!(
            rd.next(&mut r).await.unwrap().unwrap(),
            Message {
                opcode: OP_PING,
                payload: b"p".to_vec()
            }
        );
        assert_eq!(
            rd.next(&mut r).await.unwrap().unwrap(),
            Message {
                opcode: OP_BINARY,
                payload: b"\x01hello".to_vec()
            }
        );
        assert_eq!(rd.next(&mut r).await.unwrap().unwrap().payload, big);
        assert_eq!(rd.next(&mut r).await.unwrap().unwrap().payload.len(), 300);
        assert_eq!(rd.next(&mut r).await.unwrap(), None);
        let mut cut = &frame(OP_BINARY, b"abc", None)[..3];
        assert!(
            Reader::default().next(&mut cut).await.is_err(),
            "a torn frame is an error, not a panic"
        );
        let mut huge = &[0x82u8, 127, 0xff, 0, 0, 0, 0, 0, 0, 0][..];
        assert!(Reader::default().next(&mut huge).await.is_err());
    }
}
