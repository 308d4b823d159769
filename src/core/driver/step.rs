//! The step loop of a turn: gate, enter steering, compact and repair,
//! call the model, record its answer and usage, then run its tool calls (or
//! refuse them when they loop). A step always ends with `step_end`.

use super::turn::{Turn, TurnEnd};
use crate::provider::Completion;
use crate::vocab::event::{Event, FinishReason, StopReason};

impl Turn<'_> {
    pub(super) async fn steps(&mut self) -> TurnEnd {
        let mut steps_done = 0;
        let mut hit_max_tokens = false;
        loop {
            if let Some(end) = self.gate(steps_done) {
                return end;
            }
            if steps_done > 0 {
                let claimed = self.session.claim_next_step();
                // A rejected steer is discarded; the turn goes on without it.
                let _ = self.enter_inputs(claimed);
            }
            steps_done += 1;
            let step = steps_done;
            self.record(Event::StepStart {
                turn_id: self.turn_id.clone(),
                step,
            });
            // The model of this step: a switch from now on waits for the next.
            self.pick_model();
            // Compaction first: it summarizes; trimming (a repair) only
            // drops, as the last resort when even that did not fit.
            self.compact_if_needed(step).await;
            if let Some(end) = self.compaction_spiral() {
                self.end_step(step);
                return end;
            }
            self.repair_history();
            if step == 1 {
                // MCP servers still starting: the first step waits for
                // them, each up to its startup timeout, or the cancel.
                tokio::select! {
                    _ = self.env.tools.wait_ready() => {}
                    _ = self.cancel.cancelled() => {}
                }
            }
            self.tool_specs = self
                .env
                .tools
                .offered(self.session.mode(), self.bridge.abilities());
            let (completion, attempt) = match self.call_model(step).await {
                Ok(done) => done,
                Err(end) => {
                    self.end_step(step);
                    return end;
                }
            };
            let finish = normalize_finish(&completion);
            self.usage.add(&completion.usage);
            self.session_usage.add(&completion.usage);
            let tool_calls = completion.tool_calls.clone();
            self.record(Event::AssistantMessage {
                turn_id: self.turn_id.clone(),
                step,
                attempt,
                provider: self.provider.name().to_string(),
                model: self.provider.model().to_string(),
                text: completion.text,
                thinking: completion.thinking,
                tool_calls: completion.tool_calls,
                finish_reason: finish,
                usage: completion.usage,
            });
            // The context now holds what was sent and what came back.
            let call = completion.usage;
            self.record_usage(call, call.input_tokens + call.output_tokens);
            self.charge(&completion.usage);
            if finish == FinishReason::Length {
                hit_max_tokens = true;
            }
            if !tool_calls.is_empty() {
                if let Some(description) = self.loops.check(&tool_calls) {
                    let second = self.loops.detections() > 1;
                    self.refuse_calls(&tool_calls, &format!("loop detected: {description}"));
                    self.record(Event::LoopDetected {
                        turn_id: self.turn_id.clone(),
                        description: description.clone(),
                    });
                    self.end_step(step);
                    return if second {
                        TurnEnd::new(
                            StopReason::Error,
                            format!("loop detected again after a warning: {description}"),
                        )
                    } else {
                        TurnEnd::new(
                            StopReason::LoopDetected,
                            format!("stopped a loop: {description}"),
                        )
                    };
                }
                self.run_tools(&tool_calls).await;
                self.end_step(step);
                if self.cancel.is_cancelled() {
                    return TurnEnd::cancelled();
                }
                continue;
            }
            self.end_step(step);
            if self.session.has_waking_input() && !self.cancel.is_cancelled() {
                // Steering arrived during this step: the turn goes on.
                continue;
            }
            return match finish {
                FinishReason::ContentFilter => TurnEnd::new(
                    StopReason::Refusal,
                    "the provider filtered the answer or the model refused",
                ),
                _ if hit_max_tokens => TurnEnd::new(
                    StopReason::MaxTokens,
                    "the model's answer was cut off at its output token limit",
                ),
                _ => TurnEnd {
                    reason: StopReason::EndTurn,
                    message: None,
                    cost_usd: None,
                },
            };
        }
    }
}

/// `stop` with tool calls means run them; `tool_calls` with none means stop.
fn normalize_finish(completion: &Completion) -> FinishReason {
    match completion.finish_reason {
        FinishReason::Stop if !completion.tool_calls.is_empty() => FinishReason::ToolCalls,
        FinishReason::ToolCalls if completion.tool_calls.is_empty() => FinishReason::Stop,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::driver::loops::tests::call;
    use crate::vocab::event::Usage;

    #[test]
    fn stop_with_tool_calls_and_tool_calls_without_calls_are_normalized() {
        let mut completion = Completion {
            text: String::new(),
            thinking: None,
            tool_calls: vec![call("grep", "{}")],
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
        };
        assert_eq!(normalize_finish(&completion), FinishReason::ToolCalls);
        completion.tool_calls.clear();
        completion.finish_reason = FinishReason::ToolCalls;
        assert_eq!(normalize_finish(&completion), FinishReason::Stop);
    }
}
