//! Text that is safe to print and measure on a terminal.
//!
//! A process chooses its own name and command line, and a user types any bytes into an
//! argument; printed raw, `"\x1b]0;pwned\x07"` sets the window title, `"\x1b[2J"` clears
//! the screen, `"\r"` overwrites the line, U+202E turns the rest of the line around
//! (Trojan Source, CVE-2021-42574). [`for_terminal`] makes every such character visible
//! instead. [`width`] counts columns as a terminal does, well enough for tables of
//! names, numbers, `…` and `µs`.

use std::borrow::Cow;
use std::fmt::Write;

/// True for the characters [`for_terminal`] escapes: C0 controls (U+0000–U+001F,
/// including tab and newline), DEL (U+007F), C1 controls (U+0080–U+009F; U+009B is a
/// one-character CSI on some terminals) and the bidirectional embeddings, overrides and
/// isolates (U+202A–U+202E, U+2066–U+2069).
pub fn is_unsafe(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control and bidi-override character ([`is_unsafe`]) replaced by a
/// visible escape, so nothing in it can move the cursor, clear the screen, set a window
/// title or reorder the line: `"\x1b]0;pwned\x07"` becomes `\e]0;pwned\a`.
///
/// Escapes: `\0 \a \b \t \n \v \f \r \e` by name, other C0 and DEL as `\x01`…`\x7f`,
/// C1 as `\u{80}`…`\u{9f}`, bidi controls as `\u{202e}`. Borrowed when there is nothing
/// to escape, so calling it on every cell costs nothing. For display only: a backslash
/// already in `s` is left alone (command lines keep their `\|`), so the result is not
/// meant to be parsed back. Newlines are escaped too: apply it to a field (a name, a
/// command line, an argument), not to a whole multi-line report.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !is_unsafe(c) {
            out.push(c);
            continue;
        }
        let named = match c {
            '\0' => "\\0",
            '\u{7}' => "\\a",
            '\u{8}' => "\\b",
            '\t' => "\\t",
            '\n' => "\\n",
            '\u{b}' => "\\v",
            '\u{c}' => "\\f",
            '\r' => "\\r",
            '\u{1b}' => "\\e",
            _ => "",
        };
        if !named.is_empty() {
            out.push_str(named);
        } else if (c as u32) <= 0x7f {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Columns one character takes on a terminal: 0 for combining marks and zero-width
/// characters, 2 for East Asian wide and fullwidth characters and most emoji, 1 for the
/// rest (including `…`, `µ`, `×`, `—`, `∞`). An approximation of Unicode's East Asian
/// Width (UAX #11) without its tables: right for the text allot prints.
pub fn char_width(c: char) -> usize {
    let u = c as u32;
    match u {
        // Control characters print nothing of their own (escape them first).
        0..=0x1f | 0x7f..=0x9f => 0,
        // Combining marks, zero-width space/joiners/marks, word joiner, variation
        // selectors, BOM.
        0x300..=0x36f | 0x483..=0x489 | 0x591..=0x5bd | 0x610..=0x61a | 0x64b..=0x65f | 0x1ab0..=0x1aff | 0x1dc0..=0x1dff | 0x200b..=0x200f => 0,
        0x2060..=0x2064 | 0x20d0..=0x20ff | 0xfe00..=0xfe0f | 0xfe20..=0xfe2f | 0xfeff | 0xe0100..=0xe01ef => 0,
        // Hangul Jamo, CJK radicals to Yi, Hangul syllables, CJK compatibility, vertical
        // forms, fullwidth forms, emoji and pictographs, CJK extensions B and later.
        0x1100..=0x115f | 0x231a..=0x231b | 0x2329..=0x232a | 0x23e9..=0x23ec | 0x2614..=0x2615 | 0x26a1 | 0x26bd..=0x26be | 0x2705 => 2,
        0x2e80..=0x303e | 0x3041..=0x33ff | 0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xa000..=0xa4cf | 0xa960..=0xa97f | 0xac00..=0xd7a3 => 2,
        0xf900..=0xfaff | 0xfe10..=0xfe19 | 0xfe30..=0xfe6f | 0xff00..=0xff60 | 0xffe0..=0xffe6 => 2,
        0x1f300..=0x1f64f | 0x1f680..=0x1f6ff | 0x1f900..=0x1f9ff | 0x1fa70..=0x1faff | 0x20000..=0x3fffd => 2,
        _ => 1,
    }
}

/// Columns `s` takes on a terminal (see [`char_width`]): `"µs"` is 2, `"…"` is 1,
/// `"日本"` is 4.
pub fn width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

/// `s` cut to at most `max` columns, ending in `…` when cut: `fit("make -j8 all", 8)`
/// is `"make -j…"`. Borrowed when it fits.
pub fn fit(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    if max == 0 {
        return Cow::Owned(String::new());
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = char_width(c);
        if w + cw > max - 1 {
            break;
        }
        out.push(c);
        w += cw;
    }
    out.push('…');
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_moves_the_cursor_or_sets_a_title() {
        assert_eq!(for_terminal("\x1b]0;pwned\x07"), "\\e]0;pwned\\a");
        assert_eq!(for_terminal("\x1b[2J\x1b[H"), "\\e[2J\\e[H");
        assert_eq!(for_terminal("a\rb\nc\td\0"), "a\\rb\\nc\\td\\0");
        assert_eq!(for_terminal("\x01\x1f\x7f"), "\\x01\\x1f\\x7f");
        assert_eq!(for_terminal("\u{9b}2J\u{85}"), "\\u{9b}2J\\u{85}");
        assert_eq!(for_terminal("\u{202e}gnp.exe"), "\\u{202e}gnp.exe");
        for c in ['\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}'] {
            let e = for_terminal(&c.to_string()).into_owned();
            assert!(e.starts_with("\\u{20") && !e.contains(c), "{e}");
        }
    }

    #[test]
    fn leaves_ordinary_text_alone_and_borrowed() {
        for s in ["make -j8", "grep 'a\\|b'", "250 µs", "…", "×1.9", "日本語", "", "naïve", "\u{a0}"] {
            assert!(matches!(for_terminal(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn nothing_unsafe_survives_any_input() {
        // Every code point up to U+FFFF, and a few beyond, one at a time and together.
        let all: String = (0u32..0x10000).chain(0x1f300..0x1f310).filter_map(char::from_u32).collect();
        let out = for_terminal(&all);
        assert!(!out.chars().any(is_unsafe));
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\n'));
    }

    #[test]
    fn widths() {
        assert_eq!(width("µs"), 2);
        assert_eq!(width("…"), 1);
        assert_eq!(width("12.5 µs"), 7);
        assert_eq!(width("日本"), 4);
        assert_eq!(width("e\u{301}"), 1);
        assert_eq!(width("a\u{200b}b"), 2);
        assert_eq!(width("∞ × —"), 5);
    }

    #[test]
    fn fit_cuts_by_columns_with_an_ellipsis() {
        assert_eq!(fit("make -j8 all", 8), "make -j…");
        assert_eq!(fit("make", 8), "make");
        assert_eq!(fit("日本語テキスト", 5), "日本…");
        assert_eq!(width(&fit("日本語テキスト", 5)), 5);
        assert_eq!(fit("abc", 1), "…");
        assert_eq!(fit("abc", 0), "");
    }
}
