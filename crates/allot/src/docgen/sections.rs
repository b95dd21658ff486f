//! The sections clap cannot write: what the daemon keeps where, its signals, the exit
//! statuses, the environment, examples, the cap forms, and the pages to read next. Paths,
//! limits and defaults come from the constants and the CLI definition the code itself
//! uses; the tests below parse every example with the CLI, check every cap form with the
//! cap parser, and fail when the source reads an environment variable this page omits.

use super::{example, item, page_ref, para, Section};
use crate::config_check::DEFAULT_PATH;
use crate::daemon::{audit, state};
use clap::Command;

/// The extra sections of page `name` (allot, allot-daemon, allot-run, ...).
pub fn for_page(name: &str, root: &Command) -> Vec<Section> {
    let sub = |n: &str| root.find_subcommand(n).cloned().unwrap_or_else(|| Command::new(n.to_string()));
    match name {
        "allot" => vec![
            files(root, &sub("daemon")),
            signals(),
            exit_status(),
            environment(root),
            examples(),
            see_also(&see_also_allot(root)),
        ],
        "allot-daemon" => vec![
            files(root, &sub("daemon")),
            signals(),
            Section {
                title: "EXIT STATUS",
                body: item("0", "Stopped by SIGTERM or SIGINT, or `--release` done.")
                    + &item("1", "Could not start: not root, a config the loader refuses (named with its file and line), a state file it cannot read, another daemon on the socket, no usable cgroup hierarchy."),
            },
            Section { title: "ENVIRONMENT", body: env_items(&daemon_env(root)) },
            see_also(&[("allot", 1), ("allot.toml", 5), ("allot-config-check", 1), ("allot-status", 1), ("systemctl", 1), ("systemd.resource-control", 5), ("cgroups", 7)]),
        ],
        "allot-run" => vec![
            caps(false),
            Section {
                title: "EXIT STATUS",
                body: para("`allot run` replaces itself with the command (exec), so its exit status is the command's. It exits 1 itself, before the command runs, when a value is refused, when the daemon refuses the request (75 when it refuses for now: busy, or over a limit of yours), or when the command cannot be executed; and, with `--strict`, when no daemon answers (without it, the command runs unmanaged, with a warning naming each option that could not be kept).")
                    + &para("2: the command line could not be parsed."),
            },
            see_also(&[("allot", 1), ("allot-set", 1), ("allot-show", 1), ("allot-explain", 1), ("allot.toml", 5)]),
        ],
        "allot-set" => vec![caps(true), see_also(&[("allot", 1), ("allot-run", 1), ("allot-show", 1), ("allot-explain", 1)])],
        "allot-config-check" => vec![
            Section {
                title: "EXIT STATUS",
                body: item("0", "The daemon would take the file (warnings about names NSS does not know are printed; the file loads), or no file was named and the default one does not exist (the built-in defaults apply).")
                    + &item("1", "The daemon would refuse it: the error is printed as FILE:LINE:COLUMN where known, and a reload would keep the config in force. With `--strict`, warnings also exit 1.")
                    + &item("2", "The command line could not be parsed."),
            },
            see_also(&[("allot.toml", 5), ("allot-config-example", 1), ("allot-daemon", 1), ("systemctl", 1)]),
        ],
        "allot-config-example" => vec![see_also(&[("allot.toml", 5), ("allot-config-check", 1)])],
        _ => vec![],
    }
}

/// The default value clap shows for argument `id` of `cmd`.
fn default_of(cmd: &Command, id: &str) -> String {
    cmd.get_arguments()
        .find(|a| a.get_id() == id)
        .and_then(|a| a.get_default_values().first().map(|v| v.to_string_lossy().into_owned()))
        .unwrap_or_else(|| panic!("argument {id} of {} has no default", cmd.get_name()))
}

fn files(root: &Command, daemon: &Command) -> Section {
    let state_dir = default_of(daemon, "state_dir");
    let mib = |b: u64| b / (1024 * 1024);
    let body = item(
        DEFAULT_PATH,
        "The daemon's config (TOML), described in allot.toml(5). Optional: without it every setting has its default. `allot daemon --config FILE` or ALLOT_CONFIG names another; a file named so must exist. `allot config check` checks it as the daemon would load it; `allot config example` prints the annotated example.",
    ) + &item(
        &format!("{state_dir}/"),
        "The state directory (`allot daemon --state-dir DIR` or ALLOT_STATE_DIR). Removing the package with purge (Debian) or erase (RPM) removes it.",
    ) + &item(
        &format!("{state_dir}/{}", state::FILE),
        "The desired state, whole: the funding set with `allot fund`, and every job with its owner, currency, tickets, cap, background class and rule. Written atomically (a crash leaves the old file or the new one); read at start, so jobs, funding and settings survive a restart. A file the daemon cannot read stops it with the reason rather than being guessed around.",
    ) + &item(
        &format!("{state_dir}/{}", audit::USERS_FILE),
        &format!(
            "The audit trail of users' requests: every change (run, set, fund, move, focus) and every refusal, with who asked (uid, pid), what, and the settings before and after, one JSON record a line; `allot log` reads it. Each user gets at most {} records or {} KiB a minute; past that the minute ends with one summary record of how many more there were. The same records go to the daemon's log; under systemd each is one journal entry with MESSAGE_ID={} ({} for a summary) and the fields ALLOT_UID, ALLOT_PID, ALLOT_REQUEST, ALLOT_REFUSED, ALLOT_JOBS and ALLOT_OWNERS, so `journalctl MESSAGE_ID={} ALLOT_UID=1000` finds one user's.",
            audit::RECORDS_PER_MINUTE,
            audit::BYTES_PER_MINUTE / 1024,
            audit::RECORD_ID,
            audit::SUMMARY_ID,
            audit::RECORD_ID,
        ),
    ) + &item(
        &format!("{state_dir}/{}", audit::ROOT_FILE),
        "Root's trail: root's requests and every config reload (taken or refused), never dropped or limited.",
    ) + &item(
        &format!("{state_dir}/{}.1, {state_dir}/{}.1", audit::USERS_FILE, audit::ROOT_FILE),
        &format!("Each trail's previous file: a trail is moved here once it passes {} MiB, replacing the one before.", mib(audit::MAX_BYTES)),
    ) + &item(
        &default_of(root, "socket"),
        "The daemon's socket (`--socket PATH` or ALLOT_SOCKET, for every command). Anyone may connect; the daemon checks every request against the caller's credentials, which the kernel reports (a user changes their own jobs, root anyone's).",
    ) + &item(
        &format!("/sys/fs/cgroup/{}/", default_of(daemon, "cgroup_root")),
        "allot's cgroup tree on a host without systemd (`--cgroup-root NAME` or ALLOT_CGROUP_ROOT; under the cpu controller's mount on cgroup v1). On a systemd host allot asks systemd for its cgroups instead: a scope per currency (allot:user-UID.scope in the user's slice) and a background slice, which `systemctl status` shows.",
    ) + &item(
        "/usr/share/doc/allot/examples/allot.toml",
        "The annotated example config, every setting commented out at its default (the same text as `allot config example`).",
    );
    Section { title: "FILES", body }
}

fn signals() -> Section {
    let body = para("The daemon (`allot daemon`) handles:")
        + &item(
            "SIGHUP",
            "Read the config again (`systemctl reload allot` sends it). The file goes through the same loader as at start and as `allot config check`: a file it refuses is logged with its file and line, recorded in the root audit trail and shown by `allot status` and in the service's status line (`systemctl status allot`), and the config in force is kept. A file it takes applies at once, without a restart: rules, limits, funding defaults, the metrics endpoint.",
        )
        + &item(
            "SIGTERM, SIGINT",
            "Stop cleanly: take back every dynamic adjustment (boosts, held soft caps, nice emulation), remove the socket and exit 0. Jobs keep running in their cgroups with their tickets and hard caps, and the next start adopts them again.",
        )
        + &item("SIGPIPE", "Ignored by the daemon. Other commands end quietly when their output is closed (piped into head(1)).");
    Section { title: "SIGNALS", body }
}

fn exit_status() -> Section {
    let body = item("0", "Success.")
        + &item(
            "1",
            "An error, printed as one line that names the value and what is allowed: a value refused, the daemon refused the request or could not be reached, or `allot config check` refused the file (or found warnings, with `--strict`).",
        )
        + &item("2", "The command line could not be parsed (an unknown option, a missing argument).")
        + &item("75", "The daemon refused for now and did nothing: it is busy or stopping, or the request is over a limit of yours (connections, requests per second, jobs); try again later.")
        + &para("`allot run` execs the command: its exit status is then the command's (allot-run(1)).");
    Section { title: "EXIT STATUS", body }
}

/// Environment variables the daemon reads, with what each does.
fn daemon_env(root: &Command) -> Vec<(&'static str, String)> {
    let daemon = root.find_subcommand("daemon").expect("allot daemon");
    vec![
        ("ALLOT_CONFIG", format!("The config file of `allot daemon` and `allot config check` (default {DEFAULT_PATH}).")),
        ("ALLOT_STATE_DIR", format!("The daemon's state directory (default {}).", default_of(daemon, "state_dir"))),
        ("ALLOT_CGROUP_ROOT", format!("The name of allot's cgroup root, where allot keeps its own tree (default {}).", default_of(daemon, "cgroup_root"))),
        ("ALLOT_LOG", "The daemon's log level: error, warn, info (the default) or debug.".into()),
        (
            "JOURNAL_STREAM",
            "Set by systemd when stderr goes to the journal (DEVICE:INODE of that stream): when it names the daemon's stderr, the daemon starts each log line with its syslog priority (<3> error to <7> debug) for journald instead of spelling the level out, and sends each audit record to journald's socket as one entry with fields (FILES).".into(),
        ),
        ("NOTIFY_SOCKET", "Set by systemd (Type=notify): the daemon reports ready, reloading, stopping and a status line there.".into()),
        ("WATCHDOG_USEC, WATCHDOG_PID", "Set by systemd (WatchdogSec=): the daemon's loop pings the watchdog at half that interval.".into()),
        (
            "LISTEN_PID, LISTEN_FDS",
            "Set by systemd when allot.socket passes the daemon its socket (socket activation): the daemon serves that socket instead of binding its own, once it has checked that it is one listening unix stream socket at the path it serves, and leaves it in place when it stops, so a client that comes meanwhile waits for the next daemon.".into(),
        ),
        (
            "DBUS_SYSTEM_BUS_ADDRESS",
            format!("The system bus, where the daemon talks to systemd and logind: its unix:path= is used (default {}).", allot_linux::ipc::dbus::SYSTEM_BUS),
        ),
        ("ALLOT_TEST_NO_PEERPIDFD", "For tests: the daemon identifies callers as on a kernel without SO_PEERPIDFD.".into()),
    ]
}

/// Environment variables every command reads.
fn client_env(root: &Command) -> Vec<(&'static str, String)> {
    vec![
        ("ALLOT_SOCKET", format!("The daemon's socket (default {}), for every command and the daemon alike.", default_of(root, "socket"))),
        (
            "ALLOT_TIMEOUT",
            format!(
                "How long a command waits for the daemon's reply: a duration such as 5s or 500ms, a bare number being seconds (default {}s).",
                crate::client::TIMEOUT.as_secs()
            ),
        ),
    ]
}

fn env_items(vars: &[(&str, String)]) -> String {
    vars.iter().map(|(k, v)| item(k, v)).collect()
}

fn environment(root: &Command) -> Section {
    Section { title: "ENVIRONMENT", body: env_items(&client_env(root)) + &env_items(&daemon_env(root)) }
}

/// The examples of allot(1): what each does, and the command line (every one starting
/// with `allot` is parsed by the tests; `sudo` is dropped first).
const EXAMPLES: [(&str, &str); 11] = [
    ("Run a build on idle CPU only (the background class):", "allot run --background make -j8"),
    (
        "Run a simulation with twice the default tickets, held to half a CPU while others want the CPU (a soft cap):",
        "allot run -t 200 --cap 50% ./simulate",
    ),
    ("Hold a running process's job to one CPU even when the machine is idle (a hard cap):", "allot set 4242 --cap 1!"),
    ("Run a build that may never hold more than 4 GiB of memory (a hard memory cap; 4G without ! is soft):", "allot run --mem 4G! make -j8"),
    ("See every job and currency, their entitlements and usage:", "allot show"),
    ("Why a job is boosted, held, capped or in the background now:", "allot explain 4242"),
    ("Give alice's currency twice the default funding (root):", "sudo allot fund alice 200"),
    ("Check an edited config, then load it into the running daemon:", "allot config check /etc/allot/allot.toml && sudo systemctl reload allot"),
    ("Start a config from the annotated example:", "allot config example | sudo tee /etc/allot/allot.toml"),
    ("The latest 20 audit records about alice:", "allot log --user alice --limit 20"),
    ("Watch entitlement against usage live:", "allot top"),
];

fn examples() -> Section {
    Section { title: "EXAMPLES", body: EXAMPLES.iter().map(|(what, line)| example(what, line)).collect() }
}

/// allot(1)'s SEE ALSO: every command's page, then the system's.
fn see_also_allot(root: &Command) -> Vec<(String, u8)> {
    let mut v = vec![("allot.toml".to_string(), 5)];
    v.extend(super::pages(root).into_iter().skip(1).map(|(n, _)| (n, 1)));
    v.extend([("systemctl", 1), ("systemd.resource-control", 5), ("cgroups", 7), ("sched", 7)].map(|(n, s)| (n.to_string(), s)));
    v
}

fn see_also<S: AsRef<str>>(refs: &[(S, u8)]) -> Section {
    let list: Vec<String> = refs.iter().map(|(n, s)| page_ref(n.as_ref(), *s)).collect();
    Section { title: "SEE ALSO", body: format!("{}\n", list.join(", ")) }
}

/// The cap forms `run` and `set` take: (form, CPUs, hard), each checked by the tests.
const CAP_FORMS: [(&str, f64, bool); 7] =
    [("0.5", 0.5, false), ("1/2", 0.5, false), ("50%", 0.5, false), ("0.5!", 0.5, true), ("50%!", 0.5, true), ("2!", 2.0, true), ("0", 0.0, false)];

fn caps(set: bool) -> Section {
    let forms = |hard: bool| CAP_FORMS.iter().filter(|f| f.2 == hard && f.1 > 0.0).map(|f| format!("`{}`", f.0)).collect::<Vec<_>>().join(", ");
    let mut body = para("A cap bounds a job's usage rate, in CPUs: a decimal (`0.5`), a fraction (`1/2`) or a percent of one CPU (`50%`, as systemd's CPUQuota= writes it). A job is a process tree, so a cap may be more than one CPU, up to the machine's CPUs.")
        + &item(
            &format!("Soft: {}", forms(false)),
            "Held only while other jobs want the CPU: the job is limited to its cap under contention and may use idle CPU beyond it. The daemon holds it each tick.",
        )
        + &item(
            &format!("Hard, with !: {}", forms(true)),
            "Held always, even when CPUs are idle, by the kernel's CPU bandwidth limit (cpu.max; cpu.cfs_quota_us on cgroup v1). At least 0.01 CPU (1%).",
        )
        + &item("0", "The background class: the job runs only on CPU no foreground job wants (the same as `--background`). A hard 0 (`0!`) is refused: the job would never run.");
    if set {
        body += &item("none", "Removes the job's cap.");
    }
    body += &para(&format!(
        "A soft cap other than 0 is at least {} CPU; caps are kept to three decimals. A value outside these forms or bounds is refused, naming the value and the forms.",
        allot_model::cap::MIN_SOFT_CPUS
    ));
    Section { title: "CAPS", body }
}

#[cfg(test)]
#[path = "sections_tests.rs"]
mod tests;
