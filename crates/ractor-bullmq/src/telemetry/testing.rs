//! Test helpers for the telemetry catalogue (feature `test-util`): a `tracing` layer that
//! captures events and spans with their fields, and a metrics recorder with lookups by name and
//! labels. Use them to assert that your application (or a scripted run of a Worker) emits the
//! catalogue entries you rely on.
//!
//! Both install per thread ([`CapturedEvents::set_default`], [`CapturedMetrics::set_default`]),
//! so parallel tests do not see each other; run async tests on a current-thread runtime (the
//! `#[tokio::test]` default) so every task runs on the capturing thread.
//!
//! ```
//! use ractor_bullmq::telemetry::{self, event_names, testing::{CapturedEvents, CapturedMetrics}};
//!
//! let events = CapturedEvents::new();
//! let metrics = CapturedMetrics::new();
//! let _tracing = events.set_default();
//! let _metrics = metrics.set_default();
//!
//! telemetry::job_added("emails", "1", "welcome");
//!
//! let added = events.first(event_names::JOB_ADDED).expect("event emitted");
//! assert_eq!(added.field("job.id"), Some("1"));
//! assert_eq!(metrics.counter("bullmq_jobs_added_total", &[("queue", "emails")]), Some(1));
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock must not hide what was captured.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One captured `tracing` event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CapturedEvent {
    /// The `event` field (the catalogue name), when present.
    pub name: Option<String>,
    /// The event's target (`bullmq` for catalogue events).
    pub target: String,
    /// The event's level.
    pub level: Level,
    /// Every field, rendered as text (strings verbatim, `%`/`?` values as formatted); the
    /// message is under `message`.
    pub fields: BTreeMap<String, String>,
    /// Names of the spans the event happened in, outermost first.
    pub spans: Vec<&'static str>,
}

impl CapturedEvent {
    /// A field's text.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// One captured span, with the fields given at creation and recorded later.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CapturedSpan {
    /// The span's name (for example `bullmq.worker.process`).
    pub name: &'static str,
    /// The span's target.
    pub target: String,
    /// Fields with a value, rendered as text.
    pub fields: BTreeMap<String, String>,
}

impl CapturedSpan {
    /// A field's text.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Debug, Default)]
struct Captured {
    events: Vec<CapturedEvent>,
    spans: Vec<CapturedSpan>,
}

/// Captures events and spans; clones share what was captured.
#[derive(Debug, Clone, Default)]
pub struct CapturedEvents {
    inner: Arc<Mutex<Captured>>,
}

/// The index of a span's entry in [`Captured::spans`], kept in the span's extensions.
struct SpanSlot(usize);

struct FieldText<'a>(&'a mut BTreeMap<String, String>);

impl Visit for FieldText<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl CapturedEvents {
    /// An empty capture.
    pub fn new() -> Self {
        Self::default()
    }

    /// The layer to add to your own subscriber (when you also need, say, a fmt layer).
    pub fn layer(&self) -> CaptureLayer {
        CaptureLayer {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Installs a registry with only this capture layer as the current thread's default
    /// subscriber, until the guard is dropped. Captures every level.
    pub fn set_default(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.layer()))
    }

    /// Every event captured so far, in order.
    pub fn events(&self) -> Vec<CapturedEvent> {
        lock(&self.inner).events.clone()
    }

    /// The events whose `event` field is `name`, in order.
    pub fn named(&self, name: &str) -> Vec<CapturedEvent> {
        lock(&self.inner)
            .events
            .iter()
            .filter(|e| e.name.as_deref() == Some(name))
            .cloned()
            .collect()
    }

    /// The first event whose `event` field is `name`.
    pub fn first(&self, name: &str) -> Option<CapturedEvent> {
        lock(&self.inner)
            .events
            .iter()
            .find(|e| e.name.as_deref() == Some(name))
            .cloned()
    }

    /// Every span created so far, in creation order, with its latest field values.
    pub fn spans(&self) -> Vec<CapturedSpan> {
        lock(&self.inner).spans.clone()
    }

    /// The spans named `name`, in creation order.
    pub fn spans_named(&self, name: &str) -> Vec<CapturedSpan> {
        lock(&self.inner)
            .spans
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }

    /// Forgets everything captured so far.
    pub fn clear(&self) {
        let mut captured = lock(&self.inner);
        captured.events.clear();
        // Spans still open keep their slot index, so only their content is dropped.
        for span in &mut captured.spans {
            span.fields.clear();
        }
    }
}

/// The `tracing_subscriber` layer behind [`CapturedEvents`].
#[derive(Debug, Clone)]
pub struct CaptureLayer {
    inner: Arc<Mutex<Captured>>,
}

impl<S> Layer<S> for CaptureLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut FieldText(&mut fields));
        let slot = {
            let mut captured = lock(&self.inner);
            captured.spans.push(CapturedSpan {
                name: attrs.metadata().name(),
                target: attrs.metadata().target().to_owned(),
                fields,
            });
            captured.spans.len() - 1
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanSlot(slot));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let extensions = span.extensions();
        let Some(SpanSlot(slot)) = extensions.get::<SpanSlot>() else {
            return;
        };
        let mut captured = lock(&self.inner);
        if let Some(captured_span) = captured.spans.get_mut(*slot) {
            values.record(&mut FieldText(&mut captured_span.fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut FieldText(&mut fields));
        let spans = ctx
            .event_scope(event)
            .map(|scope| scope.from_root().map(|span| span.name()).collect())
            .unwrap_or_default();
        lock(&self.inner).events.push(CapturedEvent {
            name: fields.get("event").cloned(),
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields,
            spans,
        });
    }
}

/// A metrics recorder for tests, with lookups by metric name and labels.
///
/// Values accumulate across lookups (the underlying debugging recorder hands out and resets
/// deltas): counters and histograms exactly; gauges as the sum of their increments and
/// decrements, which is what every catalogue gauge uses (a `set` gauge would read wrong).
pub struct CapturedMetrics {
    recorder: DebuggingRecorder,
    snapshotter: Snapshotter,
    seen: Mutex<BTreeMap<SeriesKey, Recorded>>,
}

type SeriesKey = (MetricKind, String, Vec<(String, String)>);

/// What one series holds, accumulated over snapshots.
#[derive(Debug, Clone)]
enum Recorded {
    Counter(u64),
    Gauge(f64),
    Histogram(Vec<f64>),
}

impl fmt::Debug for CapturedMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CapturedMetrics")
            .field("series", &lock(&self.seen).len())
            .finish()
    }
}

impl Default for CapturedMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl CapturedMetrics {
    /// An empty recorder.
    pub fn new() -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        Self {
            recorder,
            snapshotter,
            seen: Mutex::new(BTreeMap::new()),
        }
    }

    /// Makes this the current thread's recorder until the guard is dropped.
    pub fn set_default(&self) -> metrics::LocalRecorderGuard<'_> {
        metrics::set_default_local_recorder(&self.recorder)
    }

    /// Runs `f` with this recorder as the current thread's recorder.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(&self.recorder, f)
    }

    fn refresh(&self) -> MutexGuard<'_, BTreeMap<SeriesKey, Recorded>> {
        let mut seen = lock(&self.seen);
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let entry_key = series(&key);
            let value = match value {
                DebugValue::Counter(c) => Recorded::Counter(c),
                DebugValue::Gauge(g) => Recorded::Gauge(g.into_inner()),
                DebugValue::Histogram(values) => {
                    Recorded::Histogram(values.into_iter().map(|f| f.into_inner()).collect())
                }
            };
            // The debugging recorder hands out deltas (it zeroes what it reports), so add up.
            match (seen.get_mut(&entry_key), value) {
                (Some(Recorded::Counter(old)), Recorded::Counter(new)) => {
                    *old = old.saturating_add(new);
                }
                (Some(Recorded::Gauge(old)), Recorded::Gauge(new)) => *old += new,
                (Some(Recorded::Histogram(old)), Recorded::Histogram(new)) => old.extend(new),
                (_, value) => {
                    seen.insert(entry_key, value);
                }
            }
        }
        seen
    }

    /// Names of every metric recorded so far.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.refresh().keys().map(|(_, n, _)| n.clone()).collect();
        names.dedup();
        names
    }

    /// The sum of the counter `name` over the series whose labels include every pair of
    /// `labels`; `None` when no such series exists.
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> Option<u64> {
        self.matching(MetricKind::Counter, name, labels)
            .into_iter()
            .map(|v| match v {
                Recorded::Counter(c) => c,
                _ => 0,
            })
            .reduce(|a, b| a.saturating_add(b))
    }

    /// The sum of the gauge `name` over the matching series (see [`CapturedMetrics::counter`]).
    pub fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(MetricKind::Gauge, name, labels)
            .into_iter()
            .map(|v| match v {
                Recorded::Gauge(g) => g,
                _ => 0.0,
            })
            .reduce(|a, b| a + b)
    }

    /// Every value recorded in the histogram `name` over the matching series.
    pub fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.matching(MetricKind::Histogram, name, labels)
            .into_iter()
            .flat_map(|v| match v {
                Recorded::Histogram(values) => values,
                _ => Vec::new(),
            })
            .collect()
    }

    /// The label sets of metric `name`, one per series.
    pub fn label_sets(&self, name: &str) -> Vec<Vec<(String, String)>> {
        self.refresh()
            .keys()
            .filter(|(_, n, _)| n == name)
            .map(|(_, _, labels)| labels.clone())
            .collect()
    }

    fn matching(&self, kind: MetricKind, name: &str, labels: &[(&str, &str)]) -> Vec<Recorded> {
        self.refresh()
            .iter()
            .filter(|((k, n, series_labels), _)| {
                *k == kind
                    && n == name
                    && labels
                        .iter()
                        .all(|(lk, lv)| series_labels.iter().any(|(sk, sv)| sk == lk && sv == lv))
            })
            .map(|(_, v)| v.clone())
            .collect()
    }
}

fn series(key: &CompositeKey) -> SeriesKey {
    let mut labels: Vec<(String, String)> = key
        .key()
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect();
    labels.sort();
    (key.kind(), key.key().name().to_owned(), labels)
}
