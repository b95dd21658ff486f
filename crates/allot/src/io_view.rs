//! Block I/O as `allot status` reports it (I/O by share, docs/memory.md): how a currency's
//! funding reaches the kernel as an I/O weight here, each device, its I/O scheduler, and
//! whether the kernel divides that device's time by cgroup weight. The daemon fills it
//! (daemon/io.rs); this is the reply's part and its words.
use serde::{Deserialize, Serialize};

/// The block devices as `allot status` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoView {
    /// Whether a currency's funding is written as its I/O weight here.
    pub shared: bool,
    /// How, or why not, in words ("io.weight and io.bfq.weight in allot's tree").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
    /// The last write that failed, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
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
    let how = v.how.as_deref().map(|h| format!(": {h}")).unwrap_or_default();
    let shared = if v.shared {
        format!("funding is each currency's I/O weight, tickets its jobs'{how}")
    } else {
        format!("I/O is not shared by funding{how}")
    };
    let honoured = match (v.shared, v.devices.iter().filter(|d| d.honours_weight).count()) {
        (true, 0) if !v.devices.is_empty() => "; no device here honours it",
        _ => "",
    };
    let failed = v.failed.as_deref().map(|f| format!("; last failure: {f}")).unwrap_or_default();
    format!("io                {shared}{honoured} ({devices}){failed}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_how_and_names_each_device_and_why() {
        let d = |n: &str, h: bool, w: &str| IoDevice { name: n.into(), scheduler: None, honours_weight: h, why: w.into() };
        let v = IoView {
            shared: true,
            how: Some("blkio.bfq.weight in allot's tree".into()),
            failed: None,
            devices: vec![d("sda", true, "BFQ divides its time by weight"), d("vda", false, "the none scheduler ignores weights")],
        };
        assert_eq!(
            line(&v),
            "io                funding is each currency's I/O weight, tickets its jobs': blkio.bfq.weight in allot's tree (sda: BFQ divides its time by weight; vda: the none scheduler ignores weights)"
        );
        let v = IoView { devices: vec![v.devices[1].clone()], failed: Some("could not set x".into()), ..v };
        assert_eq!(
            line(&v),
            "io                funding is each currency's I/O weight, tickets its jobs': blkio.bfq.weight in allot's tree; no device here honours it (vda: the none scheduler ignores weights); last failure: could not set x"
        );
        let none = IoView { how: Some("no I/O controller beside allot's tree".into()), ..Default::default() };
        assert_eq!(line(&none), "io                I/O is not shared by funding: no I/O controller beside allot's tree (no block devices found)");
    }
}
