//! Who may talk to the serve: the HTTP layer in front of jsonrpsee that
//! checks every request (the WebSocket handshake included) before it is
//! upgraded.
//!
//! Invariant: a request is let through only if it carries
//! `Authorization: Bearer <token>` with the serve's token (compared in
//! constant time) and either no `Origin` header or one on the explicit
//! allowlist. Browsers always send `Origin`, so a web page cannot connect
//! even if it guessed the port (CVE-2025-52882). The token is never logged.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse};
use subtle::ConstantTimeEq;
use tower::{Layer, Service};

/// A fresh 256-bit token, as 64 hex digits.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(std::io::Error::other)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What a request must show.
#[derive(Clone)]
pub struct Policy {
    token: Arc<[u8]>,
    allowed_origins: Arc<[String]>,
}

/// Why a request was turned away (the body of the HTTP answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 401: no `Authorization: Bearer`, or the wrong token.
    Unauthorized,
    /// 403: an `Origin` not on the allowlist.
    ForbiddenOrigin,
}

impl Policy {
    pub fn new(token: &str, allowed_origins: Vec<String>) -> Policy {
        Policy {
            token: token.as_bytes().into(),
            allowed_origins: allowed_origins.into(),
        }
    }

    /// Checks a request's headers.
    pub fn check(&self, headers: &http::HeaderMap) -> Result<(), Refusal> {
        // Origin first: a browser's request is refused whatever it carries.
        for origin in headers.get_all(http::header::ORIGIN) {
            let allowed = origin
                .to_str()
                .is_ok_and(|o| self.allowed_origins.iter().any(|a| a == o));
            if !allowed {
                return Err(Refusal::ForbiddenOrigin);
            }
        }
        let presented = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or_default();
        // `ct_eq` on slices of different lengths is false without looking
        // at the contents; the length of our token is no secret (64).
        if bool::from(presented.ct_eq(&self.token)) {
            Ok(())
        } else {
            Err(Refusal::Unauthorized)
        }
    }
}

fn refusal_response(refusal: Refusal) -> HttpResponse {
    let (status, body) = match refusal {
        Refusal::Unauthorized => (
            http::StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token (see $TANDEM_HOME/serve.json)\n",
        ),
        Refusal::ForbiddenOrigin => (
            http::StatusCode::FORBIDDEN,
            "requests with this Origin are not allowed\n",
        ),
    };
    let mut response = HttpResponse::new(HttpBody::from(body));
    *response.status_mut() = status;
    if refusal == Refusal::Unauthorized {
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// The tower layer jsonrpsee's HTTP middleware stack runs first.
#[derive(Clone)]
pub struct AuthLayer(pub Policy);

impl<S> Layer<S> for AuthLayer {
    type Service = Auth<S>;

    fn layer(&self, inner: S) -> Auth<S> {
        Auth {
            inner,
            policy: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Auth<S> {
    inner: S,
    policy: Policy,
}

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl<S, B> Service<HttpRequest<B>> for Auth<S>
where
    S: Service<HttpRequest<B>, Response = HttpResponse>,
    S::Error: Into<BoxError> + 'static,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, BoxError>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: HttpRequest<B>) -> Self::Future {
        match self.policy.check(request.headers()) {
            Ok(()) => {
                // Checked: nothing further in (jsonrpsee traces whole
                // requests) needs to see the token.
                request.headers_mut().remove(http::header::AUTHORIZATION);
                let future = self.inner.call(request);
                Box::pin(async move { future.await.map_err(Into::into) })
            }
            Err(refusal) => {
                // Never the header's value: it may be a token.
                tracing::warn!(?refusal, "refused a connection");
                Box::pin(async move { Ok(refusal_response(refusal)) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    #[test]
    fn tokens_are_256_random_bits_in_hex() {
        let a = new_token().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, new_token().unwrap());
    }

    #[test]
    fn only_the_exact_bearer_token_without_origin_passes() {
        let policy = Policy::new("secret", vec![]);
        assert_eq!(
            policy.check(&headers(&[("authorization", "Bearer secret")])),
            Ok(())
        );
        for bad in ["Bearer secre", "Bearer secrets", "secret", "Basic secret"] {
            assert_eq!(
                policy.check(&headers(&[("authorization", bad)])),
                Err(Refusal::Unauthorized),
                "{bad}"
            );
        }
        assert_eq!(policy.check(&headers(&[])), Err(Refusal::Unauthorized));
        assert_eq!(
            policy.check(&headers(&[
                ("authorization", "Bearer secret"),
                ("origin", "https://evil.example")
            ])),
            Err(Refusal::ForbiddenOrigin)
        );
    }

    #[test]
    fn an_allowlisted_origin_passes_with_the_token() {
        let policy = Policy::new("secret", vec!["vscode-webview://abc".into()]);
        assert_eq!(
            policy.check(&headers(&[
                ("authorization", "Bearer secret"),
                ("origin", "vscode-webview://abc")
            ])),
            Ok(())
        );
    }
}
