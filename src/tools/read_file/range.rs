//! read_file's window over a big file on disk: read only as far as the
//! window needs, never the whole file.
//!
//! Files up to [`COUNT_WHOLE_BYTES`] (and open buffers) are read whole, so
//! their output names the exact number of lines left. A bigger file is read
//! line by line from its start through the last line of the window, keeping
//! at most [`KEPT_LINE_BYTES`] of any line; when lines remain after the
//! window the last line says so without counting them:
//! `[... more lines follow; the file has 104857600 bytes, read to byte 12345; continue with offset=201]`.
//! A window past the end reads to the end, so its error names the count.
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek};
use std::path::Path;

use super::{binary_error, push_numbered, BINARY_PROBE_BYTES, MAX_LINE_CHARS};
use crate::tools::ToolError;

/// Bigger files are read only as far as the window needs. 1 MiB is read
/// and counted in about a millisecond, and holds the source files models
/// usually read, whose output stays exactly what it was.
pub const COUNT_WHOLE_BYTES: u64 = 1024 * 1024;
/// Bytes kept of one line: enough for [`MAX_LINE_CHARS`] characters of up
/// to 4 bytes and one more, so a cut line still gets its marker. A file
/// without newlines costs this much memory, not its size.
const KEPT_LINE_BYTES: usize = 4 * MAX_LINE_CHARS + 4;
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Lines `offset..offset+limit` of the file at `path` (`size` bytes), in
/// read_file's format.
pub fn read_window(
    path: &Path,
    size: u64,
    offset: usize,
    limit: usize,
    shown: &str,
) -> Result<String, ToolError> {
    let cannot = |e: io::Error| ToolError::new(format!("cannot read `{shown}`: {e}"));
    let mut file = File::open(path).map_err(cannot)?;
    let mut probe = Vec::with_capacity(BINARY_PROBE_BYTES);
    (&mut file)
        .take(BINARY_PROBE_BYTES as u64)
        .read_to_end(&mut probe)
        .map_err(cannot)?;
    if probe.contains(&0) {
        return Err(binary_error(shown));
    }
    file.rewind().map_err(cannot)?;
    let mut reader = Lines {
        inner: BufReader::with_capacity(READ_BUFFER_BYTES, file),
        read: 0,
    };
    for skipped in 0..offset - 1 {
        if !reader.next_line(None).map_err(cannot)? {
            if skipped == 0 {
                return Ok(format!("[`{shown}` is empty]"));
            }
            return Err(ToolError::new(format!(
                "offset {offset} is past the end of `{shown}`, which has {skipped} lines"
            )));
        }
    }
    let mut out = String::new();
    let mut line = Vec::with_capacity(256);
    let mut last = offset - 1;
    for _ in 0..limit {
        line.clear();
        if !reader.next_line(Some(&mut line)).map_err(cannot)? {
            break;
        }
        last += 1;
        push_numbered(&mut out, last, &String::from_utf8_lossy(&line));
    }
    if last == 0 {
        return Ok(format!("[`{shown}` is empty]"));
    }
    if last == offset - 1 {
        return Err(ToolError::new(format!(
            "offset {offset} is past the end of `{shown}`, which has {last} lines"
        )));
    }
    if reader.at_end().map_err(cannot)? {
        return Ok(out);
    }
    out.push_str(&format!(
        "[... more lines follow; the file has {size} bytes, read to byte {}; continue with offset={}]\n",
        reader.read,
        last + 1
    ));
    Ok(out)
}

/// Lines of a reader, as `str::lines` splits them (`\n`, `\r\n`; a final
/// newline adds no empty line), without holding more than one line's
/// [`KEPT_LINE_BYTES`].
struct Lines<R> {
    inner: BufReader<R>,
    /// Bytes consumed so far.
    read: u64,
}

impl<R: Read> Lines<R> {
    /// Reads the next line into `keep` (when given) without its ending,
    /// cut at [`KEPT_LINE_BYTES`]. `false` at the end of the file.
    fn next_line(&mut self, mut keep: Option<&mut Vec<u8>>) -> io::Result<bool> {
        let mut any = false;
        let mut length = 0;
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                return Ok(any);
            }
            any = true;
            let newline = buf.iter().position(|&b| b == b'\n');
            let (part, used) = match newline {
                Some(at) => (&buf[..at], at + 1),
                None => (buf, buf.len()),
            };
            length += part.len();
            if let Some(kept) = keep.as_deref_mut() {
                let room = KEPT_LINE_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&part[..part.len().min(room)]);
                // `\r\n` ends a line; a lone `\r` is text. A cut line
                // lost its `\r` with its tail.
                if newline.is_some() && length <= KEPT_LINE_BYTES && kept.last() == Some(&b'\r') {
                    kept.pop();
                }
            }
            self.inner.consume(used);
            self.read += used as u64;
            if newline.is_some() {
                return Ok(true);
            }
        }
    }

    fn at_end(&mut self) -> io::Result<bool> {
        Ok(self.inner.fill_buf()?.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(text: &[u8], offset: usize, limit: usize) -> Result<String, ToolError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, text).unwrap();
        read_window(&path, text.len() as u64, offset, limit, "f.txt")
    }

    /// What read_file shows for a small file: the reference.
    fn whole(text: &[u8], offset: usize, limit: usize) -> Result<String, ToolError> {
        super::super::number_lines(&String::from_utf8_lossy(text), offset, limit, "f.txt")
    }

    #[test]
    fn lines_match_the_whole_file_reading_when_the_window_reaches_the_end() {
        let long = "é".repeat(MAX_LINE_CHARS + 5);
        let texts: [&[u8]; 5] = [
            b"first\r\nsecond\n\nfourth",
            b"a\nb\n",
            b"caf\xe9\nbar\r\n",
            long.as_bytes(),
            b"cr\ralone\n\r\n",
        ];
        for text in texts {
            for offset in 1..=3 {
                assert_eq!(
                    window(text, offset, 10).map_err(|e| e.0),
                    whole(text, offset, 10).map_err(|e| e.0),
                    "{text:?} from {offset}"
                );
            }
        }
    }

    #[test]
    fn a_window_before_the_end_says_more_follows_without_counting() {
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let out = window(text.as_bytes(), 3, 2).unwrap();
        assert_eq!(
            out,
            "     3\tline 3\n     4\tline 4\n[... more lines follow; the file has 71 bytes, \
             read to byte 28; continue with offset=5]\n"
        );
    }

    #[test]
    fn past_the_end_names_the_line_count() {
        let err = window(b"a\nb\nc\n", 9, 2).unwrap_err();
        assert_eq!(
            err.0,
            "offset 9 is past the end of `f.txt`, which has 3 lines"
        );
        let err = window(b"a\nb\nc\n", 4, 2).unwrap_err();
        assert_eq!(
            err.0,
            "offset 4 is past the end of `f.txt`, which has 3 lines"
        );
    }

    #[test]
    fn a_nul_in_the_first_bytes_is_binary() {
        let err = window(b"text\0more\n", 1, 2).unwrap_err();
        assert_eq!(err.0, "`f.txt` is a binary file; read_file only shows text");
    }

    #[test]
    fn a_huge_line_keeps_only_what_is_shown() {
        let mut reader = Lines {
            inner: BufReader::new(io::repeat(b'x').take(10 * 1024 * 1024)),
            read: 0,
        };
        let mut line = Vec::new();
        assert!(reader.next_line(Some(&mut line)).unwrap());
        assert_eq!(line.len(), KEPT_LINE_BYTES);
        assert_eq!(reader.read, 10 * 1024 * 1024);
        assert!(!reader.next_line(None).unwrap());
    }
}
