//! `bullmq top`: every queue under the prefix, live. On a terminal a full-screen view (keys
//! select a queue, pause / resume it, retry its failed jobs); anywhere else (a pipe, a file,
//! `--json`, `--plain`) one table or JSON line per refresh.

mod model;
mod plain;
mod render;
mod sample;

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;

use self::model::Model;
use self::sample::Sampler;
use super::Context;
use crate::output::Paint;
use crate::time_text::{now_ms, parse_duration_ms};

/// Arguments of `bullmq top`.
#[derive(Debug, Clone, Args)]
pub(crate) struct TopArgs {
    /// Time between refreshes (`500ms`, `2s`, `1m`).
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    interval: Duration,
    /// Stop after this many refreshes (default: until `q`, Ctrl-C or the end of the pipe).
    #[arg(long)]
    iterations: Option<u64>,
    /// Print one table per refresh even on a terminal (what a pipe or `--json` gets).
    #[arg(long)]
    plain: bool,
    /// Print one snapshot (a table, or a JSON document with `--json`) and exit.
    #[arg(long, conflicts_with = "iterations")]
    once: bool,
}

/// Reads `--interval`: a duration of at least 100ms (faster only loads Redis).
fn parse_interval(text: &str) -> Result<Duration, String> {
    let ms = parse_duration_ms(text)?;
    if ms < 100 {
        return Err(format!("--interval must be at least 100ms, got {text:?}"));
    }
    Ok(Duration::from_millis(ms))
}

/// Runs `bullmq top`.
pub(crate) async fn run(ctx: &Context, mut args: TopArgs) -> Result<()> {
    if args.once {
        args.plain = true;
        args.iterations = Some(1);
    }
    if args.iterations == Some(0) {
        return Ok(());
    }
    // Listening before anything is drawn, so a signal never finds the default handler (which
    // would end the process with the terminal still raw).
    let mut stop = StopSignals::listen()?;
    let mut sampler = Sampler::connect(ctx).await?;
    let model = Model::new(ctx.prefix.clone(), args.interval);
    let outcome = if args.plain || ctx.json || !std::io::stdout().is_terminal() {
        run_plain(&mut sampler, model, &args, ctx.json, &mut stop).await
    } else {
        run_interactive(&mut sampler, model, &args, &mut stop).await
    };
    sampler.close().await;
    outcome
}

/// SIGINT, SIGTERM and SIGHUP: each ends `top` the way `q` does (the terminal restored), so
/// `kill`, closing the terminal window or a lost SSH session never leave it raw.
struct StopSignals {
    #[cfg(unix)]
    signals: [tokio::signal::unix::Signal; 3],
}

impl StopSignals {
    /// Starts listening.
    fn listen() -> Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let listen = |kind: SignalKind| signal(kind).context("listening for signals");
            Ok(Self {
                signals: [
                    listen(SignalKind::interrupt())?,
                    listen(SignalKind::terminate())?,
                    listen(SignalKind::hangup())?,
                ],
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves when one of the signals arrives.
    async fn recv(&mut self) {
        #[cfg(unix)]
        {
            let [int, term, hup] = &mut self.signals;
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Takes one sample into `model`; `last` is when the previous one was taken.
async fn refresh(sampler: &mut Sampler, model: &mut Model, last: &mut Option<Instant>) {
    match sampler.sample().await {
        Ok(samples) => {
            let now = Instant::now();
            let elapsed = last.map_or(Duration::ZERO, |at| now - at);
            *last = Some(now);
            model.apply(samples, elapsed, now_ms());
            model.server = sampler.server().await;
            refresh_failures(sampler, model).await;
        }
        Err(error) => model.error = Some(crate::output::error_chain(&error)),
    }
}

/// Reads the latest failures of the selected queue.
async fn refresh_failures(sampler: &Sampler, model: &mut Model) {
    let Some(name) = model.selected_name().map(str::to_owned) else {
        model.failures.clear();
        return;
    };
    match sampler.failures(&name).await {
        Ok(failures) => model.failures = failures,
        Err(error) => model.error = Some(crate::output::error_chain(&error)),
    }
}

/// The plain loop: a table (or a JSON line) per refresh on stdout.
async fn run_plain(
    sampler: &mut Sampler,
    mut model: Model,
    args: &TopArgs,
    json: bool,
    stop: &mut StopSignals,
) -> Result<()> {
    let paint = Paint::stdout();
    let mut last = None;
    let mut ticks = tokio::time::interval(args.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut done = 0;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = stop.recv() => return Ok(()),
        }
        // A script reading the output wants to know Redis broke, not a table of stale counts.
        let samples = sampler.sample().await?;
        let now = Instant::now();
        let elapsed = last.map_or(Duration::ZERO, |at| now - at);
        last = Some(now);
        model.apply(samples, elapsed, now_ms());
        model.server = sampler.server().await;
        let text = if json {
            format!("{}\n", plain::as_json(&model))
        } else {
            // A blank line between refreshes keeps the tables apart in a log.
            let separator = if done == 0 { "" } else { "\n" };
            format!("{separator}{}", plain::as_text(&model, paint))
        };
        if !write_stdout(&text)? {
            // The reader went away (`bullmq top | head`): that is the end, not an error.
            return Ok(());
        }
        done += 1;
        if args.iterations.is_some_and(|n| done >= n) {
            return Ok(());
        }
    }
}

/// Writes `text` to stdout and flushes it; `false` when the reader closed the pipe.
fn write_stdout(text: &str) -> Result<bool> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(error) => Err(error).context("writing to stdout"),
    }
}

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Quit,
    Up,
    Down,
    TogglePause,
    RetryFailed,
    /// The terminal changed size: draw again now rather than at the next refresh.
    Redraw,
}

/// The action of `key`, if it has one.
fn action_of(key: KeyEvent) -> Option<Action> {
    if key.kind != KeyEventKind::Press {
        return None;
    }
    // Raw mode turns Ctrl-C into a key instead of a signal, and the end of the input (the
    // terminal's EOF character, what a closed pseudo-terminal sends) into Ctrl-D.
    if key.modifiers.contains(KeyModifiers::CONTROL) {
        return matches!(key.code, KeyCode::Char('c' | 'd')).then_some(Action::Quit);
    }
    match key.code {
        KeyCode::Char('q') | KeyCode::Esc => Some(Action::Quit),
        KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
        KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
        KeyCode::Char('p') => Some(Action::TogglePause),
        KeyCode::Char('r') => Some(Action::RetryFailed),
        _ => None,
    }
}

/// Puts the terminal back (raw mode off, main screen) when dropped, so every way out of the
/// view restores it: `q`, an error returned with `?`, or a panic unwinding (ratatui's panic
/// hook restores it too, before the message is printed).
struct RestoreTerminal;

impl Drop for RestoreTerminal {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// How often the key reader looks whether the view has ended.
const KEY_POLL: Duration = Duration::from_millis(100);

/// Reads keys on a thread of its own (crossterm's reads block) and sends the ones with an
/// action; ends when the view has gone (the channel closed) or the input closed (a read
/// that fails because the terminal went away: that ends the view like `q`).
fn read_keys(actions: mpsc::UnboundedSender<Action>, failed: std_mpsc::Sender<String>) {
    while !actions.is_closed() {
        let ready = match event::poll(KEY_POLL) {
            Ok(ready) => ready,
            Err(error) if input_closed(&error) => {
                let _ = actions.send(Action::Quit);
                return;
            }
            Err(error) => {
                let _ = failed.send(format!("reading the keyboard: {error}"));
                return;
            }
        };
        if !ready {
            continue;
        }
        match event::read() {
            Ok(event) => {
                let action = match event {
                    Event::Key(key) => action_of(key),
                    Event::Resize(..) => Some(Action::Redraw),
                    _ => None,
                };
                if let Some(action) = action {
                    if actions.send(action).is_err() {
                        return;
                    }
                }
            }
            Err(error) if input_closed(&error) => {
                let _ = actions.send(Action::Quit);
                return;
            }
            Err(error) => {
                let _ = failed.send(format!("reading the keyboard: {error}"));
                return;
            }
        }
    }
}

/// Whether a failed terminal read means the input is gone: end of file, or `EIO` (what a
/// read from a terminal whose other end closed returns).
fn input_closed(error: &std::io::Error) -> bool {
    const EIO: i32 = 5;
    error.kind() == std::io::ErrorKind::UnexpectedEof || error.raw_os_error() == Some(EIO)
}

/// The full-screen loop.
async fn run_interactive(
    sampler: &mut Sampler,
    mut model: Model,
    args: &TopArgs,
    stop: &mut StopSignals,
) -> Result<()> {
    // Declared before the terminal so it drops after it (the terminal shows the cursor again
    // when dropped, then this leaves raw mode and the alternate screen), and set up first so
    // a half-done setup is undone too.
    let _restore = RestoreTerminal;
    let mut terminal = ratatui::try_init().context("cannot set up the terminal")?;
    let (actions_tx, mut actions) = mpsc::unbounded_channel();
    let (failed_tx, failed) = std_mpsc::channel();
    std::thread::Builder::new()
        .name("bullmq-top-keys".into())
        .spawn(move || read_keys(actions_tx, failed_tx))
        .context("starting the key reader")?;
    let mut ticks = tokio::time::interval(args.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = None;
    let mut done = 0;
    // Keys pressed while Redis was being read, carried out next.
    let mut pending = VecDeque::new();
    loop {
        let step = match pending.pop_front() {
            Some(action) => Step::Act(action),
            None => tokio::select! {
                _ = ticks.tick() => Step::Refresh,
                action = actions.recv() => match action {
                    Some(Action::Quit) => return Ok(()),
                    Some(action) => Step::Act(action),
                    // The reader ended: say why rather than leave a view that takes no keys.
                    None => anyhow::bail!(failed
                        .try_recv()
                        .unwrap_or_else(|_| "the key reader stopped".into())),
                },
                () = stop.recv() => return Ok(()),
            },
        };
        let work = async {
            match step {
                Step::Refresh => {
                    refresh(sampler, &mut model, &mut last).await;
                    true
                }
                Step::Act(action) => {
                    act(sampler, &mut model, action).await;
                    false
                }
            }
        };
        // A slow or unreachable Redis must not make `q` wait for it.
        let refreshed = match unless_quit(work, &mut actions, &mut pending, stop).await {
            Ok(Some(refreshed)) => refreshed,
            Ok(None) => return Ok(()),
            Err(ReaderGone) => anyhow::bail!(failed
                .try_recv()
                .unwrap_or_else(|_| "the key reader stopped".into())),
        };
        if refreshed {
            done += 1;
        }
        terminal
            .draw(|frame| render::draw(frame, &model))
            .context("drawing the screen")?;
        if args.iterations.is_some_and(|n| done >= n) {
            return Ok(());
        }
    }
}

/// One turn of the full-screen loop.
enum Step {
    Refresh,
    Act(Action),
}

/// The key reader stopped while work was running.
struct ReaderGone;

/// Runs `work` unless quitting is asked for first (a quit key or a [`StopSignals`]:
/// `Ok(None)`) or the
/// key reader stops; other keys pressed meanwhile are queued in `pending`.
async fn unless_quit<T>(
    work: impl std::future::Future<Output = T>,
    actions: &mut mpsc::UnboundedReceiver<Action>,
    pending: &mut VecDeque<Action>,
    stop: &mut StopSignals,
) -> Result<Option<T>, ReaderGone> {
    let quit = async {
        loop {
            match actions.recv().await {
                Some(Action::Quit) => return Ok(None),
                Some(action) => pending.push_back(action),
                None => return Err(ReaderGone),
            }
        }
    };
    tokio::select! {
        output = work => Ok(Some(output)),
        outcome = quit => outcome,
        () = stop.recv() => Ok(None),
    }
}

/// Carries out a key's action and says how it went in the status line.
async fn act(sampler: &mut Sampler, model: &mut Model, action: Action) {
    match action {
        Action::Up => {
            model.select_previous();
            refresh_failures(sampler, model).await;
        }
        Action::Down => {
            model.select_next();
            refresh_failures(sampler, model).await;
        }
        Action::TogglePause => {
            let Some(name) = model.selected_name().map(str::to_owned) else {
                return;
            };
            match sampler.toggle_pause(&name).await {
                Ok(paused) => {
                    // Shown at once rather than at the next refresh.
                    if let Some(view) = model.queues.get_mut(model.selected) {
                        view.sample.paused = paused;
                    }
                    let done = if paused { "paused" } else { "resumed" };
                    model.status = Some(format!("{done} {name}"));
                }
                Err(error) => {
                    model.status = Some(format!(
                        "could not pause/resume {name}: {}",
                        crate::output::error_chain(&error)
                    ));
                }
            }
        }
        Action::RetryFailed => {
            let Some(name) = model.selected_name().map(str::to_owned) else {
                return;
            };
            model.status = Some(match sampler.retry_failed(&name).await {
                Ok(0) => format!("no failed jobs to retry in {name}"),
                Ok(1) => format!("retried 1 failed job of {name}"),
                Ok(n) => format!("retried {n} failed jobs of {name}"),
                Err(error) => format!(
                    "retrying the failed jobs of {name} stopped: {}",
                    crate::output::error_chain(&error)
                ),
            });
            refresh_failures(sampler, model).await;
        }
        Action::Quit | Action::Redraw => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode, modifiers: KeyModifiers) -> Option<Action> {
        action_of(KeyEvent::new(code, modifiers))
    }

    #[test]
    fn keys_map_to_actions() {
        let none = KeyModifiers::NONE;
        assert_eq!(press(KeyCode::Char('q'), none), Some(Action::Quit));
        assert_eq!(press(KeyCode::Esc, none), Some(Action::Quit));
        assert_eq!(
            press(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Action::Quit)
        );
        assert_eq!(
            press(KeyCode::Char('d'), KeyModifiers::CONTROL),
            Some(Action::Quit)
        );
        assert_eq!(press(KeyCode::Char('j'), none), Some(Action::Down));
        assert_eq!(press(KeyCode::Up, none), Some(Action::Up));
        assert_eq!(press(KeyCode::Char('p'), none), Some(Action::TogglePause));
        assert_eq!(press(KeyCode::Char('r'), none), Some(Action::RetryFailed));
        assert_eq!(press(KeyCode::Char('x'), none), None);
        assert_eq!(press(KeyCode::Char('p'), KeyModifiers::CONTROL), None);
    }

    #[test]
    fn the_interval_has_a_floor() {
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_interval("10ms")
            .unwrap_err()
            .contains("at least 100ms"));
        assert!(parse_interval("soon").is_err());
    }
}
