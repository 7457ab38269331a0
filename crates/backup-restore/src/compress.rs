//! Compression of snapshot objects (br's `--compress-snapshots` and
//! `--compression-policy`): gzip and zlib through `flate2`. Objects are
//! read back by their name's suffix, so a store may mix policies.

use std::io::{Read, Write};
use std::path::Path;

use crate::snapshot::Compression;

/// Copies `src` to `dst`, compressing with `c`.
pub fn compress_file(src: &Path, dst: &Path, c: Compression) -> std::io::Result<()> {
    let mut input = std::fs::File::open(src)?;
    let out = std::fs::File::create(dst)?;
    match c {
        Compression::None => {
            let mut out = out;
            std::io::copy(&mut input, &mut out)?;
            out.sync_all()
        }
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            std::io::copy(&mut input, &mut enc)?;
            enc.finish()?.sync_all()
        }
        Compression::Zlib => {
            let mut enc = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
            std::io::copy(&mut input, &mut enc)?;
            enc.finish()?.sync_all()
        }
        Compression::Lzw => Err(lzw_unsupported()),
    }
}

/// Copies `src` to `dst`, decompressing with `c`.
pub fn decompress_file(src: &Path, dst: &Path, c: Compression) -> std::io::Result<()> {
    let input = std::fs::File::open(src)?;
    let mut out = std::fs::File::create(dst)?;
    let mut reader: Box<dyn Read> = match c {
        Compression::None => Box::new(input),
        Compression::Gzip => Box::new(flate2::read::GzDecoder::new(input)),
        Compression::Zlib => Box::new(flate2::read::ZlibDecoder::new(input)),
        Compression::Lzw => return Err(lzw_unsupported()),
    };
    std::io::copy(&mut reader, &mut out)?;
    out.flush()?;
    out.sync_all()
}

/// The bytes of `data` compressed with `c` (deltas are built in memory).
pub fn compress_bytes(data: &[u8], c: Compression) -> std::io::Result<Vec<u8>> {
    match c {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(data)?;
            enc.finish()
        }
        Compression::Zlib => {
            let mut enc =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(data)?;
            enc.finish()
        }
        Compression::Lzw => Err(lzw_unsupported()),
    }
}

/// The bytes of `data` decompressed with `c`.
pub fn decompress_bytes(data: &[u8], c: Compression) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    match c {
        Compression::None => out.extend_from_slice(data),
        Compression::Gzip => {
            flate2::read::GzDecoder::new(data).read_to_end(&mut out)?;
        }
        Compression::Zlib => {
            flate2::read::ZlibDecoder::new(data).read_to_end(&mut out)?;
        }
        Compression::Lzw => return Err(lzw_unsupported()),
    }
    Ok(out)
}

fn lzw_unsupported() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "lzw-compressed snapshots are not supported (use gzip or zlib)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_policy_round_trips_bytes_and_files() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let dir = tempfile::tempdir().unwrap();
        for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
            let packed = compress_bytes(&data, c).unwrap();
            if c != Compression::None {
                assert!(packed.len() < data.len(), "{c:?} compresses");
            }
            assert_eq!(decompress_bytes(&packed, c).unwrap(), data);
            let (a, b, r) = (
                dir.path().join("a"),
                dir.path().join("b"),
                dir.path().join("r"),
            );
            std::fs::write(&a, &data).unwrap();
            compress_file(&a, &b, c).unwrap();
            decompress_file(&b, &r, c).unwrap();
            assert_eq!(std::fs::read(&r).unwrap(), data);
        }
        assert!(compress_bytes(&data, Compression::Lzw).is_err());
        // Garbage is an error, not a panic.
        assert!(decompress_bytes(b"not gzip", Compression::Gzip).is_err());
    }
}
