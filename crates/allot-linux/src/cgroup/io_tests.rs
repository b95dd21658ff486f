//! The I/O controller against fixture directories (no kernel): which weight files are
//! written, in which range and spelling, and pressure files, garbled ones included.

use super::*;

/// A directory removed when dropped.
struct Fixture(PathBuf);
impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fixture(tag: &str) -> (Fixture, PathBuf) {
    let d = std::env::temp_dir().join(format!("allot-io-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("allot/user-1000/default")).unwrap();
    (Fixture(d.clone()), d)
}

fn touch(dir: &Path, names: &[&str]) {
    for n in names {
        std::fs::write(dir.join(n), "").unwrap();
    }
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn v2_delegates_io_and_writes_io_cost_and_bfq_weights_in_their_ranges() {
    let (_f, d) = fixture("v2");
    for f in ["cgroup.subtree_control", "allot/cgroup.subtree_control", "allot/user-1000/cgroup.subtree_control"] {
        std::fs::write(d.join(f), "cpu memory\n").unwrap();
    }
    let io = Io::at(Version::V2, d.clone(), d.join("allot"));
    io.ensure("user-1000/default").unwrap();
    for f in ["cgroup.subtree_control", "allot/cgroup.subtree_control", "allot/user-1000/cgroup.subtree_control"] {
        // Written in place, as a kernel file is (not truncated): the write is at its start.
        assert!(read(d.join(f)).starts_with("+io "), "{f}");
    }
    let dir = d.join("allot/user-1000");
    assert!(io.set_weight("user-1000", 300).unwrap().is_empty(), "no weight file: nothing written");
    touch(&dir, &["io.weight", "io.bfq.weight"]);
    assert_eq!(io.set_weight("user-1000", 3000).unwrap(), [WeightFile::IoCost, WeightFile::Bfq]);
    assert_eq!(read(dir.join("io.weight")), "default 3000");
    assert_eq!(read(dir.join("io.bfq.weight")), "default 1000", "BFQ's range ends at 1000");
    touch(&dir, &["io.weight", "io.bfq.weight"]);
    io.set_weight("user-1000", 300).unwrap();
    assert_eq!((read(dir.join("io.weight")), read(dir.join("io.bfq.weight"))), ("default 300".into(), "default 300".into()));
}

#[test]
fn v1_writes_bfq_or_cfq_weights_where_the_file_is() {
    let (_f, d) = fixture("v1");
    let io = Io::at(Version::V1, d.clone(), d.join("allot"));
    io.ensure("user-1000/default").unwrap();
    let dir = d.join("allot/user-1000");
    touch(&dir, &["blkio.bfq.weight", "io.weight"]);
    assert_eq!(io.set_weight("user-1000", 300).unwrap(), [WeightFile::Bfq], "v1 has no io.weight");
    assert_eq!(read(dir.join("blkio.bfq.weight")), "300");
    assert_eq!(read(dir.join("io.weight")), "", "a v2 name is never written on v1");
    touch(&dir.join("default"), &["blkio.weight"]);
    assert_eq!(io.set_weight("user-1000/default", 100).unwrap(), [WeightFile::Cfq]);
    assert_eq!(read(dir.join("default/blkio.weight")), "500", "CFQ's default for the default funding");
    std::fs::write(dir.join("memory.pressure"), "some avg10=1.00 avg60=0.00 avg300=0.00 total=5\n").unwrap();
    assert_eq!(io.pressure("user-1000"), CgroupPressure::default(), "v1 has no PSI per cgroup");
}

/// Hostile: pressure files with garbage, out-of-range averages or cut short give none,
/// never a number; a missing file is none, not an error.
#[test]
fn garbled_pressure_files_give_none() {
    let (_f, d) = fixture("psi");
    let dir = d.join("allot/user-1000");
    assert_eq!(pressure_file(&dir.join("io.pressure")).unwrap(), None);
    let good = "some avg10=12.50 avg60=3.00 avg300=1.00 total=4000\nfull avg10=2.00 avg60=0.50 avg300=0.10 total=1500\n";
    std::fs::write(dir.join("memory.pressure"), good).unwrap();
    std::fs::write(dir.join("io.pressure"), "some avg10=1.00 avg60=0.00 avg300=0.00 total=7\n").unwrap();
    let p = cgroup_pressure(&dir);
    let m = p.memory.unwrap();
    assert_eq!((m.some.avg10, m.some.total_us, m.full.unwrap().avg10, m.full.unwrap().total_us), (12.5, 4000, 2.0, 1500));
    assert_eq!(p.io.unwrap().some.total_us, 7);
    for bad in [
        "\u{0}\u{1}garbage",
        "some avg10=nan avg60=0 total=1\n",
        "some avg10=inf avg60=0 total=1\n",
        "some avg10=-3 avg60=0 total=1\n",
        "some avg10=250.00 avg60=0 total=1\n",
        "some avg10=1.0 avg60=0 total=-5\n",
        "some avg10=1.0 avg60=0 total=99999999999999999999999\n",
        "some avg10=1.0 avg60=0 total=1\nfull avg10=NaN avg60=0 total=1\n",
        "some avg10",
        "",
    ] {
        std::fs::write(dir.join("io.pressure"), bad).unwrap();
        let e = pressure_file(&dir.join("io.pressure")).unwrap_err().to_string();
        assert!(e.contains("io.pressure") && e.contains("PSI"), "{bad:?}: {e}");
        assert_eq!(cgroup_pressure(&dir).io, None, "{bad:?}");
    }
    let mut invalid_utf8 = b"some avg10=1.0 avg60=0 total=1\n".to_vec();
    invalid_utf8.extend([0xff, 0xfe]);
    std::fs::write(dir.join("io.pressure"), invalid_utf8).unwrap();
    assert_eq!(cgroup_pressure(&dir).io, None, "not UTF-8");
    assert!(cgroup_pressure(&dir).memory.is_some(), "one garbled file does not hide the other");
}
