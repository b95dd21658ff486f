//! Block I/O as `allot status` reports it: each device, its I/O scheduler, and whether the
//! kernel would divide its time by cgroup weight (docs/memory.md). allot does not yet
//! make funding an I/O weight; the line says so, and which devices could honour one. The
//! daemon reads it (daemon/views.rs); this is the reply's part and its words.
use serde::{Deserialize, Serialize};

/// The block devices as `allot status` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoView {
    /// Whether a currency's funding is its I/O weight (not yet: always false).
    pub shared: bool,
    /// The devices that hold data, by name.
    pub devices: Vec<IoDevice>,
}

/// One block device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoDevice {
    /// Its name under /sys/block.
    pub name: String,
    /// The active I/O scheduler, if it has one.
    pub scheduler: Option<String>,
    /// The kernel honours cgroup I/O weights on it (BFQ, or io.cost enabled).
    pub honours_weight: bool,
    /// Why, or why not, in words.
    pub why: String,
}

/// `allot status`'s line.
pub fn line(v: &IoView) -> String {
    let devices = if v.devices.is_empty() {
        "no block devices found".to_string()
    } else {
        v.devices.iter().map(|d| format!("{}: {}", d.name, d.why)).collect::<Vec<_>>().join("; ")
    };
    let shared = if v.shared { "funding is each currency's I/O weight" } else { "I/O is not shared by funding yet" };
    format!("io                {shared} ({devices})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_device_and_why() {
        let d = |n: &str, h: bool, w: &str| IoDevice { name: n.into(), scheduler: None, honours_weight: h, why: w.into() };
        let v = IoView {
            shared: false,
            devices: vec![d("sda", true, "BFQ divides its time by weight"), d("vda", false, "the none scheduler ignores weights")],
        };
        assert_eq!(
            line(&v),
            "io                I/O is not shared by funding yet (sda: BFQ divides its time by weight; vda: the none scheduler ignores weights)"
        );
        assert_eq!(line(&IoView::default()), "io                I/O is not shared by funding yet (no block devices found)");
    }
}
