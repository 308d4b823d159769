//! The command's output: both pipes decoded as UTF-8 (a character split across
//! reads stays whole), streamed to a callback, and kept capped as head + tail.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

use super::{CommandEnd, CommandOutcome};

const READ_CHUNK: usize = 8 * 1024;
/// One output pipe with its own UTF-8 decoder: a character split across two
/// reads of stdout must not be broken by a read of stderr in between.
pub(super) struct Pipe<R> {
    reader: Option<R>,
    decoder: Utf8Decoder,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Pipe<R> {
    pub(super) fn new(reader: R) -> Self {
        Pipe {
            reader: Some(reader),
            decoder: Utf8Decoder::default(),
            buf: vec![0; READ_CHUNK],
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.reader.is_none()
    }

    /// The next read; pending forever once closed, so it can sit in a select.
    pub(super) async fn read(&mut self) -> io::Result<usize> {
        match &mut self.reader {
            Some(reader) => reader.read(&mut self.buf).await,
            None => std::future::pending().await,
        }
    }

    pub(super) fn accept<F: FnMut(&str)>(
        &mut self,
        read: io::Result<usize>,
        sink: &mut OutputSink<F>,
    ) {
        match read {
            Ok(0) => self.close(sink),
            Ok(n) => sink.emit(self.decoder.decode(&self.buf[..n])),
            Err(error) => {
                tracing::warn!(%error, "reading command output failed; treating as end of output");
                self.close(sink);
            }
        }
    }

    fn close<F: FnMut(&str)>(&mut self, sink: &mut OutputSink<F>) {
        self.reader = None;
        self.flush_decoder(sink);
    }

    pub(super) fn flush_decoder<F: FnMut(&str)>(&mut self, sink: &mut OutputSink<F>) {
        sink.emit(self.decoder.finish());
    }
}

/// Decodes a byte stream read in arbitrary pieces. Invalid bytes become
/// U+FFFD; an incomplete sequence at the end of a piece waits for the next
/// one and is replaced only if the stream ends inside it.
#[derive(Debug, Default)]
pub(super) struct Utf8Decoder {
    pending: Vec<u8>,
}

impl Utf8Decoder {
    fn decode(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut text = String::with_capacity(self.pending.len());
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(valid) => {
                    text.push_str(valid);
                    start = self.pending.len();
                    break;
                }
                Err(error) => {
                    let valid_end = start + error.valid_up_to();
                    // Already validated: this borrows, it does not replace.
                    text.push_str(&String::from_utf8_lossy(&self.pending[start..valid_end]));
                    match error.error_len() {
                        Some(invalid) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            start = valid_end + invalid;
                        }
                        None => {
                            start = valid_end;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        text
    }

    fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

/// Where decoded output goes: the streaming callback and the capped buffer.
pub(super) struct OutputSink<F> {
    pub(super) buffer: CappedOutput,
    pub(super) on_output: F,
}

impl<F: FnMut(&str)> OutputSink<F> {
    fn emit(&mut self, piece: String) {
        if !piece.is_empty() {
            (self.on_output)(&piece);
            self.buffer.push(&piece);
        }
    }

    pub(super) fn into_outcome(
        self,
        end: CommandEnd,
        started: Instant,
        timeout: Duration,
    ) -> CommandOutcome {
        let (output, elided_bytes) = self.buffer.render();
        CommandOutcome {
            end,
            output,
            total_bytes: self.buffer.total,
            elided_bytes,
            duration: started.elapsed(),
            timeout,
        }
    }
}

/// `text` kept as [`CappedOutput`] keeps a command's output: head and tail
/// within `max_bytes`, the cut said.
pub(super) fn cap_text(text: &str, max_bytes: usize) -> String {
    let mut capped = CappedOutput::new(max_bytes);
    capped.push(text);
    capped.render().0
}

/// Keeps the first `max / 2` and the last `max - max / 2` bytes of a text
/// stream, cutting only at character boundaries (the tail gets whatever
/// such a cut leaves unused in the head, so output within `max` is kept
/// whole).
#[derive(Debug)]
pub(super) struct CappedOutput {
    max_bytes: usize,
    head: String,
    head_cap: usize,
    /// Once a piece overflowed the head, everything goes to the tail, even
    /// if a char-boundary cut left a few bytes of room in the head.
    head_full: bool,
    /// The last bytes seen, up to twice `tail_cap` so that trimming is
    /// amortised; [`Self::tail_window`] is the part that is kept.
    tail: String,
    tail_cap: usize,
    total: u64,
}

impl CappedOutput {
    pub(super) fn new(max_bytes: usize) -> Self {
        let head_cap = max_bytes / 2;
        CappedOutput {
            max_bytes,
            head: String::new(),
            head_cap,
            head_full: false,
            tail: String::new(),
            tail_cap: max_bytes - head_cap,
            total: 0,
        }
    }

    fn push(&mut self, mut piece: &str) {
        self.total += piece.len() as u64;
        if !self.head_full {
            let room = self.head_cap - self.head.len();
            if piece.len() <= room {
                self.head.push_str(piece);
                return;
            }
            let cut = piece.floor_char_boundary(room);
            self.head.push_str(&piece[..cut]);
            self.head_full = true;
            self.tail_cap = self.max_bytes - self.head.len();
            piece = &piece[cut..];
        }
        if piece.len() >= self.tail_cap {
            let start = piece.ceil_char_boundary(piece.len() - self.tail_cap);
            self.tail.clear();
            self.tail.push_str(&piece[start..]);
        } else {
            self.tail.push_str(piece);
            if self.tail.len() > 2 * self.tail_cap {
                let start = self
                    .tail
                    .ceil_char_boundary(self.tail.len() - self.tail_cap);
                self.tail.drain(..start);
            }
        }
    }

    fn tail_window(&self) -> &str {
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        &self.tail[self.tail.ceil_char_boundary(excess)..]
    }

    /// The kept text, with the elision marker if anything was dropped, and
    /// the number of bytes dropped.
    fn render(&self) -> (String, u64) {
        let tail = self.tail_window();
        let elided = self.total - (self.head.len() + tail.len()) as u64;
        let text = if elided == 0 {
            format!("{}{tail}", self.head)
        } else {
            format!("{}\n[... {elided} bytes elided ...]\n{tail}", self.head)
        };
        (text, elided)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_output_cuts_only_at_char_boundaries() {
        let mut capped = CappedOutput::new(10);
        for _ in 0..10 {
            // 3 bytes each: the head (5) fits one, the tail (5 + the
            // head's spare 2) fits two.
            capped.push("€");
        }
        let (text, elided) = capped.render();
        assert_eq!(text, "€\n[... 21 bytes elided ...]\n€€");
        assert_eq!(elided, 21);
    }

    #[test]
    fn capped_output_under_the_cap_is_kept_whole_across_head_and_tail() {
        let mut capped = CappedOutput::new(10);
        capped.push("abc€"); // the head (5) takes "abc", the tail gets its 2 spare bytes
        capped.push("d€");
        let (text, elided) = capped.render();
        assert_eq!((text.as_str(), elided), ("abc€d€", 0));
    }
    #[test]
    fn decoder_carries_a_split_character_to_the_next_read() {
        let bytes = "a€😀".as_bytes();
        for split in 0..=bytes.len() {
            let mut decoder = Utf8Decoder::default();
            let mut text = decoder.decode(&bytes[..split]);
            text += &decoder.decode(&bytes[split..]);
            text += &decoder.finish();
            assert_eq!(text, "a€😀", "split at {split}");
        }
    }

    #[test]
    fn decoder_replaces_invalid_bytes_and_a_truncated_end() {
        let mut decoder = Utf8Decoder::default();
        assert_eq!(decoder.decode(b"a\xffb\xe2\x82"), "a\u{FFFD}b");
        assert_eq!(decoder.finish(), "\u{FFFD}");
    }
}
