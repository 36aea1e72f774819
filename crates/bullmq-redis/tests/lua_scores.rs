//! The Lua score helpers (`lua/includes/scores.lua` and `markers.lua`, shared by the producer
//! and worker scripts) compute what `bullmq_protocol::score` computes, over a table of edge
//! cases: priority 0 and the limit, counters that wrap at 2³², corrupted and overflowing
//! counters, timestamps up to the last exact one, negative and sub-millisecond delays, full and
//! neighbouring millisecond buckets.
//!
//! Each case EVALs a tiny script made of the real include text plus one `return` line. Numbers
//! come back as `%.17g` text, which is the exact double Redis would store as a score.

use bullmq_protocol::score::{
    delayed_bucket, next_delayed_score, priority_score, ready_at_from_score, sequence_from_score,
    DELAYED_SEQUENCE_MAX, MAX_PRIORITY, MAX_READY_AT_MS,
};
use bullmq_redis::fred::interfaces::KeysInterface;
use bullmq_redis::fred::prelude::{Client, Value};
use bullmq_redis::{ConnectionConfig, Script};

/// `priorityScore(priority, pc)` after setting `pc` to ARGV[2] (unless empty); returns the
/// score and the counter the helper left in `pc`.
static PRIORITY: Script = Script::new(
    "test_priority_score",
    concat!(
        include_str!("../lua/includes/scores.lua"),
        "\nif ARGV[2] ~= '' then redis.call('SET', KEYS[1], ARGV[2]) end",
        "\nlocal score = priorityScore(tonumber(ARGV[1]), KEYS[1])",
        "\nreturn { string.format('%.17g', score), redis.call('GET', KEYS[1]) }\n",
    ),
);

/// `delayedScore(delayed, readyAtOf(ARGV[1], ARGV[2]))` with the scores ARGV[3..] already in
/// `delayed`; returns the ready time and the score.
static DELAYED: Script = Script::new(
    "test_delayed_score",
    concat!(
        include_str!("../lua/includes/scores.lua"),
        "\nfor i = 3, #ARGV do redis.call('ZADD', KEYS[1], ARGV[i], 'existing' .. i) end",
        "\nlocal readyAt = readyAtOf(tonumber(ARGV[1]), tonumber(ARGV[2]))",
        "\nlocal score = delayedScore(KEYS[1], readyAt)",
        "\nreturn { string.format('%.17g', readyAt), string.format('%.17g', score) }\n",
    ),
);

/// `addDelayMarker(marker, delayed)` with the scores ARGV[1..] in `delayed`; returns the
/// marker's score ("" when none) and nextDelayedAt ("" when nil).
static DELAY_MARKER: Script = Script::new(
    "test_delay_marker",
    concat!(
        include_str!("../lua/includes/scores.lua"),
        include_str!("../lua/includes/markers.lua"),
        "\nfor i = 1, #ARGV do redis.call('ZADD', KEYS[1], ARGV[i], 'job' .. i) end",
        "\naddDelayMarker(KEYS[2], KEYS[1])",
        "\nlocal at = nextDelayedAt(KEYS[1])",
        "\nreturn { redis.call('ZSCORE', KEYS[2], '1') or '',",
        " at and string.format('%.17g', at) or '' }\n",
    ),
);

async fn connect() -> anyhow::Result<Client> {
    Ok(ConnectionConfig::from_env()?.connect(None).await?)
}

/// A key of its own for each case (the tests share one Redis with other suites).
fn key(test: &str, case: usize, role: &str) -> String {
    format!(
        "test:lua-scores:{}:{test}:{case}:{role}",
        std::process::id()
    )
}

async fn run(client: &Client, script: &Script, keys: &[&str], args: &[String]) -> Vec<String> {
    let args = args.iter().map(|a| Value::from(a.as_str())).collect();
    let keys = keys.iter().map(|k| (*k).to_owned()).collect();
    script.run(client, keys, args).await.expect("script runs")
}

fn number(text: &str) -> f64 {
    text.parse()
        .unwrap_or_else(|_| panic!("{text:?} is not a number"))
}

#[tokio::test]
async fn priority_scores_match_the_protocol_crate() -> anyhow::Result<()> {
    let client = connect().await?;
    let priorities = [0, 1, 2, 1000, MAX_PRIORITY, MAX_PRIORITY + 1];
    // The value `pc` holds before the helper's INCR, and the counter the INCR then yields.
    let counters: [(&str, u64); 9] = [
        ("", 1),
        ("0", 1),
        ("41", 42),
        ("4294967294", 4_294_967_295),
        // wraps: 2³² mod 2³² is 0, so this job sorts first within its priority
        ("4294967295", 4_294_967_296),
        ("4294967296", 4_294_967_297),
        ("9007199254740990", 9_007_199_254_740_991),
        // another client wrote text, or the counter cannot grow: it starts again at 1
        ("abc", 1),
        ("9223372036854775807", 1),
    ];
    let mut case = 0;
    for priority in priorities {
        for (stored, counter) in counters {
            case += 1;
            let pc = key("priority", case, "pc");
            let reply = run(
                &client,
                &PRIORITY,
                &[&pc],
                &[priority.to_string(), stored.to_owned()],
            )
            .await;
            let _: i64 = client.del(&pc).await?;
            let expected = priority_score(priority, counter);
            let lua = number(&reply[0]);
            assert_eq!(reply[1], counter.to_string(), "pc after {stored:?}");
            // What Redis stores is the double: the two must round to the same one.
            assert_eq!(
                lua, expected as f64,
                "priority {priority}, counter {counter}"
            );
            if priority <= MAX_PRIORITY {
                // Within Node's PRIORITY_LIMIT every score is exact.
                assert_eq!(
                    lua as u64, expected,
                    "priority {priority}, counter {counter}"
                );
            }
        }
    }
    // Past the limit the counter's low bit no longer fits in a double: why the limit exists.
    let odd = priority_score(MAX_PRIORITY + 1, 1);
    assert_ne!(odd as f64 as u64, odd);
    Ok(())
}

#[tokio::test]
async fn delayed_scores_match_the_protocol_crate() -> anyhow::Result<()> {
    let client = connect().await?;
    let timestamps = [
        0,
        1,
        1_700_000_000_000,
        MAX_READY_AT_MS - 5_000,
        MAX_READY_AT_MS,
    ];
    let delays: [i64; 5] = [0, -5, 1, 1_000, 5_000];
    let mut case = 0;
    for timestamp in timestamps {
        for delay in delays {
            let ready = timestamp + delay.max(0) as u64;
            if ready > MAX_READY_AT_MS {
                continue;
            }
            let (min, max) = delayed_bucket(ready);
            // What the bucket already holds: nothing, its first / some / the last two
            // sequences, or only neighbouring buckets' scores (which must be ignored).
            let mut existing: Vec<Vec<u64>> = vec![
                vec![],
                vec![min],
                vec![min, min + 7],
                vec![max - 1],
                vec![max],
                vec![max + 1],
            ];
            if min > 0 {
                existing.push(vec![min - 1]);
            }
            for scores in existing {
                case += 1;
                let delayed = key("delayed", case, "delayed");
                let mut args = vec![timestamp.to_string(), delay.to_string()];
                args.extend(scores.iter().map(u64::to_string));
                let reply = run(&client, &DELAYED, &[&delayed], &args).await;
                let _: i64 = client.del(&delayed).await?;
                let in_bucket = scores
                    .iter()
                    .copied()
                    .filter(|s| (min..=max).contains(s))
                    .max();
                let expected = next_delayed_score(ready, in_bucket);
                assert_eq!(number(&reply[0]), ready as f64, "ready at, case {case}");
                let lua = number(&reply[1]);
                assert_eq!(
                    lua as u64, expected,
                    "ts {timestamp} delay {delay} {scores:?}"
                );
                assert_eq!(lua, expected as f64);
                assert_eq!(ready_at_from_score(lua), ready);
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn sub_millisecond_delays_keep_their_millisecond() -> anyhow::Result<()> {
    // Node's clients may store fractional delays (the Rust API cannot): the fraction lands in
    // the sequence bits, and the job still becomes due in the millisecond it was asked for.
    let client = connect().await?;
    let timestamp = 1_700_000_000_000u64;
    for (case, (delay, sequence)) in [("0.5", 2048), ("0.25", 1024), ("1.75", 3072)]
        .into_iter()
        .enumerate()
    {
        let delayed = key("sub-ms", case, "delayed");
        let args = [timestamp.to_string(), delay.to_owned()];
        let reply = run(&client, &DELAYED, &[&delayed], &args).await;
        let _: i64 = client.del(&delayed).await?;
        let ready = timestamp as f64 + number(delay);
        assert_eq!(number(&reply[0]), ready);
        let score = number(&reply[1]);
        assert_eq!(
            score,
            ready * 4096.0,
            "an empty bucket starts at the ready time"
        );
        assert_eq!(ready_at_from_score(score), ready.floor() as u64);
        assert_eq!(sequence_from_score(score as u64), sequence);
    }
    Ok(())
}

#[tokio::test]
async fn the_delay_marker_carries_the_earliest_due_time() -> anyhow::Result<()> {
    let client = connect().await?;
    let t = 1_700_000_000_000u64;
    let (min, max) = delayed_bucket(t);
    let cases: [Vec<u64>; 6] = [
        vec![],
        vec![min],
        vec![min + 5, delayed_bucket(t + 10).0],
        vec![max],
        vec![delayed_bucket(MAX_READY_AT_MS).1, delayed_bucket(0).0 + 3],
        vec![delayed_bucket(MAX_READY_AT_MS).0 + DELAYED_SEQUENCE_MAX],
    ];
    for (case, scores) in cases.into_iter().enumerate() {
        let delayed = key("marker", case, "delayed");
        let marker = key("marker", case, "marker");
        let args: Vec<String> = scores.iter().map(u64::to_string).collect();
        let reply = run(&client, &DELAY_MARKER, &[&delayed, &marker], &args).await;
        let _: i64 = client.del(vec![delayed.as_str(), marker.as_str()]).await?;
        let Some(head) = scores.iter().copied().min() else {
            assert_eq!(reply, ["", ""], "no delayed job, no marker");
            continue;
        };
        // Node's marker is the head's score / 0x1000, not rounded; its millisecond is what the
        // protocol crate decodes.
        let at = number(&reply[1]);
        assert_eq!(at, head as f64 / 4096.0, "case {case}");
        assert_eq!(number(&reply[0]), at, "marker score, case {case}");
        assert_eq!(
            at.floor() as u64,
            ready_at_from_score(head as f64),
            "case {case}"
        );
    }
    Ok(())
}
