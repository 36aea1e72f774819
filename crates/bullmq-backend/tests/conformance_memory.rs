//! The backend conformance suite against the in-memory backend.

use std::sync::Arc;

use bullmq_backend::memory::MemoryBackend;

bullmq_backend::conformance_tests!(async { Arc::new(MemoryBackend::new()) });
