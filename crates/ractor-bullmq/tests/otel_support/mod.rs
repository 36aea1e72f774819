//! An in-memory OpenTelemetry exporter behind a `tracing` subscriber, for the `otel` tests.
// Each test file uses the part it needs.
#![allow(dead_code, unreachable_pub)]

use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt;

/// Generous: a Worker on a loaded shared box may take a while to pick the job up.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A subscriber exporting every finished span to memory, installed on this thread.
pub struct Otel {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Otel {
    pub fn install() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer =
            tracing_opentelemetry::layer().with_tracer(provider.tracer("ractor-bullmq-test"));
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        Self {
            exporter,
            provider,
            _guard: guard,
        }
    }

    /// The finished spans called `name`.
    pub fn finished_all(&self, name: &str) -> Vec<SpanData> {
        self.provider.force_flush().expect("flush");
        self.exporter
            .get_finished_spans()
            .expect("spans")
            .into_iter()
            .filter(|s| s.name == name)
            .collect()
    }

    /// The first finished span called `name` (panics when there is none).
    pub fn finished(&self, name: &str) -> SpanData {
        self.finished_all(name)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("span {name} not exported"))
    }

    /// Polls until exactly one span called `name` has finished, and returns it.
    pub async fn wait_for_one(&self, name: &str) -> SpanData {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let mut spans = self.finished_all(name);
            assert!(spans.len() <= 1, "more than one {name} span: {spans:?}");
            if let Some(span) = spans.pop() {
                return span;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {name}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
