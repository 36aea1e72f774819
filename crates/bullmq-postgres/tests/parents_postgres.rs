//! Children added one by one and in bulk on PostgreSQL: a job id that is already the child of
//! another live parent is refused with a typed error naming both (Node's -7), and a bulk that
//! meets one writes nothing; a missing parent refuses only its own job.

mod common;

use bullmq_backend::{AddResult, Backend, NewJob, ParentFlags, ParentLink, QueueStore};
use bullmq_postgres::PgError;
use bullmq_protocol::keys::QueueKeys;
use bullmq_protocol::JobState;
use bullmq_protocol::{JobRef, QueueId};

fn job(keys: &QueueKeys, id: &str) -> JobRef {
    JobRef::new(QueueId::from(keys), id)
}

fn child(keys: &QueueKeys, id: &str, parent: &str) -> NewJob {
    NewJob::new(id, "{}", "{}", bullmq_backend::now_ms())
        .with_custom_id(id)
        .with_parent(ParentLink::new(job(keys, parent), ParentFlags::default()))
}

async fn add(store: &dyn QueueStore, job: NewJob) -> String {
    match store.add(&job).await.expect("add") {
        AddResult::Id(id) => id,
        other => panic!("{other:?}"),
    }
}

fn taken(error: &bullmq_backend::BackendError) -> (String, String) {
    match error.downcast_ref::<PgError>() {
        Some(PgError::ParentCannotBeReplaced {
            job_key,
            existing_parent_key,
        }) => (job_key.clone(), existing_parent_key.clone()),
        _ => panic!("not a -7 refusal: {error}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_of_another_parent_is_refused_and_a_bulk_that_meets_one_writes_nothing() {
    let backend = common::backend().await;
    let queue = bullmq_backend::conformance::unique_queue_name("parents");
    let keys = QueueKeys::new("bull", queue.as_str());
    let store = backend
        .queue_store(&QueueId::from(&keys))
        .await
        .expect("store");
    for parent in ["p1", "p2"] {
        add(
            store.as_ref(),
            NewJob::new(parent, "{}", "{}", bullmq_backend::now_ms()).with_custom_id(parent),
        )
        .await;
    }
    assert_eq!(add(store.as_ref(), child(&keys, "x", "p1")).await, "x");

    let error = store
        .add(&child(&keys, "x", "p2"))
        .await
        .expect_err("x belongs to p1");
    assert_eq!(taken(&error), (keys.job("x"), keys.job("p1")));
    let x = store.get_job("x").await.unwrap().expect("x");
    assert_eq!(x.parent_key, Some(keys.job("p1")), "x keeps its parent");

    // A bulk with a taken id writes nothing, not even its other jobs.
    let error = store
        .add_bulk(&[child(&keys, "fresh", "p2"), child(&keys, "x", "p2")])
        .await
        .expect_err("x belongs to p1");
    assert_eq!(taken(&error), (keys.job("x"), keys.job("p1")));
    assert_eq!(store.get_state("fresh").await.unwrap(), JobState::Unknown);
    assert!(store
        .get_dependencies("p2")
        .await
        .unwrap()
        .unprocessed
        .is_empty());

    // A missing parent refuses its own job only.
    let added = store
        .add_bulk(&[child(&keys, "lost", "nowhere"), child(&keys, "kept", "p2")])
        .await
        .expect("add_bulk");
    assert_eq!(
        added,
        [
            AddResult::ParentMissing {
                parent: job(&keys, "nowhere")
            },
            AddResult::Id("kept".into()),
        ]
    );
    assert_eq!(store.get_state("lost").await.unwrap(), JobState::Unknown);
    assert_eq!(
        store.get_dependencies("p2").await.unwrap().unprocessed,
        [job(&keys, "kept")]
    );
    let kept = store.get_job("kept").await.unwrap().expect("kept");
    let parent = kept.parent.expect("parent");
    assert_eq!(
        (parent.id.as_str(), parent.queue_key.as_str()),
        ("p2", keys.qualified_name())
    );
    let _ = store.close().await;
}
