//! Any bytes as one datagram from the kernel's process connector: every netlink message
//! in it classified (or the rest called malformed), never a panic, never more messages
//! than 16-byte netlink headers fit.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let n = allot_linux::procevents::fuzz_datagram(data);
    assert!(n <= data.len() / 16 + 1, "{n} messages from {} bytes", data.len());
});
