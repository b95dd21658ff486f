//! allot's output formatting, in one place and pure: every function returns a `String`
//! (or a `Cow`); nothing here prints, reads or writes a file.
//!
//! - [`Table`]: plain-text tables (aligned columns, right-aligned numbers, a rule under
//!   the header, a free-width last column), measured in terminal columns.
//! - [`for_terminal`]: any string from a process or a user made safe to print (control
//!   characters and bidi overrides escaped), with [`width`] and [`fit`] to measure and
//!   cut it.
//! - [`Chart`] (line, dashed and dot series in panels, bands and error bars) and
//!   [`BarChart`] (grouped horizontal bars with error bars) as SVG, on linear or log
//!   [`Axis`]es with round ticks.
//!
//! Used by `allot-lab sim` (allot-sim), `allot probe`/`why`/`bench` (allot-measure) and the
//! CLI's tables.
#![deny(missing_docs)]

pub mod bars;
pub mod chart;
pub mod scale;
pub mod svg;
pub mod table;
pub mod terminal;

pub use bars::{BarChart, BarGroup};
pub use chart::{Chart, Panel, Series, Style};
pub use scale::{fmt_num, Axis, Scale, Ticks};
pub use table::{Align, Rule, Table};
pub use terminal::{fit, for_terminal, width};
