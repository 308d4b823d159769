//! The writer task over real pipes: a trim goes to the writer whose queue
//! asked for it, once what was queued before it is written.

use std::io::Read;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;

fn raw(body: &[u8]) -> Vec<u8> {
    body.to_vec()
}

/// A writer on a pipe: its queue, its count of trims asked, and the
/// pipe's reading end (blocking).
fn writer_on_a_pipe() -> (OutboundQueue, Arc<AtomicUsize>, std::fs::File) {
    let (reader, writer) = std::io::pipe().unwrap();
    let watch = ClientOut::new(std::fs::File::from(
        writer.as_fd().try_clone_to_owned().unwrap(),
    ));
    let sender =
        tokio::net::unix::pipe::Sender::from_owned_fd(std::os::fd::OwnedFd::from(writer)).unwrap();
    let (queue, writer, rx) = writer_parts(raw, update_notification);
    let trims = writer.trims.clone();
    spawn_writer(writer, rx, sender, watch, Default::default());
    (
        queue,
        trims,
        std::fs::File::from(std::os::fd::OwnedFd::from(reader)),
    )
}

/// Reads exactly `len` bytes on the blocking pool.
async fn read(mut from: std::fs::File, len: usize) -> (std::fs::File, Vec<u8>) {
    tokio::task::spawn_blocking(move || {
        let mut bytes = vec![0; len];
        from.read_exact(&mut bytes).unwrap();
        (from, bytes)
    })
    .await
    .unwrap()
}

async fn until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what} within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trim_is_asked_only_by_the_writer_whose_queue_asked() {
    let (a, a_trims, a_read) = writer_on_a_pipe();
    let (b, b_trims, b_read) = writer_on_a_pipe();
    a.send_body(b"a's replay".to_vec());
    a.trim_when_idle();
    b.send_body(b"b's frame".to_vec());
    let (_a_read, got) = read(a_read, 10).await;
    assert_eq!(got, b"a's replay");
    let (_b_read, got) = read(b_read, 9).await;
    assert_eq!(got, b"b's frame");
    until("a's trim", || a_trims.load(Ordering::Relaxed) == 1).await;
    // B is idle too by now: it took nothing meant for A.
    b.close().await;
    a.close().await;
    assert_eq!(b_trims.load(Ordering::Relaxed), 0, "b took a's trim");
    assert_eq!(a_trims.load(Ordering::Relaxed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trim_waits_until_what_was_queued_before_it_is_written() {
    let (queue, trims, reader) = writer_on_a_pipe();
    // Four times a pipe's 64 KiB: the writer waits for the reader.
    let frame = vec![b'x'; 4096];
    for _ in 0..64 {
        queue.send_body(frame.clone());
    }
    queue.trim_when_idle();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        trims.load(Ordering::Relaxed),
        0,
        "trimmed before the frames queued ahead were written"
    );
    let (_reader, got) = read(reader, 64 * 4096).await;
    assert!(got.iter().all(|&b| b == b'x'));
    until("the trim once everything is written", || {
        trims.load(Ordering::Relaxed) == 1
    })
    .await;
    queue.close().await;
}
