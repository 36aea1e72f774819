//! [`Queue::get_metrics`]: the per-minute completed / failed counts workers keep in Redis.

use crate::error::Result;
use crate::queue::Queue;
use crate::telemetry::{Metrics, MetricsKind};

impl Queue {
    /// Reads the `kind` metrics of this queue as Node's `queue.getMetrics(type, start, end)`:
    /// the totals hash and the per-minute data points `start..=end` (list indexes, 0 = newest
    /// minute, negative from the end; Node's defaults are `0` and `-1`). A queue whose
    /// workers never recorded metrics returns zeros and no data, as in Node.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`](crate::QueueError::Redis) when Redis fails (another backend: [`QueueError::Backend`](crate::QueueError::Backend)).
    ///
    /// # Cancel safety
    ///
    /// Read-only: cancelling loses nothing.
    pub async fn get_metrics(&self, kind: MetricsKind, start: i64, end: i64) -> Result<Metrics> {
        Ok(self.store().get_metrics(kind, start, end).await?)
    }
}
