//! `bullmq limits <queue>`: show, set or remove the queue's global concurrency and global rate
//! limit (kept in the queue's `meta`, honoured by every worker, Node's or ours).

use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Args;
use ractor_bullmq::{GlobalRateLimit, RateLimitTtl};
use serde_json::{json, Value};

use super::Context;
use crate::output::{print_json, two_columns};
use crate::time_text::{format_duration_ms, parse_duration_ms};

/// Arguments of `bullmq limits`; without a change flag it only shows the limits.
#[derive(Debug, Clone, Args)]
pub(crate) struct LimitsArgs {
    /// Queue name.
    queue: String,
    /// Set the global concurrency: at most N jobs of the queue active at once across every
    /// worker (0 stops every worker from taking jobs).
    #[arg(long, value_name = "N", conflicts_with = "remove_concurrency")]
    concurrency: Option<u64>,
    /// Remove the global concurrency.
    #[arg(long)]
    remove_concurrency: bool,
    /// Set the global rate limit: at most MAX jobs start per DURATION across every worker
    /// (`100/1m`, `5/500ms`, `10/1000` = per 1000 ms).
    #[arg(
        long,
        value_name = "MAX/DURATION",
        value_parser = parse_rate_limit,
        conflicts_with = "remove_rate_limit"
    )]
    rate_limit: Option<GlobalRateLimit>,
    /// Remove the global rate limit.
    #[arg(long)]
    remove_rate_limit: bool,
    /// Make the queue when it does not exist yet (otherwise a missing queue is an error,
    /// exit 3, so a typo never creates one).
    #[arg(long)]
    create: bool,
}

impl LimitsArgs {
    fn changes_anything(&self) -> bool {
        self.concurrency.is_some()
            || self.remove_concurrency
            || self.rate_limit.is_some()
            || self.remove_rate_limit
    }
}

/// Parses `MAX/DURATION`: a positive job count and a duration of at least 1 ms.
fn parse_rate_limit(text: &str) -> Result<GlobalRateLimit, String> {
    let (max, duration) = text
        .split_once('/')
        .ok_or_else(|| format!("expected MAX/DURATION such as 100/1m, got {text:?}"))?;
    let max: u64 = max
        .trim()
        .parse()
        .map_err(|_| format!("expected a whole number of jobs before '/', got {max:?}"))?;
    if max == 0 {
        return Err(
            "the rate limit's MAX must be at least 1 (use --remove-rate-limit to lift it)".into(),
        );
    }
    let ms = parse_duration_ms(duration)?;
    if ms == 0 {
        return Err("the rate limit's DURATION must be at least 1ms".into());
    }
    Ok(GlobalRateLimit::new(max, Duration::from_millis(ms)))
}

/// The limits as read back after any change.
#[derive(Debug, Clone)]
struct Limits {
    concurrency: Option<u64>,
    rate_limit: Option<GlobalRateLimit>,
    limited: RateLimitTtl,
}

/// Runs `bullmq limits`.
pub(crate) async fn run(ctx: &Context, args: LimitsArgs) -> Result<()> {
    // Showing must not create anything; a change opens the queue as Node's Queue does.
    let access = match (args.create, args.changes_anything()) {
        (true, _) => super::Access::Create,
        (false, true) => super::Access::ExistingWritingMeta,
        (false, false) => super::Access::Existing,
    };
    let queue = super::open_queue(ctx, &args.queue, access).await?;
    if let Some(n) = args.concurrency {
        queue
            .set_global_concurrency(n)
            .await
            .context("setting the global concurrency")?;
    }
    if args.remove_concurrency {
        queue
            .remove_global_concurrency()
            .await
            .context("removing the global concurrency")?;
    }
    if let Some(limit) = args.rate_limit {
        queue
            .set_global_rate_limit(limit.max, limit.duration)
            .await
            .context("setting the global rate limit")?;
    }
    if args.remove_rate_limit {
        queue
            .remove_global_rate_limit()
            .await
            .context("removing the global rate limit")?;
    }
    let limits = Limits {
        concurrency: queue
            .get_global_concurrency()
            .await
            .context("reading the global concurrency")?,
        rate_limit: queue
            .get_global_rate_limit()
            .await
            .context("reading the global rate limit")?,
        limited: queue
            .get_rate_limit_ttl(None)
            .await
            .context("reading the rate limiter")?,
    };
    let qualified = queue.keys().qualified_name().to_owned();
    queue.close().await?;
    if ctx.json {
        print_json(&as_json(&args.queue, &limits));
    } else {
        print!("{}", as_text(&qualified, &limits));
    }
    Ok(())
}

fn as_json(queue: &str, limits: &Limits) -> Value {
    json!({
        "queue": queue,
        "concurrency": limits.concurrency,
        "rateLimit": limits.rate_limit.map(|l| json!({"max": l.max, "duration": l.duration_ms()})),
        "rateLimitTtl": limits.limited.as_millis(),
    })
}

fn as_text(qualified: &str, limits: &Limits) -> String {
    let rows = vec![
        ("queue".to_owned(), qualified.to_owned()),
        (
            "global concurrency".to_owned(),
            limits
                .concurrency
                .map_or_else(|| "none".to_owned(), |n| n.to_string()),
        ),
        (
            "global rate limit".to_owned(),
            limits.rate_limit.map_or_else(
                || "none".to_owned(),
                |l| format!("{} jobs per {}", l.max, format_duration_ms(l.duration_ms())),
            ),
        ),
        (
            "rate limited now".to_owned(),
            match limits.limited {
                RateLimitTtl::Limited(left) => format!(
                    "yes, for {} more",
                    format_duration_ms(u64::try_from(left.as_millis()).unwrap_or(u64::MAX))
                ),
                RateLimitTtl::NoExpiry => "the limiter key has no expiry".to_owned(),
                _ => "no".to_owned(),
            },
        ),
    ];
    two_columns(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_parse_as_max_per_duration() {
        let limit = parse_rate_limit("100/1m").unwrap();
        assert_eq!((limit.max, limit.duration_ms()), (100, 60_000));
        let limit = parse_rate_limit("10/1000").unwrap();
        assert_eq!((limit.max, limit.duration_ms()), (10, 1_000));
        assert!(parse_rate_limit("100")
            .unwrap_err()
            .contains("MAX/DURATION"));
        assert!(parse_rate_limit("0/1s").unwrap_err().contains("at least 1"));
        assert!(parse_rate_limit("5/0s")
            .unwrap_err()
            .contains("at least 1ms"));
        assert!(parse_rate_limit("x/1s")
            .unwrap_err()
            .contains("whole number"));
        assert!(parse_rate_limit("5/soon").unwrap_err().contains("500ms"));
    }

    #[test]
    fn text_and_json_show_both_limits() {
        let limits = Limits {
            concurrency: Some(4),
            rate_limit: Some(GlobalRateLimit::new(100, Duration::from_secs(60))),
            limited: RateLimitTtl::Limited(Duration::from_millis(1_500)),
        };
        assert_eq!(
            as_text("bull:q", &limits),
            "queue               bull:q\n\
             global concurrency  4\n\
             global rate limit   100 jobs per 1m\n\
             rate limited now    yes, for 1s500ms more\n"
        );
        let value = as_json("q", &limits);
        assert_eq!(value["concurrency"], 4);
        assert_eq!(value["rateLimit"], json!({"max": 100, "duration": 60_000}));
        assert_eq!(value["rateLimitTtl"], 1_500);
        let none = Limits {
            concurrency: None,
            rate_limit: None,
            limited: RateLimitTtl::NoKey,
        };
        assert!(as_text("bull:q", &none).contains("global concurrency  none\n"));
        assert_eq!(as_json("q", &none)["rateLimit"], Value::Null);
    }
}
