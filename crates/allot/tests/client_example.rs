//! The protocol's example client (examples/allot_client.py, docs/protocol.md) against a
//! private daemon: a request and its reply, refusals and their exit codes, `set` by root as
//! a spawner would send it, and `run` putting the client's own process in a job both ways
//! the daemon proves who is asking (SO_PEERPIDFD, and the pidfd the client sends beside
//! SCM_CREDENTIALS, which kernels before 6.5 need).

mod common;

use allot::proto::{ErrorKind, Reply, Response};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Debian's Python (`.ci/run` installs it with python3-prometheus-client); the example uses
/// its standard library only.
const PYTHON: &str = "/usr/bin/python3";

/// The example, copied where the test users can read it (the daemon's directory, 0755).
fn client(d: &PrivateDaemon) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/allot_client.py");
    let dst = d.dir.join("allot_client.py");
    std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
    std::fs::set_permissions(&dst, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    dst
}

/// Runs the client as root with one request; its exit code and its reply, read as the
/// library's `Reply` (None: it printed none).
fn ask(d: &PrivateDaemon, script: &Path, req: &str) -> (Option<i32>, Option<Reply>, Output) {
    let o = Command::new(PYTHON).arg(script).arg("--socket").arg(&d.socket).arg(req).stdin(Stdio::null()).output().expect(PYTHON);
    let reply = serde_json::from_slice(&o.stdout).ok();
    (o.status.code(), reply, o)
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn the_python_client_sends_one_request_and_prints_the_reply() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n").unwrap();
    let script = client(&d);

    let (code, r, o) = ask(&d, &script, r#"{"op": "status"}"#);
    assert_eq!(code, Some(0), "status: {o:?}");
    let r = r.expect("a reply");
    assert_eq!((r.v, r.ok), (Some(3), true), "{r:?}");
    let Some(Response::Status(st)) = r.data else { panic!("a status reply: {o:?}") };
    assert_eq!(Some(st.pid), d.daemon_pid(), "the reply is this daemon's: {st:?}");
    let cli = status(&d);
    assert_eq!(st.protocol, cli.protocol, "the client speaks the CLI's protocol");

    // Refusals: exit 1 and the daemon's one sentence.
    let (code, r, _) = ask(&d, &script, r#"{"op": "set", "pids": [1], "tickets": 5}"#);
    let r = r.expect("a reply");
    assert_eq!((code, r.ok), (Some(1), false), "{r:?}");
    assert!(r.error.as_deref().unwrap().contains("pid 1 (init) is never moved"), "{r:?}");
    assert_eq!(r.kind, Some(ErrorKind::NotPermitted), "{r:?}");
    let (code, r, _) = ask(&d, &script, r#"{"op": "frob"}"#);
    let r = r.expect("a reply");
    assert_eq!(code, Some(1), "{r:?}");
    assert!(r.error.as_deref().unwrap().starts_with("malformed request: unknown variant `frob`"), "{r:?}");
    assert_eq!(r.kind, Some(ErrorKind::Malformed), "{r:?}");
    // No daemon there, or no request: exit 2, nothing on stdout.
    let o = Command::new(PYTHON).arg(&script).args(["--socket", "/nonexistent/allot.sock", r#"{"op":"status"}"#]).output().unwrap();
    assert_eq!((o.status.code(), o.stdout.is_empty()), (Some(2), true), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot reach the allot daemon at /nonexistent/allot.sock"), "{o:?}");
    let (code, _, o) = ask(&d, &script, "[1]");
    assert_eq!(code, Some(2), "{o:?}");

    // A spawner (root) gives a user's running process tickets and a cap: it lands in a new
    // job of that user's, in their currency.
    let mut kids = Kids::default();
    let pid = spawn_as(&d, &mut kids, A, &["sleep", "300"]);
    let (code, r, o) = ask(&d, &script, &format!(r#"{{"op": "set", "pids": [{pid}], "tickets": 200, "cap": "0.5"}}"#));
    assert_eq!(code, Some(0), "set: {o:?}");
    let Some(Response::Changed(changed)) = r.and_then(|r| r.data) else { panic!("a changed reply: {o:?}") };
    let job = wait_for("the set process in its job", || job_with_pid(&show(&d), pid));
    assert_eq!((job.uid, job.tickets, job.cap.as_deref()), (A, 200, Some("0.5")), "{job:?}");
    assert_eq!(changed.jobs.first(), Some(&job.id), "the reply names the job: {changed:?}");
}

#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn the_python_client_runs_a_command_in_a_job_either_way_the_daemon_proves_the_caller() {
    require_root();
    let _s = serial();
    for no_peerpidfd in [false, true] {
        let mut d =
            PrivateDaemon::start(exe(), "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n[currencies.ci]\nusers = [\"2902\"]\n").unwrap();
        if no_peerpidfd {
            // As on kernels before 6.5: the daemon believes only the pidfd the client sends.
            d.env.push(("ALLOT_TEST_NO_PEERPIDFD".into(), "1".into()));
            d.terminate().unwrap();
            d.launch(true).unwrap();
        }
        let script = client(&d);
        let way = if no_peerpidfd { "the pidfd the client sent" } else { "SO_PEERPIDFD" };
        let mut kids = Kids::default();
        let reply_file = d.dir.join("run.reply");
        let mut c = d.shelter.command(PYTHON, Some(A));
        c.arg(&script)
            .arg("--socket")
            .arg(&d.socket)
            .args([r#"{"op": "run", "tickets": 250, "cap": "0.5"}"#, "--", "sleep", "300"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&reply_file).unwrap());
        let pid = kids.add(c.spawn().unwrap());
        d.wait_exec(pid).unwrap_or_else(|e| panic!("{way}: {e}; the client said {}", std::fs::read_to_string(&reply_file).unwrap_or_default()));
        assert_eq!(std::fs::read(format!("/proc/{pid}/cmdline")).unwrap(), b"sleep\x00300\x00", "{way}: the client exec'd the command");
        let job = wait_for("the job", || job_with_pid(&show(&d), pid));
        assert_eq!((job.uid, job.tickets, job.cap.as_deref()), (A, 250, Some("0.5")), "{way}: {job:?}");
        assert!(!job.id.ends_with("/default"), "{way}: a job of its own, not the default one: {job:?}");
        let reply: Reply = serde_json::from_str(&std::fs::read_to_string(&reply_file).unwrap()).unwrap();
        let Some(Response::Job(made)) = reply.data else { panic!("{way}: a job reply: {reply:?}") };
        assert_eq!(made.job, job.id, "{way}: {made:?}");

        // Refused (A may not use ci): exit 1, and the command never runs.
        // In /tmp, where A could write it (the daemon's directory is root's).
        let marker = std::env::temp_dir().join(format!("{}-ran", d.root_name));
        let o = d
            .shelter
            .command(PYTHON, Some(A))
            .arg(&script)
            .arg("--socket")
            .arg(&d.socket)
            .args([r#"{"op": "run", "currency": "ci"}"#, "--", "/bin/sh", "-c", &format!("echo > {}", marker.display())])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{way}: {o:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("may not run jobs in currency \\\"ci\\\""), "{way}: {o:?}");
        let ran = std::fs::remove_file(&marker).is_ok();
        assert!(!ran, "{way}: a refused run does not run the command");
    }
}

/// What a spawner running as root does (docs/protocol.md's recipe): the user's server
/// starts in a job of the user's, placed before its command runs, out of the spawner's own
/// cgroup (another manager's, to this daemon: so only with `force`).
#[test]
#[ignore = "root: kernel tier, run by scripts/test"]
fn spawn_in_job_places_a_users_process_before_its_command_runs() {
    require_root();
    let _s = serial();
    let d = PrivateDaemon::start(exe(), "scan_ms = 200\n[users]\nonly = [\"2901\", \"2902\"]\n").unwrap();
    let script = client(&d);
    let seen = std::env::temp_dir().join(format!("{}-cgroup", d.root_name));
    let driver = format!(
        r#"
import json, subprocess, sys
sys.path.insert(0, {dir:?})
from allot_client import Refused, spawn_in_job
argv = ["/bin/sh", "-c", "cat /proc/self/cgroup > {seen}; exec sleep 300"]
job = {{"tickets": 300, "cap": "0.5!"}}
quiet = {{"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}}
try:
    spawn_in_job(argv, {A}, {A}, job, path={sock:?}, **quiet)
    print(json.dumps({{"unforced": "placed"}}))
except Refused as e:
    print(json.dumps({{"unforced": str(e), "kind": e.kind}}))
print(json.dumps({{"pid": spawn_in_job(argv, {A}, {A}, job, path={sock:?}, force=True, **quiet).pid}}))
"#,
        dir = script.parent().unwrap().display().to_string(),
        seen = seen.display(),
        sock = d.socket.display().to_string(),
    );
    // The spawner runs in a cgroup of its own, which this daemon does not place from: as a
    // spawner in a systemd service would be.
    let spawner = allot_measure::harness::Shelter::new().unwrap();
    let o = spawner.command(PYTHON, None).arg("-c").arg(&driver).stdin(Stdio::null()).output().expect(PYTHON);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let pid = lines.iter().find_map(|l| l["pid"].as_u64()).unwrap_or_else(|| panic!("spawn_in_job: {o:?}")) as u32;
    // Started by this test (through the driver, which has exited): killed by pid at the end,
    // and the file it wrote removed, even when an assertion fails.
    struct AtEnd(u32, PathBuf);
    impl Drop for AtEnd {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the pid of the sleep this test started.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
            let _ = std::fs::remove_file(&self.1);
        }
    }
    let _end = AtEnd(pid, seen.clone());
    let unforced = lines[0]["unforced"].as_str().unwrap_or_default().to_string();
    assert!(unforced.contains("which another manager owns"), "without force, the spawner's own cgroup is not allot's to take from: {o:?}");
    assert_eq!(lines[0]["kind"], "not_permitted", "{o:?}");
    let job = wait_for("the spawned process in its job", || job_with_pid(&show(&d), pid));
    assert_eq!((job.uid, job.tickets, job.cap.as_deref()), (A, 300, Some("0.5!")), "{job:?}");
    assert_eq!(std::fs::read(format!("/proc/{pid}/cmdline")).unwrap(), b"sleep\x00300\x00", "the command runs under the spawned pid");
    let first = wait_for("the command's first child", || std::fs::read_to_string(&seen).ok().filter(|s| !s.is_empty()));
    let in_job = cgroup_of(pid);
    assert!(
        !in_job.is_empty() && first.lines().any(|l| l.ends_with(&format!(":{in_job}"))),
        "the command's first child was already in the job ({in_job}): {first}"
    );
}
