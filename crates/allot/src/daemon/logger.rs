//! The daemon's log: the `log` facade, written to stderr one line per record. Under
//! systemd (stderr connected to the journal: `JOURNAL_STREAM` is set) each line starts
//! with its syslog priority (`<3>` error … `<7>` debug), which journald turns into the
//! entry's priority; elsewhere the level is spelled out. `ALLOT_LOG=debug` shows more.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;

struct Stderr {
    journal: bool,
    level: LevelFilter,
}

impl Log for Stderr {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= self.level
    }
    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let line = if self.journal {
            let prio = match r.level() {
                Level::Error => 3,
                Level::Warn => 4,
                Level::Info => 6,
                Level::Debug | Level::Trace => 7,
            };
            format!("<{prio}>{}\n", r.args())
        } else {
            let lvl = match r.level() {
                Level::Error => "error: ",
                Level::Warn => "warning: ",
                Level::Info => "",
                Level::Debug | Level::Trace => "debug: ",
            };
            format!("allot daemon: {lvl}{}\n", r.args())
        };
        // One write per line, so lines from threads never interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    fn flush(&self) {}
}

/// Installs the logger (once; later calls do nothing).
pub fn init() {
    let level = match std::env::var("ALLOT_LOG").as_deref() {
        Ok("debug") | Ok("trace") => LevelFilter::Debug,
        Ok("warn") | Ok("warning") => LevelFilter::Warn,
        Ok("error") => LevelFilter::Error,
        _ => LevelFilter::Info,
    };
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    if log::set_boxed_logger(Box::new(Stderr { journal, level })).is_ok() {
        log::set_max_level(level);
    }
}
