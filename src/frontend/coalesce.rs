//! Output for a slow editor: the frames waiting for stdout, with streamed
//! text merged. When the editor reads more slowly than the model streams,
//! `agent_message_chunk` / `agent_thought_chunk` updates queue up; a chunk
//! that follows a pending chunk of the same session and message (turn,
//! step, attempt, kind) is appended to it, so the editor receives fewer,
//! larger chunks with exactly the same text, in order.
//!
//! Chunks merge only behind a backlog of [`MERGE_BACKLOG`] frames, so an
//! editor that keeps up sees every chunk as it was streamed — or at once
//! when the writer knows the editor is slow (`eager`).
//!
//! Invariant: only adjacent chunks merge. Anything else between two chunks
//! (a reset, a tool call, a plan, a request, a response) keeps them apart,
//! so every frame keeps its place relative to every other.

use std::collections::VecDeque;

use crate::core::log::LoggedEvent;
use crate::vocab::event::Event;

/// Frames waiting before chunks start to merge: a backlog this long means
/// the editor reads more slowly than the model streams.
pub(crate) const MERGE_BACKLOG: usize = 32;

/// A frame waiting for stdout.
pub(crate) enum Pending<T> {
    /// A streamed chunk of `session`, kept as an event until it is written
    /// so the chunks after it can join it.
    Chunk {
        session: String,
        event: Box<LoggedEvent>,
        /// Bytes charged to the output budget for it (and for the chunks
        /// merged into it).
        charge: usize,
    },
    /// Anything else, as queued.
    Other(T),
}

/// The frames waiting for stdout, in order, chunks merged.
pub(crate) struct PendingFrames<T> {
    frames: VecDeque<Pending<T>>,
    /// Chunks merged into an earlier one since the start.
    pub(crate) merged: u64,
    /// Merge adjacent chunks without waiting for a backlog: the editor is
    /// known to be slow.
    pub(crate) eager: bool,
}

impl<T> Default for PendingFrames<T> {
    fn default() -> Self {
        PendingFrames {
            frames: VecDeque::new(),
            merged: 0,
            eager: false,
        }
    }
}

impl<T> PendingFrames<T> {
    /// Queues a frame, merging a chunk into the chunk before it when it
    /// may; returns the bytes of charge that merging freed (the merged
    /// chunk's own event and envelope: only its text is kept).
    pub(crate) fn push(&mut self, frame: Pending<T>) -> usize {
        // An editor that keeps up never has a backlog, and sees every chunk
        // as the model sent it; only a backlog merges.
        if self.frames.len() < MERGE_BACKLOG && !self.eager {
            self.frames.push_back(frame);
            return 0;
        }
        if let (
            Some(Pending::Chunk {
                session: last_session,
                event: last,
                charge: last_charge,
            }),
            Pending::Chunk {
                session,
                event,
                charge,
            },
        ) = (self.frames.back_mut(), &frame)
        {
            if last_session == session {
                if let Some(appended) = append_chunk(&mut last.event, &event.event) {
                    // The merged frame carries the events up to the last.
                    last.seq = last.seq.max(event.seq);
                    *last_charge += appended;
                    self.merged += 1;
                    return charge.saturating_sub(appended);
                }
            }
        }
        self.frames.push_back(frame);
        0
    }

    /// Merges from now on without waiting for a backlog, and merges what
    /// already waits (queued while the editor seemed to keep up); returns
    /// the bytes of charge that freed.
    pub(crate) fn make_eager(&mut self) -> usize {
        self.eager = true;
        let waiting = std::mem::take(&mut self.frames);
        waiting.into_iter().map(|frame| self.push(frame)).sum()
    }

    pub(crate) fn pop(&mut self) -> Option<Pending<T>> {
        self.frames.pop_front()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Once a burst (a replay, a long backlog) has drained, gives back the
    /// room it needed; says whether there was any to give back.
    pub(crate) fn release_spare(&mut self) -> bool {
        if self.frames.is_empty() && self.frames.capacity() > SPARE_FRAMES {
            self.frames = VecDeque::new();
            return true;
        }
        false
    }
}

/// Room for this many frames is kept after a burst; more is given back.
const SPARE_FRAMES: usize = 1024;

/// Appends `next`'s text to `into` when both are chunks of one message
/// and kind; returns how many bytes it appended, if it did.
fn append_chunk(into: &mut Event, next: &Event) -> Option<usize> {
    match (into, next) {
        (
            Event::AssistantChunk {
                turn_id,
                step,
                attempt,
                text,
            },
            Event::AssistantChunk {
                turn_id: t,
                step: s,
                attempt: a,
                text: more,
            },
        )
        | (
            Event::ThoughtChunk {
                turn_id,
                step,
                attempt,
                text,
            },
            Event::ThoughtChunk {
                turn_id: t,
                step: s,
                attempt: a,
                text: more,
            },
        ) if turn_id == t && step == s && attempt == a => {
            text.push_str(more);
            Some(more.len())
        }
        _ => None,
    }
}

/// Whether an event is a streamed chunk the writer may merge.
pub(crate) fn is_chunk(event: &Event) -> bool {
    matches!(
        event,
        Event::AssistantChunk { .. } | Event::ThoughtChunk { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(seq: u64, attempt: u32, text: &str) -> Pending<&'static str> {
        Pending::Chunk {
            session: "s".into(),
            charge: 10,
            event: Box::new(LoggedEvent {
                seq,
                ts: String::new(),
                recovered: None,
                event: Event::AssistantChunk {
                    turn_id: "t1".into(),
                    step: 1,
                    attempt,
                    text: text.into(),
                },
            }),
        }
    }

    fn texts(mut pending: PendingFrames<&'static str>) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(frame) = pending.pop() {
            out.push(match frame {
                Pending::Chunk { event, .. } => match event.event {
                    Event::AssistantChunk { text, attempt, .. } => format!("{attempt}:{text}"),
                    _ => unreachable!(),
                },
                Pending::Other(o) => o.to_string(),
            });
        }
        out
    }

    #[test]
    fn adjacent_chunks_of_one_message_merge_and_anything_between_keeps_them_apart() {
        let mut pending = PendingFrames::default();
        for _ in 0..MERGE_BACKLOG {
            pending.push(Pending::Other("backlog"));
        }
        pending.push(chunk(1, 1, "Hel"));
        pending.push(chunk(2, 1, "lo"));
        pending.push(Pending::Other("reset"));
        pending.push(chunk(4, 2, "Hel"));
        pending.push(chunk(5, 2, "lo!"));
        pending.push(chunk(6, 3, "other attempt"));
        assert_eq!(pending.merged, 2);
        assert_eq!(
            texts(pending)[MERGE_BACKLOG..],
            ["1:Hello", "reset", "2:Hello!", "3:other attempt"]
        );
    }

    #[test]
    fn an_eager_queue_merges_without_a_backlog_and_keeps_the_charges() {
        let mut pending = PendingFrames {
            eager: true,
            ..PendingFrames::default()
        };
        assert_eq!(pending.push(chunk(1, 1, "Hel")), 0);
        assert_eq!(pending.push(chunk(2, 1, "lo")), 8, "all but the text");
        pending.push(Pending::Other("tool_call"));
        pending.push(chunk(3, 1, "!"));
        let Some(Pending::Chunk { charge, .. }) = pending.pop() else {
            panic!("a chunk first")
        };
        assert_eq!(charge, 12, "the first chunk's charge and the text merged");
        assert_eq!(texts(pending), ["tool_call", "1:!"]);
    }

    #[test]
    fn turning_eager_merges_what_already_waits() {
        let mut pending = PendingFrames::default();
        pending.push(chunk(1, 1, "Hel"));
        pending.push(chunk(2, 1, "lo"));
        pending.push(Pending::Other("tool_call"));
        pending.push(chunk(3, 1, "!"));
        pending.push(chunk(4, 1, "?"));
        assert_eq!(pending.merged, 0);
        assert_eq!(pending.make_eager(), 8 + 9, "all but the merged texts");
        assert_eq!(texts(pending), ["1:Hello", "tool_call", "1:!?"]);
    }

    #[test]
    fn without_a_backlog_nothing_merges() {
        let mut pending = PendingFrames::default();
        pending.push(chunk(1, 1, "Hel"));
        pending.push(chunk(2, 1, "lo"));
        assert_eq!(pending.merged, 0);
        assert_eq!(texts(pending), ["1:Hel", "1:lo"]);
    }
}
