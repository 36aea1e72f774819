//! The open-time checks against real ledgers: each refusal on a schema made by Node's migrator
//! and then altered the way a wrong or foreign deployment would leave it, and an open that
//! changes nothing in the schema.

mod common;

use bullmq_postgres::{PgConfig, PgError, PostgresBackend};

/// A schema migrated by Node, altered by `sql` (with `{s}` for the quoted schema), dropped at
/// the end.
struct Altered(String);

impl Altered {
    fn new(case: &str, sql: &str) -> Self {
        let name = format!("rs_test_{}_{case}", std::process::id());
        common::psql(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"));
        common::node_migrate(&[&name]);
        if !sql.is_empty() {
            common::psql(&sql.replace("{s}", &format!("\"{name}\"")));
        }
        Self(name)
    }

    async fn open(
        &self,
        config: impl FnOnce(PgConfig) -> PgConfig,
    ) -> Result<PostgresBackend, PgError> {
        let base = PgConfig::from_url(&common::pg_url())
            .and_then(|c| c.with_schema(&self.0))
            .expect("PG_URL");
        PostgresBackend::open(config(base)).await
    }
}

impl Drop for Altered {
    fn drop(&mut self) {
        common::psql(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.0));
    }
}

#[tokio::test]
async fn a_schema_without_a_ledger_is_refused_with_the_migrate_hint() {
    let config = PgConfig::from_url(&common::pg_url())
        .and_then(|c| c.with_schema("rs_test_no_such_schema"))
        .unwrap();
    let error = PostgresBackend::open(config).await.unwrap_err();
    assert!(
        matches!(error, PgError::SchemaNotMigrated { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("migrate: true"), "{error}");
}

#[tokio::test]
async fn older_and_newer_ledgers_are_untested_and_name_both_versions() {
    let older = Altered::new("v4", "DELETE FROM {s}.migration WHERE version > 4");
    let error = older.open(|c| c).await.unwrap_err();
    match &error {
        PgError::SchemaVersionUntested { found, tested, .. } => {
            assert_eq!((*found, *tested), (4, 11));
        }
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().contains("migration 4"), "{error}");
    assert!(error.to_string().contains("upgrade it in place"), "{error}");
    // Waived on request (only this check).
    older.open(PgConfig::accept_untested_schema).await.unwrap();

    let newer = Altered::new(
        "v12",
        "INSERT INTO {s}.migration (version, name, min_client_version) VALUES (12, '0012_future', 6)",
    );
    match newer.open(|c| c).await.unwrap_err() {
        PgError::SchemaVersionUntested { found, .. } => assert_eq!(found, 12),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_ledger_that_demands_a_newer_client_is_refused_even_when_waived() {
    let schema = Altered::new(
        "min7",
        "UPDATE {s}.migration SET min_client_version = 7 WHERE version = 11",
    );
    for waive in [false, true] {
        let error = schema
            .open(|c| if waive { c.accept_untested_schema() } else { c })
            .await
            .unwrap_err();
        match &error {
            PgError::SchemaNeedsNewerClient {
                required,
                supported,
                ..
            } => {
                assert_eq!((*required, *supported), (7, 6));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_ledger_without_its_functions_is_refused_at_open() {
    let schema = Altered::new(
        "nofn",
        "DROP FUNCTION {s}.move_to_active(text, text, bigint, bigint, text, integer, bigint)",
    );
    let error = schema.open(|c| c).await.unwrap_err();
    match &error {
        PgError::MissingFunction { signature, .. } => {
            assert!(signature.starts_with("move_to_active("), "{signature}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn opening_changes_nothing_in_the_schema() {
    let schema = Altered::new("ro", "");
    let catalog = || {
        common::psql(&format!(
            "SELECT string_agg(x, ',' ORDER BY x) FROM ( \
               SELECT 'rel:' || relname || ':' || relkind::text AS x FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname = '{0}' \
               UNION ALL SELECT 'fn:' || p.oid::regprocedure::text || md5(prosrc) FROM pg_proc p \
                 JOIN pg_namespace n ON n.oid = p.pronamespace WHERE nspname = '{0}' \
               UNION ALL SELECT 'ledger:' || version || ':' || min_client_version FROM \"{0}\".migration \
             ) t",
            schema.0
        ))
    };
    let before = catalog();
    let backend = schema.open(|c| c).await.unwrap();
    assert_eq!(backend.ledger().version, 11);
    assert_eq!(backend.ledger().min_client_version, 6);
    assert_eq!(catalog(), before);
}
