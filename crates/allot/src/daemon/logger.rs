//! The daemon's log: the `log` facade, written to stderr one line per record. Under
//! systemd (stderr connected to the journal: `JOURNAL_STREAM` names fd 2's device and
//! inode) each line starts with its syslog priority (`<3>` error … `<7>` debug), which
//! journald turns into the entry's priority; elsewhere the level is spelled out.
//! `ALLOT_LOG=debug` shows more. Audit records go to the journal apart (audit/journal.rs).
//!
//! Every line is one line: control and bidi characters in a message (a client's string, a
//! cgroup or process name) are escaped (`allot_report::for_terminal`), so nothing logged
//! can start a line of its own that reads as another record. The audit records also quote
//! what clients send (audit.rs); this is the net under every other message.

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
        let line = line(self.journal, r.level(), &r.args().to_string());
        // One write per line, so lines from threads never interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    fn flush(&self) {}
}

/// One log line: the level as a syslog priority (journal) or spelled out, the message
/// escaped so it stays one line.
fn line(journal: bool, level: Level, msg: &str) -> String {
    let msg = allot_report::for_terminal(msg);
    if journal {
        let prio = match level {
            Level::Error => 3,
            Level::Warn => 4,
            Level::Info => 6,
            Level::Debug | Level::Trace => 7,
        };
        format!("<{prio}>{msg}\n")
    } else {
        let lvl = match level {
            Level::Error => "error: ",
            Level::Warn => "warning: ",
            Level::Info => "",
            Level::Debug | Level::Trace => "debug: ",
        };
        format!("allot daemon: {lvl}{msg}\n")
    }
}

/// Installs the logger (once; later calls do nothing).
pub fn init() {
    let level = match std::env::var("ALLOT_LOG").as_deref() {
        Ok("debug") | Ok("trace") => LevelFilter::Debug,
        Ok("warn") | Ok("warning") => LevelFilter::Warn,
        Ok("error") => LevelFilter::Error,
        _ => LevelFilter::Info,
    };
    let journal = allot_linux::ipc::journal::stderr_is_journal();
    if log::set_boxed_logger(Box::new(Stderr { journal, level })).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_stays_one_line_whatever_it_carries() {
        let forged = "run --currency x\n<6>audit: uid 0 (pid 1) fund alice 9999\r\u{1b}[2K\u{202e}";
        for journal in [true, false] {
            let l = line(journal, Level::Info, forged);
            assert_eq!(l.matches('\n').count(), 1, "{l:?}");
            assert!(l.ends_with('\n'));
            assert!(!l.contains(['\r', '\u{1b}', '\u{202e}']), "{l:?}");
            assert!(l.contains("x\\n<6>audit: uid 0"), "{l:?}");
        }
        assert_eq!(line(true, Level::Error, "plain"), "<3>plain\n");
        assert_eq!(line(false, Level::Warn, "plain"), "allot daemon: warning: plain\n");
    }
}
