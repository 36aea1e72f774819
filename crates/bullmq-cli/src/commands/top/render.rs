//! Drawing a [`Model`] with ratatui: a title line, the queues table (the selected one
//! highlighted), throughput and failure sparklines and the latest failures of the selected
//! queue, then a status line and the keys. Pure: it draws into whatever frame it is given, so
//! tests draw into a `TestBackend`. Laid out to fit 80x24.

use chrono::TimeZone as _;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Sparkline, Table, TableState};
use ratatui::Frame;

use super::model::{Model, QueueView};
use super::plain::rate_text;

/// Rows the screen keeps for everything but the queues table: title, server facts,
/// sparklines (4), the failures box at its smallest (3), status and keys.
const OTHER_ROWS: u16 = 2 + 4 + 3 + 2;

/// The smallest terminal the view is drawn in; a smaller one gets a message saying so.
pub(crate) const MIN_WIDTH: u16 = 60;
/// See [`MIN_WIDTH`].
pub(crate) const MIN_HEIGHT: u16 = 14;

/// The keys, on the last line.
const KEYS: &str = "↑/↓ j/k select  p pause/resume  r retry failed  q quit";

/// Draws `model` over the whole frame.
pub(crate) fn draw(frame: &mut Frame<'_>, model: &Model) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        frame.render_widget(
            Paragraph::new(too_small(area.width, area.height))
                .wrap(ratatui::widgets::Wrap { trim: true }),
            area,
        );
        return;
    }
    // Border, header, one line per queue (at least one, for "no queues"), border; what does
    // not fit scrolls, following the selection.
    let wanted = model.queues.len().max(1) as u16 + 3;
    let queues_height = wanted.min(area.height.saturating_sub(OTHER_ROWS).max(4));
    let [title, server, queues, sparks, failures, status, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(queues_height),
        Constraint::Length(4),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(title_line(model)), title);
    let facts = model
        .server
        .as_ref()
        .map_or_else(|| "Redis: no INFO yet".to_owned(), |s| s.summary());
    frame.render_widget(
        Paragraph::new(Line::from(facts).style(Style::new().add_modifier(Modifier::DIM))),
        server,
    );
    draw_queues(frame, queues, model);
    draw_sparklines(frame, sparks, model);
    draw_failures(frame, failures, model);
    frame.render_widget(Paragraph::new(status_line(model)), status);
    frame.render_widget(
        Paragraph::new(Line::from(KEYS).style(Style::new().add_modifier(Modifier::DIM))),
        keys,
    );
}

/// Why nothing else is drawn: the size, what is needed and what works instead.
pub(crate) fn too_small(width: u16, height: u16) -> String {
    format!(
        "terminal too small ({width}x{height}): bullmq top needs at least \
         {MIN_WIDTH}x{MIN_HEIGHT}; enlarge it, or run `bullmq top --once` for one table. \
         q quits."
    )
}

fn title_line(model: &Model) -> Line<'static> {
    let count = model.queues.len();
    // No time before the first refresh.
    let at = i64::try_from(model.refreshed_at_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .and_then(|ms| chrono::Local.timestamp_millis_opt(ms).single())
        .map_or_else(|| "-".into(), |t| t.format("%H:%M:%S").to_string());
    Line::from(vec![
        Span::styled("bullmq top", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!(
            "  prefix {}  {count} queue{}  every {}  at {at}",
            model.prefix,
            if count == 1 { "" } else { "s" },
            crate::time_text::format_duration_ms(model.interval.as_millis() as u64),
        )),
    ])
}

fn draw_queues(frame: &mut Frame<'_>, area: Rect, model: &Model) {
    let mut header = vec![Cell::from("QUEUE")];
    header.extend(
        ["WAIT", "ACTIVE", "DELAY", "PRIO", "DONE", "FAILED", "WRK"]
            .map(|title| Cell::from(Text::from(title).right_aligned())),
    );
    header.push(Cell::from(" STATE"));
    let header = Row::new(header).style(Style::new().add_modifier(Modifier::BOLD));
    let block = Block::bordered().title(" queues ");
    if model.queues.is_empty() {
        let text = format!("no queues under prefix {:?}", model.prefix);
        frame.render_widget(Paragraph::new(text).block(block), area);
        return;
    }
    let rows: Vec<Row<'_>> = model.queues.iter().map(queue_row).collect();
    let widths = [
        Constraint::Min(10),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(7),
        Constraint::Length(4),
        Constraint::Length(8),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(block)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut state = TableState::default().with_selected(Some(model.selected));
    frame.render_stateful_widget(table, area, &mut state);
}

fn queue_row(view: &QueueView) -> Row<'_> {
    let counts = &view.sample.counts;
    let failed_style = if counts.failed > 0 {
        Style::new().fg(Color::Red)
    } else {
        Style::new()
    };
    let state = if view.sample.paused {
        Cell::from(" paused").style(Style::new().fg(Color::Yellow))
    } else {
        Cell::from(" running").style(Style::new().fg(Color::Green))
    };
    // Numbers right-aligned, so their digits line up as they grow.
    let number = |n: u64| Cell::from(Text::from(n.to_string()).right_aligned());
    Row::new([
        Cell::from(view.sample.name.as_str()),
        number(counts.waiting),
        number(counts.active),
        number(counts.delayed),
        number(counts.prioritized),
        number(counts.completed),
        number(counts.failed).style(failed_style),
        number(view.sample.workers as u64),
        state,
    ])
}

fn draw_sparklines(frame: &mut Frame<'_>, area: Rect, model: &Model) {
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
    let Some(view) = model.selected_queue() else {
        frame.render_widget(Block::bordered().title(" completed/s "), left);
        frame.render_widget(Block::bordered().title(" failed/s "), right);
        return;
    };
    let completed_title = format!(" completed {}/s ", rate_text(view.completed_rate));
    let failed_title = match view.failure_percent() {
        Some(percent) => format!(" failed {}/s ({percent:.0}%) ", rate_text(view.failed_rate)),
        None => format!(" failed {}/s ", rate_text(view.failed_rate)),
    };
    let sparkline =
        |title: String, history: &std::collections::VecDeque<u64>, colour, area: Rect| {
            // The newest points that fit inside the borders, so the line ends at "now".
            let fits = usize::from(area.width.saturating_sub(2));
            let skip = history.len().saturating_sub(fits);
            let data: Vec<u64> = history.iter().skip(skip).copied().collect();
            Sparkline::default()
                .block(Block::bordered().title(title))
                .data(&data)
                .style(Style::new().fg(colour))
        };
    frame.render_widget(
        sparkline(completed_title, &view.completed_history, Color::Green, left),
        left,
    );
    frame.render_widget(
        sparkline(failed_title, &view.failed_history, Color::Red, right),
        right,
    );
}

fn draw_failures(frame: &mut Frame<'_>, area: Rect, model: &Model) {
    let title = match model.selected_name() {
        Some(name) => format!(" latest failures of {name} "),
        None => " latest failures ".into(),
    };
    let block = Block::bordered().title(title);
    if model.failures.is_empty() {
        frame.render_widget(
            Paragraph::new("no failed jobs")
                .style(Style::new().add_modifier(Modifier::DIM))
                .block(block),
            area,
        );
        return;
    }
    let width_of = |longest: usize, min: u16, max: u16| (longest as u16).clamp(min, max);
    let id_width = width_of(
        model
            .failures
            .iter()
            .map(|f| f.id.chars().count())
            .max()
            .unwrap_or(0),
        2,
        12,
    );
    let name_width = width_of(
        model
            .failures
            .iter()
            .map(|f| f.name.chars().count())
            .max()
            .unwrap_or(0),
        4,
        16,
    );
    let rows = model.failures.iter().map(|failure| {
        Row::new([
            Cell::from(failure.id.as_str()),
            Cell::from(failure.name.as_str()),
            // Stack-less first line only: the whole reason may span many lines.
            Cell::from(failure.reason.lines().next().unwrap_or_default())
                .style(Style::new().fg(Color::Red)),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(id_width),
            Constraint::Length(name_width),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(["ID", "NAME", "REASON"]).style(Style::new().add_modifier(Modifier::BOLD)))
    .block(block);
    frame.render_widget(table, area);
}

fn status_line(model: &Model) -> Line<'static> {
    if let Some(error) = &model.error {
        Line::from(Span::styled(
            format!("refresh failed: {error}"),
            Style::new().fg(Color::Red),
        ))
    } else if let Some(status) = &model.status {
        Line::from(Span::styled(status.clone(), Style::new().fg(Color::Cyan)))
    } else {
        Line::from("")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::*;
    use crate::commands::top::model::tests::sample;
    use crate::commands::top::model::Failure;

    /// The screen's text, one string per row.
    fn screen(model: &Model, width: u16, height: u16) -> Vec<String> {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|frame| draw(frame, model)).unwrap();
        let buffer = terminal.backend().buffer();
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buffer[(x, y)].symbol().to_owned())
                    .collect::<String>()
            })
            .collect()
    }

    fn two_queues() -> Model {
        let mut model = Model::new("bull", Duration::from_secs(1));
        let mut emails = sample("emails", 12, 3);
        emails.paused = true;
        emails.counts.waiting = 41;
        emails.workers = 2;
        let mut resize = sample("resize-images", 7, 0);
        resize.counts.delayed = 5;
        model.apply(vec![emails.clone(), resize.clone()], Duration::ZERO, 0);
        emails.counts.completed = 20;
        emails.completed = crate::commands::top::model::Total::pick(0, 20);
        model.apply(vec![emails, resize], Duration::from_secs(1), 1000);
        model.failures = vec![Failure {
            id: "17".into(),
            name: "welcome".into(),
            reason: "smtp refused the connection\n    at send (mail.js:3)".into(),
        }];
        model.status = Some("retried 3 failed jobs of emails".into());
        model
    }

    #[test]
    fn two_queues_fit_80_by_24() {
        let rows = screen(&two_queues(), 80, 24);
        let text = rows.join("\n");
        let emails = rows.iter().find(|r| r.contains("emails")).expect(&text);
        let cells: Vec<&str> = emails.split_whitespace().collect();
        // Border, highlight marker, name, wait, active, delayed, prio, done, failed, workers, state.
        assert_eq!(
            cells,
            ["│>", "emails", "41", "0", "0", "0", "20", "3", "2", "paused", "│"],
            "{text}"
        );
        let resize = rows
            .iter()
            .find(|r| r.contains("resize-images"))
            .expect(&text);
        assert!(resize.contains(" 5 "), "{text}");
        assert!(resize.contains("running"), "{text}");
        assert!(text.contains("2 queues"), "{text}");
        assert!(text.contains("completed 8.0/s"), "{text}");
        assert!(text.contains("latest failures of emails"), "{text}");
        let failure = rows.iter().find(|r| r.contains("welcome")).expect(&text);
        assert!(failure.contains("17"), "{text}");
        assert!(failure.contains("smtp refused the connection"), "{text}");
        assert!(
            !text.contains("mail.js"),
            "only the reason's first line: {text}"
        );
        assert!(text.contains("retried 3 failed jobs of emails"), "{text}");
        assert!(rows[23].contains("q quit"), "{text}");
    }

    #[test]
    fn many_queues_scroll_to_the_selection_and_keep_the_rest_visible() {
        let mut model = Model::new("bull", Duration::from_secs(1));
        let samples = (0..30).map(|i| sample(&format!("q{i:02}"), 0, 0)).collect();
        model.apply(samples, Duration::ZERO, 0);
        for _ in 0..29 {
            model.select_next();
        }
        let text = screen(&model, 80, 24).join("\n");
        assert!(text.contains("q29"), "{text}");
        assert!(text.contains("latest failures of q29"), "{text}");
        assert!(text.contains("no failed jobs"), "{text}");
        assert!(text.contains("q quit"), "{text}");
    }

    #[test]
    fn a_tiny_terminal_says_why_it_cannot_draw() {
        for (width, height) in [(40, 10), (1, 1), (80, 3), (59, 24), (80, 13)] {
            let rows = screen(&two_queues(), width, height);
            assert_eq!(rows.len(), usize::from(height));
            let text = rows.concat();
            assert!(!text.contains("emails"), "{width}x{height}: {text}");
        }
        let text = screen(&two_queues(), 40, 10).join(" ");
        let words: Vec<&str> = text.split_whitespace().collect();
        assert!(
            words
                .join(" ")
                .starts_with("terminal too small (40x10): bullmq top needs at least 60x14"),
            "{text}"
        );
        // The smallest size it draws at shows the queues.
        let text = screen(&two_queues(), MIN_WIDTH, MIN_HEIGHT).join("\n");
        assert!(text.contains("emails"), "{text}");
    }

    #[test]
    fn the_server_facts_line_follows_the_title() {
        let mut model = two_queues();
        let rows = screen(&model, 80, 24);
        assert!(
            rows[1].starts_with("Redis: no INFO yet"),
            "{}",
            rows.join("\n")
        );
        model.server = Some(crate::commands::server_facts::parse(
            "redis_version:7.2.4\r\nused_memory_human:1.21M\r\nconnected_clients:5\r\n\
             instantaneous_ops_per_sec:12\r\n",
        ));
        let rows = screen(&model, 80, 24);
        assert!(
            rows[1].starts_with("Redis 7.2.4, memory 1.21M, 5 clients, 12 ops/s"),
            "{}",
            rows.join("\n")
        );
    }

    #[test]
    fn no_queues_is_said() {
        let model = Model::new("nothing-here", Duration::from_secs(1));
        let text = screen(&model, 80, 24).join("\n");
        assert!(
            text.contains("no queues under prefix \"nothing-here\""),
            "{text}"
        );
        assert!(text.contains("at -"), "no refresh yet: {text}");
    }
}
