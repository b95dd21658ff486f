//! What the process events listener costs under a storm, with the socket filter on and
//! off: the numbers behind the daemon's docs. Needs root (the 8 MiB receive buffer
//! needs SO_RCVBUFFORCE; before Linux 6.6, listening at all).
//!
//! ```sh
//! cargo build --release -p allot-linux --example procevents_storm
//! sudo target/release/examples/procevents_storm [--rate 5000] [--secs 5] [--json out.json]
//! ```
//!
//! Each row runs a storm in a child process (re-executed from this binary, so it starts
//! with one thread) for `--secs` seconds at `--rate` per second:
//! - `procs`: fork, the child `_exit(0)`s at once, the parent reaps it;
//! - `threads`: a thread is started and joined.
//!
//! Beside it, one listener thread in this process reads events, with the socket filter
//! on or off, for all kinds or only UID|EXEC, and in one of three ways: `wake` (block
//! until events come: a wakeup per batch), `hold 20ms` (the same, then sleep 20 ms
//! before reading again) or `tick 250ms` (sleep, then drain without blocking, as a
//! daemon's loop would). Then five rows with no storm: the listener at rest on this
//! machine, whatever its other users are doing.
//!
//! Columns: achieved storm rate; events reported per second; of them the storm's own
//! (a Fork and an Exit per child); Lost reports; wakeups that found events; datagrams
//! read; the listener thread's CPU time (/proc/self/task/TID/schedstat, with the
//! user/sys split from .../stat in the JSON) in ms, as % of one CPU and per datagram;
//! and the storm's CPU per fork or thread (getrusage of itself and its children),
//! the side that runs the socket filter and queues the datagrams.

use allot_linux::process::procfs;
use allot_linux::procevents::{Kinds, Listener, Options, ProcEvent, Stats};
use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

fn usage() -> ! {
    eprintln!("usage: procevents_storm [--rate PER_SECOND (5000)] [--secs SECONDS (5)] [--json PATH]");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--storm-child") {
        storm_child(&args[1..]);
        return;
    }
    let (mut rate, mut secs, mut json) = (5000u64, 5u64, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_else(|| usage());
        match a.as_str() {
            "--rate" => rate = val().parse().unwrap_or_else(|_| usage()),
            "--secs" => secs = val().parse().unwrap_or_else(|_| usage()),
            "--json" => json = Some(val()),
            _ => usage(),
        }
    }
    if rate == 0 || secs == 0 {
        usage();
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("procevents_storm: run as root (an 8 MiB receive buffer needs SO_RCVBUFFORCE)");
        std::process::exit(1);
    }

    let configs: [(&str, Option<(Options, Mode)>); 6] = [
        ("none", None),
        ("ALL, off, wake", Some((opts(Kinds::ALL, false), Mode::Wake))),
        ("ALL, on, wake", Some((opts(Kinds::ALL, true), Mode::Wake))),
        ("ALL, on, hold 20ms", Some((opts(Kinds::ALL, true), Mode::Hold(Duration::from_millis(20))))),
        ("ALL, on, tick 250ms", Some((opts(Kinds::ALL, true), Mode::Tick(Duration::from_millis(250))))),
        ("UID|EXEC, on, wake", Some((opts(Kinds::UID | Kinds::EXEC, true), Mode::Wake))),
    ];
    let mut rows = Vec::new();
    println!("storm: {rate}/s for {secs} s on {} CPUs, kernel {}", allot_linux::ncpu(), release());
    for storm in ["procs", "threads"] {
        for (name, o) in configs {
            rows.push(run(storm, name, o, rate, secs));
            print_row(rows.last().unwrap(), rows.len() == 1);
        }
    }
    // The listener alone, with no storm: what it costs at rest on this machine.
    for (name, o) in &configs[1..] {
        rows.push(run("none (rest)", name, *o, 0, secs));
        print_row(rows.last().unwrap(), false);
    }
    println!(
        "\nLISTENER: kinds, socket filter on/off, how it reads (see the example's doc). STORM EV: the storm's own events\n\
         (procs: a Fork and an Exit per child). CPU: the listener thread (user+sys), as % of one CPU and µs per datagram.\n\
         µs/MADE: the storm's CPU per fork or thread (itself and its children), where the filter runs."
    );
    if let Some(path) = json {
        let body: Vec<String> = rows.iter().map(Row::json).collect();
        let text = format!("{{\"rate\":{rate},\"secs\":{secs},\"kernel\":\"{}\",\"rows\":[\n{}\n]}}\n", release(), body.join(",\n"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {path}: {e}"));
        println!("wrote {path}");
    }
}

fn opts(kinds: Kinds, filter: bool) -> Options {
    let mut o = Options::new(kinds);
    o.socket_filter = filter;
    o
}

fn release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// How the listener thread reads.
#[derive(Clone, Copy)]
enum Mode {
    /// Blocks until events come: a wakeup per batch, lowest latency.
    Wake,
    /// As Wake, then sleeps this long before reading again, so that a storm is read in
    /// large batches while a lone event is still seen at once.
    Hold(Duration),
    /// Sleeps a tick, then drains the queue without blocking (as a daemon's loop would).
    Tick(Duration),
}

/// One measured run.
struct Row {
    storm: &'static str,
    listener: &'static str,
    secs: f64,
    /// Forks or threads the storm made.
    made: u64,
    storm_cpu_ms: f64,
    /// From here on, zero without a listener.
    events: u64,
    storm_events: u64,
    lost: u64,
    /// Times the listener thread woke and found events.
    reads: u64,
    stats: Stats,
    cpu_ms: f64,
    user_ms: f64,
    sys_ms: f64,
}

impl Row {
    fn json(&self) -> String {
        format!(
            "{{\"storm\":\"{}\",\"listener\":\"{}\",\"secs\":{:.3},\"made\":{},\"storm_cpu_ms\":{:.1},\"events\":{},\"storm_events\":{},\
             \"lost\":{},\"reads\":{},\"datagrams\":{},\"discarded\":{},\"listener_cpu_ms\":{:.1},\"listener_user_ms\":{:.0},\"listener_sys_ms\":{:.0}}}",
            self.storm,
            self.listener,
            self.secs,
            self.made,
            self.storm_cpu_ms,
            self.events,
            self.storm_events,
            self.lost,
            self.reads,
            self.stats.datagrams,
            self.stats.discarded,
            self.cpu_ms,
            self.user_ms,
            self.sys_ms
        )
    }
}

fn print_row(r: &Row, header: bool) {
    if header {
        println!(
            "\n{:<11} {:<19} {:>6} {:>8} {:>8} {:>4} {:>6} {:>8} {:>7} {:>6} {:>6} {:>8}",
            "STORM", "LISTENER", "MADE/s", "EVENTS/s", "STORM EV", "LOST", "WAKES", "DGRAMS", "CPU ms", "CPU %", "µs/dg", "µs/MADE"
        );
    }
    let per = |a: f64, b: u64| if b > 0 { format!("{:.1}", a * 1000.0 / b as f64) } else { "-".into() };
    println!(
        "{:<11} {:<19} {:>6.0} {:>8.0} {:>8} {:>4} {:>6} {:>8} {:>7.1} {:>6.2} {:>6} {:>8}",
        r.storm,
        r.listener,
        r.made as f64 / r.secs,
        r.events as f64 / r.secs,
        r.storm_events,
        r.lost,
        r.reads,
        r.stats.datagrams,
        r.cpu_ms,
        r.cpu_ms / 10.0 / r.secs,
        per(r.cpu_ms, r.stats.datagrams),
        per(r.storm_cpu_ms, r.made)
    );
}

/// What the listener thread saw.
#[derive(Default)]
struct Seen {
    events: u64,
    storm_events: u64,
    lost: u64,
    reads: u64,
    stats: Stats,
    cpu_ms: f64,
    user_ms: f64,
    sys_ms: f64,
}

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// (on-CPU ms from schedstat, user ms, sys ms from stat) of this thread.
fn thread_cpu() -> (f64, f64, f64) {
    let (pid, tid) = (std::process::id() as i32, tid());
    let run = procfs::task_schedstat(pid, tid).map(|s| s.run_ns as f64 / 1e6).unwrap_or(f64::NAN);
    let path = format!("/proc/{pid}/task/{tid}/stat");
    let tick_ms = 1000.0 / procfs::clk_tck() as f64;
    let (u, s) = allot_linux::read(&path)
        .and_then(|text| procfs::parse_stat(path.as_ref(), &text))
        .map(|st| (st.utime as f64 * tick_ms, st.stime as f64 * tick_ms))
        .unwrap_or((f64::NAN, f64::NAN));
    (run, u, s)
}

/// Reads events until `stop` is set and the queue is empty. The storm's pid arrives on
/// `storm` once it has started.
fn listen((o, mode): (Options, Mode), ready: mpsc::Sender<()>, storm: mpsc::Receiver<i32>, stop: Arc<AtomicBool>) -> Seen {
    let mut l = Listener::open_with(o).unwrap_or_else(|e| panic!("open: {e}"));
    ready.send(()).unwrap();
    let (cpu0, u0, s0) = thread_cpu();
    let mut seen = Seen::default();
    let mut storm_pid = None;
    let mut children = HashSet::new();
    let mut batch = Vec::with_capacity(256);
    loop {
        batch.clear();
        let n = match mode {
            Mode::Wake | Mode::Hold(_) => l.recv_timeout(&mut batch, Duration::from_millis(100)),
            Mode::Tick(_) => {
                let mut n = 0;
                loop {
                    match l.recv_timeout(&mut batch, Duration::ZERO) {
                        Ok(0) => break Ok(n),
                        Ok(k) => n += k,
                        Err(e) => break Err(e),
                    }
                }
            }
        }
        .unwrap_or_else(|e| panic!("recv: {e}"));
        if n > 0 {
            seen.reads += 1;
        }
        if storm_pid.is_none() {
            storm_pid = storm.try_recv().ok();
        }
        for e in &batch {
            match *e {
                ProcEvent::Lost => seen.lost += 1,
                ProcEvent::Fork { parent, child } => {
                    seen.events += 1;
                    if Some(parent) == storm_pid {
                        seen.storm_events += 1;
                        children.insert(child);
                    }
                }
                ProcEvent::Exit { pid } => {
                    seen.events += 1;
                    if children.remove(&pid) {
                        seen.storm_events += 1;
                    }
                }
                _ => seen.events += 1,
            }
        }
        if n == 0 && stop.load(Ordering::Relaxed) {
            break;
        }
        match mode {
            Mode::Tick(t) => std::thread::sleep(t),
            Mode::Hold(t) if n > 0 => std::thread::sleep(t),
            _ => {}
        }
    }
    let (cpu1, u1, s1) = thread_cpu();
    seen.stats = l.stats();
    (seen.cpu_ms, seen.user_ms, seen.sys_ms) = (cpu1 - cpu0, u1 - u0, s1 - s0);
    seen
}

fn run(storm: &'static str, listener: &'static str, o: Option<(Options, Mode)>, rate: u64, secs: u64) -> Row {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let (pid_tx, pid_rx) = mpsc::channel();
    let handle = o.map(|o| {
        let stop = stop.clone();
        std::thread::spawn(move || listen(o, ready_tx, pid_rx, stop))
    });
    if handle.is_some() {
        ready_rx.recv().expect("the listener thread failed to open (see its panic above)");
    }
    let start = Instant::now();
    let (made, storm_cpu_ms) = if rate == 0 {
        std::thread::sleep(Duration::from_secs(secs));
        (0, 0.0)
    } else {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--storm-child", storm, &rate.to_string(), &secs.to_string()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let _ = pid_tx.send(child.id() as i32);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "storm child failed: {}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<f64> = text.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        assert_eq!(v.len(), 2, "storm child said {text:?}");
        (v[0] as u64, v[1])
    };
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let seen = handle.map(|h| h.join().expect("listener thread panicked")).unwrap_or_default();
    Row {
        storm: if rate == 0 { "none (rest)" } else { storm },
        listener: if o.is_some() { listener } else { "none" },
        secs: elapsed,
        made,
        storm_cpu_ms,
        events: seen.events,
        storm_events: seen.storm_events,
        lost: seen.lost,
        reads: seen.reads,
        stats: seen.stats,
        cpu_ms: seen.cpu_ms,
        user_ms: seen.user_ms,
        sys_ms: seen.sys_ms,
    }
}

/// The storm: `KIND RATE SECS`. Prints "MADE CPU_MS" (CPU of itself and its reaped children).
fn storm_child(args: &[String]) {
    let (kind, rate, secs) = match args {
        [k, r, s] => (k.as_str(), r.parse::<f64>().unwrap_or_else(|_| usage()), s.parse::<f64>().unwrap_or_else(|_| usage())),
        _ => usage(),
    };
    let start = Instant::now();
    let mut made = 0u64;
    // One at a time, checking the clock: a storm that falls behind does not run over.
    loop {
        let t = start.elapsed().as_secs_f64();
        if t >= secs {
            break;
        }
        if made >= (t * rate) as u64 {
            std::thread::sleep(Duration::from_micros(500));
            continue;
        }
        match kind {
            "procs" => {
                // SAFETY: this process has one thread; the child only calls _exit.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    unsafe { libc::_exit(0) };
                }
                assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
                let mut st = 0;
                // SAFETY: a valid pointer to an int.
                unsafe { libc::waitpid(pid, &mut st, 0) };
            }
            "threads" => std::thread::spawn(|| {}).join().unwrap(),
            _ => usage(),
        }
        made += 1;
    }
    let cpu_ms = |who| {
        // SAFETY: a zeroed rusage filled by the kernel.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut ru) };
        let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
        ms(ru.ru_utime) + ms(ru.ru_stime)
    };
    let total = cpu_ms(libc::RUSAGE_SELF) + cpu_ms(libc::RUSAGE_CHILDREN);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{made} {total:.1}").unwrap();
}
