//! The models a server lists (`GET {base_url}/models`), for `tandem
//! doctor`: OpenAI-compatible servers (Ollama, llama.cpp, vLLM, LM Studio)
//! and Anthropic answer `{"data": [{"id": ...}, ...]}` alike.

use std::time::Duration;

use serde::Deserialize;

use super::{anthropic::AnthropicProvider, http, openai::OpenAiProvider};
use super::{ErrorKind, ProviderError};
use crate::config::{ModelConfig, ProviderKind};

#[derive(Deserialize)]
struct ModelList {
    data: Vec<ListedModel>,
}

#[derive(Deserialize)]
struct ListedModel {
    id: String,
}

/// The ids of the models the server of `config` lists, with the same
/// headers (key, API version) the provider sends; `timeout` bounds the
/// whole exchange.
pub async fn list_models(
    config: &ModelConfig,
    timeout: Duration,
) -> Result<Vec<String>, ProviderError> {
    let base_url = http::trim_base_url(&config.base_url);
    let headers = match config.provider {
        ProviderKind::Openai => OpenAiProvider::new(config).headers(),
        ProviderKind::Anthropic => AnthropicProvider::new(config).headers(),
    };
    let url = format!("{base_url}/models");
    let response = http::get(&http::client(), &base_url, &url, headers, timeout).await?;
    let body = response.bytes().await.map_err(|e| {
        ProviderError::new(
            ErrorKind::StreamDropped,
            format!("reading {url}: {}", http::error_chain(&e)),
        )
    })?;
    let list: ModelList = serde_json::from_slice(&body).map_err(|e| {
        ProviderError::new(
            ErrorKind::Protocol,
            format!("{url} answered no model list ({e}): {}", quote(&body)),
        )
    })?;
    Ok(list.data.into_iter().map(|m| m.id).collect())
}

/// The start of a body, for a message.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
