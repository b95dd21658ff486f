//! A currency's fields in the one schema ([`crate::fields`]): the currency tables of
//! `allot show` and `allot top` and the `allot_currency_` metric families read them, so a
//! currency's numbers are named, measured and formatted the same in each. Its memory has
//! fields of its own ([`crate::memory_fields`]): a table and families apart, where memory
//! is shared.

use crate::fields::{cpus, format_unit, In, Spec, Unit};
use crate::proto::{CurrencyView, JobView};

/// A field of a currency, in the order the outputs list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurrencyField {
    Name,
    Kind,
    Funding,
    Cap,
    Weight,
    Jobs,
    Active,
    Entitled,
    Usage,
}

/// Every currency field, in order.
pub const CURRENCY_FIELDS: [CurrencyField; 9] = {
    use CurrencyField::*;
    [Name, Kind, Funding, Cap, Weight, Jobs, Active, Entitled, Usage]
};

const SHOW_TOP: In = In { show: true, top: true, metric: false };
const ALL: In = In { show: true, top: true, metric: true };
const SHOW_METRIC: In = In { show: true, top: false, metric: true };
const TOP: In = In { show: false, top: true, metric: false };

impl CurrencyField {
    pub fn spec(self) -> Spec {
        use CurrencyField::*;
        let s = |id, header, unit, help, shown| Spec { id, header, unit, counter: false, help, shown };
        match self {
            Name => s("currency", "CURRENCY", Unit::Text, "The currency's name (a label of every currency metric).", SHOW_TOP),
            Kind => s("kind", "KIND", Unit::Text, "user or named (a label of every currency metric).", SHOW_TOP),
            Funding => s("funding", "FUNDING", Unit::Number, "The currency's funding: its base tickets (1..10000).", ALL),
            Cap => s("cap", "CAP", Unit::Cpus, "The currency's hard cap, CPUs: all its jobs together use at most this (absent: no cap).", ALL),
            Weight => s(
                "weight",
                "WEIGHT",
                Unit::Number,
                "The weight written to the kernel for the currency now (nice emulation may lower it).",
                SHOW_METRIC,
            ),
            Jobs => s("jobs", "JOBS", Unit::Number, "Jobs in the currency.", ALL),
            Active => s("active_jobs", "ACTIVE", Unit::Number, "Jobs of the currency using CPU now.", ALL),
            Entitled => s("entitlement", "ENTITLED", Unit::Cpus, "The summed entitlement of the currency's active jobs, CPUs.", TOP),
            Usage => s("usage", "USAGE", Unit::Cpus, "The currency's summed usage rate, CPUs.", ALL),
        }
    }

    /// Its metric family's name: `allot_currency_` + id + unit suffix.
    pub fn metric_name(self) -> String {
        self.spec().metric_name("allot_currency_")
    }

    /// Its number for a currency whose jobs are among `jobs` (None: none, e.g. no cap).
    /// Text fields have none.
    pub fn number(self, c: &CurrencyView, jobs: &[JobView]) -> Option<f64> {
        use CurrencyField::*;
        match self {
            Name | Kind => None,
            Funding => Some(c.funding as f64),
            Cap => c.cap.as_deref().and_then(|x| x.parse::<allot_model::Cap>().ok()).map(|cap| cap.cpus),
            Weight => Some(c.weight as f64),
            Jobs => Some(c.jobs as f64),
            Active => Some(c.active as f64),
            Entitled => Some(entitlement(jobs, &c.name)),
            Usage => Some(c.usage),
        }
    }

    /// Its cell in a table, before it is made safe for the terminal and fitted.
    pub fn text(self, c: &CurrencyView, jobs: &[JobView]) -> String {
        match self {
            CurrencyField::Name => c.name.clone(),
            CurrencyField::Kind => c.kind.clone(),
            // The cap as set ("4!").
            CurrencyField::Cap => c.cap.clone().unwrap_or_else(|| "-".into()),
            CurrencyField::Usage | CurrencyField::Entitled => cpus(self.number(c, jobs).unwrap_or(0.0)),
            f => f.number(c, jobs).map_or_else(|| "-".into(), |x| format_unit(f.spec().unit, x)),
        }
    }

    /// Its column is aligned right (numbers), else left (words, and the cap as set, as a
    /// job's is).
    pub fn right(self) -> bool {
        !matches!(self, CurrencyField::Name | CurrencyField::Kind | CurrencyField::Cap)
    }
}

/// The currency fields an output shows, in order.
pub fn currency_shown_in(pick: fn(In) -> bool) -> impl Iterator<Item = CurrencyField> {
    CURRENCY_FIELDS.into_iter().filter(move |f| pick(f.spec().shown))
}

/// A currency's entitlement: the summed entitlement of its active jobs.
pub fn entitlement(jobs: &[JobView], name: &str) -> f64 {
    // A fold from +0: `sum` of no f64 is -0.0, which prints as "-0.00".
    jobs.iter().filter(|j| j.active && j.currency == name).map(|j| j.entitlement).fold(0.0, |a, b| a + b)
}
