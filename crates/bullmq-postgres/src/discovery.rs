//! Who is connected and which queues exist: Node's worker discovery on PostgreSQL reads the
//! sessions' `application_name` (`<queue>` or `<queue>:w:<name>`, set on each Worker's LISTEN
//! session), and queues are the ones with rows.

use std::time::Duration;

use async_trait::async_trait;
use bullmq_backend::{BackendName, BackendResult, QueueStore, WorkerInfo};

use crate::queue_store::PgQueueStore;

/// The name every store of this backend gives in refusals and traces.
pub(crate) const BACKEND_NAME: &str = "postgres";

impl BackendName for PgQueueStore {
    fn backend_name(&self) -> &'static str {
        BACKEND_NAME
    }
}

#[async_trait]
impl QueueStore for PgQueueStore {
    fn queue_name(&self) -> &str {
        &self.queue
    }

    async fn close(&self) -> BackendResult<()> {
        // The pool belongs to the backend, shared by every store it opened.
        Ok(())
    }

    /// The sessions of this database named as a worker of this queue, as Node's `getWorkers`
    /// lists them (a worker without a name is named after the queue alone). Sessions carry no
    /// schema, so a same-named queue in another schema of the database is counted too, as Node
    /// counts it; and the server cuts session names at 63 bytes, so with a long queue name the
    /// worker's own name is cut or gone.
    async fn list_workers(&self) -> BackendResult<Vec<WorkerInfo>> {
        let rows = self
            .query_rows(
                "listing workers",
                "SELECT application_name, pid::text, \
                        COALESCE(host(client_addr) || ':' || client_port, 'local'), \
                        EXTRACT(EPOCH FROM now() - backend_start)::int8, \
                        EXTRACT(EPOCH FROM now() - COALESCE(state_change, backend_start))::int8 \
                   FROM pg_stat_activity \
                  WHERE datname = current_database() \
                    AND (application_name = left($1, 63) \
                         OR starts_with(application_name, left($1 || ':w:', 63))) \
                  ORDER BY backend_start, pid",
                &[&self.queue],
            )
            .await?;
        let secs = |v: i64| Duration::from_secs(u64::try_from(v).unwrap_or(0));
        Ok(rows
            .iter()
            .map(|r| {
                let raw: String = r.get(0);
                let worker = raw
                    .strip_prefix(&format!("{}:w:", self.queue))
                    .map(str::to_owned);
                let (id, addr): (String, String) = (r.get(1), r.get(2));
                let (age, idle): (i64, i64) = (r.get(3), r.get(4));
                // Node's entry: the queue's name as `name`, the session's as `rawname`.
                let fields = [
                    ("name", self.queue.clone()),
                    ("rawname", raw.clone()),
                    ("id", id.clone()),
                    ("addr", addr.clone()),
                    ("age", age.to_string()),
                    ("idle", idle.to_string()),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
                WorkerInfo::new(raw, worker, id, addr, secs(age), secs(idle)).with_fields(fields)
            })
            .collect())
    }
}
