//! Body compression shared by the sinks that store documents (file, S3): deterministic gzip
//! (mtime 0, no file name, so one message always compresses to the same bytes) and bounded
//! reading of stored documents back for conflict checks.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

/// Compression applied to each stored document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// Plain JSON (default).
    #[default]
    None,
    /// Deterministic gzip (mtime 0, no file name in the header).
    Gzip,
}

impl Compression {
    /// `data` compressed at `level` (0–9; ignored for `None`).
    pub fn apply(self, data: Vec<u8>, level: u32) -> std::io::Result<Vec<u8>> {
        match self {
            Self::None => Ok(data),
            Self::Gzip => {
                let out = Vec::with_capacity(data.len() / 2 + 64);
                let mut encoder = flate2::GzBuilder::new().mtime(0).write(out, flate2::Compression::new(level));
                encoder.write_all(&data)?;
                encoder.finish()
            }
        }
    }
}

/// The decoded content of a stored document read from `reader` (gunzipped when `gzip`), or
/// `None` when it cannot be read or decodes to more than `max` bytes.
pub fn read_decoded(reader: impl Read, gzip: bool, max: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let limit = max.saturating_add(1);
    let read = if gzip {
        flate2::read::GzDecoder::new(reader).take(limit).read_to_end(&mut out)
    } else {
        reader.take(limit).read_to_end(&mut out)
    };
    read.ok()?;
    (out.len() as u64 <= max).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_deterministic_and_reads_back_within_bounds() {
        let data = b"{\"a\":1}".repeat(1000);
        let once = Compression::Gzip.apply(data.clone(), 6).unwrap();
        assert_eq!(once, Compression::Gzip.apply(data.clone(), 6).unwrap());
        assert_eq!(&once[..2], &[0x1f, 0x8b]);
        assert_eq!(read_decoded(&once[..], true, 7000).unwrap(), data);
        assert!(read_decoded(&once[..], true, 6999).is_none(), "over the bound");
        assert!(read_decoded(&b"not gzip"[..], true, 100).is_none());
        assert_eq!(Compression::None.apply(data.clone(), 6).unwrap(), data);
        assert_eq!(read_decoded(&data[..], false, 7000).unwrap(), data);
    }
}
