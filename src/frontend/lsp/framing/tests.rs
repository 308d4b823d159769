//! Tests of the framing: every frame sequence must come out the same
//! whether the input arrives at once, byte by byte or in 7-byte pieces.

use super::*;
use futures::FutureExt;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};

/// Hands out the input in fixed-size pieces, one piece per read.
struct ChunkedReader {
    chunks: VecDeque<Vec<u8>>,
}

impl ChunkedReader {
    fn new(input: &[u8], chunk_size: usize) -> Self {
        ChunkedReader {
            chunks: input.chunks(chunk_size).map(<[u8]>::to_vec).collect(),
        }
    }
}

impl AsyncRead for ChunkedReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Some(mut chunk) = self.chunks.pop_front() {
            let n = chunk.len().min(buf.remaining());
            buf.put_slice(&chunk[..n]);
            if n < chunk.len() {
                self.chunks.push_front(chunk.split_off(n));
            }
        }
        Poll::Ready(Ok(()))
    }
}

async fn collect<R: AsyncRead + Unpin>(reader: R) -> Vec<Frame> {
    let mut reader = FrameReader::new(reader);
    let mut frames = Vec::new();
    while let Some(frame) = reader.next().await {
        frames.push(frame);
    }
    frames
}

/// All frames in `input`, checked to be the same whether the input
/// arrives at once, byte by byte, or in 7-byte pieces.
async fn frames_of(input: &[u8]) -> Vec<Frame> {
    let at_once = collect(input).await;
    assert_eq!(collect(ChunkedReader::new(input, 1)).await, at_once);
    assert_eq!(collect(ChunkedReader::new(input, 7)).await, at_once);
    at_once
}

fn message(body: &str) -> Frame {
    let value = serde_json::from_str(body).expect("test body is JSON");
    Frame::Message {
        body: body.as_bytes().to_vec(),
        value,
    }
}

fn bad_header(frame: &Frame) -> &str {
    match frame {
        Frame::Invalid(FrameError::BadHeader(message)) => message,
        other => panic!("expected BadHeader, got {other:?}"),
    }
}

fn invalid_request(frame: &Frame) -> (&Value, &str) {
    match frame {
        Frame::Invalid(FrameError::InvalidRequest { id, message }) => (id, message),
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;

#[tokio::test]
async fn well_formed_request_yields_its_exact_body_and_value() {
    let (mut client, server) = tokio::io::duplex(64);
    let writer = tokio::spawn(async move {
        client.write_all(&encode(PING.as_bytes())).await?;
        client.shutdown().await
    });
    assert_eq!(collect(server).await, vec![message(PING)]);
    writer.await.expect("writer task").expect("write");
}

#[tokio::test]
async fn two_frames_in_one_read_are_both_yielded() {
    let mut input = encode(PING.as_bytes());
    input.extend(encode(INITIALIZED.as_bytes()));
    assert_eq!(
        collect(&input[..]).await,
        vec![message(PING), message(INITIALIZED)]
    );
}

#[tokio::test]
async fn frame_split_across_reads_is_reassembled() {
    let input = encode(PING.as_bytes());
    for chunk_size in [1, 2, 3, 10, 20] {
        let frames = collect(ChunkedReader::new(&input, chunk_size)).await;
        assert_eq!(frames, vec![message(PING)], "chunk size {chunk_size}");
    }
}

#[tokio::test]
async fn lf_only_header_lines_are_accepted() {
    let input = format!("Content-Length: {}\n\n{PING}", PING.len());
    assert_eq!(frames_of(input.as_bytes()).await, vec![message(PING)]);
}

#[tokio::test]
async fn header_names_are_case_insensitive() {
    let input = format!("content-LENGTH: {}\r\n\r\n{PING}", PING.len());
    assert_eq!(frames_of(input.as_bytes()).await, vec![message(PING)]);
}

#[tokio::test]
async fn content_type_and_unknown_headers_are_ignored() {
    let input = format!(
        "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\
         Content-Length: {}\r\nX-Trace: 42\r\n\r\n{PING}",
        PING.len()
    );
    assert_eq!(frames_of(input.as_bytes()).await, vec![message(PING)]);
}

#[tokio::test]
async fn bad_content_length_is_reported_and_next_frame_still_parses() {
    let mut input = b"Content-Length: abc\r\n\r\n".to_vec();
    input.extend(encode(PING.as_bytes()));
    let frames = frames_of(&input).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(
        bad_header(&frames[0]),
        "bad Content-Length header: `abc` is not a number"
    );
    assert_eq!(frames[1], message(PING));
}

#[tokio::test]
async fn body_after_bad_content_length_is_skipped_up_to_the_next_header() {
    // Frames follow each other without a separator, so the next header is
    // not at the start of a line.
    let mut input = format!("Content-Length: 12x\r\n\r\n{PING}").into_bytes();
    input.extend(encode(INITIALIZED.as_bytes()));
    let frames = frames_of(&input).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    bad_header(&frames[0]);
    assert_eq!(frames[1], message(INITIALIZED));
}

#[tokio::test]
async fn content_length_over_the_limit_is_refused_without_waiting_for_the_body() {
    let mut reader = FrameReader::new(&b"Content-Length: 268435457\r\n\r\n{"[..]);
    let frame = reader.next().await.expect("a frame");
    assert!(
        bad_header(&frame).contains("over the 268435456-byte (256 MiB) limit"),
        "{frame:?}"
    );
    assert_eq!(reader.next().await, None);

    let overflowing = b"Content-Length: 99999999999999999999999\r\n\r\n";
    let frames = frames_of(overflowing).await;
    assert_eq!(frames.len(), 1);
    assert!(bad_header(&frames[0]).contains("limit"));
}

#[tokio::test]
async fn missing_content_length_is_reported_and_next_frame_still_parses() {
    let mut input = b"Content-Type: application/json\r\n\r\n".to_vec();
    input.extend(encode(PING.as_bytes()));
    let frames = frames_of(&input).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(bad_header(&frames[0]), "missing Content-Length header");
    assert_eq!(frames[1], message(PING));
}

#[tokio::test]
async fn raw_garbage_lines_are_reported_once_and_next_frame_still_parses() {
    let mut input = b"hello\nworld\n".to_vec();
    input.extend(encode(PING.as_bytes()));
    let frames = frames_of(&input).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(
        bad_header(&frames[0]),
        "malformed header line `hello`: expected `Name: value`"
    );
    assert_eq!(frames[1], message(PING));
}

#[tokio::test]
async fn garbage_line_is_reported_before_anything_else_arrives() {
    let (mut client, server) = tokio::io::duplex(64);
    let mut reader = FrameReader::new(server);
    client.write_all(b"hello\n").await.expect("write");
    // The writer stays open: the report must not wait for more input.
    let frame = reader.next().await.expect("a frame");
    bad_header(&frame);
    client
        .write_all(&encode(PING.as_bytes()))
        .await
        .expect("write");
    assert_eq!(reader.next().await, Some(message(PING)));
}

#[tokio::test]
async fn garbage_glued_to_a_header_is_skipped() {
    let mut input = b"hello".to_vec();
    input.extend(encode(PING.as_bytes()));
    let frames = frames_of(&input).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    bad_header(&frames[0]);
    assert_eq!(frames[1], message(PING));
}

#[tokio::test]
async fn oversized_header_block_is_reported_and_next_frame_still_parses() {
    let mut input = vec![b'x'; MAX_HEADER_BYTES + 100];
    input.extend(encode(PING.as_bytes()));
    let frames = frames_of(&input).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert!(bad_header(&frames[0]).contains("exceeds 8192 bytes"));
    assert_eq!(frames[1], message(PING));
}

#[tokio::test]
async fn body_that_is_not_json_is_reported_and_next_frame_still_parses() {
    let mut input = encode(b"{not json");
    input.extend(encode(PING.as_bytes()));
    let frames = frames_of(&input).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    match &frames[0] {
        Frame::Invalid(err @ FrameError::NotJson(message)) => {
            assert!(message.starts_with("body is not JSON"), "{message}");
            assert_eq!(err.code(), -32700);
        }
        other => panic!("expected NotJson, got {other:?}"),
    }
    assert_eq!(frames[1], message(PING));
}

#[tokio::test]
async fn body_that_is_not_utf8_is_reported_as_not_json() {
    let frames = frames_of(&encode(b"{\"jsonrpc\":\"2.0\xff\"}")).await;
    match &frames[..] {
        [Frame::Invalid(FrameError::NotJson(message))] => {
            assert!(message.starts_with("body is not valid UTF-8"), "{message}")
        }
        other => panic!("expected one NotJson, got {other:?}"),
    }
}

#[tokio::test]
async fn json_array_is_refused_as_an_unsupported_batch() {
    let frames = frames_of(&encode(format!("[{PING}]").as_bytes())).await;
    assert_eq!(frames.len(), 1);
    assert_eq!(
        invalid_request(&frames[0]),
        (&Value::Null, "batch requests are not supported")
    );
}

#[tokio::test]
async fn a_repeated_top_level_key_is_an_invalid_request_and_the_next_frame_still_parses() {
    let repeated = br#"{"jsonrpc":"2.0","id":9,"method":"ping","method":"pong"}"#;
    let mut input = encode(repeated);
    input.extend(encode(
        br#"{"jsonrpc":"2.0","id":9,"id":10,"method":"ping"}"#,
    ));
    input.extend(encode(PING.as_bytes()));
    let frames = frames_of(&input).await;
    assert_eq!(frames.len(), 3);
    let (id, why) = invalid_request(&frames[0]);
    assert_eq!(id, &json!(9));
    assert!(why.contains("`method` appears more than once"), "{why}");
    // Two ids: the answer cannot pick one.
    let (id, why) = invalid_request(&frames[1]);
    assert_eq!(id, &Value::Null);
    assert!(why.contains("`id`"), "{why}");
    assert_eq!(frames[2], message(PING));
}

#[tokio::test]
async fn json_object_without_jsonrpc_version_is_an_invalid_request() {
    let frames = frames_of(&encode(br#"{"id":3,"method":"ping"}"#)).await;
    assert_eq!(frames.len(), 1);
    let (id, message) = invalid_request(&frames[0]);
    assert_eq!(id, &json!(3));
    assert!(message.contains("jsonrpc"), "{message}");
}

#[tokio::test]
async fn responses_with_result_or_error_are_accepted() {
    let ok = r#"{"jsonrpc":"2.0","id":"s1","result":null}"#;
    let err = r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}"#;
    let mut input = encode(ok.as_bytes());
    input.extend(encode(err.as_bytes()));
    assert_eq!(frames_of(&input).await, vec![message(ok), message(err)]);
}

#[tokio::test]
async fn response_needs_exactly_one_of_result_and_error_and_an_id() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","result":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#,
    ] {
        let frames = frames_of(&encode(body.as_bytes())).await;
        assert_eq!(frames.len(), 1, "{body}");
        invalid_request(&frames[0]);
    }
}

#[tokio::test]
async fn invalid_request_keeps_its_id() {
    let cases = [
        (r#"{"jsonrpc":"2.0","id":7,"method":5}"#, json!(7)),
        (
            r#"{"jsonrpc":"2.0","id":"a","method":"m","params":3}"#,
            json!("a"),
        ),
        (r#"{"jsonrpc":"1.0","id":1.5,"method":"m"}"#, json!(1.5)),
        (
            r#"{"jsonrpc":"2.0","id":{"x":1},"method":"m"}"#,
            Value::Null,
        ),
    ];
    for (body, expected_id) in cases {
        let frames = frames_of(&encode(body.as_bytes())).await;
        assert_eq!(frames.len(), 1, "{body}");
        let Frame::Invalid(err) = &frames[0] else {
            panic!("expected Invalid for {body}, got {:?}", frames[0]);
        };
        assert_eq!(err.id(), expected_id, "{body}");
        assert_eq!(err.code(), -32600, "{body}");
    }
}

#[tokio::test]
async fn ids_tower_lsp_cannot_represent_are_refused() {
    for body in [
        r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
    ] {
        let frames = frames_of(&encode(body.as_bytes())).await;
        let (_, message) = invalid_request(&frames[0]);
        assert!(message.starts_with("`id` must be"), "{body}: {message}");
    }
}

#[tokio::test]
async fn eof_mid_body_returns_none() {
    let input = format!("Content-Length: 100\r\n\r\n{PING}");
    let mut reader = FrameReader::new(input.as_bytes());
    assert_eq!(reader.next().await, None);
    assert_eq!(reader.next().await, None);
}

#[tokio::test]
async fn eof_mid_header_or_on_empty_input_returns_none() {
    assert_eq!(frames_of(b"Content-Length: 1").await, vec![]);
    assert_eq!(frames_of(b"").await, vec![]);
}

#[tokio::test]
async fn ten_megabyte_body_parses() {
    let text = "x".repeat(10 * 1024 * 1024);
    let body = json!({
        "jsonrpc": "2.0",
        "method": "textDocument/didOpen",
        "params": { "textDocument": { "uri": "file:///big.txt", "text": text } },
    })
    .to_string();
    let input = encode(body.as_bytes());
    for reader in [
        ChunkedReader::new(&input, input.len()),
        ChunkedReader::new(&input, 4096),
    ] {
        let frames = collect(reader).await;
        assert_eq!(frames.len(), 1);
        let Frame::Message { body: got, .. } = &frames[0] else {
            panic!("expected a message");
        };
        assert!(got == body.as_bytes(), "body bytes differ");
    }
}

#[tokio::test]
async fn encode_round_trips_through_the_reader() {
    let framed = encode(INITIALIZED.as_bytes());
    assert!(framed.starts_with(format!("Content-Length: {}\r\n\r\n", INITIALIZED.len()).as_bytes()));
    assert_eq!(frames_of(&framed).await, vec![message(INITIALIZED)]);
}

#[tokio::test]
async fn next_is_cancel_safe() {
    let input = encode(PING.as_bytes());
    let (mut client, server) = tokio::io::duplex(64);
    let mut reader = FrameReader::new(server);
    client.write_all(&input[..10]).await.expect("write");
    // Polled once, then dropped while waiting for the rest of the frame.
    assert_eq!(reader.next().now_or_never(), None);
    client.write_all(&input[10..]).await.expect("write");
    assert_eq!(reader.next().await, Some(message(PING)));
}

#[test]
fn error_responses_carry_the_jsonrpc_code_and_id() {
    let bad = FrameError::BadHeader("missing Content-Length header".into());
    assert_eq!(
        bad.to_response(),
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"missing Content-Length header"}})
    );
    let invalid = FrameError::InvalidRequest {
        id: json!(4),
        message: "`method` must be a string, not a number".into(),
    };
    assert_eq!(
        invalid.to_response(),
        json!({"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"`method` must be a string, not a number"}})
    );
}
