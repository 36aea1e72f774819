//! [`FlowJob`], one node of a flow, and [`FlowOptions`].

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::options::JobOptions;

/// One job of a flow and the jobs it waits for (Node's `FlowJob`).
///
/// A node with children is added in `waiting-children` and moves on once every child has
/// finished; each child names this node as its parent.
///
/// ```
/// use bullmq_protocol::flow::FlowJob;
/// use bullmq_protocol::options::JobOptions;
///
/// let tree = FlowJob::new("assemble", "cars")
///     .opts(JobOptions::new().job_id("car-1"))
///     .child(FlowJob::new("wheels", "parts"))
///     .child(FlowJob::new("engine", "parts").data(serde_json::json!({ "hp": 90 })));
/// assert_eq!(tree.children.len(), 2);
///
/// // Any `Serialize` value is data; the tree reads and writes as Node's `FlowJob` JSON.
/// #[derive(serde::Serialize)]
/// struct Engine { hp: u32 }
/// let engine = FlowJob::new("engine", "parts").data(Engine { hp: 90 });
/// let json = serde_json::to_value(&engine).unwrap();
/// assert_eq!(json["queueName"], "parts");
/// assert_eq!(json["data"]["hp"], 90);
/// let back: FlowJob = serde_json::from_value(json).unwrap();
/// assert_eq!(back, engine);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct FlowJob {
    /// Job name (Node `name`); must not be empty.
    pub name: String,
    /// The queue the job is added to (Node `queueName`); must not be empty.
    pub queue_name: String,
    /// The job's data (Node `data`), `{}` by default.
    #[serde(default = "empty_object")]
    pub data: Value,
    /// The job's options (Node `opts`), merged over the queue's defaults of
    /// [`FlowOptions::queues_options`]. `opts.parent` is only allowed on the root.
    #[serde(default)]
    pub opts: JobOptions,
    /// The jobs this one waits for (Node `children`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<FlowJob>,
    /// The key prefix of this node's queue (Node `prefix`); the producer's when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Why the data given to [`FlowJob::data`] could not be turned into JSON; the add that
    /// carries this node is refused with it.
    #[serde(skip)]
    data_error: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

impl FlowJob {
    /// A job `name` in `queue_name` with data `{}`, default options and no children.
    pub fn new(name: impl Into<String>, queue_name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            queue_name: queue_name.into(),
            data: Value::Object(serde_json::Map::new()),
            opts: JobOptions::default(),
            children: Vec::new(),
            prefix: None,
            data_error: None,
        }
    }

    /// With `data`, any `Serialize` value (a `serde_json::Value` as it is). Data that cannot be
    /// written as JSON (a map with non-text keys, a failing `Serialize`) is kept as the reason
    /// of [`FlowJob::data_error`], and the flow add is refused with it, nothing written.
    #[must_use]
    pub fn data(mut self, data: impl Serialize) -> Self {
        match serde_json::to_value(data) {
            Ok(value) => {
                self.data = value;
                self.data_error = None;
            }
            Err(error) => self.data_error = Some(error.to_string()),
        }
        self
    }

    /// Why the data given to [`FlowJob::data`] could not be serialised, if it could not.
    pub fn data_error(&self) -> Option<&str> {
        self.data_error.as_deref()
    }

    /// With options `opts`.
    #[must_use]
    pub fn opts(mut self, opts: JobOptions) -> Self {
        self.opts = opts;
        self
    }

    /// With one more child.
    #[must_use]
    pub fn child(mut self, child: FlowJob) -> Self {
        self.children.push(child);
        self
    }

    /// With these children added.
    #[must_use]
    pub fn children(mut self, children: impl IntoIterator<Item = FlowJob>) -> Self {
        self.children.extend(children);
        self
    }

    /// With the key prefix `prefix` for this node's queue.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// How many jobs the tree holds, this one included.
    pub fn len(&self) -> usize {
        // Iterative: a deep chain must not exhaust the stack.
        let mut count = 0;
        let mut stack = vec![self];
        while let Some(node) = stack.pop() {
            count += 1;
            stack.extend(node.children.iter());
        }
        count
    }

    /// Never empty: a tree holds at least its root (for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Options of one flow add (Node's `FlowOpts`).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct FlowOptions {
    /// Default job options per queue name (Node `queuesOptions[queue].defaultJobOptions`):
    /// a node's own options win option by option.
    pub queues_options: HashMap<String, JobOptions>,
}

impl FlowOptions {
    /// No per-queue defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `defaults` for the jobs of `queue`.
    #[must_use]
    pub fn queue_defaults(mut self, queue: impl Into<String>, defaults: JobOptions) -> Self {
        self.queues_options.insert(queue.into(), defaults);
        self
    }
}
