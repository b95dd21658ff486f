//! `allot top`: a live view of currencies and jobs, in the manner of top and
//! systemd-cgtop: funding, tickets, entitlement against usage, state, run-queue wait,
//! pressure, throttling, processes and command, refreshed every second.
//!
//! On a terminal it takes the screen (raw mode, alternate screen) and reads keys; with
//! stdout not a terminal it prints plain frames (one, or `--iterations N`) without a
//! single escape code. Each refresh asks the daemon for `show` (and `status`) and reads
//! the kernel itself (see `readings`).

pub mod columns;
pub mod screen;
pub mod sort;
pub mod tty;

use crate::client;
use crate::metrics_cmd::status;
use crate::proto::{Request, Response, ShowView, StatusView};
use crate::readings::{Readings, Sampler};
use allot_model::duration::{self, Unit};
use anyhow::bail;
use screen::Frame;
use sort::SortKey;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use tty::{Key, Wake};

/// Live view of currencies and jobs (keys: u e t p w j sort, / user, q quit).
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Refresh every this long, 100ms..1h: 1s, 500ms (a bare number is seconds).
    #[arg(short = 'd', long, default_value = "1s")]
    interval: String,
    /// Stop after this many frames (default: run until q; one frame when stdout is not a
    /// terminal).
    #[arg(short = 'n', long)]
    iterations: Option<String>,
    /// Only this user's jobs (a name or uid; `/` changes it while running).
    #[arg(long)]
    user: Option<String>,
    /// Sort by usage, entitled, tickets, pids, wait or job (keys u, e, t, p, w, j).
    #[arg(long, default_value = "usage")]
    sort: String,
}

/// The viewer's choices, changed by keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Ui {
    /// Sort key.
    pub sort: SortKey,
    /// Smallest first.
    pub ascending: bool,
    /// Only this user's jobs.
    pub filter: Option<String>,
    /// The filter being typed.
    pub prompt: Option<String>,
    /// Job rows scrolled past.
    pub scroll: usize,
}

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing visible changed.
    None,
    /// Draw again with the data at hand.
    Redraw,
    /// Ask the daemon again (the user filter changed).
    Refetch,
    /// Leave.
    Quit,
}

/// How long an error stays on screen.
const MESSAGE_FOR: Duration = Duration::from_secs(5);

/// Longest filter a viewer may type.
const MAX_FILTER: usize = 64;

impl Ui {
    /// Applies one key; `page` is the number of job rows on screen.
    pub fn key(&mut self, k: Key, page: usize) -> Action {
        if let Some(p) = &mut self.prompt {
            return match k {
                Key::Enter => {
                    let typed = p.trim().to_string();
                    self.prompt = None;
                    self.filter = if typed.is_empty() { None } else { Some(typed) };
                    self.scroll = 0;
                    Action::Refetch
                }
                Key::Esc | Key::Interrupt => {
                    self.prompt = None;
                    Action::Redraw
                }
                Key::Backspace => {
                    p.pop();
                    Action::Redraw
                }
                Key::Char(c) if !c.is_control() && p.chars().count() < MAX_FILTER => {
                    p.push(c);
                    Action::Redraw
                }
                _ => Action::None,
            };
        }
        match k {
            Key::Char('q') | Key::Char('Q') | Key::Interrupt => Action::Quit,
            Key::Char('/') => {
                self.prompt = Some(String::new());
                Action::Redraw
            }
            Key::Char(c) => match SortKey::ALL.into_iter().find(|s| s.key() == c) {
                Some(s) if s == self.sort => {
                    self.ascending = !self.ascending;
                    Action::Redraw
                }
                Some(s) => {
                    self.sort = s;
                    self.ascending = s.ascending_first();
                    Action::Redraw
                }
                None => Action::None,
            },
            Key::Up => self.scroll_to(self.scroll.saturating_sub(1)),
            Key::Down => self.scroll_to(self.scroll + 1),
            Key::PageUp => self.scroll_to(self.scroll.saturating_sub(page.max(1))),
            Key::PageDown => self.scroll_to(self.scroll + page.max(1)),
            Key::Home => self.scroll_to(0),
            Key::End => self.scroll_to(usize::MAX / 2),
            Key::Redraw => Action::Redraw,
            Key::Enter | Key::Esc | Key::Backspace => Action::None,
        }
    }

    fn scroll_to(&mut self, s: usize) -> Action {
        self.scroll = s;
        Action::Redraw
    }
}

/// What the last refresh brought.
struct Data {
    status: StatusView,
    show: ShowView,
    readings: Readings,
}

fn fetch_show(socket: &Path, user: Option<&str>) -> anyhow::Result<ShowView> {
    match client::call(socket, &Request::Show { user: user.map(String::from) })? {
        Response::Show(s) => Ok(s),
        other => bail!("the allot daemon answered show with {other:?}"),
    }
}

/// Local wall-clock time as HH:MM:SS.
fn clock() -> String {
    // SAFETY: time and localtime_r write only into the values given.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return String::new();
        }
        format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
    }
}

fn frame<'a>(d: &'a Data, ui: &'a Ui, message: Option<&'a str>, clock: &'a str) -> Frame<'a> {
    Frame {
        status: &d.status,
        show: &d.show,
        kernel: &d.readings,
        sort: ui.sort,
        ascending: ui.ascending,
        filter: ui.filter.as_deref(),
        prompt: ui.prompt.as_deref(),
        message,
        scroll: ui.scroll,
        clock,
    }
}

/// `allot top`; with `json`, one JSON object per frame (a line each).
pub fn run(a: TopArgs, socket: &Path, json: bool) -> anyhow::Result<i32> {
    let interval = duration::parse("--interval", &a.interval, Some(Unit::S))?;
    if interval < Duration::from_millis(100) || interval > Duration::from_secs(3600) {
        bail!("--interval must be 100ms..1h, got {:?}", a.interval);
    }
    let iterations = match &a.iterations {
        None => None,
        Some(s) => match s.trim().parse::<u64>() {
            Ok(n) if n >= 1 => Some(n),
            _ => bail!("--iterations must be a whole number 1 or more, got {s:?}"),
        },
    };
    let sort = SortKey::parse(&a.sort)?;
    let mut ui = Ui { sort, ascending: sort.ascending_first(), filter: a.user.clone(), prompt: None, scroll: 0 };

    // The first frame needs two kernel samples for the wait: a baseline, then a short
    // settle (a quarter of the interval, at most 250 ms).
    let status = status(socket)?;
    let mut sampler = Sampler::new(&status);
    let show = fetch_show(socket, ui.filter.as_deref())?;
    sampler.sample(&show);
    std::thread::sleep((interval / 4).min(Duration::from_millis(250)));
    let show = fetch_show(socket, ui.filter.as_deref())?;
    let readings = sampler.sample(&show);
    let mut data = Data { status, show, readings };

    if json || !tty::stdout_is_terminal() {
        return plain(socket, &mut data, &mut sampler, &ui, interval, iterations.unwrap_or(1), json);
    }
    let mut term = tty::Terminal::enter()?;
    // An error stays on screen for a few seconds, even when the next refresh works.
    let mut message: Option<(String, Instant)> = None;
    let mut frames = 0u64;
    let mut next = Instant::now() + interval;
    let mut page = 1;
    loop {
        let now = clock();
        let (cols, rows) = term.size();
        if message.as_ref().is_some_and(|(_, at)| at.elapsed() > MESSAGE_FOR) {
            message = None;
        }
        let msg = message.as_ref().map(|(m, _)| m.as_str());
        let (lines, max_scroll) = screen::render(&frame(&data, &ui, msg, &now), Some((cols, rows)));
        ui.scroll = ui.scroll.min(max_scroll);
        page = page.max(rows.saturating_sub(10));
        if term.draw(&lines, cols).is_err() {
            return Ok(0); // the terminal is gone
        }
        frames += 1;
        if iterations.is_some_and(|n| frames >= n) {
            return Ok(0);
        }
        // Wait for the next refresh, handling keys as they come.
        let refetch = loop {
            match term.wait(next) {
                Wake::Quit => return Ok(0),
                Wake::Resized => break false,
                Wake::Tick => break true,
                Wake::Keys(keys) => {
                    let mut act = Action::None;
                    for k in keys {
                        match ui.key(k, page) {
                            Action::Quit => return Ok(0),
                            Action::Refetch => act = Action::Refetch,
                            Action::Redraw if act == Action::None => act = Action::Redraw,
                            _ => {}
                        }
                    }
                    match act {
                        Action::Refetch => break true,
                        Action::Redraw => break false,
                        _ => {}
                    }
                }
            }
        };
        if refetch {
            next = Instant::now() + interval;
            if let Err(e) = refresh(socket, &mut data, &mut sampler, ui.filter.as_deref()) {
                message = Some((format!("{e:#}"), Instant::now()));
                // A refusal with a filter in force (an unknown user): drop the filter, so
                // the next refresh shows everyone rather than stale rows.
                if e.downcast_ref::<allot::proto::Refusal>().is_some_and(|r| r.kind == allot::proto::ErrorKind::NotFound) && ui.filter.is_some() {
                    ui.filter = None;
                }
            }
        }
    }
}

/// Asks the daemon again and reads the kernel.
fn refresh(socket: &Path, data: &mut Data, sampler: &mut Sampler, user: Option<&str>) -> anyhow::Result<()> {
    let show = fetch_show(socket, user)?;
    if let Ok(s) = status(socket) {
        if s.cgroup_root != data.status.cgroup_root || s.pid != data.status.pid {
            // Another daemon (restarted, or moved): find its tree again.
            *sampler = Sampler::new(&s);
        }
        data.status = s;
    }
    data.readings = sampler.sample(&show);
    data.show = show;
    Ok(())
}

/// Plain frames on a pipe or file: no escape codes, all rows and columns, a blank line
/// between frames. With `json`, a JSON object a line instead (see [`frame_json`]).
fn plain(socket: &Path, data: &mut Data, sampler: &mut Sampler, ui: &Ui, interval: Duration, n: u64, json: bool) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    for i in 0..n {
        if i > 0 {
            std::thread::sleep(interval);
            refresh(socket, data, sampler, ui.filter.as_deref())?;
            if !json {
                writeln!(out)?;
            }
        }
        if json {
            writeln!(out, "{}", frame_json(data))?;
            out.flush()?;
            continue;
        }
        let now = clock();
        let (lines, _) = screen::render(&frame(data, ui, None, &now), None);
        for l in lines {
            writeln!(out, "{}", l.text)?;
        }
        out.flush()?;
    }
    Ok(0)
}

/// A frame for scripts: the daemon's `status` and `show` replies as `--json` prints them,
/// and what top read from the kernel per job id (`null` where it could not).
fn frame_json(d: &Data) -> serde_json::Value {
    let kernel: serde_json::Map<String, serde_json::Value> = d
        .readings
        .jobs
        .iter()
        .map(|(id, k)| {
            let v = serde_json::json!({
                "periods": k.throttling.map(|t| t.periods),
                "throttled_periods": k.throttling.map(|t| t.throttled_periods),
                "throttled_s": k.throttling.map(|t| t.throttled_ns as f64 / 1e9),
                "pressure_some_avg10": k.pressure.map(|p| p.some_avg10),
                "pressure_some_s": k.pressure.map(|p| p.some_s),
                "pressure_full_s": k.pressure.and_then(|p| p.full_s),
                "wait_ratio": k.wait.map(|w| w.ratio),
                "waiting_threads": k.wait.map(|w| w.threads),
            });
            (id.clone(), v)
        })
        .collect();
    serde_json::json!({
        "status": d.status,
        "show": d.show,
        "kernel": kernel,
        "window_s": d.readings.window_s,
        "notes": d.readings.notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ui() -> Ui {
        Ui { sort: SortKey::Usage, ascending: false, filter: None, prompt: None, scroll: 0 }
    }

    #[test]
    fn sort_keys_select_and_the_same_key_reverses() {
        let mut u = ui();
        assert_eq!(u.key(Key::Char('t'), 10), Action::Redraw);
        assert_eq!((u.sort, u.ascending), (SortKey::Tickets, false));
        u.key(Key::Char('t'), 10);
        assert_eq!((u.sort, u.ascending), (SortKey::Tickets, true));
        u.key(Key::Char('j'), 10);
        assert_eq!((u.sort, u.ascending), (SortKey::Job, true), "job ids read smallest first");
        assert_eq!(u.key(Key::Char('x'), 10), Action::None);
        assert_eq!(u.key(Key::Char('q'), 10), Action::Quit);
        assert_eq!(u.key(Key::Interrupt, 10), Action::Quit);
    }

    #[test]
    fn the_user_prompt_types_applies_and_cancels() {
        let mut u = ui();
        u.key(Key::Char('/'), 10);
        for c in "al!x".chars() {
            u.key(Key::Char(c), 10);
        }
        u.key(Key::Backspace, 10);
        assert_eq!(u.key(Key::Char('q'), 10), Action::Redraw, "q is typed, not quit, while the prompt is open");
        assert_eq!(u.prompt.as_deref(), Some("al!q"));
        assert_eq!(u.key(Key::Enter, 10), Action::Refetch);
        assert_eq!((u.filter.as_deref(), u.prompt.as_deref()), (Some("al!q"), None));
        u.key(Key::Char('/'), 10);
        u.key(Key::Char('z'), 10);
        assert_eq!(u.key(Key::Esc, 10), Action::Redraw);
        assert_eq!(u.filter.as_deref(), Some("al!q"), "Esc keeps the filter in force");
        u.key(Key::Char('/'), 10);
        assert_eq!(u.key(Key::Enter, 10), Action::Refetch);
        assert_eq!(u.filter, None, "an empty filter shows everyone");
        u.key(Key::Char('/'), 10);
        for _ in 0..100 {
            u.key(Key::Char('a'), 10);
        }
        assert_eq!(u.prompt.as_ref().unwrap().len(), MAX_FILTER);
    }

    #[test]
    fn scrolling_pages() {
        let mut u = ui();
        u.key(Key::PageDown, 5);
        u.key(Key::Down, 5);
        assert_eq!(u.scroll, 6);
        u.key(Key::PageUp, 5);
        u.key(Key::Up, 5);
        u.key(Key::Up, 5);
        assert_eq!(u.scroll, 0);
        u.key(Key::End, 5);
        assert!(u.scroll > 1000, "End scrolls to the last page (the frame clamps it)");
        u.key(Key::Home, 5);
        assert_eq!(u.scroll, 0);
    }
}
