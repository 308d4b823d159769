//! Parsing one LSP header block, incrementally: lines end in CRLF or LF,
//! header names are checked, `Content-Length` must be plain digits within
//! [`MAX_BODY_BYTES`], and the block is bounded by [`MAX_HEADER_BYTES`]. A bad
//! block says where resynchronization may start, past its first byte.

use super::{MAX_BODY_BYTES, MAX_HEADER_BYTES};

/// Progress through a header block, kept between reads so that no byte is
/// scanned twice.
#[derive(Debug, Default)]
pub(super) struct HeaderScan {
    /// Start of the first line not yet complete; all lines before it were
    /// valid, non-empty header lines.
    line_start: usize,
    /// Bytes from `line_start` up to here hold no `\n`.
    searched: usize,
    content_length: Option<usize>,
}

/// The outcome of looking at the buffered part of a header block.
pub(super) enum HeaderProgress {
    NeedMore,
    Complete {
        header_len: usize,
        content_length: usize,
    },
    /// `resume` is where resynchronization starts searching; it is past the
    /// block's first byte so that the same bad header is never reported twice.
    Bad {
        message: String,
        resume: usize,
    },
}

/// Continues scanning the header block at the start of `pending`.
pub(super) fn scan_header(pending: &[u8], scan: &mut HeaderScan) -> HeaderProgress {
    // Bytes past the limit can never belong to an acceptable header block.
    let window = &pending[..pending.len().min(MAX_HEADER_BYTES)];
    while let Some(newline) = window[scan.searched..].iter().position(|&b| b == b'\n') {
        let line_end = scan.searched + newline;
        let line = &window[scan.line_start..line_end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let next_line = line_end + 1;
        if line.is_empty() {
            return match scan.content_length {
                Some(content_length) => HeaderProgress::Complete {
                    header_len: next_line,
                    content_length,
                },
                None => HeaderProgress::Bad {
                    message: if scan.line_start == 0 {
                        "missing Content-Length header (empty header block)".to_string()
                    } else {
                        "missing Content-Length header".to_string()
                    },
                    resume: 1,
                },
            };
        }
        // Lines are judged as soon as they are complete, so garbage such as a
        // stray `hello\n` is reported at once instead of when a blank line or
        // the size limit eventually shows up.
        if let Err(message) = parse_header_line(line, &mut scan.content_length) {
            return HeaderProgress::Bad {
                message,
                resume: scan.line_start + 1,
            };
        }
        scan.line_start = next_line;
        scan.searched = next_line;
    }
    scan.searched = window.len();
    if window.len() == MAX_HEADER_BYTES {
        return HeaderProgress::Bad {
            message: format!(
                "header block exceeds {MAX_HEADER_BYTES} bytes without ending in an empty line"
            ),
            resume: 1,
        };
    }
    HeaderProgress::NeedMore
}

/// Checks one header line (without its line ending) and records `Content-Length`.
fn parse_header_line(line: &[u8], content_length: &mut Option<usize>) -> Result<(), String> {
    let malformed = || {
        format!(
            "malformed header line `{}`: expected `Name: value`",
            excerpt(line)
        )
    };
    let colon = line.iter().position(|&b| b == b':').ok_or_else(malformed)?;
    let name = &line[..colon];
    if name.is_empty() || !name.iter().all(|&b| is_header_name_byte(b)) {
        return Err(malformed());
    }
    if !name.eq_ignore_ascii_case(b"content-length") {
        // Content-Type only ever announces utf-8 in practice; others are extensions.
        return Ok(());
    }
    let value = line[colon + 1..].trim_ascii();
    let length = parse_content_length(value)?;
    match *content_length {
        Some(earlier) if earlier != length => Err(format!(
            "conflicting Content-Length headers: {earlier} and {length}"
        )),
        _ => {
            *content_length = Some(length);
            Ok(())
        }
    }
}

/// Parses a `Content-Length` value: plain decimal digits, at most [`MAX_BODY_BYTES`].
fn parse_content_length(value: &[u8]) -> Result<usize, String> {
    if value.is_empty() {
        return Err("bad Content-Length header: the value is empty".to_string());
    }
    // Checked by hand because `usize::from_str` also accepts a leading `+`.
    if !value.iter().all(u8::is_ascii_digit) {
        return Err(format!(
            "bad Content-Length header: `{}` is not a number",
            excerpt(value)
        ));
    }
    let too_large = || {
        format!(
            "bad Content-Length header: {} bytes is over the {MAX_BODY_BYTES}-byte (256 MiB) limit",
            excerpt(value)
        )
    };
    // All digits, so a parse failure can only be overflow.
    let length: usize = std::str::from_utf8(value)
        .ok()
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(too_large)?;
    if length > MAX_BODY_BYTES {
        return Err(too_large());
    }
    Ok(length)
}

/// RFC 9110 `tchar`: what a header field name may consist of.
fn is_header_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Input bytes made fit for an error message: lossy UTF-8, escaped, and cut short.
fn excerpt(bytes: &[u8]) -> String {
    const MAX_CHARS: usize = 60;
    let text = String::from_utf8_lossy(bytes);
    let mut shown: String = text.chars().take(MAX_CHARS).collect();
    if text.chars().nth(MAX_CHARS).is_some() {
        shown.push('…');
    }
    shown.escape_debug().to_string()
}
