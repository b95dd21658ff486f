//! The workloads `allot-lab bench overhead` times, each by its own clock so a side's start-up
//! (`allot run` asking the daemon for a job) is not counted:
//!
//! - **build**: a parallel build, `make -j NCPU` of generated C files with gcc, what a
//!   build host runs. One run's time varies by about 1% here (six runs of 48 files:
//!   7.15–7.34 s), so a median of ten pairs decides a 1% limit.
//! - **hackbench** (Debian's rt-tests): 400 processes passing messages over sockets, the
//!   scheduler's own stress test and the worst case for group scheduling. One run varies
//!   by 7–8% here (eight runs of `-g 10 -l 100`: 0.65–0.84 s), so even 40 pairs know the
//!   median only to about ±2%.

use anyhow::{bail, Context};
use std::path::PathBuf;
use std::process::Output;

/// What `allot-lab bench overhead` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `make -j NCPU` of generated C files (gcc).
    Build,
    /// hackbench (rt-tests).
    Hackbench,
}

/// A workload ready to run.
#[derive(Debug)]
pub enum Workload {
    /// hackbench with these arguments.
    Hackbench(Vec<String>),
    /// A build tree of its own, removed on drop.
    Build(Build),
}

impl Workload {
    /// A line for the report: what runs.
    pub fn describe(&self) -> String {
        match self {
            Workload::Hackbench(a) => format!("hackbench {}", a.join(" ")),
            Workload::Build(b) => format!("make -j{} of {} generated C files (gcc -O2)", b.jobs, b.files),
        }
    }

    /// The program and its arguments for one run.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Workload::Hackbench(a) => std::iter::once("hackbench".to_string()).chain(a.iter().cloned()).collect(),
            // The clean is not timed; the build between the two clock readings is.
            Workload::Build(b) => vec![
                "/bin/sh".into(),
                "-c".into(),
                r#"cd "$1" && make -s clean && s=$(date +%s%N) && make -s -j"$2" && e=$(date +%s%N) && echo "Time: $((e - s))ns""#.into(),
                "sh".into(),
                b.dir.display().to_string(),
                b.jobs.to_string(),
            ],
        }
    }

    /// The run's own time, s, from its output ("Time: 2.765" from hackbench, "Time:
    /// 3612345678ns" from the build's script).
    pub fn time(&self, out: &Output) -> anyhow::Result<f64> {
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!("{} failed ({}): {}{}", self.describe(), out.status, text, String::from_utf8_lossy(&out.stderr));
        }
        let t = text.lines().find_map(|l| l.strip_prefix("Time:")).map(str::trim);
        let s = match t {
            Some(ns) if ns.ends_with("ns") => ns.trim_end_matches("ns").parse::<u64>().ok().map(|n| n as f64 / 1e9),
            Some(s) => s.parse().ok(),
            None => None,
        };
        s.with_context(|| format!("no \"Time:\" line in the output of {}: {text:?}", self.describe()))
    }

    /// Checks that the programs it needs are installed.
    pub fn check_installed(&self) -> anyhow::Result<()> {
        let have = |p: &str| std::process::Command::new(p).arg("--version").output().is_ok();
        match self {
            Workload::Hackbench(_) if std::process::Command::new("hackbench").arg("--help").output().is_err() => {
                bail!("hackbench is not installed; it is in Debian's rt-tests package: apt-get install rt-tests")
            }
            Workload::Build(_) if !(have("make") && have("gcc")) => bail!("the build workload needs make and gcc: apt-get install make gcc"),
            _ => Ok(()),
        }
    }
}

/// A directory of generated C sources and a Makefile, owned by the uid that builds it.
#[derive(Debug)]
pub struct Build {
    dir: PathBuf,
    files: usize,
    jobs: usize,
}

impl Build {
    /// `files` sources of about 0.3 s of `gcc -O2` each here, built `jobs` at a time, in a
    /// new directory under /tmp that `uid` owns.
    pub fn new(files: usize, jobs: usize, uid: u32) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("allot-overhead-build-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // 0700 whatever root's umask: no one else can put anything in it before the chown.
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&dir)
            .with_context(|| format!("mkdir {}", dir.display()))?;
        let me = Self { dir, files, jobs };
        let mut objs = vec![];
        for i in 0..files {
            let name = format!("f{i}.c");
            std::fs::write(me.dir.join(&name), source(i)).with_context(|| format!("write {name}"))?;
            objs.push(format!("f{i}.o"));
        }
        let make = format!("OBJS = {}\nall: $(OBJS)\n%.o: %.c\n\tgcc -O2 -pipe -c $< -o $@\nclean:\n\trm -f *.o\n", objs.join(" "));
        std::fs::write(me.dir.join("Makefile"), make).context("write the Makefile")?;
        // Files first, while the directory is still root's, and without following links:
        // nothing in it can be swapped for a link before root has let go of it.
        let chown = |p: &std::path::Path| std::os::unix::fs::lchown(p, Some(uid), Some(uid)).with_context(|| format!("chown {}", p.display()));
        for e in std::fs::read_dir(&me.dir)? {
            chown(&e?.path())?;
        }
        chown(&me.dir)?;
        Ok(me)
    }
}

impl Drop for Build {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Source file `i`: sixty functions of loops and calls that gcc -O2 optimizes for about
/// 0.3 s here; deterministic (a fixed LCG), so every run compiles the same code.
fn source(i: usize) -> String {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ i as u64;
    let mut next = |m: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        1 + (x >> 33) % m
    };
    let mut s = format!("int f{i}_0(int *a, int n) {{ return n ? a[0] : 0; }}\n");
    for j in 1..60 {
        let (m, sh, md) = (next(99), next(7), 1 + next(8));
        s += &format!(
            "int f{i}_{j}(int *a, int n) {{ int s = 0; for (int k = 0; k < n; k++) {{ s += a[k] * {m} ^ (s >> {sh}); \
             if (s % {md} == 0) s += f{i}_{p}(a, n / 2 + {j}); }} return s; }}\n",
            p = j - 1
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn out(stdout: &str) -> Output {
        Output { status: std::process::ExitStatus::from_raw(0), stdout: stdout.as_bytes().to_vec(), stderr: vec![] }
    }

    #[test]
    fn reads_each_workloads_time() {
        let h = Workload::Hackbench(vec!["-g".into(), "1".into()]);
        assert_eq!(h.time(&out("Running in process mode\nTime: 2.765\n")).unwrap(), 2.765);
        assert!(h.time(&out("nothing\n")).unwrap_err().to_string().contains("Time:"));
        let b = Workload::Build(Build { dir: "/nonexistent-allot".into(), files: 1, jobs: 2 });
        assert_eq!(b.time(&out("Time: 3612345678ns\n")).unwrap(), 3.612345678);
        assert!(b.time(&out("Time: xns\n")).is_err());
        let failed = Output { status: std::process::ExitStatus::from_raw(2 << 8), ..out("make: *** Error 1\n") };
        assert!(b.time(&failed).unwrap_err().to_string().contains("failed"));
    }

    #[test]
    fn sources_are_the_same_every_time_and_differ_by_file() {
        assert_eq!(source(3), source(3));
        assert_ne!(source(3), source(4));
        assert_eq!(source(0).lines().count(), 60);
    }
}
