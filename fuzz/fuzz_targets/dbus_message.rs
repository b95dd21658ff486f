//! Any bytes as one D-Bus message, as the daemon's client reads them from the system
//! bus: decoded or refused, never a panic, and a decoded one encodes again.
#![no_main]
use allot_linux::ipc::dbus::Message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::decode(data) {
        // What decoded is a message allot could send: it encodes without panicking.
        let _ = std::hint::black_box(m.encode(1));
    }
});
