//! Job schedulers (Node `upsertJobScheduler`): the schedule ([`Repeat`]), the template of every
//! iteration ([`SchedulerTemplate`]), what an upsert and a started iteration write
//! ([`plan_upsert`], [`plan_next_iteration`]), the next run of `every` ([`every_next_millis`])
//! and of cron patterns ([`cron`]), and the stored scheduler read back
//! ([`JobSchedulerRecord`]).

pub mod cron;
mod every;
mod plan;
mod record;
mod repeat;

/// A zone of the tz database, for [`Repeat::time_zone`].
pub use chrono_tz::Tz;
pub use every::every_next_millis;
pub use plan::{
    has_legacy_repeat_key_shape, iteration_job_id, plan_next_iteration, plan_upsert,
    validate_upsert, NextIterationPlan, SchedulerError, SchedulerFields, SchedulerTemplate,
    UpsertPlan,
};
pub use record::{
    field, parse_score, JobSchedulerRecord, LegacyRepeatableJob, SchedulerDecodeError,
    TemplateRecord,
};
pub use repeat::Repeat;
