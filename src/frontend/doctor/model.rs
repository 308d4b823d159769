//! The model server of the configuration: its key, whether it answers
//! (`GET /models`), whether it lists the configured model, and whether it
//! streams — one tiny real request through the same provider the agent
//! uses.

use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::config::{ModelConfig, ProviderKind};
use crate::provider::{
    self, models, CachedMessage, ErrorKind, ModelMessage, ModelRequest, ProviderError, StreamEvent,
};

use super::{Check, Section, Status};

/// How long the model list may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the streaming request may take: a local server may load the
/// model first.
const STREAM_TIMEOUT: Duration = Duration::from_secs(60);

/// The streaming request's prompt and output cap: a few tokens.
const PROMPT: &str = "Reply with the single word: ok";
const MAX_OUTPUT_TOKENS: u32 = 8;

/// At most this many of the server's models are named.
const MAX_NAMED: usize = 10;

pub(super) async fn check(model: &ModelConfig) -> Vec<Check> {
    let provider_name = match model.provider {
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
    };
    let mut checks = vec![Check::new(
        "model.config",
        Section::ModelServer,
        Status::Ok,
        format!(
            "{provider_name} server at {}, model `{}`",
            model.base_url, model.name
        ),
    )];
    checks.extend(key(model));
    let started = Instant::now();
    let listed = models::list_models(model, LIST_TIMEOUT).await;
    let elapsed = started.elapsed();
    let list = match listed {
        Ok(ids) => {
            checks.push(Check::new(
                "model.reachable",
                Section::ModelServer,
                Status::Ok,
                format!(
                    "reachable: GET /models answered in {} ms, {} model(s)",
                    elapsed.as_millis(),
                    ids.len()
                ),
            ));
            Some(ids)
        }
        Err(e) if matches!(e.kind, ErrorKind::Connect) => {
            checks.push(unreachable(model, &e));
            checks.push(Check::new(
                "model.streams",
                Section::ModelServer,
                Status::Skip,
                "streaming not tried: the server is unreachable",
            ));
            return checks;
        }
        Err(e) if matches!(e.kind, ErrorKind::Auth) => {
            checks.push(
                Check::new(
                    "model.reachable",
                    Section::ModelServer,
                    Status::Fail,
                    e.message,
                )
                .with_fix(key_fix(model)),
            );
            return checks;
        }
        Err(e) => {
            // Reachable, but no list to read: not every server has one.
            checks.push(Check::new(
                "model.reachable",
                Section::ModelServer,
                Status::Ok,
                format!("reachable, but it lists no models: {}", e.message),
            ));
            None
        }
    };
    let streamed = streams(model).await;
    let streaming_works = streamed.status == Status::Ok;
    if let Some(ids) = list {
        checks.push(listed_check(model, &ids, streaming_works));
    }
    checks.push(streamed);
    checks
}

/// Whether a key is there, when the server is likely to need one.
fn key(model: &ModelConfig) -> Option<Check> {
    let variable = &model.api_key_env;
    let set = !variable.is_empty() && std::env::var(variable).is_ok_and(|v| !v.trim().is_empty());
    if set {
        return Some(Check::new(
            "model.key",
            Section::ModelServer,
            Status::Ok,
            format!("API key from ${variable}"),
        ));
    }
    let local = is_loopback(&model.base_url);
    if local && model.provider == ProviderKind::Openai {
        return None;
    }
    Some(
        Check::new(
            "model.key",
            Section::ModelServer,
            Status::Warn,
            format!("no API key: ${variable} is not set"),
        )
        .with_fix(key_fix(model)),
    )
}

fn key_fix(model: &ModelConfig) -> String {
    format!(
        "export {}=<your key> in the environment the editor starts tandem from (or set \
         [model] api_key_env to the variable that holds it)",
        if model.api_key_env.is_empty() {
            "OPENAI_API_KEY"
        } else {
            &model.api_key_env
        }
    )
}

fn is_loopback(base_url: &str) -> bool {
    let rest = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest);
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    host == "localhost" || host == "::1" || host.starts_with("127.")
}

fn unreachable(model: &ModelConfig, error: &ProviderError) -> Check {
    Check::new(
        "model.reachable",
        Section::ModelServer,
        Status::Fail,
        // The provider's own advice is the fix below, said once.
        format!(
            "unreachable: {}",
            error.message.split(". Start a server").next().unwrap_or("")
        ),
    )
    .with_fix(format!(
        "start the model server at {} (Ollama: `ollama serve`; llama.cpp: `llama-server`), or \
         point [model] base_url in config.toml (or TANDEM_BASE_URL) at the one you run",
        model.base_url
    ))
}

/// Ollama serves `name` as `name:latest`.
fn listed_check(model: &ModelConfig, ids: &[String], streaming_works: bool) -> Check {
    let name = &model.name;
    let latest = format!("{name}:latest");
    if ids.iter().any(|id| id == name || *id == latest) {
        return Check::new(
            "model.listed",
            Section::ModelServer,
            Status::Ok,
            format!("`{name}` is listed"),
        );
    }
    let mut named: Vec<&str> = ids.iter().take(MAX_NAMED).map(String::as_str).collect();
    if ids.len() > MAX_NAMED {
        named.push("...");
    }
    let among = if ids.is_empty() {
        "the server lists none".to_string()
    } else {
        format!("the server lists {}", named.join(", "))
    };
    let fix = format!(
        "set [model] name (or TANDEM_MODEL) to one the server has, or install `{name}` there \
         (Ollama: `ollama pull {name}`)"
    );
    if streaming_works {
        // llama.cpp and others answer whatever the name.
        Check::new(
            "model.listed",
            Section::ModelServer,
            Status::Warn,
            format!("`{name}` is not listed ({among}), though the server answers to it"),
        )
        .with_fix(fix)
    } else {
        Check::new(
            "model.listed",
            Section::ModelServer,
            Status::Fail,
            format!("`{name}` is not listed: {among}"),
        )
        .with_fix(fix)
    }
}

/// One real streaming request of a few tokens.
async fn streams(model: &ModelConfig) -> Check {
    let provider = provider::from_config(model);
    let messages = [CachedMessage::new(ModelMessage::user(PROMPT.to_string()))];
    let request = ModelRequest {
        messages: &messages,
        tools: &[],
        max_output_tokens: Some(MAX_OUTPUT_TOKENS),
    };
    let started = Instant::now();
    let outcome = tokio::time::timeout(STREAM_TIMEOUT, async {
        let mut stream = provider.stream(request).await?;
        let mut first = None;
        let mut chunks = 0usize;
        while let Some(event) = stream.next().await {
            match event? {
                StreamEvent::TextDelta(_) | StreamEvent::ThoughtDelta(_) => {
                    chunks += 1;
                    first.get_or_insert_with(|| started.elapsed());
                }
                StreamEvent::ToolCallStarted { .. } => {}
                StreamEvent::Completed(_) => return Ok((first, chunks)),
            }
        }
        Err(ProviderError::new(
            ErrorKind::StreamDropped,
            "the stream ended before the answer was complete",
        ))
    })
    .await;
    let total = started.elapsed().as_millis();
    match outcome {
        Ok(Ok((Some(first), chunks))) => Check::new(
            "model.streams",
            Section::ModelServer,
            Status::Ok,
            format!(
                "streams: first text after {} ms, {chunks} chunk(s) in {total} ms",
                first.as_millis()
            ),
        ),
        Ok(Ok((None, _))) => Check::new(
            "model.streams",
            Section::ModelServer,
            Status::Warn,
            format!("the server answered in {total} ms but streamed no text"),
        )
        .with_fix("check that the model is a chat model; try it with the server's own client"),
        Ok(Err(e)) => stream_failed(model, &e),
        Err(_) => Check::new(
            "model.streams",
            Section::ModelServer,
            Status::Fail,
            format!(
                "no complete answer within {} s",
                STREAM_TIMEOUT.as_secs()
            ),
        )
        .with_fix("the server may still be loading the model: run `tandem doctor` again; else see the server's log"),
    }
}

fn stream_failed(model: &ModelConfig, error: &ProviderError) -> Check {
    let (status, fix) = match error.kind {
        ErrorKind::Auth => (Status::Fail, key_fix(model)),
        ErrorKind::BadRequest | ErrorKind::ContextOverflow => (
            Status::Fail,
            "the server refused the request: check [model] name (the model must exist there) \
             and provider (openai or anthropic)"
                .to_string(),
        ),
        ErrorKind::Protocol => (
            Status::Fail,
            format!(
                "the server does not stream the {:?} API at {}: check [model] provider and \
                 base_url (it usually ends in /v1)",
                model.provider, model.base_url
            ),
        ),
        ErrorKind::RateLimited | ErrorKind::Overloaded => (
            Status::Warn,
            "the server is busy: try again later".to_string(),
        ),
        ErrorKind::Connect | ErrorKind::StreamDropped | ErrorKind::StreamStalled => (
            Status::Fail,
            "see the model server's own log for why it stopped".to_string(),
        ),
    };
    Check::new(
        "model.streams",
        Section::ModelServer,
        status,
        format!("streaming failed: {}", error.message),
    )
    .with_fix(fix)
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn loopback_hosts_are_told_apart_from_remote_ones() {
        for url in [
            "http://127.0.0.1:11434/v1",
            "http://localhost/v1",
            "http://[::1]:8080/v1",
            "http://user@127.0.0.2:1/v1",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://10.0.0.1:11434/v1",
            "http://localhost.evil.com/v1",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }
}
