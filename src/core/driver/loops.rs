//! The loop detector: spots the model calling the same tools over and over
//! (a pattern of period 1, 2 or 3 repeated three times in the last 12
//! calls), whatever the order of the arguments' keys.

use serde_json::Value;

use crate::vocab::event::ToolCallRequest;

/// Spots the model calling the same tools over and over: a pattern of
/// period 1, 2 or 3 repeated three times in the last 12 calls.
#[derive(Debug, Default)]
pub struct LoopDetector {
    window: std::collections::VecDeque<(u64, String)>,
    /// Detections since the last user prompt.
    detections: u32,
}

const LOOP_WINDOW: usize = 12;
const LOOP_REPEATS: usize = 3;

impl LoopDetector {
    pub fn reset(&mut self) {
        self.window.clear();
        self.detections = 0;
    }

    /// Adds a batch of calls; returns what repeated if they complete a loop.
    pub fn check(&mut self, calls: &[ToolCallRequest]) -> Option<String> {
        let mut found = None;
        for call in calls {
            let canonical = canonical_call(call);
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&canonical, &mut hasher);
            let hash = std::hash::Hasher::finish(&hasher);
            if self.window.len() == LOOP_WINDOW {
                self.window.pop_front();
            }
            self.window.push_back((hash, canonical));
            if found.is_none() {
                found = self.repeating_pattern();
            }
        }
        if found.is_some() {
            self.detections += 1;
            // Start afresh so the same calls are not reported twice.
            self.window.clear();
        }
        found
    }

    pub fn detections(&self) -> u32 {
        self.detections
    }

    fn repeating_pattern(&self) -> Option<String> {
        let n = self.window.len();
        for period in 1..=3 {
            let span = period * LOOP_REPEATS;
            if n < span {
                continue;
            }
            let tail: Vec<&(u64, String)> = self.window.iter().skip(n - span).collect();
            if (period..span).all(|i| tail[i].0 == tail[i - period].0) {
                let pattern: Vec<&str> = tail[..period].iter().map(|(_, c)| c.as_str()).collect();
                return Some(format!(
                    "the same {} repeated {LOOP_REPEATS} times: {}",
                    if period == 1 {
                        "tool call".to_string()
                    } else {
                        format!("sequence of {period} tool calls")
                    },
                    pattern.join(" -> ")
                ));
            }
        }
        None
    }
}

/// `name {canonical JSON args}` with object keys sorted, so that argument
/// order does not hide a repetition.
fn canonical_call(call: &ToolCallRequest) -> String {
    fn canonical(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for key in keys {
                    out.insert(key.clone(), canonical(&map[key]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let args = serde_json::from_str::<Value>(&call.arguments)
        .map(|v| canonical(&v).to_string())
        .unwrap_or_else(|_| call.arguments.clone());
    format!("{} {}", call.name, args)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::core::driver) fn call(name: &str, args: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: format!("id-{name}-{args}"),
            name: name.to_string(),
            arguments: args.to_string(),
        }
    }

    fn feed(detector: &mut LoopDetector, calls: &[ToolCallRequest]) -> Vec<Option<String>> {
        calls
            .iter()
            .map(|c| detector.check(std::slice::from_ref(c)))
            .collect()
    }

    #[test]
    fn period_one_loop_is_detected_on_the_third_repeat() {
        let mut detector = LoopDetector::default();
        let a = call("read_file", r#"{"path":"a.rs"}"#);
        let results = feed(&mut detector, &[a.clone(), a.clone(), a.clone()]);
        assert!(results[0].is_none() && results[1].is_none());
        let description = results[2].as_ref().expect("loop on third call");
        assert!(description.contains("read_file"), "{description}");
    }

    #[test]
    fn period_two_and_three_loops_are_detected() {
        let mut detector = LoopDetector::default();
        let (a, b) = (
            call("read_file", r#"{"path":"a"}"#),
            call("grep", r#"{"pattern":"x"}"#),
        );
        let results = feed(
            &mut detector,
            &[
                a.clone(),
                b.clone(),
                a.clone(),
                b.clone(),
                a.clone(),
                b.clone(),
            ],
        );
        assert!(results[..5].iter().all(Option::is_none));
        assert!(results[5].as_ref().unwrap().contains("sequence of 2"));

        let mut detector = LoopDetector::default();
        let c = call("list_files", "{}");
        let seq = [a.clone(), b.clone(), c.clone()];
        let all: Vec<ToolCallRequest> = seq.iter().cycle().take(9).cloned().collect();
        let results = feed(&mut detector, &all);
        assert!(results[..8].iter().all(Option::is_none));
        assert!(results[8].as_ref().unwrap().contains("sequence of 3"));
    }

    #[test]
    fn paging_with_changing_offsets_is_not_a_loop() {
        let mut detector = LoopDetector::default();
        let pages: Vec<ToolCallRequest> = (0..12)
            .map(|i| {
                call(
                    "read_file",
                    &format!(r#"{{"path":"big.rs","offset":{}}}"#, 1 + i * 100),
                )
            })
            .collect();
        assert!(feed(&mut detector, &pages).iter().all(Option::is_none));
    }

    #[test]
    fn argument_key_order_does_not_hide_a_loop() {
        let mut detector = LoopDetector::default();
        let calls = [
            call("grep", r#"{"pattern":"x","path":"src"}"#),
            call("grep", r#"{"path":"src","pattern":"x"}"#),
            call("grep", r#"{"pattern":"x","path":"src"}"#),
        ];
        assert!(feed(&mut detector, &calls)[2].is_some());
    }

    #[test]
    fn one_batch_completing_a_loop_is_reported_once_and_counted() {
        let mut detector = LoopDetector::default();
        let a = call("read_file", r#"{"path":"a"}"#);
        assert!(detector.check(&[a.clone(), a.clone(), a.clone()]).is_some());
        assert_eq!(detector.detections(), 1);
        assert!(
            detector.check(std::slice::from_ref(&a)).is_none(),
            "window restarts after a detection"
        );
        detector.reset();
        assert_eq!(detector.detections(), 0);
    }
}
