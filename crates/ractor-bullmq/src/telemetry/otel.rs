//! OpenTelemetry context propagation through the job's `opts.tm` (feature `otel`).
//!
//! # The facts (Node BullMQ 6.7.0 with `bullmq-otel`)
//!
//! - A producer running with `telemetry` configured opens an `add` span and, inside it, asks
//!   its context manager for "metadata" of the active context. It stores that string in the
//!   job's options as `opts.tm` (Node `opts.telemetry.metadata`), unless the job sets
//!   `opts.omc` (Node `opts.telemetry.omitContext`), or the caller already gave a metadata
//!   string, which is kept.
//! - `bullmq-otel`'s context manager makes that metadata by injecting the context with the
//!   globally configured OpenTelemetry propagator into an empty object and `JSON.stringify`ing
//!   it; with the Node SDK's default propagators (W3C Trace Context and W3C Baggage) `tm` is a
//!   string such as `{"traceparent":"00-<32 hex trace id>-<16 hex span id>-01"}`, plus
//!   `tracestate` and `baggage` when present. The span id is that of the producer's `add` span.
//! - A worker reads `opts.tm`, `JSON.parse`s it and extracts a context from it with the same
//!   propagator; the `process` span (kind CONSUMER) starts with that context as parent, so the
//!   consumer continues the producer's trace.
//!
//! This module does the same with the W3C Trace Context and Baggage propagators (the same
//! default), so a trace goes Node → Rust and Rust → Node. Applications with another propagator
//! use the `*_with` variants. (Checked by hand with `bullmq-otel` 2.0.1 on Node BullMQ 6.7.0:
//! its producer stores `{"traceparent":"00-…-…-01"}`, and its worker continues the trace of
//! the `tm` [`inject_context`] writes; CI checks Node BullMQ's own side, see `docs/telemetry.md`.)
//!
//! Everything here needs a `tracing-opentelemetry` layer in the application's subscriber;
//! without one, [`inject_span`] returns `None` and [`set_parent`] returns `false`.

use std::collections::HashMap;

use opentelemetry::propagation::{TextMapCompositePropagator, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The propagator used by the functions without `_with`: W3C Trace Context + W3C Baggage,
/// the Node OpenTelemetry SDK's default.
pub fn default_propagator() -> TextMapCompositePropagator {
    TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ])
}

/// Serialises `cx` as a `tm` value with `propagator`: a JSON object of the propagator's
/// fields. `None` when the propagator wrote nothing (no valid span context, no baggage).
pub fn inject_context_with(propagator: &dyn TextMapPropagator, cx: &Context) -> Option<String> {
    let mut carrier: HashMap<String, String> = HashMap::new();
    propagator.inject_context(cx, &mut carrier);
    // Rust's W3C propagator writes `tracestate` even when empty; Node's omits it.
    carrier.retain(|_, value| !value.is_empty());
    if carrier.is_empty() {
        return None;
    }
    // Sorted keys: deterministic output; Node reads it with JSON.parse, so order is free.
    let sorted: std::collections::BTreeMap<_, _> = carrier.into_iter().collect();
    serde_json::to_string(&sorted).ok()
}

/// [`inject_context_with`] and the [`default_propagator`].
pub fn inject_context(cx: &Context) -> Option<String> {
    inject_context_with(&default_propagator(), cx)
}

/// The `tm` value of `span`'s OpenTelemetry context (normally the `bullmq.queue.add` span).
pub fn inject_span(span: &Span) -> Option<String> {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    inject_context(&cx)
}

/// The `tm` value of the current `tracing` span's OpenTelemetry context, for a producer that
/// writes jobs itself.
pub fn inject_current_context() -> Option<String> {
    inject_span(&Span::current())
}

/// Reads a `tm` value with `propagator`. Unparseable metadata (not a JSON object) gives an
/// empty context; non-string values are ignored, as a propagator would.
pub fn extract_context_with(propagator: &dyn TextMapPropagator, tm: &str) -> Context {
    let carrier: HashMap<String, String> = match serde_json::from_str::<serde_json::Value>(tm) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .filter_map(|(k, v)| match v {
                serde_json::Value::String(s) => Some((k, s)),
                _ => None,
            })
            .collect(),
        _ => {
            tracing::debug!(target: "bullmq", tm, "job telemetry metadata is not a JSON object");
            HashMap::new()
        }
    };
    propagator.extract_with_context(&Context::new(), &carrier)
}

/// [`extract_context_with`] and the [`default_propagator`].
pub fn extract_context(tm: &str) -> Context {
    extract_context_with(&default_propagator(), tm)
}

/// Makes the producer's context in `tm` the OpenTelemetry parent of `span` (normally a fresh
/// `bullmq.worker.process` span, before it is entered). Returns whether a valid parent was
/// attached: `false` for metadata without a trace, without an OpenTelemetry layer, or when the
/// span is disabled or already started.
pub fn set_parent(span: &Span, tm: &str) -> bool {
    let cx = extract_context(tm);
    if !cx.span().span_context().is_valid() {
        return false;
    }
    match span.set_parent(cx) {
        Ok(()) => true,
        Err(error) => {
            tracing::debug!(target: "bullmq", %error, "cannot continue the producer's trace");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

    fn remote_context() -> Context {
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        Context::new().with_remote_span_context(sc)
    }

    #[test]
    fn inject_writes_the_bullmq_otel_shape() {
        let tm = inject_context(&remote_context()).unwrap();
        assert_eq!(
            tm,
            r#"{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}"#
        );
    }

    #[test]
    fn extract_reads_what_inject_wrote() {
        let tm = inject_context(&remote_context()).unwrap();
        let cx = extract_context(&tm);
        let sc = cx.span().span_context().clone();
        assert!(sc.is_valid() && sc.is_remote() && sc.is_sampled());
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
    }

    #[test]
    fn nothing_to_inject_gives_none() {
        assert_eq!(inject_context(&Context::new()), None);
    }

    #[test]
    fn garbage_metadata_gives_an_empty_context() {
        for tm in [
            "",
            "not json",
            "[1]",
            r#"{"traceparent": 5}"#,
            r#"{"traceparent":"00-zz"}"#,
        ] {
            assert!(
                !extract_context(tm).span().span_context().is_valid(),
                "{tm}"
            );
        }
    }
}
