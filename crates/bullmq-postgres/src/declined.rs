//! What this backend declines for now: job schedulers, through the seam's default bodies
//! (each answers `BackendError::Unsupported` naming the capability and this backend).

use bullmq_backend::JobSchedulers;

use crate::queue_store::PgQueueStore;

impl JobSchedulers for PgQueueStore {}
