//! Integration tests live in `tests/`; this library only compiles the code of the guides and
//! recipes under `docs/` (each file as doctests), so every example there compiles as shown.
//!
//! The blocks are what a reader copies: complete programs or complete functions, no hidden
//! `# ` lines, each page's crates listed in a `toml` block (this crate's dev-dependencies
//! provide them, `ractor-bullmq` with `test-util`); `tests/docs_examples.rs` checks the lists
//! and runs the Node snippet of getting-started. Blocks marked `no_run` are programs that
//! wait for Ctrl-C or write to a fixed queue such as `emails`, which a shared CI Redis must not
//! get; the rest run (functions defined in a block are compiled, not called).

/// `docs/guides/schedulers.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/schedulers.md")]
pub struct SchedulersGuide;

/// `docs/guides/postgres.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/postgres.md")]
pub struct PostgresGuide;

/// `docs/guides/workers.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/workers.md")]
pub struct WorkersGuide;

/// `docs/recipes/step-jobs.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/recipes/step-jobs.md")]
pub struct StepJobsRecipe;

/// `docs/guides/flows.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/flows.md")]
pub struct FlowsGuide;

/// `docs/guides/operations.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/operations.md")]
pub struct OperationsGuide;

/// `docs/guides/getting-started.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/getting-started.md")]
pub struct GettingStartedGuide;

/// `docs/guides/production.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/production.md")]
pub struct ProductionGuide;

/// `docs/guides/queue-events.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/queue-events.md")]
pub struct QueueEventsGuide;

/// `docs/recipes/custom-backoff.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/recipes/custom-backoff.md")]
pub struct CustomBackoffRecipe;

/// `docs/recipes/graceful-shutdown.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/recipes/graceful-shutdown.md")]
pub struct GracefulShutdownRecipe;

/// `docs/recipes/node-producer-rust-worker.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/recipes/node-producer-rust-worker.md")]
pub struct NodeProducerRustWorkerRecipe;

/// `docs/recipes/rate-limited-api.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/recipes/rate-limited-api.md")]
pub struct RateLimitedApiRecipe;

/// `docs/recipes/wait-for-a-job.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/recipes/wait-for-a-job.md")]
pub struct WaitForAJobRecipe;

/// `docs/scaling.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/scaling.md")]
pub struct ScalingDoc;

/// `docs/supervision.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/supervision.md")]
pub struct SupervisionDoc;

/// `docs/telemetry.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/telemetry.md")]
pub struct TelemetryDoc;
