//! The checks made when a backend opens: the server is new enough, the schema's migration
//! ledger is at a version this release was tested on, and the functions it calls exist.
//!
//! Read only: the ledger belongs to Node's migrator. A row written here would make Node skip
//! its own later migrations, and a `min_client_version` above 6 would lock Node 6 out.

use tokio_postgres::error::SqlState;

use crate::db::Db;
use crate::error::{PgError, PgResult};

/// The ledger versions this release was tested on (Node BullMQ 6.7.0 installs 1–11).
pub const TESTED_VERSIONS: std::ops::RangeInclusive<i64> = 11..=11;
/// The client major version this release speaks (the ledger's `min_client_version`).
pub const CLIENT_MAJOR: i64 = 6;
/// The oldest server BullMQ supports.
pub const MINIMUM_SERVER: i64 = 13;

/// Every installed function this backend calls, with its argument types: a ledger that claims
/// the protocol without its functions (a hand-copied ledger) is refused at open, not at the
/// first job.
pub(crate) const CALLED_FUNCTIONS: &[&str] = &[
    "add_job(text,text,text,jsonb,jsonb,integer,bigint,bigint,integer,text,text,text,text,text,boolean)",
    "add_jobs_bulk(text,jsonb)",
    "move_to_active(text,text,bigint,bigint,text,integer,bigint)",
    "move_to_completed(text,text,text,jsonb,bigint,boolean,bigint,integer)",
    "move_to_failed(text,text,text,text,jsonb,bigint,boolean,bigint,integer)",
    "move_to_completed_fetch(text,text,text,jsonb,bigint,boolean,bigint,integer,bigint,bigint,text,integer,bigint)",
    "move_to_failed_fetch(text,text,text,text,jsonb,bigint,boolean,bigint,integer,bigint,bigint,text,integer,bigint)",
    "retry_job(text,text,text,boolean,text,jsonb)",
    "move_to_delayed(text,text,text,bigint,bigint,boolean,text,jsonb)",
    "move_active_to_wait(text,text,text,bigint)",
    "move_to_waiting_children(text,text,text)",
    "extend_lock(text,text,text,bigint,bigint)",
    "move_stalled_jobs_to_wait(text,integer,bigint,bigint)",
    "next_signal(text,integer,bigint)",
    "rate_limit_effective(text,integer,bigint)",
    "update_progress(text,text,jsonb)",
    "pause(text,boolean)",
    "drain(text,boolean)",
    "clean(text,text,bigint,integer)",
    "obliterate(text,integer,boolean)",
    "remove(text,text,boolean)",
    "publish_event(text,text,jsonb)",
    "set_rate_limit(text,bigint,bigint)",
    "collect_metrics(text,text,integer,bigint)",
];

/// What the open-time checks found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerState {
    /// `MAX(version)` of the ledger.
    pub version: i64,
    /// `MAX(min_client_version)` (6 when the column is absent, as Node reads it).
    pub min_client_version: i64,
    /// The server's major version.
    pub server_major: i64,
}

/// Runs every check on `db`'s schema.
pub(crate) async fn check(db: &Db) -> PgResult<LedgerState> {
    let schema = db.schema().to_string();
    let client = db.client("checking the migration ledger").await?;
    let quoted = db.config().quoted_schema();
    let server: i64 = client
        .query_one("SELECT current_setting('server_version_num')::int8", &[])
        .await
        .map_err(PgError::sql("reading the server version"))?
        .get(0);
    let server_major = server / 10_000;
    if server_major < MINIMUM_SERVER {
        return Err(PgError::ServerTooOld {
            found: server_major,
            minimum: MINIMUM_SERVER,
        });
    }
    // `to_jsonb(row)` reads min_client_version also from a ledger made before the column
    // existed (Python's migrator), as Node does.
    let sql = format!(
        "SELECT COALESCE(MAX(version), 0)::int8, \
                COALESCE(MAX((to_jsonb(m) ->> 'min_client_version')::int8), {CLIENT_MAJOR})::int8 \
           FROM {quoted}.migration m"
    );
    let row = match client.query_one(&sql, &[]).await {
        Ok(row) => row,
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
            return Err(PgError::SchemaNotMigrated { schema })
        }
        Err(e) => return Err(PgError::sql("reading the migration ledger")(e)),
    };
    let state = LedgerState {
        version: row.get(0),
        min_client_version: row.get(1),
        server_major,
    };
    if state.min_client_version > CLIENT_MAJOR {
        return Err(PgError::SchemaNeedsNewerClient {
            schema,
            required: state.min_client_version,
            supported: CLIENT_MAJOR,
        });
    }
    if !TESTED_VERSIONS.contains(&state.version) && !db.config().accept_untested_schema {
        let hint = if state.version < *TESTED_VERSIONS.start() {
            "upgrade it in place with Node BullMQ 6.7's migrator (migrate: true), or open it anyway with accept_untested_schema"
        } else {
            "use a release tested on it, or open it anyway with accept_untested_schema"
        };
        return Err(PgError::SchemaVersionUntested {
            schema,
            found: state.version,
            tested: *TESTED_VERSIONS.end(),
            hint,
        });
    }
    let signatures: Vec<String> = CALLED_FUNCTIONS
        .iter()
        .map(|f| format!("{quoted}.{f}"))
        .collect();
    let missing = client
        .query(
            "SELECT s FROM unnest($1::text[]) AS s WHERE to_regprocedure(s) IS NULL",
            &[&signatures],
        )
        .await
        .map_err(PgError::sql("checking the installed functions"))?;
    if let Some(row) = missing.first() {
        let signature: String = row.get(0);
        return Err(PgError::MissingFunction {
            schema,
            signature: signature
                .trim_start_matches(&format!("{quoted}."))
                .to_string(),
        });
    }
    Ok(state)
}
