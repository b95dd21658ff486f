//! `allot`: proportional-share CPU for shared Linux machines.
//!
//! The product's one binary: the root daemon (`allot daemon`), the thin CLI that drives
//! it, and the instruments a user needs (probe, why, top, metrics). The simulator,
//! benchmarks, selftest and load generators are the lab's, in `allot-lab` (src/lab/);
//! the protocol types both binaries and the tests use are this package's library (lib.rs).

use allot::{client, memory_view, proto};

mod config;
mod config_check;
mod config_funding;
mod config_io;
mod config_memory;
mod config_metrics;
mod config_print;
#[cfg(test)]
mod config_props;
mod config_rules;
mod config_scheduler;
mod config_sessions;
mod currency_fields;
mod daemon;
mod docgen;
mod fields;
mod memory_fields;
mod metrics;
mod metrics_cmd;
mod output;
#[cfg(test)]
mod proto_doc_tests;
mod readings;
mod top;
mod why_daemon;

use clap::{Parser, Subcommand};
use proto::Request;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

/// Proportional-share CPU for shared Linux machines: tickets per job, a currency per
/// user, caps, a background class, and the instruments to prove it.
#[derive(Debug, Parser)]
#[command(name = "allot", version, propagate_version = true, max_term_width = 100)]
struct Cli {
    /// The daemon's socket.
    #[arg(long, global = true, env = "ALLOT_SOCKET", default_value = "/run/allot/allot.sock")]
    socket: PathBuf,
    /// Print JSON instead of a table (for scripts).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the enforcing daemon (root). Built-in defaults serve without a config.
    Daemon {
        /// Config file (optional; defaults apply when it does not exist).
        #[arg(long, env = "ALLOT_CONFIG")]
        config: Option<PathBuf>,
        /// State directory (funding survives restarts here).
        #[arg(long, env = "ALLOT_STATE_DIR", default_value = "/var/lib/allot")]
        state_dir: PathBuf,
        /// Name of allot's cgroup root under the cpu controller's mount.
        #[arg(long, env = "ALLOT_CGROUP_ROOT", default_value = "allot")]
        cgroup_root: String,
        /// For tests and benchmarks: keep no state and remove the cgroup tree on stop.
        #[arg(long, hide = true)]
        ephemeral: bool,
        /// Let go of everything allot made, for good, and exit (the package runs this when
        /// allot is removed; the daemon must be stopped). No running process is stopped.
        #[arg(long, conflicts_with = "ephemeral")]
        release: bool,
    },
    /// Run a command as a new job: it and all its descendants share the job's tickets.
    Run {
        /// Tickets: the job's claim inside its currency (1..10000).
        #[arg(short, long, allow_hyphen_values = true)]
        tickets: Option<String>,
        /// Currency (a named one, or a user); default your own.
        #[arg(long)]
        currency: Option<String>,
        /// Cap in CPUs: 0.5, 1/2 or 50% is soft (held only while others want the CPU); add !
        /// for hard (0.5!, 50%!: held even on idle CPUs); 0 = background.
        #[arg(long, allow_hyphen_values = true)]
        cap: Option<String>,
        /// Memory cap: a size (bytes, or K, M, G, T: 512M, 1.5G) with ! for hard (4G!: never
        /// more; reclaimed, then the OOM killer acts inside the job) or without for soft (4G:
        /// throttled and reclaimed above it).
        #[arg(long)]
        mem: Option<String>,
        /// An OOM kill in the job kills all of it, not one process (cgroup v2's
        /// memory.oom.group: for a job whose processes cannot go on without each other).
        #[arg(long)]
        oom_group: bool,
        /// Run on idle CPU only (soft cap 0).
        #[arg(long)]
        background: bool,
        /// Fail if the daemon cannot be reached (default: run the command unmanaged, with a warning).
        #[arg(long)]
        strict: bool,
        /// Root only: take this process out of a cgroup another manager owns.
        #[arg(long)]
        force: bool,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Change running processes' jobs: tickets, cap, memory cap, OOM group, background or foreground.
    Set {
        /// Processes. A process not yet in a job of its own gets one.
        #[arg(required = true)]
        pids: Vec<String>,
        /// Tickets (1..10000).
        #[arg(short, long, allow_hyphen_values = true)]
        tickets: Option<String>,
        /// Cap in CPUs: 0.5, 1/2 or 50% is soft (held only while others want the CPU); add !
        /// for hard (0.5!, 50%!: held even on idle CPUs); 0 = background; none removes it.
        #[arg(long, allow_hyphen_values = true)]
        cap: Option<String>,
        /// Memory cap: a size with ! for hard (4G!), without for soft (4G); none removes it.
        #[arg(long)]
        mem: Option<String>,
        /// on: an OOM kill in the job kills all of it; off: one process (the kernel's default).
        #[arg(long, value_parser = ["on", "off"])]
        oom_group: Option<String>,
        /// Move to the background class (idle CPU only).
        #[arg(long, conflicts_with = "foreground")]
        background: bool,
        /// Back to the foreground.
        #[arg(long)]
        foreground: bool,
        /// Root only: take processes out of cgroups other managers own.
        #[arg(long)]
        force: bool,
    },
    /// List jobs and currencies: tickets, funding, entitlement, usage, cap.
    Show {
        /// Only this user's jobs.
        #[arg(long)]
        user: Option<String>,
    },
    /// Show or set a currency's funding and hard cap (setting them is root's).
    Fund {
        /// Currency or user.
        currency: Option<String>,
        /// New funding: base tickets, 1..10000.
        #[arg(allow_hyphen_values = true)]
        base: Option<String>,
        /// Hard cap of the whole currency, all its jobs together: CPUs with ! (4!, 1/2!,
        /// 50%!); none removes it. On a systemd host it is the user's slice's CPUQuota=.
        #[arg(long, allow_hyphen_values = true)]
        cap: Option<String>,
    },
    /// Mark the job you are waiting on: boosted whatever its usage history, still bounded
    /// by its entitlement. Owner or root.
    Focus {
        /// A process of the job.
        pid: String,
        /// Take the focus away again.
        #[arg(long)]
        off: bool,
    },
    /// Move a process into another currency (root's).
    Move {
        /// The process.
        pid: String,
        /// Named currency or user.
        currency: String,
        /// Take the process out of a cgroup another manager owns.
        #[arg(long)]
        force: bool,
    },
    /// The config file: `allot config check [FILE]` checks it as the daemon would load it,
    /// `allot config example` prints the annotated example.
    Config {
        #[command(subcommand)]
        which: ConfigCmd,
    },
    /// The config's rules: `allot rules test PID` shows which matches a process.
    Rules {
        #[command(subcommand)]
        which: RulesCmd,
    },
    /// Why a job is boosted, held, capped, niced or background now, since when, and the
    /// numbers that decided it.
    Explain {
        /// A pid, or a job as `allot show` names it (7, alice/default).
        target: String,
    },
    /// The audit trail: every change and refusal, who asked, before and after (root sees
    /// all; a user, their own requests and changes to their jobs).
    Log {
        /// Only records by or about this user.
        #[arg(long)]
        user: Option<String>,
        /// Only records about this job (as `show` names it: 7, alice/default).
        #[arg(long)]
        job: Option<String>,
        /// The latest N records.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Daemon version, cgroup version and root, kernel features found and missing.
    Status,
    /// Live view of currencies and jobs: entitlement against usage, wait, throttling
    /// (keys: u e t p w j sort, / user, q quit). Plain frames when not on a terminal.
    Top(top::TopArgs),
    /// Prometheus metrics of currencies, jobs and the daemon, once (for node_exporter's
    /// textfile collector).
    Metrics(metrics_cmd::MetricsArgs),
    /// Periodic latency probe: how late does a wakeup run, under any policy.
    Probe(allot_measure::probe::ProbeArgs),
    /// Why is this process slow? Samples the kernel's accounting and gives a verdict:
    /// starved, held by allot, or stalled on memory or I/O and by whose use.
    Why(allot_measure::why::WhyArgs),
    /// Print a shell completion script (e.g. `allot completions bash > /etc/bash_completion.d/allot`).
    Completions(docgen::CompletionsArgs),
    /// Write the man pages (the Debian package builds them so).
    #[command(hide = true)]
    Manpages(docgen::ManpagesArgs),
}

#[derive(Debug, Subcommand)]
enum RulesCmd {
    /// Which rule matches a process, and what it would do.
    Test {
        /// The process.
        pid: String,
    },
}

#[derive(Debug, Subcommand)]
enum ConfigCmd {
    /// Check a config file without loading it into a daemon: exit 0 when the daemon would
    /// take it (warnings for names NSS does not know), 1 with FILE:LINE and why when not.
    Check(config_check::CheckArgs),
    /// Print the annotated example config (every setting commented out at its default).
    Example,
}

/// Reads tickets or funding here, so a bad value is named even when the daemon is not
/// running; the request then carries the typed value (the daemon's decoder checks the
/// line again: it trusts no client).
fn count<T: std::str::FromStr<Err = allot_model::ModelError>>(s: &str) -> anyhow::Result<T> {
    s.parse::<T>().map_err(|e| anyhow::anyhow!("{e}"))
}

/// A cap flag: "none" removes the cap; anything else is a cap in the job grammar, or the
/// currency's (hard only), within this machine's CPUs (named as the user wrote it).
fn cap_arg(c: Option<&str>, currency: bool) -> anyhow::Result<proto::CapChange> {
    let Some(c) = c else { return Ok(proto::CapChange::Keep) };
    if c.trim() == "none" {
        return Ok(proto::CapChange::Clear);
    }
    let cap = if currency { allot_model::Cap::parse_currency(c) } else { c.parse::<allot_model::Cap>() }.map_err(|e| anyhow::anyhow!("{e}"))?;
    cap.within(c, allot_linux::ncpu()).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(proto::CapChange::Set(cap))
}

/// A memory cap flag: "none" removes the cap; anything else is a memory cap (a size, ! for
/// hard), refused here naming the value before anything is sent.
fn mem_arg(m: Option<&str>) -> anyhow::Result<proto::MemChange> {
    match m {
        None => Ok(proto::MemChange::Keep),
        Some(m) if m.trim().eq_ignore_ascii_case("none") => Ok(proto::MemChange::Clear),
        Some(m) => proto::job_mem(m).map(proto::MemChange::Set).map_err(|e| anyhow::anyhow!("{e}")),
    }
}

/// `allot run` when no daemon answers: says which of the options could not be kept, and
/// keeps `--background` (or `--cap 0`) as SCHED_IDLE on this process, which any user may
/// choose for their own process and which the command inherits through exec.
fn run_unmanaged(
    why: &anyhow::Error,
    tickets: Option<&str>,
    currency: Option<&str>,
    cap: Option<&str>,
    (mem, oom_group): (Option<&str>, bool),
    background: bool,
) {
    eprintln!("allot: warning: {}; running the command unmanaged (--strict makes this an error)", allot_report::for_terminal(&format!("{why:#}")));
    let cap = cap.filter(|c| *c != "none");
    let cap_idle = cap.and_then(|c| c.parse::<allot_model::Cap>().ok()).is_some_and(|c| c.is_background());
    let idle = background || cap_idle;
    let not_kept = [
        ("-t", tickets),
        ("--currency", currency),
        ("--cap", cap.filter(|_| !cap_idle)),
        ("--mem", mem.filter(|m| *m != "none")),
        ("--oom-group", oom_group.then_some("on")),
    ];
    for (flag, v) in not_kept {
        if let Some(v) = v {
            eprintln!("allot: warning: {flag} {} was not applied: no daemon to enforce it", allot_report::for_terminal(v));
        }
    }
    if idle {
        let what = if background { "--background".to_string() } else { format!("--cap {}", cap.unwrap_or_default()) };
        let idle = allot_linux::process::sched::get(0).and_then(|mut a| {
            a.sched_policy = allot_linux::process::sched::SCHED_IDLE;
            a.sched_flags &= allot_linux::process::sched::SCHED_FLAG_RESET_ON_FORK;
            allot_linux::process::sched::set(0, &a)
        });
        match idle {
            Ok(()) => eprintln!(
                "allot: warning: {what} kept as SCHED_IDLE: the command runs only on CPU nobody else wants (not in allot's background class)"
            ),
            Err(e) => eprintln!("allot: warning: {what} was not applied: no daemon, and SCHED_IDLE was refused ({e})"),
        }
    }
}

fn pid_number(p: &str) -> anyhow::Result<i64> {
    p.trim().parse::<i64>().map_err(|_| anyhow::anyhow!("PID must be a process id (a positive number), got {p:?}"))
}

fn pid_arg(p: &str) -> anyhow::Result<proto::Pid> {
    proto::Pid::new(pid_number(p)?).map_err(|e| anyhow::anyhow!("{e}"))
}

fn main() {
    // A holder of a systemd scope is this binary re-executed: it only blocks (systemd.md).
    allot_linux::ipc::systemd_bus::holder::hold_if_asked();
    // Output piped into `head` ends quietly, as in any Unix tool (the daemon ignores
    // SIGPIPE itself).
    // SAFETY: restoring the default disposition of one signal.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let code = match real_main(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("allot: {}", allot_report::for_terminal(&format!("{e:#}")));
            e.downcast_ref::<proto::Refusal>().map_or(1, |r| exit_code(r.kind))
        }
    };
    std::process::exit(code);
}

/// The exit status of a command the daemon refused, by the refusal's kind: 75 (sysexits'
/// EX_TEMPFAIL) when it refused for now and nothing was done (busy, or over a limit of the
/// caller's), so a script may try again later; 1 for every other refusal.
fn exit_code(kind: proto::ErrorKind) -> i32 {
    match kind {
        proto::ErrorKind::Busy | proto::ErrorKind::Limit => 75,
        _ => 1,
    }
}

fn real_main(cli: Cli) -> anyhow::Result<i32> {
    let json = cli.json;
    let sock = cli.socket.clone();
    match cli.command {
        Command::Daemon { config, state_dir, cgroup_root, ephemeral, release } => daemon::run(daemon::Options {
            config_required: config.is_some(),
            config: config.unwrap_or_else(|| config_check::DEFAULT_PATH.into()),
            socket: sock,
            state_dir,
            cgroup_root,
            ephemeral,
            release,
        }),
        Command::Run { tickets: given, currency, cap, mem, oom_group, background, strict, force, command } => {
            let tickets = given.as_deref().map(count).transpose()?;
            let typed_mem = match mem_arg(mem.as_deref())? {
                proto::MemChange::Set(m) => Some(m),
                proto::MemChange::Keep | proto::MemChange::Clear => None,
            };
            let typed = match cap_arg(cap.as_deref(), false)? {
                proto::CapChange::Set(c) => Some(c),
                proto::CapChange::Keep | proto::CapChange::Clear => None,
            };
            let req = Request::Run { tickets, currency: currency.clone(), cap: typed, background, force, mem: typed_mem, oom_group };
            match client::call(&sock, &req) {
                Ok(r) if json => eprintln!("{}", serde_json::to_string(&r)?),
                Ok(_) => {}
                Err(e) if !strict && e.downcast_ref::<client::Unreachable>().is_some() => {
                    run_unmanaged(&e, given.as_deref(), currency.as_deref(), cap.as_deref(), (mem.as_deref(), oom_group), background);
                }
                Err(e) => return Err(e),
            }
            let err = std::process::Command::new(&command[0]).args(&command[1..]).exec();
            anyhow::bail!("cannot run {:?}: {err}", command[0])
        }
        Command::Set { pids, tickets, cap, mem, oom_group, background, foreground, force } => {
            let pids = pids.iter().map(|p| pid_number(p)).collect::<anyhow::Result<Vec<_>>>()?;
            let pids = proto::Pids::new(pids).map_err(|e| anyhow::anyhow!("{e}"))?;
            let tickets = tickets.as_deref().map(count).transpose()?;
            let cap = cap_arg(cap.as_deref(), false)?;
            let mem = mem_arg(mem.as_deref())?;
            let bg = if background {
                Some(true)
            } else if foreground {
                Some(false)
            } else {
                None
            };
            output::print(
                json,
                &client::call(&sock, &Request::Set { pids, tickets, cap, background: bg, force, mem, oom_group: oom_group.map(|o| o == "on") })?,
            )
        }
        Command::Show { user } => output::print(json, &client::call(&sock, &Request::Show { user })?),
        Command::Fund { currency, base, cap } => {
            let funding = base.as_deref().map(count).transpose()?;
            let cap = cap_arg(cap.as_deref(), true)?;
            output::print(json, &client::call(&sock, &Request::Fund { currency, funding, cap })?)
        }
        Command::Focus { pid, off } => output::print(json, &client::call(&sock, &Request::Focus { pid: pid_arg(&pid)?, on: !off })?),
        Command::Move { pid, currency, force } => output::print(json, &client::call(&sock, &Request::Move { pid: pid_arg(&pid)?, currency, force })?),
        Command::Status => output::print(json, &client::call(&sock, &Request::Status {})?),
        Command::Config { which: ConfigCmd::Check(a) } => config_check::run(a, json),
        Command::Config { which: ConfigCmd::Example } => {
            print!("{}", config_check::EXAMPLE);
            Ok(0)
        }
        Command::Rules { which: RulesCmd::Test { pid } } => output::print(json, &client::call(&sock, &Request::RulesTest { pid: pid_arg(&pid)? })?),
        Command::Explain { target } => output::print(json, &client::call(&sock, &Request::Explain { target })?),
        Command::Log { user, job, limit } => output::print(json, &client::call(&sock, &Request::Log { user, job, limit: Some(limit) })?),
        Command::Top(a) => top::run(a, &sock, json),
        Command::Metrics(a) => metrics_cmd::run(a, &sock, json),
        Command::Probe(a) => allot_measure::probe::run(a),
        Command::Why(a) => allot_measure::why::run(a, &mut why_daemon::DaemonView::new(&sock)),
        Command::Completions(a) => docgen::completions::<Cli>(a),
        Command::Manpages(a) => docgen::manpages::<Cli>(a),
    }
}

#[cfg(test)]
mod cli_tests {
    use super::*;

    #[test]
    fn a_refusal_for_now_exits_75_and_any_other_1() {
        use proto::ErrorKind::*;
        for (kind, code) in [(Busy, 75), (Limit, 75), (Invalid, 1), (NotFound, 1), (NotPermitted, 1), (Internal, 1), (Malformed, 1), (Other, 1)] {
            assert_eq!(exit_code(kind), code, "{kind:?}");
            let e: anyhow::Error = proto::Refusal::new(kind, "x").into();
            assert_eq!(e.downcast_ref::<proto::Refusal>().map(|r| exit_code(r.kind)), Some(code));
        }
    }

    #[test]
    fn fund_takes_a_hard_currency_cap_or_none_and_names_a_bad_one() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).map(|c| c.command);
        match parse(&["allot", "fund", "alice", "300", "--cap", "4!"]).unwrap() {
            Command::Fund { currency, base, cap } => {
                assert_eq!((currency.as_deref(), base.as_deref(), cap.as_deref()), (Some("alice"), Some("300"), Some("4!")))
            }
            c => panic!("{c:?}"),
        }
        match parse(&["allot", "fund", "alice", "--cap", "none"]).unwrap() {
            Command::Fund { base, cap, .. } => assert_eq!((base, cap.as_deref()), (None, Some("none"))),
            c => panic!("{c:?}"),
        }
        assert_eq!(cap_arg(Some("none"), true).unwrap(), proto::CapChange::Clear);
        assert_eq!(cap_arg(None, true).unwrap(), proto::CapChange::Keep);
        assert!(matches!(cap_arg(Some("1/2!"), true).unwrap(), proto::CapChange::Set(c) if c.hard && c.cpus == 0.5));
        for (bad, why) in [("4", "not a hard cap"), ("0", "not a hard cap"), ("0!", "hard cap of 0"), ("x!", "not a number"), ("99999!", "more CPUs")]
        {
            let e = cap_arg(Some(bad), true).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
        let many = format!("{}!", allot_linux::ncpu() + 1);
        assert!(cap_arg(Some(&many), true).unwrap_err().to_string().contains("more than this machine's"), "{many}");
        let many = format!("{}", allot_linux::ncpu() + 1);
        let e = cap_arg(Some(&many), false).unwrap_err().to_string();
        assert!(e.contains("more than this machine's") && e.contains(&format!("{many:?}")), "{e}");
        assert!(matches!(cap_arg(Some("0"), false).unwrap(), proto::CapChange::Set(c) if c.is_background()));
    }
}
