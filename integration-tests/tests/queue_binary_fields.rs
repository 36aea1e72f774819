//! `Queue::get_job` on a job hash holding binary (non-UTF-8) bytes, written by another client:
//! a typed [`QueueError::Decode`] naming the job and the field, never an opaque parse error
//! (issue 10, item 7). Node (ioredis) decodes such bytes lossily into U+FFFD characters; we
//! refuse to hand out silently altered data.

mod common;

use common::*;
use fred::bytes::Bytes;
use fred::prelude::{ClientLike, HashesInterface};
use ractor_bullmq::protocol::keys::QueueKeys;
use ractor_bullmq::protocol::DecodeReason;
use ractor_bullmq::QueueError;

/// Writes job `id` of `queue` with the given raw fields (bytes as they are).
async fn write_raw_job(queue: &str, id: &str, fields: Vec<(Bytes, Bytes)>) -> anyhow::Result<()> {
    let client = raw_client().await?;
    let key = QueueKeys::new(PREFIX, queue).job(id);
    let _: () = client.hset(key, fields).await?;
    client.quit().await?;
    Ok(())
}

fn good_fields() -> Vec<(Bytes, Bytes)> {
    [
        ("name", "n"),
        ("data", "{}"),
        ("opts", "{}"),
        ("timestamp", "1764000000000"),
        ("delay", "0"),
        ("priority", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (Bytes::from(k), Bytes::from(v)))
    .collect()
}

#[tokio::test]
async fn a_binary_value_is_a_decode_error_naming_the_job_and_the_field() -> anyhow::Result<()> {
    let name = unique_queue("binary-fields");
    let queue = open_queue(&name).await?;
    for field in ["data", "name", "returnvalue", "failedReason"] {
        let id = format!("bin-{field}");
        let mut fields = good_fields();
        fields.retain(|(k, _)| k.as_ref() != field.as_bytes());
        fields.push((
            Bytes::from(field),
            Bytes::from_static(b"{\"a\":\"\xff\xfe\x00\x80\"}"),
        ));
        write_raw_job(&name, &id, fields).await?;
        let error = queue.get_job(&id).await.expect_err(field);
        let message = error.to_string();
        match &error {
            QueueError::Decode { job_id, source } => {
                assert_eq!(job_id, &id);
                assert_eq!(source.field, field);
                assert!(
                    matches!(
                        source.reason,
                        DecodeReason::NotUtf8 {
                            bytes: 12,
                            valid_up_to: 6
                        }
                    ),
                    "{:?}",
                    source.reason
                );
            }
            other => panic!("{field}: expected Decode, got {other:?}"),
        }
        assert!(message.contains(&id), "{message}");
        assert!(message.contains(field), "{message}");
        assert!(message.contains("UTF-8"), "{message}");
    }

    // A binary field *name* is reported too (shown lossily).
    let mut fields = good_fields();
    fields.push((Bytes::from_static(b"x\xff"), Bytes::from_static(b"v")));
    write_raw_job(&name, "bin-name-of-field", fields).await?;
    let error = queue
        .get_job("bin-name-of-field")
        .await
        .expect_err("field name");
    assert!(
        matches!(&error, QueueError::Decode { job_id, .. } if job_id == "bin-name-of-field"),
        "{error:?}"
    );

    // A clean hash next to them still reads.
    write_raw_job(&name, "clean", good_fields()).await?;
    let job = queue.get_job("clean").await?.expect("exists");
    assert_eq!(job.name(), "n");
    assert!(queue.get_job("missing").await?.is_none());

    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}
