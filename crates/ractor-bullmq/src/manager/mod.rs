//! The WorkerManager: N Workers of one queue, scaled by message or by an autoscaling policy.
//!
//! ```no_run
//! use std::time::Duration;
//! use ractor_bullmq::manager::{Autoscale, WorkerManagerOptions};
//! use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
//! use ractor_bullmq::worker::{Job, JobContext, WorkerOptions};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let runtime = Runtime::start(RuntimeOptions::default()).await?;
//! let processor = |job: Job, _ctx: JobContext| async move { Ok(job.data_value().clone()) };
//! let manager = runtime
//!     .worker_manager(
//!         "emails",
//!         processor,
//!         WorkerOptions::new().concurrency(10),
//!         WorkerManagerOptions::new().workers(2).autoscale(Autoscale::new(
//!             Duration::from_secs(5),
//!             1,
//!             8,
//!             |input| (input.waiting as usize).div_ceil(500),
//!         )),
//!     )
//!     .await?;
//! manager.scale_up(3).await?;
//! manager.scale_down(2).await?;
//! println!("{} workers", manager.worker_count().await?);
//! runtime.shutdown(Duration::from_secs(30)).await?;
//! # Ok(()) }
//! ```

mod autoscale;
mod handle;
mod worker_manager;

pub use autoscale::{Autoscale, AutoscaleError, AutoscaleInput, AutoscalePolicy};
pub use handle::WorkerManagerHandle;
pub use worker_manager::{
    ManagerInternal, WorkerManager, WorkerManagerArgs, WorkerManagerMsg, WorkerManagerOptions,
    WorkerManagerState,
};
