//! A response: JSON bytes or a stream of watch lines, with its status,
//! `Warning` headers and content type; and the `metav1.Status` reply of an
//! error. The one place API values become HTTP responses.

use std::convert::Infallible;

use apimachinery::ApiError;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use serde_json::Value;
use tokio_stream::wrappers::ReceiverStream;

use crate::storage::Output;

/// A response: JSON bytes, or a stream of watch lines.
pub struct Reply {
    status: StatusCode,
    body: ReplyBody,
    warnings: Vec<String>,
    content_type: Option<&'static str>,
}

enum ReplyBody {
    Json(Bytes),
    Stream(tokio::sync::mpsc::Receiver<Result<Bytes, Infallible>>),
    /// A response made elsewhere (a protocol switch), sent as it is.
    Raw(Response),
}

impl Reply {
    pub fn json(status: StatusCode, body: Bytes) -> Reply {
        Reply {
            status,
            body: ReplyBody::Json(body),
            warnings: Vec::new(),
            content_type: None,
        }
    }

    pub fn value(status: StatusCode, v: &Value) -> Reply {
        Reply::json(
            status,
            Bytes::from(serde_json::to_vec(v).unwrap_or_default()),
        )
    }

    /// What the storage layer handed back, with `status`.
    pub fn output(status: StatusCode, out: Output) -> Reply {
        match out {
            Output::Object(v) => Reply::value(status, &v),
            Output::Encoded(b) => Reply::json(status, b),
        }
    }

    pub fn stream(rx: tokio::sync::mpsc::Receiver<Result<Bytes, Infallible>>) -> Reply {
        Reply {
            status: StatusCode::OK,
            body: ReplyBody::Stream(rx),
            warnings: Vec::new(),
            content_type: None,
        }
    }

    /// A whole response, sent unchanged (its status and headers win).
    pub fn raw(resp: Response) -> Reply {
        Reply {
            status: resp.status(),
            body: ReplyBody::Raw(resp),
            warnings: Vec::new(),
            content_type: None,
        }
    }

    pub fn warnings(mut self, w: Vec<String>) -> Reply {
        self.warnings.extend(w);
        self
    }

    pub fn content_type(mut self, ct: &'static str) -> Reply {
        self.content_type = Some(ct);
        self
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        let mut resp = match self.body {
            ReplyBody::Raw(resp) => return resp,
            ReplyBody::Json(b) => {
                let mut r = Response::new(Body::from(b));
                r.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                r
            }
            ReplyBody::Stream(rx) => {
                let mut r = Response::new(Body::from_stream(ReceiverStream::new(rx)));
                r.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                r.headers_mut().insert(
                    http::header::CACHE_CONTROL,
                    HeaderValue::from_static("no-cache, private"),
                );
                r
            }
        };
        *resp.status_mut() = self.status;
        if let Some(ct) = self.content_type {
            resp.headers_mut()
                .insert(http::header::CONTENT_TYPE, HeaderValue::from_static(ct));
        }
        for w in self.warnings {
            // The warn-text is an RFC 7230 quoted-string: kube escapes quotes
            // and backslashes, and client-go unescapes them for display.
            let v = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
            if let Ok(h) = HeaderValue::from_str(&v) {
                resp.headers_mut().append("warning", h);
            }
        }
        resp
    }
}

/// Renders an error as a `metav1.Status` response.
pub fn error_response(e: &ApiError) -> Response {
    let mut r = Reply::value(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    )
    .into_response();
    if let Some(s) = e.retry_after_seconds
        && let Ok(h) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(http::header::RETRY_AFTER, h);
    }
    r
}
