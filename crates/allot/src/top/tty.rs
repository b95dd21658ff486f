//! The terminal for `allot top`, with libc alone: raw mode on stdin (termios), the
//! alternate screen, the size (TIOCGWINSZ), keys (poll + read, a few escape sequences
//! decoded), and signals (SIGWINCH redraws; SIGTERM, SIGHUP, SIGINT and SIGQUIT end the
//! loop). Only sequences every VT100-descended terminal knows are written: the alternate
//! screen (`?1049`), cursor visibility (`?25`), cursor home, erase to end of line and of
//! screen, bold and reverse video.
//!
//! The terminal is restored on every way out: on drop (normal exit and unwinding), from
//! the panic hook (so a panic message lands on the normal screen), and after a signal
//! (the loop sees the flag and returns, then drop restores).

use super::screen::{Line, Style};
use allot_report::width;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

static QUIT: AtomicBool = AtomicBool::new(false);
static RESIZED: AtomicBool = AtomicBool::new(false);
/// The terminal's settings before raw mode, for the panic hook.
static SAVED: Mutex<Option<libc::termios>> = Mutex::new(None);

const ENTER: &str = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
const LEAVE: &str = "\x1b[0m\x1b[?25h\x1b[?1049l";

extern "C" fn on_quit(_: libc::c_int) {
    QUIT.store(true, Ordering::SeqCst);
}

extern "C" fn on_winch(_: libc::c_int) {
    RESIZED.store(true, Ordering::SeqCst);
}

/// A key the viewer pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    /// Enter.
    Enter,
    /// Escape alone.
    Esc,
    /// Backspace or DEL.
    Backspace,
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Home.
    Home,
    /// End.
    End,
    /// Ctrl-C (ISIG is off in raw mode, so it arrives as a byte).
    Interrupt,
    /// Ctrl-L: redraw.
    Redraw,
}

/// Decodes the bytes of one read: printable UTF-8, control keys, and the CSI/SS3
/// sequences of arrows, Home/End and Page Up/Down. Other sequences are skipped whole.
pub fn decode(b: &[u8]) -> Vec<Key> {
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        i += 1;
        match c {
            0x1b if i < b.len() && (b[i] == b'[' || b[i] == b'O') => {
                // CSI or SS3: parameters, then a final byte 0x40..=0x7e.
                let start = i + 1;
                let mut j = start;
                while j < b.len() && !(0x40..=0x7e).contains(&b[j]) {
                    j += 1;
                }
                if j >= b.len() {
                    break;
                }
                let params = &b[start..j];
                let key = match (b[j], params) {
                    (b'A', _) => Some(Key::Up),
                    (b'B', _) => Some(Key::Down),
                    (b'H', _) => Some(Key::Home),
                    (b'F', _) => Some(Key::End),
                    (b'~', b"5") => Some(Key::PageUp),
                    (b'~', b"6") => Some(Key::PageDown),
                    (b'~', b"1") | (b'~', b"7") => Some(Key::Home),
                    (b'~', b"4") | (b'~', b"8") => Some(Key::End),
                    _ => None,
                };
                out.extend(key);
                i = j + 1;
            }
            0x1b => out.push(Key::Esc),
            b'\r' | b'\n' => out.push(Key::Enter),
            0x7f | 0x08 => out.push(Key::Backspace),
            0x03 => out.push(Key::Interrupt),
            0x0c => out.push(Key::Redraw),
            0x00..=0x1f => {}
            _ => {
                // One UTF-8 character.
                let len = match c {
                    0xc0..=0xdf => 2,
                    0xe0..=0xef => 3,
                    0xf0..=0xf7 => 4,
                    _ => 1,
                };
                let end = (i - 1 + len).min(b.len());
                if let Some(ch) = std::str::from_utf8(&b[i - 1..end]).ok().and_then(|s| s.chars().next()) {
                    out.push(Key::Char(ch));
                }
                i = end;
            }
        }
    }
    out
}

/// What ended a wait.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// The deadline passed.
    Tick,
    /// Keys were pressed.
    Keys(Vec<Key>),
    /// The terminal changed size.
    Resized,
    /// A signal asked us to stop.
    Quit,
}

/// The terminal in raw mode and on its alternate screen, until dropped.
pub struct Terminal {
    saved: Option<libc::termios>,
    keys: bool,
}

fn isatty(fd: i32) -> bool {
    // SAFETY: isatty has no preconditions.
    unsafe { libc::isatty(fd) == 1 }
}

/// True when stdout is a terminal.
pub fn stdout_is_terminal() -> bool {
    isatty(1)
}

fn write_raw(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn restore(saved: Option<libc::termios>) {
    write_raw(LEAVE);
    if let Some(t) = saved {
        // SAFETY: restoring settings read from the same fd.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) };
    }
}

fn handle(sig: libc::c_int, f: extern "C" fn(libc::c_int)) {
    // SAFETY: installs a handler that only stores to an atomic (async-signal-safe); no
    // SA_RESTART, so a poll in progress returns EINTR and the loop sees the flag.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = f as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

impl Terminal {
    /// Raw mode on stdin (when it is a terminal: otherwise no keys are read), the
    /// alternate screen, the cursor hidden, and the signal handlers.
    pub fn enter() -> std::io::Result<Terminal> {
        let mut saved = None;
        if isatty(0) {
            // SAFETY: termios is plain data; tcgetattr fills it.
            let mut t: libc::termios = unsafe { std::mem::zeroed() };
            // SAFETY: fd 0 is a terminal; t is valid for writes.
            if unsafe { libc::tcgetattr(0, &mut t) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let orig = t;
            // No echo, no line editing, no signals from keys (Ctrl-C arrives as a byte and
            // quits like q), no CR translation; reads return what is there.
            t.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
            t.c_iflag &= !(libc::IXON | libc::ICRNL);
            t.c_cc[libc::VMIN] = 1;
            t.c_cc[libc::VTIME] = 0;
            // SAFETY: as above.
            if unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            saved = Some(orig);
        }
        *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = saved;
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(t) = SAVED.lock().unwrap_or_else(|e| e.into_inner()).take() {
                restore(Some(t));
            } else {
                write_raw(LEAVE);
            }
            prev(info);
        }));
        for s in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
            handle(s, on_quit);
        }
        handle(libc::SIGWINCH, on_winch);
        write_raw(ENTER);
        Ok(Terminal { saved, keys: saved.is_some() })
    }

    /// (columns, rows), or 80×24 when the kernel does not say.
    pub fn size(&self) -> (usize, usize) {
        // SAFETY: winsize is plain data that the ioctl fills.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ on stdout writes a winsize.
        let ok = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } == 0;
        if ok && ws.ws_col > 0 && ws.ws_row > 0 {
            (ws.ws_col as usize, ws.ws_row as usize)
        } else {
            (80, 24)
        }
    }

    /// Draws a frame over the last: home, each line then erase to its end (not after a
    /// line that fills the width: erasing there would delete its last character), erase
    /// below. One write, so the screen never shows half a frame for long.
    pub fn draw(&mut self, lines: &[Line], cols: usize) -> std::io::Result<()> {
        let mut s = String::from("\x1b[H");
        for (n, l) in lines.iter().enumerate() {
            if n > 0 {
                s.push_str("\r\n");
            }
            let style = match l.style {
                Style::Normal => "",
                Style::Title | Style::Alert => "\x1b[1m",
                Style::Header => "\x1b[7m",
            };
            s.push_str(style);
            match l.mark {
                Some((a, b)) if b <= l.text.len() && l.text.is_char_boundary(a) && l.text.is_char_boundary(b) => {
                    let on = if l.style == Style::Header { "\x1b[1;4m" } else { "\x1b[7m" };
                    s.push_str(&l.text[..a]);
                    s.push_str(on);
                    s.push_str(&l.text[a..b]);
                    s.push_str("\x1b[0m");
                    s.push_str(style);
                    s.push_str(&l.text[b..]);
                }
                _ => s.push_str(&l.text),
            }
            let w = width(&l.text);
            if l.style == Style::Header && w < cols {
                // The header's reverse video spans the width, as in top and htop.
                s.push_str(&" ".repeat(cols - w));
            } else if w < cols {
                s.push_str("\x1b[K");
            }
            s.push_str("\x1b[0m");
        }
        s.push_str("\x1b[J");
        let mut out = std::io::stdout().lock();
        out.write_all(s.as_bytes())?;
        out.flush()
    }

    /// Waits until `deadline`, a key, a resize or a quitting signal.
    pub fn wait(&mut self, deadline: Instant) -> Wake {
        loop {
            if QUIT.load(Ordering::SeqCst) {
                return Wake::Quit;
            }
            if RESIZED.swap(false, Ordering::SeqCst) {
                return Wake::Resized;
            }
            let now = Instant::now();
            if now >= deadline {
                return Wake::Tick;
            }
            let ms = (deadline - now).as_millis().min(i32::MAX as u128) as i32;
            let mut fds = [libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 }];
            let n = if self.keys {
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(fds.as_mut_ptr(), 1, ms.max(1)) }
            } else {
                // SAFETY: no fds: poll just sleeps (and is interrupted by signals).
                unsafe { libc::poll(std::ptr::null_mut(), 0, ms.max(1)) }
            };
            if n <= 0 {
                continue; // timeout or EINTR: the checks above decide
            }
            if fds[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 && fds[0].revents & libc::POLLIN == 0 {
                // The terminal went away (ssh dropped): stop.
                return Wake::Quit;
            }
            let mut buf = [0u8; 256];
            // SAFETY: reads into a buffer of its length.
            let r = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if r == 0 {
                return Wake::Quit;
            }
            if r > 0 {
                return Wake::Keys(decode(&buf[..r as usize]));
            }
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        SAVED.lock().unwrap_or_else(|e| e.into_inner()).take();
        restore(self.saved.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_sequences() {
        assert_eq!(decode(b"q"), vec![Key::Char('q')]);
        assert_eq!(decode(b"tu/"), vec![Key::Char('t'), Key::Char('u'), Key::Char('/')]);
        assert_eq!(decode(b"\x1b[A\x1b[B\x1bOA"), vec![Key::Up, Key::Down, Key::Up]);
        assert_eq!(decode(b"\x1b[5~\x1b[6~\x1b[H\x1b[4~"), vec![Key::PageUp, Key::PageDown, Key::Home, Key::End]);
        assert_eq!(decode(b"\x1b"), vec![Key::Esc]);
        assert_eq!(decode(b"\r\x7f\x03\x0c"), vec![Key::Enter, Key::Backspace, Key::Interrupt, Key::Redraw]);
        // Unknown sequences (F5, a mouse report) are skipped whole, not typed.
        assert_eq!(decode(b"\x1b[15~x\x1b[<0;3;4M"), vec![Key::Char('x')]);
        assert_eq!(decode("é日".as_bytes()), vec![Key::Char('é'), Key::Char('日')]);
        // Other control bytes and a cut sequence give nothing.
        assert_eq!(decode(b"\x01\x1b[1;5"), vec![]);
    }
}
