//! Plain-text tables: a header row, aligned columns two spaces apart, an optional rule
//! under the header, and an optional free-width last column (a command line, a comment)
//! that is never padded.

use crate::terminal::{for_terminal, width};

/// How a column's cells sit in its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right: names, words.
    Left,
    /// Padded on the left: numbers, so their digits line up.
    Right,
}

/// The line under the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// None (the style of `ps` and `allot show`).
    None,
    /// Dashes under each column, the columns' gaps kept: `----  -----`.
    Columns,
    /// One line of dashes across the whole table.
    Full,
}

/// A text table. Build it, add rows, [`render`](Table::render) it:
///
/// ```
/// use allot_report::{Align, Table};
/// let mut t = Table::new(["JOB", "TICKETS", "COMMAND"]).align(0, Align::Right).free_last(true);
/// t.row(["1", "300", "make -j8"]);
/// t.row(["12", "50", "sleep 100"]);
/// assert_eq!(t.render(), "JOB  TICKETS  COMMAND\n  1      300  make -j8\n 12       50  sleep 100\n");
/// ```
///
/// By default the first column is left-aligned and the others right-aligned (a label,
/// then numbers); [`align`](Table::align) and [`aligns`](Table::aligns) change that.
/// Widths are terminal columns ([`crate::width`]), so `µs`, `…` and CJK line up. Every
/// cell goes through [`for_terminal`] first: a process name or command line cannot move
/// the cursor or break the alignment. Trailing spaces are trimmed from every line.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
    rule: Rule,
    free_last: bool,
}

impl Table {
    /// A table with these column headers (first column left, the rest right, no rule).
    pub fn new<I, S>(header: I) -> Table
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        let align = (0..header.len()).map(|i| if i == 0 { Align::Left } else { Align::Right }).collect();
        Table { header, align, rows: Vec::new(), rule: Rule::None, free_last: false }
    }

    /// Sets one column's alignment (a column past the last is ignored).
    pub fn align(mut self, column: usize, a: Align) -> Table {
        if let Some(x) = self.align.get_mut(column) {
            *x = a;
        }
        self
    }

    /// Sets every column's alignment at once (missing ones keep theirs).
    pub fn aligns(mut self, a: &[Align]) -> Table {
        for (x, a) in self.align.iter_mut().zip(a) {
            *x = *a;
        }
        self
    }

    /// Every column left-aligned.
    pub fn all_left(mut self) -> Table {
        self.align.fill(Align::Left);
        self
    }

    /// The line under the header (default [`Rule::None`]).
    pub fn rule(mut self, r: Rule) -> Table {
        self.rule = r;
        self
    }

    /// The last column takes whatever width its cells have and does not count towards
    /// the table's width (it is left-aligned and never padded).
    pub fn free_last(mut self, free: bool) -> Table {
        self.free_last = free;
        self
    }

    /// Adds a row. Missing cells are empty; cells beyond the header are dropped.
    pub fn row<I, S>(&mut self, cells: I) -> &mut Table
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut r: Vec<String> = cells.into_iter().map(Into::into).take(self.header.len()).collect();
        r.resize(self.header.len(), String::new());
        self.rows.push(r);
        self
    }

    /// Adds rows (builder form).
    pub fn with_rows<R, I, S>(mut self, rows: R) -> Table
    where
        R: IntoIterator<Item = I>,
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for r in rows {
            self.row(r);
        }
        self
    }

    /// Number of rows (the header not counted).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as lines ending in `\n`.
    pub fn render(&self) -> String {
        let n = self.header.len();
        if n == 0 {
            return String::new();
        }
        let safe = |r: &[String]| -> Vec<String> { r.iter().map(|c| for_terminal(c).into_owned()).collect() };
        let header = safe(&self.header);
        let rows: Vec<Vec<String>> = self.rows.iter().map(|r| safe(r)).collect();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&header).chain(&rows) {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(width(c));
            }
        }
        let free = |i: usize| self.free_last && i + 1 == n;
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = " ".repeat(w[i] - width(c));
                match (free(i), self.align[i]) {
                    (true, _) => s.push_str(c),
                    (false, Align::Left) => {
                        s.push_str(c);
                        s.push_str(&pad);
                    }
                    (false, Align::Right) => {
                        s.push_str(&pad);
                        s.push_str(c);
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&header, &mut out);
        match self.rule {
            Rule::None => {}
            Rule::Columns => {
                let dashes: Vec<String> = w.iter().map(|&x| "-".repeat(x)).collect();
                line(&dashes, &mut out);
            }
            Rule::Full => {
                let total = w.iter().sum::<usize>() + 2 * (n - 1);
                out.push_str(&"-".repeat(total));
                out.push('\n');
            }
        }
        for r in &rows {
            line(r, &mut out);
        }
        out
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_right_names_left_units_counted_as_columns() {
        let mut t = Table::new(["variant", "p50", "max"]).rule(Rule::Full);
        t.row(["alone", "12 µs", "1.2 ms"]);
        t.row(["vs hogs", "9 µs", "47.8 ms"]);
        assert_eq!(t.render(), "variant    p50      max\n-----------------------\nalone    12 µs   1.2 ms\nvs hogs   9 µs  47.8 ms\n");
    }

    #[test]
    fn column_rule_and_all_left() {
        let mut t = Table::new(["task", "share"]).all_left().rule(Rule::Columns);
        t.row(["a", "50.00%"]);
        t.row(["longer", "5%"]);
        assert_eq!(t.render(), "task    share\n------  ------\na       50.00%\nlonger  5%\n");
    }

    #[test]
    fn free_last_column_is_never_padded_and_lines_are_trimmed() {
        let mut t = Table::new(["PID", "STATE", "COMMAND"]).all_left().free_last(true);
        t.row(["1", "", "a very long command line that sets no width"]);
        t.row(["22", "bg", ""]);
        assert_eq!(t.render(), "PID  STATE  COMMAND\n1           a very long command line that sets no width\n22   bg\n");
    }

    #[test]
    fn hostile_cells_are_escaped_and_still_aligned() {
        let mut t = Table::new(["NAME", "N"]);
        t.row(["\x1b]0;pwned\x07", "1"]);
        t.row(["ok", "22"]);
        let s = t.render();
        assert!(!s.contains('\x1b') && !s.contains('\x07'), "{s}");
        assert_eq!(s, "NAME           N\n\\e]0;pwned\\a   1\nok            22\n");
    }

    #[test]
    fn wide_and_combining_characters_align() {
        let mut t = Table::new(["x", "y"]).all_left();
        t.row(["日本", "1"]);
        t.row(["e\u{301}", "2"]);
        t.row(["…", "3"]);
        assert_eq!(t.render(), "x     y\n日本  1\ne\u{301}     2\n…     3\n");
    }

    #[test]
    fn ragged_rows_and_empty_tables() {
        let mut t = Table::new(["a", "b", "c"]);
        t.row(["1"]);
        t.row(["1", "2", "3", "4"]);
        assert_eq!(t.render(), "a  b  c\n1\n1  2  3\n");
        assert_eq!(Table::new(Vec::<String>::new()).render(), "");
        assert!(Table::new(["a"]).is_empty());
    }
}
