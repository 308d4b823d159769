//! The session log's tests: order, torn lines, versions, the lock and
//! its liveness rule, and background fsync.

use super::*;
use crate::vocab::event::{StopReason, Usage};

struct Collect(Mutex<Vec<u64>>);
impl EventSink for Collect {
    fn on_event(&self, _session_id: &str, event: &LoggedEvent) {
        self.0.lock().push(event.seq);
    }
}

#[test]
fn appended_events_read_back_in_order_with_sequence_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(Collect(Mutex::new(Vec::new())));
    let header = LogHeader {
        tandem_log: LOG_VERSION,
        session_id: "s1".into(),
        created: now_rfc3339(),
        title: None,
        workspace: vec![],
        workspace_folder: None,
        config: None,
        kind: None,
    };
    let log = SessionLog::create(dir.path(), &header, Durability::Flush, sink.clone()).unwrap();
    log.append(Event::TurnStart {
        turn_id: "t1".into(),
    });
    log.append(Event::AssistantChunk {
        turn_id: "t1".into(),
        step: 1,
        attempt: 1,
        text: "hi".into(),
    });
    log.append(Event::TurnEnd {
        turn_id: "t1".into(),
        stop_reason: StopReason::EndTurn,
        message: None,
        usage: Usage::default(),
        cost_usd: None,
    });
    let (read_header, events) = read_log(log.path()).unwrap();
    assert_eq!(read_header, header);
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(matches!(events[2].event, Event::TurnEnd { .. }));
    assert_eq!(*sink.0.lock(), vec![1, 2, 3]);
}

fn header(id: &str) -> LogHeader {
    LogHeader {
        tandem_log: LOG_VERSION,
        session_id: id.into(),
        created: now_rfc3339(),
        title: None,
        workspace: vec![],
        workspace_folder: None,
        config: None,
        kind: None,
    }
}

#[test]
fn a_torn_last_line_is_skipped_and_cut_before_appending() {
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let log = SessionLog::create(
            dir.path(),
            &header("torn"),
            Durability::Flush,
            Arc::new(NullSink),
        )
        .unwrap();
        log.append(Event::TurnStart {
            turn_id: "t1".into(),
        });
        log.sync();
        log.path().to_path_buf()
    };
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"seq":2,"ts":"x","type":"turn_"#)
        .unwrap();
    drop(file);
    let contents = read_log_contents(&path).unwrap();
    assert!(contents.torn_tail);
    assert_eq!(contents.events.len(), 1);
    let (log, _, events) = SessionLog::open(&path, Durability::Flush, Arc::new(NullSink)).unwrap();
    assert_eq!(events.len(), 1);
    let appended = log.append(Event::TurnStart {
        turn_id: "t2".into(),
    });
    assert_eq!(appended.seq, 2);
    log.sync();
    let contents = read_log_contents(&path).unwrap();
    assert!(!contents.torn_tail);
    assert_eq!(contents.events.len(), 2);
}

#[test]
fn a_log_from_a_newer_version_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.jsonl");
    let text = "{\"tandem_log\":99,\"session_id\":\"future\",\"created\":\"x\"}\n{\"seq\":1}\n";
    std::fs::write(&path, text).unwrap();
    let err = SessionLog::open(&path, Durability::Flush, Arc::new(NullSink))
        .err()
        .unwrap();
    assert!(
        matches!(err, LogError::NewerVersion { found: 99, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("newer tandem"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn a_second_writer_is_refused_while_the_first_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let log = SessionLog::create(
        dir.path(),
        &header("locked"),
        Durability::Flush,
        Arc::new(NullSink),
    )
    .unwrap();
    // Pretend another live process holds it: pid 1 always exists.
    std::fs::write(dir.path().join("locked.lock"), "1").unwrap();
    let err = SessionLog::open(log.path(), Durability::Flush, Arc::new(NullSink))
        .err()
        .unwrap();
    assert!(matches!(err, LogError::Locked { pid: 1, .. }), "{err}");
}

#[test]
fn a_stale_lock_from_a_dead_process_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let log = SessionLog::create(
            dir.path(),
            &header("stale"),
            Durability::Flush,
            Arc::new(NullSink),
        )
        .unwrap();
        log.path().to_path_buf()
    };
    // No process has pid u32::MAX - 1.
    std::fs::write(dir.path().join("stale.lock"), format!("{}", u32::MAX - 1)).unwrap();
    assert!(SessionLog::open(&path, Durability::Flush, Arc::new(NullSink)).is_ok());
}

#[tokio::test(flavor = "current_thread")]
async fn background_fsync_tells_the_sink_in_log_order_once_durable() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(Collect(Mutex::new(Vec::new())));
    let log = SessionLog::create(
        dir.path(),
        &header("bg"),
        Durability::FsyncInBackground,
        sink.clone(),
    )
    .unwrap();
    let chunk = |text: &str| Event::AssistantChunk {
        turn_id: "t1".into(),
        step: 1,
        attempt: 1,
        text: text.into(),
    };
    log.append(chunk("before"));
    assert_eq!(*sink.0.lock(), vec![1], "no boundary: told at once");
    log.append(Event::TurnEnd {
        turn_id: "t1".into(),
        stop_reason: StopReason::EndTurn,
        message: None,
        usage: Usage::default(),
        cost_usd: None,
    });
    log.append(chunk("after"));
    // Written at once (a killed daemon loses nothing), told once the
    // boundary's fsync on the blocking pool is done.
    assert_eq!(read_log(log.path()).unwrap().1.len(), 3);
    log.durable().await;
    assert_eq!(*sink.0.lock(), vec![1, 2, 3]);
    log.append(chunk("later"));
    log.durable().await;
    assert_eq!(*sink.0.lock(), vec![1, 2, 3, 4]);
}

#[test]
fn background_fsync_outside_a_runtime_fsyncs_inline() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(Collect(Mutex::new(Vec::new())));
    let log = SessionLog::create(
        dir.path(),
        &header("inline"),
        Durability::FsyncInBackground,
        sink.clone(),
    )
    .unwrap();
    log.append(Event::ModeChanged {
        mode: crate::vocab::approval::ApprovalMode::Auto,
    });
    assert_eq!(*sink.0.lock(), vec![1]);
}

#[test]
fn a_lock_naming_a_zombie_is_stale_and_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = {
        let log = SessionLog::create(
            dir.path(),
            &header("zombie"),
            Durability::Flush,
            Arc::new(NullSink),
        )
        .unwrap();
        log.path().to_path_buf()
    };
    // A child that has exited and is not reaped: its /proc entry stays.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let stat = format!("/proc/{pid}/stat");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z ")) {
        assert!(std::time::Instant::now() < deadline, "no zombie");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::fs::write(dir.path().join("zombie.lock"), pid.to_string()).unwrap();
    assert_eq!(lock_owner(dir.path(), "zombie"), None);
    let opened = SessionLog::open(&path, Durability::Flush, Arc::new(NullSink));
    assert!(opened.is_ok(), "{:?}", opened.err());
    child.wait().unwrap();
}

#[test]
fn creating_an_existing_log_fails_instead_of_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let header = LogHeader {
        tandem_log: LOG_VERSION,
        session_id: "dup".into(),
        created: now_rfc3339(),
        title: None,
        workspace: vec![],
        workspace_folder: None,
        config: None,
        kind: None,
    };
    let first =
        SessionLog::create(dir.path(), &header, Durability::Flush, Arc::new(NullSink)).unwrap();
    drop(first);
    assert!(
        SessionLog::create(dir.path(), &header, Durability::Flush, Arc::new(NullSink)).is_err()
    );
}
