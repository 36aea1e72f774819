//! [`PgFlowStore`]: whole flows (a tree of jobs across the queues of the schema) on the
//! protocol's `add_flow`, and a flow read back node by node with our own SELECTs.
//!
//! `add_flow` inserts every entry (roots first) in one statement and answers one slot per
//! entry, a refused one as `-5` (its parent does not exist) or `-7` (its id is the child of
//! another live parent) without aborting the rest. The seam promises that a refusal writes
//! nothing, so the call runs in a transaction of its own (`BEGIN; SELECT add_flow(..)`) that is
//! rolled back when any slot is refused, its events and NOTIFYs with it, and committed
//! otherwise.

use async_trait::async_trait;
use bullmq_backend::{
    BackendError, BackendResult, FlowAdded, FlowNodeInsert, FlowNodeRead, FlowRefusal, FlowStore,
};
use bullmq_protocol::QueueId;
use serde_json::Value;

use crate::db::Db;
use crate::error::{PgError, PgResult};
use crate::keys;
use crate::queue_store::{AddArgs, PgQueueStore};

/// Adds and reads flows across the queues of one schema.
#[derive(Debug, Clone)]
pub struct PgFlowStore {
    db: Db,
}

impl PgFlowStore {
    pub(crate) fn new(db: Db) -> Self {
        Self { db }
    }

    /// The store of `queue` (checking its namespace).
    fn store(&self, queue: &QueueId) -> PgResult<PgQueueStore> {
        keys::check_prefix(queue.namespace(), self.db.schema())?;
        Ok(PgQueueStore::new(
            self.db.clone(),
            queue.name(),
            queue.namespace(),
        ))
    }

    async fn add(&self, nodes: &[FlowNodeInsert]) -> PgResult<FlowAdded> {
        let operation = "adding a flow";
        if nodes.is_empty() {
            return Ok(FlowAdded::Ids(Vec::new()));
        }
        // Every node is decoded (options, parent key, prefix) before the first write.
        let mut stores = Vec::with_capacity(nodes.len());
        let mut entries = Vec::with_capacity(nodes.len());
        for node in nodes {
            let store = self.store(&node.queue)?;
            let args = AddArgs::of(&node.job, self.db.schema(), true)?;
            entries.push(args.entry(&store.queue, &node.job, node.waiting_children));
            stores.push(store);
        }
        let payload = Value::Array(entries).to_string();
        let mut client = self.db.client(operation).await?;
        let tx = client
            .transaction()
            .await
            .map_err(PgError::sql(operation))?;
        let rows = tx
            .query("SELECT add_flow($1::text::jsonb)", &[&payload])
            .await
            .map_err(PgError::sql(operation))?;
        let slots: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        if slots.len() != nodes.len() {
            return Err(PgError::Reply {
                operation,
                detail: format!("{} results for {} jobs", slots.len(), nodes.len()),
            });
        }
        let refused = slots.iter().position(|slot| slot == "-5" || slot == "-7");
        let Some(index) = refused else {
            tx.commit().await.map_err(PgError::sql(operation))?;
            return Ok(FlowAdded::Ids(slots));
        };
        let node = &nodes[index];
        let refusal = if slots[index] == "-5" {
            match &node.job.parent {
                Some(link) => FlowRefusal::ParentMissing {
                    index,
                    parent: link.parent.clone(),
                },
                None => {
                    return Err(PgError::Reply {
                        operation,
                        detail: format!("node {index} was refused for a parent it does not name"),
                    })
                }
            }
        } else {
            // Read inside the transaction: the job still names the parent it kept.
            let id = node.job.custom_id.clone().unwrap_or_default();
            match stores[index].parent_taken(&tx, &id).await {
                PgError::ParentCannotBeReplaced {
                    existing_parent_key,
                    ..
                } => {
                    let store = &stores[index];
                    let existing = existing_parent_key
                        .strip_prefix(&format!("{}:", store.prefix))
                        .unwrap_or(&existing_parent_key);
                    FlowRefusal::ParentCannotBeReplaced {
                        index,
                        job: store.job_ref(&keys::pg_key(&store.queue, &id)),
                        existing_parent: store.job_ref(existing),
                    }
                }
                other => return Err(other),
            }
        };
        tx.rollback().await.map_err(PgError::sql(operation))?;
        Ok(FlowAdded::Refused(refusal))
    }

    async fn read(
        &self,
        keys: &QueueId,
        job_id: &str,
        max_children: u64,
    ) -> BackendResult<Option<FlowNodeRead>> {
        let store = self.store(keys)?;
        let Some(job) = store.job_row(job_id).await? else {
            return Ok(None);
        };
        let record = store
            .record_of(&job)
            .map_err(|source| BackendError::Decode {
                job_id: job_id.to_string(),
                source,
            })?;
        // The first `max_children` of each kind, in Node's getFlow order: processed, pending
        // (unprocessed), failed, ignored.
        let limit = i64::try_from(max_children.max(1)).unwrap_or(i64::MAX);
        let children = store
            .query_rows(
                "reading a flow node's children",
                "SELECT child_key FROM ( \
                   SELECT child_key, status::text AS status, row_number() OVER ( \
                            PARTITION BY status ORDER BY child_key COLLATE \"C\") AS r \
                     FROM job_dependency WHERE parent_queue = $1 AND parent_id = $2) d \
                  WHERE r <= $3 \
                  ORDER BY CASE status WHEN 'processed' THEN 0 WHEN 'pending' THEN 1 \
                                       WHEN 'failed' THEN 2 ELSE 3 END, \
                           child_key COLLATE \"C\"",
                &[&store.queue, &job_id, &limit],
            )
            .await?;
        let children = children.iter().map(|r| store.job_ref(r.get(0))).collect();
        Ok(Some(FlowNodeRead::new(record, children)))
    }
}

impl bullmq_backend::BackendName for PgFlowStore {
    fn backend_name(&self) -> &'static str {
        crate::discovery::BACKEND_NAME
    }
}

#[async_trait]
impl FlowStore for PgFlowStore {
    async fn add_flow(&self, nodes: &[FlowNodeInsert]) -> BackendResult<FlowAdded> {
        Ok(self.add(nodes).await?)
    }

    async fn read_node(
        &self,
        queue: &QueueId,
        job_id: &str,
        max_children: u64,
    ) -> BackendResult<Option<FlowNodeRead>> {
        self.read(queue, job_id, max_children).await
    }

    async fn close(&self) -> BackendResult<()> {
        // The pool belongs to the backend.
        Ok(())
    }
}
