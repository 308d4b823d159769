//! The blocking WebSocket link against soketto's server end (what the
//! serve's jsonrpsee runs), over a real socket pair.

use std::io::{self, Read};

use soketto::connection::{Builder, Mode};
use soketto::data::ByteSlice125;
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt};

use super::*;

/// Hands out at most one byte a read: every frame split across reads.
struct OneByte<R>(R);

impl<R: Read> Read for OneByte<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(1);
        self.0.read(&mut buf[..n])
    }
}

/// A connected pair: soketto's server end, and ours in blocking mode.
fn pair() -> (
    soketto::connection::Sender<Compat<tokio::net::UnixStream>>,
    soketto::connection::Receiver<Compat<tokio::net::UnixStream>>,
    UnixStream,
) {
    let (server, ours) = tokio::net::UnixStream::pair().unwrap();
    let ours = ours.into_std().unwrap();
    ours.set_nonblocking(false).unwrap();
    let mut builder = Builder::new(server.compat(), Mode::Server);
    builder.set_max_message_size(1 << 20);
    let (tx, rx) = builder.finish();
    (tx, rx, ours)
}

fn text_of(size: usize) -> String {
    (0..size).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

#[tokio::test]
async fn the_serves_messages_are_read_whole_however_the_reads_split_them() {
    // 5 bytes (7-bit length), 300 (16-bit), 100,000 (64-bit).
    let texts = [text_of(5), text_of(300), text_of(100_000)];
    for one_byte in [false, true] {
        let (mut tx, _rx, ours) = pair();
        let reader = tokio::task::spawn_blocking(move || {
            let source: Box<dyn Read + Send> = if one_byte {
                Box::new(OneByte(ours))
            } else {
                Box::new(ours)
            };
            let mut frames = Frames::new(source, Vec::new(), 1 << 20);
            (0..6)
                .map(|_| frames.next_message().unwrap())
                .collect::<Vec<_>>()
        });
        for text in &texts {
            tx.send_text(text).await.unwrap();
        }
        tx.send_ping(ByteSlice125::try_from(&b"p1"[..]).unwrap())
            .await
            .unwrap();
        tx.send_binary(b"{\"bytes\":1}").await.unwrap();
        tx.close().await.unwrap();
        let got = reader.await.unwrap();
        let mut want: Vec<Message> = texts.iter().cloned().map(Message::Text).collect();
        want.push(Message::Ping(b"p1".to_vec()));
        want.push(Message::Text("{\"bytes\":1}".into()));
        want.push(Message::Close);
        assert_eq!(got, want, "one byte a read: {one_byte}");
    }
}

#[test]
fn bytes_read_with_the_handshake_come_first() {
    // A frame whose first three bytes came in with the handshake's answer,
    // then the rest of it and a second frame from the socket.
    let first = [&[0x81, 5][..], b"hello"].concat();
    let rest = [&first[3..], &[0x81, 4], b"next"].concat();
    let mut frames = Frames::new(&rest[..], first[..3].to_vec(), 100);
    assert_eq!(
        frames.next_message().unwrap(),
        Message::Text("hello".into())
    );
    assert_eq!(frames.next_message().unwrap(), Message::Text("next".into()));
}

#[test]
fn a_fragmented_message_is_joined_and_a_ping_inside_it_is_read() {
    let bytes: Vec<u8> = [
        &[0x01, 3][..],
        b"hel",
        &[0x89, 1],
        b"p",
        &[0x00, 1],
        b"l",
        &[0x80, 1],
        b"o",
    ]
    .concat();
    let mut frames = Frames::new(OneByte(&bytes[..]), Vec::new(), 100);
    assert_eq!(frames.next_message().unwrap(), Message::Ping(b"p".to_vec()));
    assert_eq!(
        frames.next_message().unwrap(),
        Message::Text("hello".into())
    );
    // Then the end of the stream: the serve closed the socket.
    let end = frames.next_message().unwrap_err();
    assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof);
}

#[test]
fn a_socket_closed_inside_a_frame_ends_the_reader() {
    let bytes = [0x81, 5, b'h', b'e'];
    let mut frames = Frames::new(&bytes[..], Vec::new(), 100);
    let end = frames.next_message().unwrap_err();
    assert_eq!(end.kind(), io::ErrorKind::UnexpectedEof);
}

#[test]
fn a_message_over_the_limit_a_masked_frame_and_rsv_bits_are_errors() {
    let long = [&[0x81, 11][..], b"hello world"].concat();
    let fragmented_long = [&[0x01, 6][..], b"hello ", &[0x80, 5], b"world"].concat();
    let masked = [&[0x81, 0x81, 1, 2, 3, 4][..], b"h"].concat();
    let rsv = [&[0xC1, 1][..], b"h"].concat();
    for bytes in [long, fragmented_long, masked, rsv] {
        let mut frames = Frames::new(&bytes[..], Vec::new(), 10);
        let error = frames.next_message().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{bytes:?}");
    }
}

#[tokio::test]
async fn our_frames_are_read_by_soketto_as_the_serve_reads_them() {
    let (_tx, mut rx, ours) = pair();
    let texts = [text_of(5), text_of(300), text_of(100_000)];
    let sent = texts.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let mut sender = Sender::new(ours, 1 << 20);
        for text in &sent {
            sender.text(text).unwrap();
        }
        sender.pong(b"p").unwrap();
        let too_large = sender.text(&text_of((1 << 20) + 1)).unwrap_err();
        assert_eq!(too_large.kind(), io::ErrorKind::InvalidData);
        sender.close().unwrap();
        sender
    });
    for text in &texts {
        let mut message = Vec::new();
        let data = rx.receive_data(&mut message).await.unwrap();
        assert!(data.is_text());
        assert_eq!(String::from_utf8(message).unwrap(), *text);
    }
    // The pong is skipped; the close ends the connection.
    let mut message = Vec::new();
    let closed = rx.receive_data(&mut message).await.unwrap_err();
    assert!(
        matches!(closed, soketto::connection::Error::Closed),
        "{closed:?}"
    );
    drop(writer.await.unwrap());
}
