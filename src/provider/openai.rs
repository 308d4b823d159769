//! OpenAI-compatible chat completions with SSE streaming.
