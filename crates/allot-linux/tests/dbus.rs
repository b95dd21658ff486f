//! The D-Bus client against a real bus: a private `dbus-daemon` this test starts (its
//! session configuration, on a socket in a temporary directory), so it runs on any
//! machine with the dbus-daemon package, systemd or not. Fails, never skips, without it.

use allot_linux::ipc::dbus::{message, Bus, Match, Message, Value};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The private `dbus-daemon` this test runs, ended with the test.
struct PrivateBus {
    child: Child,
    dir: std::path::PathBuf,
    path: String,
}

impl PrivateBus {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("allot-dbus-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bus").display().to_string();
        let child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", &format!("--address=unix:path={path}")])
            .stdout(Stdio::null())
            .spawn()
            .expect("dbus-daemon must be installed for this test (Debian: apt-get install dbus-daemon)");
        let end = Instant::now() + Duration::from_secs(10);
        while !std::path::Path::new(&path).exists() {
            assert!(Instant::now() < end, "dbus-daemon did not create {path} within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        PrivateBus { child, dir, path }
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const T: Duration = Duration::from_secs(10);

fn bus_call(b: &mut Bus, member: &str, body: Vec<Value>) -> Result<Vec<Value>, allot_linux::ipc::dbus::Reject> {
    b.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", member, body, T).expect("the bus answers")
}

#[test]
fn calls_errors_and_signals_against_a_real_bus() {
    let d = PrivateBus::start();
    let mut a = Bus::connect(&d.path, T).expect("connect and Hello");
    assert!(a.name.starts_with(":1."), "unique name {:?}", a.name);
    let mut b = Bus::connect(&d.path, T).expect("a second connection");

    // A method with a reply: both unique names are on the bus.
    let names = bus_call(&mut a, "ListNames", vec![]).unwrap()[0].clone();
    let names: Vec<&str> = names.items().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert!(names.contains(&a.name.as_str()) && names.contains(&b.name.as_str()), "{names:?}");
    let owner = bus_call(&mut a, "GetNameOwner", vec![Value::str(&b.name)]);
    assert_eq!(owner.unwrap()[0].as_str(), Some(b.name.as_str()));

    // An error reply carries its name and message.
    let e = bus_call(&mut a, "GetNameOwner", vec![Value::str("org.example.Nobody")]).unwrap_err();
    assert_eq!(e.name, "org.freedesktop.DBus.Error.NameHasNoOwner");
    assert!(!e.message.is_empty());
    let e = bus_call(&mut a, "NoSuchMethod", vec![]).unwrap_err();
    assert_eq!(e.name, "org.freedesktop.DBus.Error.UnknownMethod");

    // A broadcast signal reaches `a` only through a match rule, also when it arrives
    // while `a` waits for a reply to another call.
    let done = Match::new(&b.name, "/org/example", "org.example.T", "Done").arg(0, "job-2");
    a.add_match(&done, T).unwrap().expect("AddMatch");
    let signal = |arg: &str| {
        let mut m = Message::call("", "/org/example", "org.example.T", "Done", vec![Value::str(arg), Value::U64(7)]);
        m.kind = message::SIGNAL;
        m.destination = None;
        m
    };
    b.send(&signal("job-1")).unwrap();
    b.send(&signal("job-2")).unwrap();
    // A round trip on `b` makes sure the bus has routed both before `a` calls.
    bus_call(&mut b, "GetId", vec![]).unwrap();
    bus_call(&mut a, "GetId", vec![]).unwrap();
    let got = a.wait_signal(Instant::now() + T, |m| m.member.as_deref() == Some("Done")).unwrap().expect("the matched signal");
    assert_eq!(got.body, vec![Value::str("job-2"), Value::U64(7)]);
    // (The bus's own NameAcquired, sent to us after Hello, is not what we wait for.)
    let none = a.wait_signal(Instant::now() + Duration::from_millis(200), |m| m.member.as_deref() == Some("Done")).unwrap();
    assert!(none.is_none(), "job-1 did not match arg0 and must not arrive: {none:?}");

    // The connection stays usable after a timed-out wait.
    assert!(bus_call(&mut a, "GetId", vec![]).is_ok());

    // The same signal sent straight to `a` by another connection is not taken, nor one
    // from `b` on another path; `b`'s own is.
    let mut c = Bus::connect(&d.path, T).expect("a third connection");
    let mut to_a = signal("job-2");
    to_a.destination = Some(a.name.clone());
    c.send(&to_a).unwrap();
    let mut elsewhere = to_a.clone();
    elsewhere.path = Some("/org/example/other".into());
    b.send(&elsewhere).unwrap();
    b.send(&to_a).unwrap();
    bus_call(&mut c, "GetId", vec![]).unwrap();
    bus_call(&mut b, "GetId", vec![]).unwrap();
    let got = a.wait_signal(Instant::now() + T, |_| true).unwrap().expect("b's signal");
    assert_eq!((got.sender.as_deref(), got.path.as_deref()), (Some(b.name.as_str()), Some("/org/example")));
    let none = a.wait_signal(Instant::now() + Duration::from_millis(200), |_| true).unwrap();
    assert!(none.is_none(), "only b's signal on /org/example is taken: {none:?}");

    // After RemoveMatch, b's signals are no longer taken either.
    a.remove_match(&done, T).unwrap().expect("RemoveMatch");
    b.send(&to_a).unwrap();
    bus_call(&mut b, "GetId", vec![]).unwrap();
    let none = a.wait_signal(Instant::now() + Duration::from_millis(200), |_| true).unwrap();
    assert!(none.is_none(), "{none:?}");
}

#[test]
fn a_missing_socket_says_what_to_check() {
    let e = Bus::connect("/nonexistent/allot-test-bus", T).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/allot-test-bus") && e.contains("systemctl status dbus"), "{e}");
}
