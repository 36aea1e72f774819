use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::options::KeepJobs;

const NOW: u64 = 1_796_139_681_903;

fn every(ms: u64) -> Repeat {
    Repeat::every(Duration::from_millis(ms))
}

#[test]
fn node_refusals_come_before_anything_is_planned() {
    let t = SchedulerTemplate::default();
    let mut both = every(1000);
    both.pattern = Some("* * * * *".into());
    assert_eq!(
        plan_upsert("s", &both, &t, NOW),
        Err(SchedulerError::PatternAndEvery)
    );
    assert_eq!(
        plan_upsert("s", &Repeat::default(), &t, NOW),
        Err(SchedulerError::NoPatternOrEvery)
    );
    assert_eq!(
        plan_upsert("s", &every(0), &t, NOW),
        Err(SchedulerError::NoPatternOrEvery)
    );
    let mut past = every(1000);
    past.end_date = Some(NOW - 1);
    assert_eq!(
        plan_upsert("s", &past, &t, NOW).unwrap_err().to_string(),
        "End date must be greater than current timestamp"
    );
    let mut immediately = every(1000).immediately();
    immediately.start_date = Some(NOW + 10);
    assert_eq!(
        plan_upsert("s", &immediately, &t, NOW),
        Err(SchedulerError::ImmediatelyAndStartDate)
    );
    let mut debounce = SchedulerTemplate::default();
    debounce
        .opts
        .extra
        .insert("debounce".into(), json!({"id": "x"}));
    assert_eq!(
        plan_upsert("s", &every(1000), &debounce, NOW),
        Err(SchedulerError::Debounce)
    );
    let with_id = SchedulerTemplate::default().opts(JobOptions::new().job_id("fixed"));
    assert_eq!(
        plan_upsert("s", &every(1000), &with_id, NOW),
        Err(SchedulerError::TemplateOption("jobId"))
    );
    assert_eq!(
        plan_upsert("", &every(1000), &t, NOW),
        Err(SchedulerError::EmptyId)
    );
}

#[test]
fn an_every_upsert_plans_what_node_stores() {
    // Node: upsertJobScheduler('ev', {every: 1000}, {name: 'tick', data: {a: 1},
    // opts: {attempts: 3, removeOnComplete: 5}}) stored these iteration options (jobId and
    // delay are the script's).
    let template = SchedulerTemplate::new("tick").data(json!({"a": 1})).opts(
        JobOptions::new()
            .attempts(3)
            .remove_on_complete(KeepJobs::Count(5)),
    );
    let plan = plan_upsert("ev", &every(1000), &template, NOW)
        .unwrap()
        .unwrap();
    assert_eq!(plan.next_millis, None);
    assert_eq!(plan.fields.name, "tick");
    assert_eq!(plan.fields.every, Some(1000));
    assert_eq!(plan.fields.offset, None);
    assert_eq!(plan.template_data, r#"{"a":1}"#);
    assert_eq!(
        serde_json::from_str::<Value>(&plan.template_opts).unwrap(),
        json!({"removeOnComplete":5,"attempts":3})
    );
    assert_eq!(
        Value::Object(plan.iteration_opts),
        json!({"removeOnComplete":5,"timestamp":NOW,"repeatJobKey":"ev",
            "repeat":{"every":1000,"count":1},"attempts":3})
    );
}

#[test]
fn the_user_offset_travels_with_every_iterations_only() {
    let plan = plan_upsert(
        "off",
        &every(60_000).offset(Duration::from_millis(1500)),
        &SchedulerTemplate::default(),
        NOW,
    )
    .unwrap()
    .unwrap();
    assert_eq!(plan.fields.name, "off");
    assert_eq!(plan.fields.offset, Some(1500));
    assert_eq!(plan.template_data, "{}");
    assert_eq!(
        plan.iteration_opts["repeat"],
        json!({"every":60000,"offset":1500,"count":1})
    );
}

#[test]
fn a_reached_limit_creates_nothing() {
    let repeat = every(1000).limit(3).count(3);
    assert_eq!(
        plan_upsert("s", &repeat, &SchedulerTemplate::default(), NOW),
        Ok(None)
    );
}

#[test]
fn a_started_iteration_plans_the_next_from_its_own_options() {
    let opts = JobOptions::from_json(
        r#"{"removeOnComplete":5,"timestamp":1796139681903,"repeatJobKey":"ev",
            "jobId":"repeat:ev:1796139681904","repeat":{"every":1000,"count":1},"delay":0,
            "attempts":3}"#,
    )
    .unwrap();
    let plan = plan_next_iteration("repeat:ev:1796139681904", "ev", &opts, NOW + 50)
        .unwrap()
        .unwrap();
    assert_eq!(plan.producer_id, "repeat:ev:1796139681904");
    assert_eq!(plan.next_millis, None);
    assert!(!plan.legacy_key_shape);
    // As Node's Worker stored the next one: count 2, its own timestamp, no jobId/delay yet.
    assert_eq!(
        Value::Object(plan.iteration_opts),
        json!({"removeOnComplete":5,"timestamp":NOW + 50,"repeatJobKey":"ev",
            "repeat":{"every":1000,"count":2},"attempts":3})
    );
}

#[test]
fn limit_and_end_date_stop_the_series_at_the_worker() {
    let at_limit =
        JobOptions::from_json(r#"{"repeat":{"every":1000,"count":3,"limit":3}}"#).unwrap();
    assert_eq!(plan_next_iteration("j", "s", &at_limit, NOW), Ok(None));
    let ended = JobOptions::from_json(&format!(
        r#"{{"repeat":{{"every":1000,"count":1,"endDate":{}}}}}"#,
        NOW - 1
    ))
    .unwrap();
    assert_eq!(plan_next_iteration("j", "s", &ended, NOW), Ok(None));
    let no_repeat = JobOptions::new();
    assert!(matches!(
        plan_next_iteration("j", "s", &no_repeat, NOW),
        Err(SchedulerError::JobRepeat { .. })
    ));
}

#[test]
fn legacy_repeat_keys_are_recognised_by_shape() {
    assert!(has_legacy_repeat_key_shape("name:id::UTC:*/5 * * * *"));
    assert!(has_legacy_repeat_key_shape("name:id:1700000000000::1000"));
    assert!(!has_legacy_repeat_key_shape("my-scheduler"));
    assert!(!has_legacy_repeat_key_shape("a:b:c:d"));
    assert!(!has_legacy_repeat_key_shape("a:b:not-a-date:d:1000"));
    assert!(!has_legacy_repeat_key_shape("a:b::d:hourly"));
    assert_eq!(iteration_job_id("ev", 1000), "repeat:ev:1000");
}

#[test]
fn a_cron_upsert_plans_what_node_stores() {
    // Node: upsertJobScheduler('cr', {pattern: '*/5 * * * * *', tz: 'Europe/Berlin',
    // limit: 10}, {name: 'cron', data: {b: 2}}) at 1796139681940 stored this iteration.
    let now = 1_796_139_681_940;
    let repeat = Repeat::cron("*/5 * * * * *").tz("Europe/Berlin").limit(10);
    let plan = plan_upsert(
        "cr",
        &repeat,
        &SchedulerTemplate::new("cron").data(json!({"b": 2})),
        now,
    )
    .unwrap()
    .unwrap();
    assert_eq!(plan.next_millis, Some(1_796_139_685_000));
    assert_eq!(plan.fields.offset, None);
    assert_eq!(
        Value::Object(plan.iteration_opts),
        json!({"prevMillis":1_796_139_685_000_u64,"repeatJobKey":"cr","timestamp":now,
            "repeat":{"tz":"Europe/Berlin","pattern":"*/5 * * * * *","count":1,"limit":10}})
    );
}

#[test]
fn cron_start_date_end_date_and_bad_patterns() {
    let t = SchedulerTemplate::default();
    // The first run is after the start date, not after now.
    let mut later = Repeat::cron("0 * * * *");
    later.start_date = Some(NOW + 3 * 3_600_000);
    let plan = plan_upsert("s", &later, &t, NOW).unwrap().unwrap();
    assert!(plan.next_millis.unwrap() > NOW + 3 * 3_600_000);
    // No run left before the end date: nothing is created (Node returns undefined).
    let mut ended = Repeat::cron("0 0 1 1 *");
    ended.end_date = Some(NOW + 1000);
    assert_eq!(plan_upsert("s", &ended, &t, NOW), Ok(None));
    assert!(matches!(
        plan_upsert("s", &Repeat::cron("61 * * * *"), &t, NOW),
        Err(SchedulerError::Cron(_))
    ));
    assert!(matches!(
        plan_upsert("s", &Repeat::cron("* * * * *").tz("Mars/Olympus"), &t, NOW),
        Err(SchedulerError::Cron(_))
    ));
    // Immediately: now.
    let plan = plan_upsert("s", &Repeat::cron("0 0 1 1 *").immediately(), &t, NOW)
        .unwrap()
        .unwrap();
    assert_eq!(plan.next_millis, Some(NOW));
}

#[test]
fn a_started_cron_iteration_plans_the_following_run() {
    let opts = JobOptions::from_json(
        r#"{"prevMillis":1796139685000,"repeatJobKey":"cr","jobId":"repeat:cr:1796139685000",
            "timestamp":1796139681940,"delay":3060,
            "repeat":{"tz":"Europe/Berlin","pattern":"*/5 * * * * *","count":1,"limit":10}}"#,
    )
    .unwrap();
    // Started a little early (clock skew): the next run still follows prevMillis.
    let plan = plan_next_iteration("repeat:cr:1796139685000", "cr", &opts, 1_796_139_684_990)
        .unwrap()
        .unwrap();
    assert_eq!(plan.next_millis, Some(1_796_139_690_000));
    assert_eq!(
        plan.iteration_opts["prevMillis"],
        json!(1_796_139_690_000_u64)
    );
    assert_eq!(plan.iteration_opts["repeat"]["count"], json!(2));
}
