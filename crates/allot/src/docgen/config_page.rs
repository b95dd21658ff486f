//! allot.toml(5), from one table of the config's settings: each table and key with its
//! type, default, allowed values and meaning. The tests hold the table to the config's
//! own definition (crates/allot/src/config.rs): every field serde accepts is here and
//! nothing else is; every default stated loads as `Config::default()`; every range stated
//! is the loader's (its bounds load, one step past them is refused); and every key is in
//! the annotated example (`allot config example`).

use super::{example, item, page_ref, para, text};
use crate::config_check::DEFAULT_PATH;
use allot_model::units::{MAX as UMAX, MIN as UMIN};

/// What a key allows.
#[derive(Debug, Clone, Copy)]
pub enum Allowed {
    /// Integers lo..=hi (the tests load both bounds and refuse one past each).
    Ints(i64, i64),
    /// Integers from lo up (tested as above, below only).
    AtLeast(i64),
    /// Numbers lo..=hi with a fraction (tested at the bounds and 0.5 past them).
    Floats(f64, f64),
    /// Said in words (a rule the loader checks against other keys, or a kind of name).
    Words(&'static str),
}

/// A key's default.
#[derive(Debug, Clone, Copy)]
pub enum DefaultIs {
    /// A TOML value; the tests load `key = value` and expect the built-in defaults.
    Value(&'static str),
    /// Said in words (unset, or taken from the system).
    Words(&'static str),
}

/// One setting.
#[derive(Debug)]
pub struct Key {
    pub name: &'static str,
    pub ty: &'static str,
    pub default: DefaultIs,
    pub allowed: Allowed,
    pub text: &'static str,
}

/// One table of the file (or the top level, `header` "").
#[derive(Debug)]
pub struct Table {
    /// "" for the top level, else how the file spells it: `[policy]`, `[groups.GROUP]`.
    pub header: &'static str,
    /// The field of the config it fills ("" for the top level). This and `probe` are read
    /// by the tests that hold the page to the loader.
    #[cfg_attr(not(test), allow(dead_code))]
    pub field: &'static str,
    /// What a test writes to reach a key of this table (a header, and whatever else the
    /// table needs to load).
    #[cfg_attr(not(test), allow(dead_code))]
    pub probe: &'static str,
    pub text: &'static str,
    pub keys: &'static [Key],
}

use Allowed::*;
use DefaultIs::{Value, Words as Said};

const fn key(name: &'static str, ty: &'static str, default: DefaultIs, allowed: Allowed, text: &'static str) -> Key {
    Key { name, ty, default, allowed, text }
}

const FUNDING: Allowed = Ints(UMIN as i64, UMAX as i64);
const CAP_FORMS: &str = "a cap: 0.5, 1/2 or 50% (soft), 0.5! or 50%! (hard), as allot-run(1) describes";

/// Every table and key of allot.toml, in the order of the annotated example.
pub const TABLES: &[Table] = &[
    Table {
        header: "",
        field: "",
        probe: "",
        text: "Settings at the top of the file, before the first [table].",
        keys: &[
            key("default_funding", "integer", Value("100"), FUNDING, "Funding of a currency nobody has funded: a user's own currency, unless [funding], [groups] or `allot fund` says otherwise."),
            key("tick_ms", "integer", Value("100"), Ints(50, 60_000), "How often, in milliseconds, the daemon measures every job's usage, applies the boost, soft caps and nice emulation, and removes ended jobs, while a new job, a boosted job that runs or a soft cap needs it; while only CPU-bound work runs, every boost_window_ms (jobs boosted while asleep are still read every tick_ms, and planned at once when one becomes active); every 500 ms at rest."),
            key("scan_ms", "integer", Value("1000"), Ints(100, 60_000), "How often, in milliseconds, the daemon scans /proc for new processes when the kernel's process events are not available. With them, it scans every 5 minutes (or every scan_ms, if longer) as a safety net."),
            key("half_life_ms", "integer", Value("5000"), Ints(1000, 100_000), "The half-life of the usage rate, in milliseconds: how fast a job's measured usage forgets the past."),
            key("funding_authority", "string", Value("\"local\""), Words("\"local\" or \"config\""), "Who decides funding. \"local\": `allot fund` sets it, kept across restarts and over the config's. \"config\": only [funding] and [groups] set it and `allot fund` is refused (a fleet whose configs are managed centrally)."),
        ],
    },
    Table {
        header: "[policy]",
        field: "policy",
        probe: "[policy]",
        text: "The dynamic policy, applied every tick.",
        keys: &[
            key("boost", "boolean", Value("true"), Words("true or false"), "Boost jobs that use less than their entitlement: they run first when they wake, which buys them latency, never more CPU."),
            key("boost_window_ms", "integer", Value("500"), Words("tick_ms..60000"), "The sliding window, in milliseconds, over which a job's usage is compared with its entitlement: for the boost of the cgroup backend's plan, and of allot's sched_ext scheduler (kind = \"scx\"), which boosts per wakeup over it; a change loads that scheduler again."),
            key("boost_below", "float", Value("0.5"), Words("above 0, at most 1"), "A job is boosted while its usage over the window is below this fraction of its entitlement."),
            key("boost_slice_us", "integer", Value("0"), Words("0, or 100..100000"), "The scheduler slice, in microseconds, of a boosted job's tasks (EEVDF, Linux 6.6 and later). 0 leaves slices alone and boosts by weight only, which measured best."),
            key("boost_weight", "float", Value("100.0"), Floats(1.0, 10_000.0), "A boosted job's weight is its tickets times this (at most 10000). The boost is withdrawn at the first tick in which the job used its entitlement."),
            key("nice_emulation", "boolean", Value("true"), Words("true or false"), "Make nice count against everyone: a niced job's share of its currency's funding is held to a threshold set by its nice value (a niced process in a user's default job first gets a job of its own), so nice lowers it against other users' jobs too, not only against its owner's other processes."),
        ],
    },
    Table {
        header: "[users]",
        field: "users",
        probe: "[users]",
        text: "Which processes are placed into their user's currency automatically.",
        keys: &[
            key("auto_place", "boolean", Value("true"), Words("true or false"), "Place human users' processes that are in no job into their user's default job."),
            key("min_uid", "integer", Said("UID_MIN of /etc/login.defs (1000 if it sets none)"), Words("a uid, at most max_uid"), "Human users' uids start here."),
            key("max_uid", "integer", Said("UID_MAX of /etc/login.defs (60000 if it sets none)"), Words("a uid"), "Human users' uids end here."),
            key("only", "array of strings", Said("unset (every human user)"), Words("user names or uids"), "Place only these users' processes."),
        ],
    },
    Table {
        header: "[placement]",
        field: "placement",
        probe: "[placement]",
        text: "Where automatic placement takes processes from.",
        keys: &[key("from", "array of strings", Value("[\"/\"]"), Words("cgroup paths starting with /, as /proc/PID/cgroup shows them"), "The cgroups whose processes may be placed. Every other cgroup belongs to another manager (a service, a container, a batch system) and its processes are never touched.")],
    },
    Table {
        header: "[limits]",
        field: "limits",
        probe: "[limits]",
        text: "What one user may ask of the daemon.",
        keys: &[
            key("jobs_per_user", "integer", Value("256"), AtLeast(1), "Jobs one user may have (default jobs not counted)."),
            key("connections_per_user", "integer", Value("16"), AtLeast(1), "Connections to the socket one user may hold open."),
            key("connections", "integer", Value("512"), AtLeast(1), "Connections all users but root may hold open together."),
            key("requests_per_second", "float", Value("50.0"), Words("above 0"), "Requests one user may make per second, on average."),
            key("request_burst", "float", Value("100.0"), Words("at least 1"), "Requests one user may make at once: the most that the average lets build up."),
        ],
    },
    Table {
        header: "[outside]",
        field: "outside",
        probe: "[outside]",
        text: "On hosts without systemd: allot's whole tree against the processes outside it (root's, services'). Not used on a systemd host, where systemd weighs user.slice against system.slice.",
        keys: &[key("weight", "integer", Value("100"), Ints(1, 10_000), "The weight of allot's tree, in cgroup v2 units (cgroup v1's cpu.shares is this times 10.24). 100, the kernel's default, weighs the whole tree as one process at nice 0.")],
    },
    Table {
        header: "[memory]",
        field: "memory",
        probe: "[memory]",
        text: "Memory by share (see docs/memory.md): under memory pressure each currency with jobs is protected up to its funding's share of the memory available to users (the machine's less the reserve, at most a limit set on allot's cgroup root), its jobs' tickets dividing that; a currency alone may use all of it. Memory caps are per currency, in [funding] (mem = \"16G!\" hard, \"16G\" soft). Read at start: a reload does not turn it on or off.",
        keys: &[
            key("enable", "boolean", Value("true"), Words("true or false"), "Share memory by funding: protection (cgroup v2 memory.low; v1 soft limits, and hard limits that keep each currency out of what the others hold within their share) and memory caps."),
            key("reserve", "string", Value("\"10%\""), Words("a size (\"2G\": K, M, G or T, powers of 1024) or a percent of the machine's memory below 100 (\"10%\")"), "Memory kept for the system: not counted as available to users."),
            key("oom", "boolean", Value("true"), Words("true or false"), "Raise the oom_score_adj of the processes of a currency above its share, so the OOM killer chooses one of them before any process of a currency within its share; given back when the currency is within its share again."),
        ],
    },
    Table {
        header: "[io]",
        field: "io",
        probe: "[io]",
        text: "I/O by share (see docs/memory.md): each currency's funding is its I/O weight and its jobs' tickets divide it, written where the kernel has a weight file (cgroup v2 io.weight and io.bfq.weight, v1 blkio.bfq.weight or blkio.weight, a systemd slice's IOWeight=); background jobs weigh the least. Only devices whose scheduler honours weights (BFQ, io.cost) divide by them: `allot status` says which.",
        keys: &[key("by_share", "boolean", Value("true"), Words("true or false"), "Write the weights (true), or leave I/O to the kernel (false): nothing is written, and a weight allot wrote is given back.")],
    },
    Table {
        header: "[scheduler]",
        field: "scheduler",
        probe: "[scheduler]",
        text: "The CPU scheduler backend that runs the plan.",
        keys: &[
            key("kind", "string", Value("\"cgroup\""), Words("\"cgroup\" or \"scx\""), "\"cgroup\": the cgroup CPU controller, allot's own tree or systemd's scopes. \"scx\": also allot's sched_ext scheduler (a BPF program; Linux 6.12+ built with sched_ext), run by its loader `allot-scx` beside the `allot` binary, for allot's jobs' threads; the cgroup settings stay written, and if the kernel ejects the scheduler the daemon goes on with them alone (`allot status` says which runs and why). Refused, naming the kernel's reason, where the kernel has no sched_ext."),
            key("draw", "string", Value("\"stride\""), Words("\"stride\" or \"lottery\""), "How allot's sched_ext scheduler (kind = \"scx\") picks the next task. \"stride\": stride scheduling, deterministic, each job's share held turn by turn. \"lottery\": each turn a draw by shares, with compensation tickets for a task that gave up the CPU early, as lottery scheduling (Waldspurger and Weihl 1994): shares hold on average and vary from second to second as a lottery's. A change loads the scheduler again. Nothing changes under kind = \"cgroup\"."),
            key("tasks", "string", Value("\"jobs\""), Words("\"jobs\" or \"all\""), "Which tasks allot's sched_ext scheduler (kind = \"scx\") schedules. \"jobs\": only allot's jobs' threads (the kernel's partial switch); every other task stays in the kernel's fair class, which runs first, so nothing allot does not manage waits for allot's jobs, and a CPU-bound task outside them leaves them about 5% of its CPU. \"all\": every task of the machine, a task in no job weighing its nice weight and allot's jobs together [outside] weight, as the cgroup backend weighs its tree; every task then depends on the scheduler (if the kernel ejects it, all go back to the fair class). A change loads the scheduler again."),
        ],
    },
    Table {
        header: "[sessions]",
        field: "sessions",
        probe: "[sessions]",
        text: "Login sessions on a systemd host: how the policy reaches processes started from a login, which stay in logind's session scope unless said here.",
        keys: &[key("background", "string", Value("\"task\""), Words("\"task\" or \"job\""), "How a [[rules]] background rule reaches a session process. \"task\": SCHED_IDLE on its threads, in its session, where it yields only to that session's other processes (against another user it keeps its user's share). \"job\": moved through systemd into a background job of allot's, tied to its session so that logout (when logind ends the session) and `loginctl terminate-user` still end it; there it runs only on CPU no one else wants. `loginctl` no longer lists it in the session. Hosts without systemd have no sessions to reach: their processes are placed as usual.")],
    },
    Table {
        header: "[privacy]",
        field: "privacy",
        probe: "[privacy]",
        text: "What `allot show` reveals to a user of other users' jobs.",
        keys: &[key("show_other_users", "boolean", Value("false"), Words("true or false"), "Show other users' pids and command lines, as /proc mounted without hidepid does.")],
    },
    Table {
        header: "[metrics]",
        field: "metrics",
        probe: "[metrics]",
        text: "The daemon's Prometheus metrics endpoint.",
        keys: &[
            key("listen", "string", Said("unset (no endpoint)"), Words("an address and port, such as \"127.0.0.1:9743\""), "Serve GET /metrics at this address, to the peers allow lets in; they see what a user with no jobs sees. An address that is not loopback is refused without an allow list."),
            key("allow", "array of strings", Value("[]"), Words("IPv4 or IPv6 addresses, alone or with a prefix length: \"192.0.2.7\", \"10.0.0.0/8\", \"2001:db8::/32\""), "Who may scrape. Empty: loopback peers only. A list: exactly the peers in it (loopback only if listed; an IPv4 client of a [::] listener counts as its IPv4 address); anyone else gets 403 Forbidden. A reload applies a new list at once."),
        ],
    },
    Table {
        header: "[funding]",
        field: "funding",
        probe: "[funding]",
        text: "Funding by currency: each key is a user name, a uid or a named currency of [currencies]. A key that is none of these loads, but `allot config check` warns about it (a top-level setting written below [funding] becomes one). The value is a funding (alice = 300) or a table that may also cap the currency's CPU and memory (alice = { funding = 300, cap = \"4!\", mem = \"16G!\" }).",
        keys: &[key("USER", "integer or table", Said("default_funding"), FUNDING, "The funding of USER's currency (or of the named currency USER). As a table: funding (as above; unset: default_funding or a group's) and cap, a hard cap on the whole currency, all its jobs together, in CPUs with ! (\"4!\", \"1/2!\", \"50%!\"); a soft cap is refused. On a systemd host the cap is the user's slice's CPUQuota=.")],
    },
    Table {
        header: "[groups.GROUP]",
        field: "groups",
        probe: "[groups.g]",
        text: "Defaults for the members of group GROUP (a group name).",
        keys: &[
            key("funding", "integer", Said("unset (default_funding)"), FUNDING, "The funding of each member's own currency."),
            key("default_cap", "string", Said("unset (no cap)"), Words("a cap above 0: 0.5, 1/2, 50% (soft) or 1!, 50%! (hard)"), "The cap of each member's default job (the job that gathers their processes in no other job)."),
            key("currency_cap", "string", Said("unset (no cap)"), Words("a hard cap: 4!, 1/2!, 50%!"), "A hard cap on each member's own currency: all their jobs together (default_cap caps one job, their default one). [funding] and `allot fund --cap` win over it."),
        ],
    },
    Table {
        header: "[currencies.NAME]",
        field: "currencies",
        probe: "[currencies.ci]",
        text: "A named currency: a budget several users' jobs can share, such as ci. NAME is 1 to 32 of a-z, 0-9, _ and -, starting with a letter; \"background\" and names starting \"user-\" are allot's own.",
        keys: &[
            key("funding", "integer", Said("unset (default_funding)"), FUNDING, "Its funding at start. `allot fund NAME N` changes it later, and that change is kept and wins (unless funding_authority is \"config\")."),
            key("users", "array of strings", Said("[]"), Words("user names or uids"), "Users who may run jobs in it."),
            key("groups", "array of strings", Said("[]"), Words("group names"), "Groups whose members may run jobs in it."),
            key("owners", "array of strings", Said("[]"), Words("user names or uids"), "Users who may also fund it and move their processes into it."),
        ],
    },
    Table {
        header: "[[rules]]",
        field: "rules",
        probe: "[[rules]]\ncomm = \"cc1\"",
        text: "Rules, in order: the first that matches a process gives it a job. A rule needs at least one of user, group, exe, comm or cmdline to match, and at least one of tickets, cap, background or currency to do. `allot rules test PID` shows which rule matches a process.",
        keys: &[
            key("name", "string", Said("its position, 1 for the first"), Words("any text"), "A name for logs and `allot rules test`."),
            key("user", "string", Said("unset (any user)"), Words("a user name or uid the system knows"), "Matches this user's processes."),
            key("group", "string", Said("unset (any group)"), Words("a group name or gid the system knows"), "Matches processes running with this group, primary or supplementary, as id(1) shows them."),
            key("exe", "string", Said("unset"), Words("a glob, or re: and a regular expression"), "Matches the path of the process's executable (/proc/PID/exe)."),
            key("comm", "string", Said("unset"), Words("a glob"), "Matches the process name (/proc/PID/comm)."),
            key("cmdline", "string", Said("unset"), Words("a glob, or re: and a regular expression"), "Matches the command line."),
            key("tickets", "integer", Said("unset (100)"), FUNDING, "The tickets of the jobs it makes."),
            key("cap", "string", Said("unset (no cap)"), Words(CAP_FORMS), "The cap of the jobs it makes."),
            key("background", "boolean", Said("false"), Words("true or false"), "The jobs it makes run in the background class, on idle CPU only."),
            key("currency", "string", Said("the process owner's"), Words("a named currency of [currencies], or a user"), "The currency of the jobs it makes."),
        ],
    },
];

/// A key's dotted name as the loader's messages spell it (`policy.boost_below`).
#[cfg(test)]
fn dotted(t: &Table, k: &Key) -> String {
    if t.field.is_empty() {
        k.name.to_string()
    } else {
        format!("{}.{}", t.field, k.name)
    }
}

fn allowed_words(a: Allowed) -> String {
    match a {
        Ints(lo, hi) => format!("{lo}..{hi}"),
        AtLeast(lo) => format!("at least {lo}"),
        Floats(lo, hi) => format!("{lo:.1}..{hi:.1}"),
        Words(w) => w.to_string(),
    }
}

/// The page, as roff.
pub fn render(version: &str) -> String {
    let mut p = format!(".TH allot.toml 5 \"allot {}\" \"allot {}\" \"File Formats\"\n.nh\n", text(version), text(version));
    p += ".SH NAME\nallot.toml \\- the configuration file of the allot daemon\n";
    p += &format!(".SH SYNOPSIS\n{}\n", text(DEFAULT_PATH));
    p += ".SH DESCRIPTION\n";
    p += &para(&format!(
        "The allot daemon (allot-daemon(1)) reads {DEFAULT_PATH} (or the file `--config` or ALLOT_CONFIG names) at start, and again on SIGHUP (`systemctl reload allot`). The file is optional: every setting has the default shown below, and no file at all means every default. It is TOML, UTF-8 text of at most {} MiB.",
        crate::config::MAX_BYTES / (1024 * 1024)
    ));
    p += &para("An unknown setting, a value of the wrong type or outside its range refuses the whole file, with its file, line and what is allowed: the daemon does not start, and a reload keeps the config in force. `allot config check FILE` checks a file the same way without a daemon, and also warns about user and group names the system does not know. `allot config example` prints an annotated example with every setting commented out at its default.");
    p += &para("Funding and tickets are shares, 1..10000, 100 by default: a currency with funding 200 gets twice the CPU of one with 100 when both want more than they get.");
    for t in TABLES {
        p += &format!(".SH \"{}\"\n", if t.header.is_empty() { "TOP LEVEL".to_string() } else { text(t.header) });
        p += &para(t.text);
        for k in t.keys {
            let default = match k.default {
                Value(v) | Said(v) => v,
            };
            p += &item(&format!("`{}` ({})", k.name, k.ty), &format!("{} Default: {default}. Allowed: {}.", k.text, allowed_words(k.allowed)));
        }
    }
    p += ".SH EXAMPLES\n";
    p += &example(
        "Half the funding for students, whose logins may each use at most one CPU; builds on idle CPU only:",
        "[groups.students]\nfunding = 50\ndefault_cap = \"1!\"\n\n[[rules]]\nname = \"builds\"\ncomm = \"cc1*\"\nbackground = true",
    );
    p += ".SH FILES\n";
    p += &item(DEFAULT_PATH, "The config.");
    p += &item("/usr/share/doc/allot/examples/allot.toml", "The annotated example (also `allot config example`).");
    p += ".SH \"SEE ALSO\"\n";
    let refs = [
        ("allot", 1),
        ("allot-daemon", 1),
        ("allot-config-check", 1),
        ("allot-config-example", 1),
        ("allot-run", 1),
        ("systemd.resource-control", 5),
    ];
    p += &format!("{}\n", refs.iter().map(|(n, s)| page_ref(n, *s)).collect::<Vec<_>>().join(", "));
    p
}

#[cfg(test)]
#[path = "config_page_tests.rs"]
mod tests;
