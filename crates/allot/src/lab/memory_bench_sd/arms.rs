//! The arms of the systemd memory bench: how each sets up and takes back its way of sharing
//! the users' memory, and one arm run from setup to teardown.

use super::measure::{measure, User};
use super::{Arm, Row, Sizes, ARMS, DAEMON_CONFIG, DAEMON_UNIT, OOMD_SOCKET};
use crate::memory_bench::MemoryBenchArgs;
use allot_measure::harness::Kids;
use anyhow::{bail, Context};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Stops systemd-oomd and masks it until the next boot (or its arm), so that no other arm
/// runs with it.
pub(super) fn mask_oomd() {
    let _ = systemctl(&["stop", OOMD_SOCKET, "systemd-oomd.service"]);
    let _ = systemctl(&["mask", "--runtime", OOMD_SOCKET, "systemd-oomd.service"]);
}

/// The machine's uptime, s (to find an arm in the journal).
fn uptime() -> f64 {
    allot_linux::read("/proc/uptime").ok().and_then(|t| t.split_whitespace().next()?.parse().ok()).unwrap_or(0.0)
}

pub(super) fn systemctl_out(args: &[&str]) -> String {
    Command::new("systemctl")
        .args(args)
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn systemctl(args: &[&str]) -> anyhow::Result<()> {
    let st = Command::new("systemctl").args(args).status().with_context(|| format!("run systemctl {args:?}"))?;
    if !st.success() {
        bail!("systemctl {} failed ({st})", args.join(" "));
    }
    Ok(())
}

/// Sets up an arm's way of sharing; undone by [`teardown`].
fn setup(arm: Arm, s: &Sizes, product: &Path, b: u32, a: u32) -> anyhow::Result<()> {
    match arm {
        Arm::Kernel => {}
        // Masked outside its arm: a login's user@.service carries the package's
        // ManagedOOMMemoryPressure=, which pulls systemd-oomd's socket (and the daemon) in.
        Arm::Oomd => {
            systemctl(&["unmask", "--runtime", OOMD_SOCKET, "systemd-oomd.service"])?;
            systemctl(&["start", "systemd-oomd.service"])?;
        }
        Arm::Earlyoom => systemctl(&["start", "earlyoom.service"])?,
        Arm::Static => {
            for uid in [b, a] {
                systemctl(&["set-property", "--runtime", &format!("user-{uid}.slice"), &format!("MemoryMax={}M", s.static_max)])?;
            }
        }
        Arm::Allot => {
            std::fs::write(DAEMON_CONFIG, "[memory]\nenable = true\n")?;
            let p = product.display().to_string();
            let env = format!("--setenv=ALLOT_CONFIG={DAEMON_CONFIG}");
            let st = Command::new("systemd-run").args(["--quiet", "--collect", &format!("--unit={DAEMON_UNIT}"), &env, &p, "daemon"]).status()?;
            if !st.success() {
                bail!("systemd-run could not start {p} daemon ({st})");
            }
            let t0 = Instant::now();
            while !Command::new(product).arg("status").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success()) {
                if t0.elapsed() > Duration::from_secs(60) {
                    bail!("allot's daemon ({DAEMON_UNIT}) did not answer `allot status` within 60 s (journalctl -u {DAEMON_UNIT})");
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
    Ok(())
}

fn teardown(arm: Arm, b: u32, a: u32) {
    match arm {
        Arm::Kernel => {}
        // systemd-oomd's socket too: while it listens, systemd would start the daemon again
        // when it has news of a cgroup oomd manages, in a later arm.
        Arm::Oomd => mask_oomd(),
        Arm::Earlyoom => {
            let _ = systemctl(&["stop", "earlyoom.service"]);
        }
        Arm::Static => {
            for uid in [b, a] {
                let _ = systemctl(&["set-property", "--runtime", &format!("user-{uid}.slice"), "MemoryMax=infinity"]);
            }
        }
        Arm::Allot => {
            let _ = systemctl(&["stop", DAEMON_UNIT]);
            let _ = std::fs::remove_file(DAEMON_CONFIG);
        }
    }
}

pub(super) fn one(arm: Arm, exe: &Path, product: &Path, args: &MemoryBenchArgs, s: &Sizes, b: &User, a: &User) -> anyhow::Result<Row> {
    setup(arm, s, product, b.uid, a.uid)?;
    let t0 = uptime();
    let mut kids = Kids::default();
    let r = measure(arm, exe, product, args, s, b, a, &mut kids);
    kids.kill_all();
    // Whatever su left running in the users' sessions (or allot's jobs) goes with the slice.
    let _ = systemctl(&["stop", &format!("user-{}.slice", b.uid), &format!("user-{}.slice", a.uid)]);
    teardown(arm, b.uid, a.uid);
    eprintln!("allot-lab: the {} arm ran from uptime {t0:.0} s to {:.0} s", arm.name(), uptime());
    // A killer that came back during another arm would make that arm's numbers its own.
    for (other, (unit, _)) in ARMS.iter().filter_map(|&o| Some((o, o.unit()?))) {
        if other != arm && systemctl_out(&["is-active", unit]) == "active" {
            eprintln!("allot-lab: {unit} was running at the end of the {} arm (started by something else); stopped", arm.name());
            let _ = systemctl(&["stop", OOMD_SOCKET, unit]);
        }
    }
    r
}
