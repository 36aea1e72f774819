//! The `bullmq` command: operate BullMQ queues from the shell.
//!
//! Works on any queue in the BullMQ 6.7.0 layout, whoever wrote it (Node, Python, Elixir or this
//! project's Rust runtime), in Redis or in a PostgreSQL schema Node's migrator made (`--url`,
//! see [`target`]). Run `bullmq --help` for the commands.

mod commands;
mod exit;
mod local_redis;
mod output;
mod sparkline;
mod target;
mod time_text;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// Operate BullMQ queues in Redis or PostgreSQL: find, inspect, retry, promote, clean, pause,
/// watch live.
#[derive(Debug, Parser)]
#[command(name = "bullmq", version, about, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// The `--help` heading of the options every command takes, listed apart from its own.
const GLOBAL: &str = "Global options";

/// Options every command takes.
#[derive(Debug, Clone, Args)]
struct GlobalArgs {
    /// Where the queues live, a Redis or PostgreSQL URL (default redis://127.0.0.1:6379;
    /// `bullmq help connection`: cluster, Sentinel, TLS, postgres://).
    // The variables' values are not shown: they may hold a password.
    #[arg(
        long,
        env = "BULLMQ_URL",
        hide_env_values = true,
        global = true,
        value_name = "URL",
        help_heading = GLOBAL
    )]
    url: Option<String>,
    /// The older name of --url, taking the same URLs (a typed flag beats a variable; else
    /// --url / BULLMQ_URL wins).
    #[arg(
        long,
        env = "REDIS_URL",
        hide_env_values = true,
        global = true,
        value_name = "URL",
        help_heading = GLOBAL
    )]
    redis_url: Option<String>,
    /// Key prefix of the queues (Node's `prefix`).
    #[arg(long, default_value = "bull", global = true, help_heading = GLOBAL)]
    prefix: String,
    /// Print JSON instead of text (errors too: one `{"error", "kind", "exit"}` object).
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,
}

/// The subcommands; each lives in its own file under `commands/`.
#[derive(Debug, Subcommand)]
// Parsed once per run: the size of the largest arguments (`add`) does not matter.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Job counts per state, the paused flag and the connected workers of a queue.
    Stats(commands::stats::StatsArgs),
    /// Add one job to a queue.
    Add(Box<commands::add::AddArgs>),
    /// A queue's events, one line per event: follow them live (`--from 0` replays the stream
    /// first), or `--no-follow` to replay the stream and exit.
    Events(commands::events::EventsArgs),
    /// The job schedulers of a queue, soonest next run first.
    Schedulers(commands::schedulers::SchedulersArgs),
    /// Create, replace (`scheduler upsert`) or remove (`scheduler remove`) one job scheduler.
    Scheduler(commands::scheduler::SchedulerArgs),
    /// Every queue under `--prefix`: job counts per state, paused flag and worker count.
    Queues(commands::queues::QueuesArgs),
    /// The jobs of a queue in one state, a page at a time (id, name, attempts, age, and the
    /// failure reason of failed jobs).
    Jobs(commands::jobs::JobsArgs),
    /// Everything about one job: data, options, result or failure with its stack trace,
    /// progress, logs, parent and children (exit 3 when there is no such job).
    Job(commands::job::JobArgs),
    /// The flow tree under a job, to any depth: each child's name, queue, state and outcome
    /// (exit 3 when there is no such job).
    Flow(commands::flow::FlowArgs),
    /// The workers connected to a queue.
    Workers(commands::workers::WorkersArgs),
    /// Jobs completed and failed per minute, with a chart (recorded by workers started with
    /// the metrics option).
    Metrics(commands::metrics::MetricsArgs),
    /// Show the global concurrency and rate limit of a queue, or set / remove them.
    Limits(commands::limits::LimitsArgs),
    /// Move failed (or `--state completed`) jobs back to be processed: by id, or `--all`.
    Retry(commands::retry::RetryArgs),
    /// Make delayed jobs due now: by id, or `--all`.
    Promote(commands::promote::PromoteArgs),
    /// Delete jobs with their flow children: by id, or `--all --state S`.
    Remove(commands::remove::RemoveArgs),
    /// Remove the children of a flow parent not processed yet, with their own (Node
    /// `job.removeUnprocessedChildren()`; children a worker holds or that failed stay).
    RemoveUnprocessedChildren(commands::remove_unprocessed_children::RemoveUnprocessedChildrenArgs),
    /// Replace a job's data with a JSON document (Node `job.updateData`).
    UpdateData(commands::update_data::UpdateDataArgs),
    /// Set jobs' priority (`--all`: the prioritized and waiting jobs).
    ChangePriority(commands::change_priority::ChangePriorityArgs),
    /// Make delayed jobs due `--delay` from now: by id, or `--all`.
    ChangeDelay(commands::change_delay::ChangeDelayArgs),
    /// Remove the jobs of a state older than `--grace`, at most `--limit`.
    Clean(commands::clean::CleanArgs),
    /// Remove the waiting and prioritized jobs (and delayed ones with `--delayed`).
    Drain(commands::drain::DrainArgs),
    /// Pause a queue: workers stop taking jobs, adding still works.
    Pause(commands::pause::PauseArgs),
    /// Resume a paused queue.
    Resume(commands::resume::ResumeArgs),
    /// Delete a queue and all its jobs (asks for the queue's name unless `--yes`).
    Obliterate(commands::obliterate::ObliterateArgs),
    /// Every queue under the prefix, live: counts, paused flag, workers, throughput and
    /// failures; keys pause / resume a queue and retry its failed jobs (a plain table per
    /// refresh when stdout is no terminal).
    Top(commands::top::TopArgs),
    /// How to write `--url`: Redis (one server, a cluster, Sentinel, TLS) or PostgreSQL, and
    /// which of `--url`, `BULLMQ_URL`, `--redis-url`, `REDIS_URL` wins.
    #[command(long_about = CONNECTION_HELP)]
    Connection,
    /// Run a self-contained demo: jobs with mixed outcomes processed by supervised workers,
    /// live progress and a summary (on Redis starts a local redis-server when none answers;
    /// on PostgreSQL needs a schema Node's migrator made).
    Demo(commands::demo::DemoArgs),
}

/// The `bullmq help connection` page: every form `--url` (or `BULLMQ_URL`, `--redis-url`,
/// `REDIS_URL`) takes, and which one wins.
const CONNECTION_HELP: &str = "\
How to write --url (or the BULLMQ_URL variable); the default is redis://127.0.0.1:6379.

Which URL is used: a flag typed on the command line beats any variable; otherwise --url /
BULLMQ_URL beats --redis-url / REDIS_URL (the older names, which take every form below too).
Typing both --url and --redis-url is a usage error (exit 2).

Redis, one server:
  redis://[user:pass@]host[:port][/db]

A Redis cluster, from seed nodes:
  redis-cluster://[user:pass@]host:port?node=host2:port2&node=...

A Redis primary behind Sentinel (host and nodes are Sentinels, default port 26379):
  redis-sentinel://[user:pass@]host[:port][/db]?sentinelServiceName=NAME&node=host2:port2
  sentinelUsername=U&sentinelPassword=P   the Sentinels' own credentials
  replica_reads=true                      read from a healthy replica

Redis TLS: rediss://, rediss-cluster://, rediss-sentinel://, with the query parameters
  tls_ca=CA.pem                           trust this CA instead of the system's
  tls_cert=CERT.pem&tls_key=KEY.pem       a client certificate
  tls_server_name=NAME                    check the certificate against NAME
  tls_danger_accept_invalid_certs=true    INSECURE: accept any certificate

valkey may replace redis in every Redis scheme.

PostgreSQL (Node BullMQ's PostgreSQL backend; the schema must have been made by Node's
migrator, e.g. new Queue(name, { connection: { connectionString, schema, migrate: true } },
createPostgresBackend); otherwise the command fails with exit 6 saying so):
  postgres://[user[:pass]@]host[:port]/database[?schema=NAME]   (postgresql:// too)
  schema=NAME                             the BullMQ schema (default bullmq); it is the
                                          namespace, so --prefix stays at bull
  sslmode=disable|prefer|require|verify-ca|verify-full, sslrootcert=CA.pem
  connect_timeout=SECS                    default 5 here; pool_size=N; other libpq settings

What PostgreSQL does not have is refused in one sentence with exit 5: job schedulers
(schedulers, scheduler upsert|remove), and the Redis server facts (INFO, cluster nodes).

A malformed URL is a usage error (exit 2).";

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // fred's own warnings (e.g. while giving up on a refused connection) repeat
                // what the error already says; the `bullmq` catalogue's per-job warnings (the
                // demo's failures are by design) would drown the progress bar and the summary.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,fred=error,bullmq=error")
                }),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: never escape codes in a pipe or a log file
        // (and never when NO_COLOR is set, https://no-color.org).
        .with_ansi(colour_on_stderr())
        .init();
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return usage_error(&error),
    };
    let given = |value: Option<String>, id: &str| {
        value.map(|value| target::Given {
            value,
            on_command_line: matches.value_source(id) == Some(ValueSource::CommandLine),
        })
    };
    let chosen = target::choose(
        given(cli.global.url, "url"),
        given(cli.global.redis_url, "redis_url"),
    );
    let (url, url_source) = match chosen {
        Ok(chosen) => chosen,
        Err(error) => return report(&error, cli.global.json),
    };
    let ctx = commands::Context::new(url, url_source, cli.global.prefix, cli.global.json);
    let outcome = match cli.command {
        Command::Stats(args) => commands::stats::run(&ctx, args).await,
        Command::Add(args) => commands::add::run(&ctx, *args).await,
        Command::Events(args) => commands::events::run(&ctx, args).await,
        Command::Schedulers(args) => commands::schedulers::run(&ctx, args).await,
        Command::Scheduler(args) => commands::scheduler::run(&ctx, args).await,
        Command::Queues(args) => commands::queues::run(&ctx, args).await,
        Command::Jobs(args) => commands::jobs::run(&ctx, args).await,
        Command::Job(args) => commands::job::run(&ctx, args).await,
        Command::Flow(args) => commands::flow::run(&ctx, args).await,
        Command::Workers(args) => commands::workers::run(&ctx, args).await,
        Command::Metrics(args) => commands::metrics::run(&ctx, args).await,
        Command::Limits(args) => commands::limits::run(&ctx, args).await,
        Command::Retry(args) => commands::retry::run(&ctx, args).await,
        Command::Promote(args) => commands::promote::run(&ctx, args).await,
        Command::Remove(args) => commands::remove::run(&ctx, args).await,
        Command::RemoveUnprocessedChildren(args) => {
            commands::remove_unprocessed_children::run(&ctx, args).await
        }
        Command::UpdateData(args) => commands::update_data::run(&ctx, args).await,
        Command::ChangePriority(args) => commands::change_priority::run(&ctx, args).await,
        Command::ChangeDelay(args) => commands::change_delay::run(&ctx, args).await,
        Command::Clean(args) => commands::clean::run(&ctx, args).await,
        Command::Drain(args) => commands::drain::run(&ctx, args).await,
        Command::Pause(args) => commands::pause::run(&ctx, args).await,
        Command::Resume(args) => commands::resume::run(&ctx, args).await,
        Command::Obliterate(args) => commands::obliterate::run(&ctx, args).await,
        Command::Top(args) => commands::top::run(&ctx, args).await,
        Command::Demo(args) => commands::demo::run(&ctx, args).await,
        Command::Connection => {
            println!("{CONNECTION_HELP}");
            Ok(())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => report(&error, ctx.json),
    }
}

/// Prints `error` (one line on stderr, or with `--json` one object on stdout) and returns
/// its exit status.
fn report(error: &anyhow::Error, json: bool) -> ExitCode {
    let message = output::error_chain(error);
    if json {
        output::print_json_error(
            &message,
            exit::kind_of(error),
            exit::number_of(error),
            exit::report_of(error),
        );
    } else {
        eprintln!("error: {message}");
    }
    exit::code_of(error)
}

/// What a command line clap refused ends with: clap's own message and code, or with `--json`
/// one JSON error object (kind `usage`, exit 2). Help and version are printed as asked.
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let shows_text = matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    let json = std::env::args_os().any(|arg| arg == "--json");
    if shows_text || !json {
        let _ = error.print();
        return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(exit::USAGE));
    }
    // clap's message without its usage and tip lines, on one line.
    let rendered = error.render().to_string();
    let head = rendered.split("\n\n").next().unwrap_or_default();
    let head = head.strip_prefix("error: ").unwrap_or(head);
    let message: Vec<&str> = head.lines().map(str::trim).collect();
    output::print_json_error(&message.join(" "), exit::USAGE_KIND, exit::USAGE, None);
    ExitCode::from(exit::USAGE)
}

/// Whether stderr may carry ANSI colours: a terminal, and `NO_COLOR` unset or empty.
fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && output::colour_allowed()
}
